"""Bad input through the real command line, as a new user would give it: each case runs `python -m softbench`
in its own process, in a folder of its own that holds a recorded session, a seal and the bad files.

For every case: the documented exit code (2 for bad input unless noted), exactly one line on stderr that starts
with `error:` (a `hint:` may follow), no traceback anywhere, and the folder exactly as it was: no file added
(nothing half-written, no empty session) and no existing file changed (the recorded session, the seal).

The cases run in a thread pool once per module, each in a process of its own forked from tests/cli_server.py
(conftest.run_cli: a fresh interpreter would spend seconds importing torch for each of them); each case is then its
own test that reads its result."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]

PREDICTIONS = {"predictions": [{
    "id": "P1", "statement": "the sim gains nothing", "quantity": "speedup_pct", "comparator": "<", "threshold": 50,
    "evidence": "latency", "scope": {"command": "latency", "backend": "sim"}}]}
KERN_HEADER = "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"
SIM = ["--backend", "sim", "--protocol", "paper", "--heads", "1", "--head-dim", "32", "--rounds", "1", "--windows", "1", "--calls", "1",
       "--warmup", "0"]


def predictions_with(**changes) -> str:
    p = {**PREDICTIONS["predictions"][0], **changes}
    return yaml.safe_dump({"predictions": [p]})


def build_template(root: Path) -> None:
    """The folder every case starts from."""
    from softbench.predictions.seal import seal_file

    root.mkdir()
    (root / "somefile").write_text("a file where a folder is expected\n")
    (root / "empty").mkdir()
    (root / "binary.bin").write_bytes(bytes(range(256)) * 4)
    (root / "latin1.yaml").write_bytes("predictions: café\n".encode("latin-1"))
    (root / "broken.yaml").write_text("predictions: [unclosed\n")
    (root / "list.yaml").write_text("- 1\n- 2\n")
    (root / "preds.yaml").write_text(yaml.safe_dump(PREDICTIONS))
    (root / "colour.yaml").write_text(predictions_with(scope={"command": "latency", "colour": "blue"}))
    (root / "vibes.yaml").write_text(predictions_with(evidence="vibes"))
    (root / "cmdtypo.yaml").write_text(predictions_with(scope={"command": "latncy"}))
    # the same typo after another key: that key was judged against the unknown command's records (a KeyError, exit 70)
    (root / "cmdtypo-late.yaml").write_text(predictions_with(scope={"command": "latncy"}).replace(
        "command: latncy", "dtype: fp8\n    command: latncy"))
    (root / "comparator.yaml").write_text(predictions_with(comparator="~="))
    (root / "onebound.yaml").write_text(predictions_with(comparator="between", threshold=[1]))
    (root / "changed.yaml").write_text(predictions_with(threshold=40))
    (root / "seq-zero.yaml").write_text(predictions_with(scope={"command": "latency", "seq": 0}))
    (root / "id-float.yaml").write_text(predictions_with(id=1.5))
    (root / "protocol-unknown.yaml").write_text("rounds: 3\ncolour: blue\n")
    # YAML reads an unquoted 2026-02-30 as a date, and one that does not exist raised out of the loaders (exit 70)
    (root / "baddate.yaml").write_text("title: 2026-02-30\n" + yaml.safe_dump(PREDICTIONS))
    (root / "protocol-baddate.yaml").write_text("description: 2026-02-30\nprotocol: {rounds: 1}\n")
    (root / "protocol-kind-list.yaml").write_text("protocol: {kind: [interleaved]}\ncells:\n  - {seq: 128}\n")
    (root / "protocol-variant-list.yaml").write_text("protocol: {rounds: 1}\nvariant: [A1]\ncells:\n  - {seq: 128}\n")
    (root / "protocol-causal-maybe.yaml").write_text("protocol: {rounds: 1}\ncells:\n  - {seq: 128, causal: maybe}\n")
    (root / "protocol-seed-huge.yaml").write_text("protocol: {kind: interleaved, seed: 99999999999999999999999}\n"
                                                  "cells:\n  - {seq: 128}\n")
    (root / "protocol-paper-seed-huge.yaml").write_text("protocol: {rounds: 1, windows: 1, "
                                                        "seed: 99999999999999999999999}\ncells:\n  - {seq: 128}\n")
    (root / "energy-seed-negative.yaml").write_text("seed: -1\n")
    # a sampling interval of NaN and a ramp fraction of true passed their checks; an interval or a budget past a
    # float's range passed `< inf` and ended in an internal error (OverflowError) where it first met a float
    (root / "energy-interval-nan.yaml").write_text("interval_ms: .nan\n")
    (root / "energy-interval-huge.yaml").write_text("interval_ms: 1" + "0" * 400 + "\n")
    (root / "energy-ramp-true.yaml").write_text("ramp_fraction: true\n")
    (root / "protocol-budget-huge.yaml").write_text("protocol: {kind: interleaved, budget_s: 1" + "0" * 400 + "}\n"
                                                    "cells:\n  - {seq: 128}\n")
    (root / "sweep-shape-text.yaml").write_text("shape: abc\nsettings: [{freq: 1, start_frg: 0}]\n")
    (root / "sweep-shape-colour.yaml").write_text("shape: {seq: 128, colour: red}\n"
                                                  "settings: [{freq: 1, start_frg: 0}]\n")
    (root / "protocol-budget-day.yaml").write_text("protocol: {kind: interleaved, budget_s: 1.0e+12}\n"
                                                   "cells:\n  - {seq: 128}\n")
    # a warm-up window of null or text once met `<=` in the protocol's check (exit 70)
    (root / "protocol-warmup-null.yaml").write_text("protocol: {kind: interleaved, warmup_min_s: null}\n"
                                                    "cells:\n  - {seq: 128}\n")
    (root / "protocol-settle-text.yaml").write_text("protocol: {kind: sustained, settle_max_s: soon}\n"
                                                    "cells:\n  - {seq: 128}\n")
    (root / "protocol-calls-huge.yaml").write_text("protocol: {kind: sustained, calls: 1000000000}\n"
                                                   "cells:\n  - {seq: 128}\n")
    (root / "protocol-paper-calls-true.yaml").write_text("protocol: {rounds: 1, windows: 1, calls: true}\n"
                                                         "cells:\n  - {seq: 128}\n")
    # a Chrome trace with an integer past 64 bits, and one nested past Python's recursion limit
    (root / "trace-huge.json").write_text('{"traceEvents": [{"cat": "kernel", "name": "k", "ts": 1, "dur": 1'
                                          + "0" * 400 + "}]}")
    (root / "trace-deep.json").write_text("[" * 100000 + "]" * 100000)
    # a kernel table row longer than its header: pandas once read its first cells as an index
    (root / "kern-long-row.csv").write_text("Name,Instances,Total Time (ns),Med (ns)\nk,3,100,5,9,9\n")
    (root / "protocol-cells.yaml").write_text("protocol: {rounds: 1}\ncells:\n  - {seq: 256}\n")
    (root / "kern-text.csv").write_text(KERN_HEADER + "50.0,1000,10,100,n/a,90,110,5,kernel_a\n")
    (root / "kern-short-row.csv").write_text(KERN_HEADER + "50.0,1000,10,100,90,80,110,5,kernel_a\n"
                                             "50.0,1000,10,100,90,80,110,5\n")
    (root / "kern-noheader.csv").write_text("Processing [r.sqlite]...\nSKIPPED: no CUDA kernel data.\n")
    (root / "trace.nsys-rep").write_bytes(b"\x00report")
    (root / "trace-bad.json").write_text("{\"traceEvents\": [")
    (root / "trace-binary.json").write_bytes(b"\xff\xfe\x00\x01")
    (root / "trace-dur.json").write_text(json.dumps({"traceEvents": [{"cat": "kernel", "name": "k", "dur": "x"}]}))
    (root / "junk.sqlite").write_text("not a database\n")
    (root / "export.xyz").write_text("?\n")
    # one recorded session, which no refused command may touch
    s = root / "sessions" / "20260101T000000Z-latency-sim"
    s.mkdir(parents=True)
    (s / "status.json").write_text(json.dumps({"command": "latency", "complete": True, "state": "complete"}))
    (s / "summary.json").write_text(json.dumps({"command": "latency", "backend": "sim", "speedup_pct": 1.0,
                                                "complete": True}))
    (s / "protocol.yaml").write_text("command: latency\nbackend: sim\nstarted_utc: '2026-01-01T00:00:00+00:00'\n")
    seal_file(root / "preds.yaml", name="demo", directory=root / "sealed")
    t = root / "tampered"
    shutil.copytree(root / "sealed", t)
    d = root / "tampered-date"
    shutil.copytree(root / "sealed", d)
    (d / "demo.yaml").write_text("title: 2026-02-30\n" + (d / "demo.yaml").read_text())
    (t / "demo.yaml").write_text((t / "demo.yaml").read_text().replace("50.0", "60.0"))
    (root / "binseal").mkdir()
    shutil.copy(root / "sealed" / "demo.yaml", root / "binseal" / "demo.yaml")
    (root / "binseal" / "demo.sha256").write_bytes(b"\xff" * 80)


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]
    code: int = 2
    says: str = ""          # a piece of the error line
    no_guess: bool = False  # a name far from every known one: no "did you mean"
    xfail: str = ""         # why it fails now (a change in a package owned elsewhere)
    env: tuple = ()         # (name, value) pairs for its environment; a value None takes the name out


def case(id, *args, code=2, says="", no_guess=False, xfail="", env=()):
    return Case(id, tuple(args), code, says, no_guess, xfail, tuple(env))


# a machine as a user has it: the tests' conftest turns on Triton's CPU interpreter, with which the Triton forward
# would run (for hours at these shapes) rather than be refused
NO_INTERPRETER = (("TRITON_INTERPRET", None),)



CASES = [
    # --- integrity: seal validates every key before anything is written ----------------------------------------
    case("seal-unknown-scope-key", "seal", "colour.yaml", says="'colour'", no_guess=True),
    case("seal-unknown-evidence", "seal", "vibes.yaml", says="'vibes' is not an evidence kind", no_guess=True),
    case("seal-command-typo", "seal", "cmdtypo.yaml", says="'latncy' is not a command"),
    case("seal-command-typo-after-a-key", "seal", "cmdtypo-late.yaml", says="'latncy' is not a command"),
    case("seal-bad-comparator", "seal", "comparator.yaml", says="comparator"),
    case("seal-between-one-bound", "seal", "onebound.yaml", says="two bounds"),
    case("seal-binary-file", "seal", "binary.bin", says="not UTF-8"),
    case("seal-latin1-file", "seal", "latin1.yaml", says="not UTF-8"),
    case("seal-broken-yaml", "seal", "broken.yaml", says="not valid YAML"),
    case("seal-list-not-mapping", "seal", "list.yaml", says="top level must be a mapping"),
    case("seal-impossible-date", "seal", "baddate.yaml", says="date or time that does not exist"),
    # a scope no session can match, sealed without a word before
    case("seal-scope-seq-zero", "seal", "seq-zero.yaml", says="0 is not a sequence length"),
    case("seal-id-float", "seal", "id-float.yaml", says="an id is a name or a whole number"),
    case("verify-impossible-date", "verify", "tampered-date/demo.yaml", code=6, says="does not match its seal"),
    case("seal-missing-file", "seal", "nothing.yaml", says="does not exist"),
    case("seal-folder", "seal", "empty", says="is a directory"),
    case("seal-bad-name", "seal", "preds.yaml", "--name", "a/b", says="seal name"),
    case("seal-dir-under-file", "seal", "preds.yaml", "--dir", "somefile/sealed", says="which is a file"),
    case("seal-dir-read-only", "seal", "preds.yaml", "--dir", "/proc/softbench-sealed", says="cannot be written"),
    case("seal-different-content-same-name", "seal", "changed.yaml", "--name", "demo", code=6,
         says="already holds different sealed content"),
    # --- verify and evaluate --------------------------------------------------------------------------------
    case("verify-missing", "verify", "sealed/nothing.yaml", says="does not exist"),
    case("verify-tampered", "verify", "tampered/demo.yaml", code=6, says="does not match its seal"),
    case("verify-binary-seal-file", "verify", "binseal/demo.yaml", says="not UTF-8"),
    case("evaluate-tampered", "evaluate", "tampered/demo.yaml", "--sessions", "sessions", code=6),
    case("evaluate-no-sessions", "evaluate", "sealed/demo.yaml", says="no sessions given"),
    case("evaluate-file-as-sessions", "evaluate", "sealed/demo.yaml", "--sessions", "somefile",
         says="neither a session"),
    case("evaluate-json-under-file", "evaluate", "sealed/demo.yaml", "--sessions", "sessions", "--json",
         "somefile/ev.json", says="which is a file"),
    case("evaluate-json-read-only", "evaluate", "sealed/demo.yaml", "--sessions", "sessions", "--json",
         "/proc/ev.json", says="cannot be written"),
    case("evaluate-json-is-folder", "evaluate", "sealed/demo.yaml", "--sessions", "sessions", "--json", "empty",
         says="is a directory"),
    # --- protocol files -------------------------------------------------------------------------------------
    case("latency-protocol-binary", "latency", "--backend", "sim", "--protocol", "binary.bin", says="not UTF-8"),
    case("latency-protocol-latin1", "latency", "--backend", "sim", "--protocol", "latin1.yaml", says="not UTF-8"),
    case("latency-protocol-broken", "latency", "--backend", "sim", "--protocol", "broken.yaml",
         says="not valid YAML"),
    case("latency-protocol-unknown-key", "latency", "--backend", "sim", "--protocol", "protocol-unknown.yaml",
         says="protocol keys"),
    case("latency-protocol-missing", "latency", "--backend", "sim", "--protocol", "nothing.yaml",
         says="does not exist"),
    case("latency-protocol-cells-and-seq", "latency", "--backend", "sim", "--protocol", "protocol-cells.yaml",
         "--seq", "512", says="lists its own cells"),
    case("energy-protocol-binary", "energy", "--protocol", "binary.bin", says="not UTF-8"),
    case("latency-protocol-impossible-date", "latency", "--backend", "sim", "--protocol", "protocol-baddate.yaml",
         says="date or time that does not exist"),
    case("latency-protocol-kind-list", "latency", "--backend", "sim", "--protocol", "protocol-kind-list.yaml",
         says="the protocol kind must be a name"),
    case("latency-protocol-variant-list", "latency", "--backend", "sim", "--protocol", "protocol-variant-list.yaml",
         says="'variant' must be one name"),
    case("latency-protocol-causal-maybe", "latency", "--backend", "sim", "--protocol", "protocol-causal-maybe.yaml",
         says="causal must be true or false"),
    case("sweep-protocol-binary", "sweep", "emulation", "--protocol", "binary.bin", "--dry-run", says="not UTF-8"),
    # --- trace ingest ---------------------------------------------------------------------------------------
    case("ingest-non-numeric-cell", "trace", "ingest", "kern-text.csv", says="'n/a' is not a number"),
    case("ingest-no-header", "trace", "ingest", "kern-noheader.csv", says="no cuda_gpu_kern_sum header"),
    case("ingest-raw-report", "trace", "ingest", "trace.nsys-rep", says="export it first"),
    case("ingest-bad-json", "trace", "ingest", "trace-bad.json", says="not JSON"),
    case("ingest-binary-json", "trace", "ingest", "trace-binary.json", says="not UTF-8"),
    case("ingest-text-duration", "trace", "ingest", "trace-dur.json", says="not a number"),
    case("ingest-junk-sqlite", "trace", "ingest", "junk.sqlite", says="not a readable SQLite export"),
    case("ingest-huge-integer", "trace", "ingest", "trace-huge.json", says="not a number"),
    case("ingest-deep-json", "trace", "ingest", "trace-deep.json", says="nests too deeply"),
    case("ingest-row-shorter-than-header", "trace", "ingest", "kern-short-row.csv",
         says="line 3: a row of the kernel table has no kernel name"),
    case("ingest-row-longer-than-header", "trace", "ingest", "kern-long-row.csv", says="more cells than its header"),
    case("ingest-unknown-type", "trace", "ingest", "export.xyz", says="unknown export type"),
    case("ingest-missing", "trace", "ingest", "nothing.csv", says="does not exist"),
    # --- an output that cannot be written, refused before anything starts -------------------------------------
    case("gates-out-under-file", "gates", "--backend", "sim", "--out", "somefile/sub", says="which is a file"),
    case("gates-out-read-only", "gates", "--backend", "sim", "--out", "/proc/softbench", says="cannot be written"),
    case("gates-out-is-file", "gates", "--backend", "sim", "--out", "somefile", says="is a file"),
    case("env-record-out-under-file", "env", "--record", "--out", "somefile/sub", says="which is a file"),
    case("report-out-under-file", "report", "sessions", "--out", "somefile/report", says="which is a file"),
    case("trace-out-under-file", "trace", "run", "--out", "somefile/sub", says="which is a file"),
    case("audit-out-under-file", "audit", "--out", "somefile/sub", says="which is a file"),
    case("energy-out-under-file", "energy", "--out", "somefile/sub", says="which is a file"),
    case("latency-out-under-file", "latency", *SIM, "--seq", "128", "--out", "somefile/sub", says="which is a file"),
    case("latency-out-read-only", "latency", *SIM, "--seq", "128", "--out", "/proc/softbench",
         says="cannot be written"),
    case("sweep-out-under-file", "sweep", "variants", *SIM, "--seq", "128", "--variants", "A1", "--out",
         "somefile/sub", says="which is a file"),
    # --- shapes too large for this machine, refused with the number -------------------------------------------
    case("gates-multi-seq-too-large", "gates", "--backend", "sim", "--multi-seq", "100000000", says="needs about"),
    case("trace-seq-too-large", "trace", "run", "--seq", "1000000000", says="needs about"),
    case("audit-seq-too-large", "audit", "--seq", "1000000000", says="needs about"),
    # taken, then only the missing GPU refused them: a GPU would have waited forever or held the board for hours
    case("audit-timeout-nan", "audit", "--timeout", "nan", says="not a finite number"),
    case("audit-timeout-inf", "audit", "--timeout", "inf", says="not a finite number"),
    case("audit-calls-huge", "audit", "--calls", "100000000000", says="'--calls'"),
    case("latency-seq-too-large", "latency", *SIM, "--seq", "1000000000", says="needs about"),
    # --- names: suggestions only when close -----------------------------------------------------------------
    case("gates-variant-nonsense", "gates", "--backend", "sim", "--variant", "nonsense", says="unknown",
         no_guess=True),
    case("latency-variant-close", "latency", "--backend", "sim", "--variant", "noxp", says="unknown"),
    case("latency-backend-unknown", "latency", "--backend", "cuda", says="'--backend'"),
    case("unknown-command", "latncy", says="No such command"),
    case("unknown-option", "latency", "--sequence", "8K", says="No such option"),
    # --- shapes ---------------------------------------------------------------------------------------------
    case("latency-seq-twice", "latency", "--backend", "sim", "--seq", "128", "--seq", "128", says="same length"),
    case("latency-seq-8K-and-8192", "latency", "--backend", "sim", "--seq", "8K", "--seq", "8192",
         says="same length"),
    case("trace-seq-twice", "trace", "run", "--seq", "128", "--seq", "128", says="same length"),
    case("latency-seq-text", "latency", "--backend", "sim", "--seq", "abc", says="not an integer"),
    case("latency-seq-zero", "latency", "--backend", "sim", "--seq", "0", says="positive integer"),
    case("latency-kv-heads", "latency", "--backend", "sim", "--heads", "3", "--kv-heads", "2",
         says="multiple of kv-heads"),
    case("latency-head-dim", "latency", "--backend", "sim", "--head-dim", "12", says="multiple of 8"),
    case("latency-calls-zero", "latency", "--backend", "sim", "--calls", "0", says="'--calls'"),
    # a seed past 64 bits failed inside the worker after the session had started (exit 5, a partial session); a
    # negative fidelity seed failed after every block had been evaluated, and again on every --resume
    case("latency-seed-huge", "latency", *SIM, "--seq", "128", "--seed", "99999999999999999999999", says="'--seed'"),
    case("fidelity-seed-negative", "fidelity", "--model", "smollm2-135m", "--seed", "-1", says="'--seed'"),
    # torch took the count as a C int: an internal error (exit 70) after the model had loaded
    case("fidelity-threads-huge", "fidelity", "--model", "smollm2-135m", "--threads", "99999999999999999999",
         says="'--threads'"),
    case("fidelity-bootstrap-huge", "fidelity", "--model", "smollm2-135m", "--bootstrap", "10000000000",
         says="'--bootstrap'"),
    case("fidelity-gguf-file-empty", "fidelity", "--model", "smollm2-135m", "--gguf-file", "",
         says="--gguf-file is empty"),
    # Path("") is the current folder: "--corpus <cwd>: a folder, but not one written by datasets' save_to_disk"
    case("fidelity-corpus-empty", "fidelity", "--model", "smollm2-135m", "--corpus", "", says="--corpus is empty"),
    # the seal's name comes from the file's stem, so the refusal named an empty --name the user never gave
    case("seal-path-empty", "seal", "", says="an argument of softbench seal is empty"),
    # read until the memory ran out
    case("seal-device", "seal", "/dev/zero", says="not a regular file"),
    # thousands of worker processes from a typo
    case("latency-processes-huge", "latency", "--backend", "sim", "--seq", "128", "--processes", "100000",
         says="'--processes'"),
    case("latency-out-empty", "latency", *SIM, "--seq", "128", "--out", "", says="--out is empty"),
    # an empty item was dropped without a word, perhaps a name that was meant
    case("sweep-variants-empty-item", "sweep", "variants", *SIM, "--seq", "128", "--variants", "A1,,noexp",
         says="has an empty item"),
    case("trace-variants-empty-item", "trace", "run", "--variants", "A0,", says="has an empty item"),
    # the last of two values won without a word
    case("fidelity-operator-parameter-twice", "fidelity", "--model", "smollm2-135m", "--operator",
         "rowmax-pot:kmax=5,kmax=6", says="parameter kmax is given twice (5 and 6)"),
    # a window longer than the budget ran on past it: the budget is checked between windows
    case("latency-window-past-budget", "latency", "--backend", "sim", "--seq", "128", "--window-ms", "1e12",
         "--budget-s", "3", says="longer than the measuring budget"),
    case("latency-protocol-seed-huge", "latency", "--backend", "sim", "--protocol", "protocol-seed-huge.yaml",
         says="seed must be at most"),
    # every protocol with a seed bounds it the same way (core.protocol._check_fields' seeds)
    case("latency-paper-protocol-seed-huge", "latency", "--backend", "sim", "--protocol",
         "protocol-paper-seed-huge.yaml", says="seed must be at most"),
    # a window of a billion calls held its worker for hours before the first pair: the budget is checked between
    # windows (core.protocol.MAX_WINDOW_CALLS bounds every protocol's calls, and --calls of latency, sweep, trace)
    case("latency-calls-huge", "latency", *SIM, "--seq", "128", "--calls", "1000000000", says="'--calls'"),
    case("trace-calls-huge", "trace", "run", "--calls", "1000000000", says="'--calls'"),
    # trace's window options are refused as options, before the device is looked for (exit 2, not 3 on a CPU)
    case("trace-calls-zero", "trace", "run", "--calls", "0", says="'--calls': 0 is not in the range"),
    case("trace-window-zero", "trace", "run", "--window-s", "0", says="'--window-s'"),
    case("trace-window-nan", "trace", "run", "--window-s", "nan", says="'--window-s': 'nan' is not a finite number"),
    case("trace-warmup-negative", "trace", "run", "--warmup", "-1", says="'--warmup': -1 is not in the range"),
    case("latency-protocol-calls-huge", "latency", "--backend", "sim", "--protocol", "protocol-calls-huge.yaml",
         says="calls must be at most 100,000 calls per window"),
    case("latency-protocol-warmup-null", "latency", "--backend", "sim", "--protocol", "protocol-warmup-null.yaml",
         says="warmup_min_s must be a finite non-negative number, got None"),
    case("latency-protocol-settle-text", "latency", "--backend", "sim", "--protocol", "protocol-settle-text.yaml",
         says="settle_max_s must be a finite non-negative number, got 'soon'"),
    case("latency-paper-protocol-calls-true", "latency", "--backend", "sim", "--protocol",
         "protocol-paper-calls-true.yaml", says="calls must be a positive integer, got True"),
    case("energy-protocol-seed-negative", "energy", "--protocol", "energy-seed-negative.yaml",
         says="seed must be a non-negative integer"),
    case("energy-protocol-interval-nan", "energy", "--protocol", "energy-interval-nan.yaml",
         says="interval_ms must be a finite number of at least 1, got nan"),
    case("energy-protocol-interval-huge", "energy", "--protocol", "energy-interval-huge.yaml",
         says="interval_ms must be a finite number of at least 1"),
    case("energy-protocol-ramp-true", "energy", "--protocol", "energy-ramp-true.yaml",
         says="ramp_fraction must be in (0, 1], got True"),
    case("latency-protocol-budget-huge", "latency", "--backend", "sim", "--protocol", "protocol-budget-huge.yaml",
         says="budget_s must be a finite positive number"),
    case("latency-reference-no-name", "latency", "--backend", "sim", "--seq", "128", "--reference", ",",
         says="names no reference kernel"),
    case("gates-dtype-unknown", "gates", "--dtype", "fp4", says="'--dtype'"),
    case("energy-two-lengths", "energy", "--seq", "1K", "--seq", "2K", says="one --seq"),
    case("latency-rescale-with-fa4", "latency", "--rescale-threshold", "8", says="--backend sim only"),
    case("latency-rescale-nan", "latency", "--backend", "sim", "--rescale-threshold", "nan", says="finite number"),
    case("gates-rescale-negative", "gates", "--backend", "sim", "--rescale-threshold", "-1", says="finite number"),
    case("latency-budget-inf", "latency", *SIM[:2], "--seq", "128", "--budget-s", "inf",
         says="'--budget-s': 'inf' is not a finite number"),
    case("energy-seconds-inf", "energy", "--seconds", "inf", says="'--seconds': 'inf' is not a finite number"),
    case("energy-seq-zero", "energy", "--seq", "0", says="positive integer"),
    case("sweep-variant-twice", "sweep", "variants", *SIM, "--seq", "128", "--variants", "A1,noexp,A1",
         says="--variants names A1 more than once"),
    # the baseline among the variants would share a label with it (a bug's exit 70 and a folder, once); alone it
    # ran an A/A-only sweep while beside others it was refused: now never one of them, however given
    case("sweep-baseline-with-null", "sweep", "variants", "--backend", "sim", "--seq", "128", "--variants", "A1,A0",
         says="--variants names the baseline A0, which is never one of the variants"),
    case("sweep-baseline-second", "sweep", "variants", "--backend", "sim", "--seq", "128", "--variants", "A1,A0",
         "--no-null", says="--variants names the baseline A0, which is never one of the variants"),
    case("sweep-baseline-second-sustained", "sweep", "variants", "--backend", "sim", "--seq", "128", "--variants",
         "A1,A0", "--no-null", "--protocol", "sustained", says="which is never one of the variants"),
    case("sweep-baseline-alone", "sweep", "variants", *SIM, "--seq", "128", "--variants", "A0",
         says="--variants names the baseline A0, which is never one of the variants"),
    case("sweep-baseline-alone-paper", "sweep", "variants", *SIM, "--seq", "128", "--variants", "A0", "--no-null",
         says="which is never one of the variants"),
    case("trace-variant-twice", "trace", "run", "--variants", "A0,A0", says="--variants names A0 more than once"),
    case("energy-kv-heads", "energy", "--heads", "3", "--kv-heads", "2", says="multiple"),
    case("sweep-sim-hours", "sweep", "variants", "--backend", "sim", says="would take at least"),
    # --- what this machine cannot run: the documented exit code 3, with what to do instead -----------------------
    case("energy-sim-on-cpu", "energy", "--backend", "sim", code=3, says="NVML"),
    case("trace-sim-on-cpu", "trace", "run", "--backend", "sim", "--seq", "128", code=3, says="CUDA GPU"),
    # the design card's command, and each GPU backend named, on a machine without one: refused before any progress
    # bar is drawn (an empty bar had left a blank line before the error)
    case("latency-design-card-on-cpu", "latency", "--dtype", "fp8", "--seq", "16384", "--rounds", "3", code=3,
         says="no kernel backend can run fp8-16K-causal", env=NO_INTERPRETER),
    case("latency-fa4-on-cpu", "latency", "--backend", "fa4", "--seq", "128", code=3, says="FA4 needs a CUDA GPU"),
    case("latency-triton-on-cpu", "latency", "--backend", "triton", "--seq", "128", code=3,
         says="the Triton forward needs a CUDA GPU", env=NO_INTERPRETER),
    # --- paths that hold no sessions --------------------------------------------------------------------------
    case("report-empty-folder", "report", "empty", says="no sessions"),
    case("report-file", "report", "somefile", says="is a file"),
    case("report-speed-shape-unrecorded", "report", "sessions", "--speed-fidelity-shape", "fp8-9K",
         says="no latency session among the paths measured shape 'fp8-9K'"),
    case("gates-reevaluate-not-a-session", "gates", "--reevaluate", "empty", says="empty"),
    # --- auto and none stand alone in --reference (once "unknown reference kernel auto, none (known: ..., auto,
    # none)") --------------------------------------------------------------------------------------------------
    case("latency-reference-auto-and-none", "latency", *SIM, "--seq", "128", "--reference", "auto,none",
         says="--reference auto,none: auto and none stand alone and cannot be combined with other kernels"),
    case("latency-reference-none-and-fa3", "latency", *SIM, "--seq", "128", "--reference", "none,fa3",
         says="none stands alone"),
    case("sweep-reference-fa3-and-auto", "sweep", "variants", *SIM, "--seq", "128", "--reference", "fa3,auto",
         says="auto stands alone"),
    # a sweep file's shape of the wrong type came back in Python's words ("argument after ** must be a mapping")
    case("sweep-emulation-shape-text", "sweep", "emulation", "--dry-run", "--protocol", "sweep-shape-text.yaml",
         says="sweep-shape-text.yaml: shape must be a mapping of the shape's fields (dtype, seq,"),
    case("sweep-emulation-shape-unknown-key", "sweep", "emulation", "--dry-run", "--protocol",
         "sweep-shape-colour.yaml", says="shape has unknown keys ['colour']"),
    # a group without its subcommand printed its whole help as the error
    case("sweep-no-subcommand", "sweep", says="softbench sweep needs a subcommand: emulation or variants"),
    case("trace-no-subcommand", "trace", says="softbench trace needs a subcommand: ingest or run"),
    case("no-command", says="softbench needs a command: audit, energy,"),
    # an empty value: once the current folder ("protocol file . is a folder", a report under ./out), or taken as not
    # given (the default reference kernels, the default protocol)
    case("latency-protocol-empty", "latency", *SIM[:2], "--seq", "128", "--protocol", "", says="--protocol is empty"),
    case("sweep-protocol-empty", "sweep", "variants", *SIM[:2], "--seq", "128", "--protocol", "",
         says="--protocol is empty"),
    case("latency-reference-empty", "latency", *SIM, "--seq", "128", "--reference", "", says="--reference is empty"),
    case("energy-protocol-empty", "energy", "--protocol", "", says="--protocol is empty"),
    case("sweep-emulation-protocol-empty", "sweep", "emulation", "--dry-run", "--protocol", "",
         says="--protocol is empty"),
    case("sweep-emulation-out-empty", "sweep", "emulation", "--out", "", says="--out is empty"),
    case("report-out-empty", "report", "sessions", "--out", "", says="--out is empty"),
    case("report-speed-shape-empty", "report", "sessions", "--speed-fidelity-shape", "",
         says="--speed-fidelity-shape is empty"),
    case("ingest-empty-path", "trace", "ingest", "", says="an argument of softbench trace ingest is empty"),
    # a path to read from, empty: click's own check had said that the folder '' does not exist
    case("report-path-empty", "report", "", says="an argument of softbench report is empty"),
    case("evaluate-sessions-empty", "evaluate", "sealed/x.yaml", "--sessions", "", says="--sessions is empty"),
    case("evaluate-dir-empty", "evaluate", "sealed/x.yaml", "", says="an argument of softbench evaluate is empty"),
    case("gates-reevaluate-empty", "gates", "--reevaluate", "", says="--reevaluate is empty"),
    case("fidelity-resume-empty", "fidelity", "--resume", "", says="--resume is empty"),
    # NaN passes every bound click checks; the refusal named the protocol's field (and "nan s" for milliseconds)
    case("latency-budget-nan", "latency", *SIM[:2], "--seq", "128", "--budget-s", "nan",
         says="'--budget-s': 'nan' is not a finite number"),
    case("latency-window-nan", "latency", *SIM[:2], "--seq", "128", "--window-ms", "nan",
         says="'--window-ms': 'nan' is not a finite number"),
    case("latency-target-nan", "latency", *SIM[:2], "--seq", "128", "--target-pp", "nan",
         says="'--target-pp': 'nan' is not a finite number"),
    case("energy-interval-nan", "energy", "--interval-ms", "nan", says="'--interval-ms': 'nan' is not a finite number"),
    case("energy-ramp-nan", "energy", "--ramp-fraction", "nan", says="'--ramp-fraction': 'nan' is not a finite"),
    case("energy-idle-nan", "energy", "--idle-s", "nan", says="'--idle-s': 'nan' is not a finite number"),
    # nonsense on any machine, once refused only by this machine's lack of a GPU (exit 3), or run until killed
    case("energy-seconds-past-a-day", "energy", "--seconds", "1e12", says="'--seconds': 1000000000000.0 is not in "
         "the range 0<x<=86400 s"),
    case("energy-trims-leave-nothing", "energy", "--trim-start", "1000", "--trim-end", "1000", "--seconds", "1",
         says="trimming 1000 + 1000 samples leaves nothing"),
    case("trace-warmup-huge", "trace", "run", "--warmup", "100000000000000000000", says="'--warmup'"),
    case("latency-rounds-huge", "latency", *SIM[:2], "--seq", "128", "--rounds", "99999999999999999999",
         says="'--rounds': 99999999999999999999 is not in the range 1<=x<=1000"),
    case("latency-budget-past-a-day", "latency", *SIM[:2], "--seq", "128", "--budget-s", "1e12",
         says="'--budget-s'"),
    case("latency-protocol-budget-past-a-day", "latency", "--backend", "sim", "--protocol",
         "protocol-budget-day.yaml", says="budget_s must be at most 86,400 s (a day), got 1000000000000.0"),
    case("sweep-fa4-protocol-missing", "sweep", "variants", "--seq", "128", "--protocol", "nothing.yaml",
         says="does not exist"),
]


def tree(root: Path) -> dict[str, str]:
    """Every file under root (paths relative) with the sha256 of its bytes, and every folder."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "folder"
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    base = tmp_path_factory.mktemp("bad-input")
    template = base / "template"
    build_template(template)
    before = tree(template)
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), "COLUMNS": "80",
           "CUDA_VISIBLE_DEVICES": ""}

    def run(c: Case):
        cwd = base / c.id
        shutil.copytree(template, cwd)
        done = run_cli(*c.args, cwd=cwd, env={**env, **dict(c.env)})
        return c.id, (done, tree(cwd))

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return before, dict(pool.map(run, CASES))


def test_there_are_at_least_fifty_cases_with_distinct_names():
    assert len(CASES) >= 50 and len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("c", [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=c.xfail)]
                                            if c.xfail else []) for c in CASES])
def test_bad_input(c: Case, results):
    before, by_id = results
    done, after = by_id[c.id]
    out = done.stdout + done.stderr
    assert "Traceback" not in out, out
    errors = [line for line in done.stderr.splitlines() if line.lower().startswith("error")]
    assert len(errors) == 1 and errors[0].startswith("error: "), done.stderr
    assert done.stderr.strip() and done.stderr.split("\n", 1)[0].strip(), repr(done.stderr[:200])  # no blank line first
    assert done.returncode == c.code, (done.returncode, done.stderr)
    assert c.says in errors[0], errors[0]
    if c.no_guess:
        assert "did you mean" not in done.stderr.lower(), done.stderr
    added = sorted(set(after) - set(before))
    changed = sorted(k for k in before if after.get(k) != before[k])
    assert not added and not changed, f"added {added}, changed or removed {changed}"
