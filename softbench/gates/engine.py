"""One gates run: both kernels' readbacks at one key tile and at several, each kernel in its own worker process, then
the gates evaluated in the parent and the session written (softbench.gates.record)."""

from __future__ import annotations

import concurrent.futures
import math
from typing import Callable

from softbench.core.errors import MeasurementError, SoftbenchError
from softbench.core.session import file_label
from softbench.gates.checks import Gate, multi_tile_gates, readback_gate, single_tile_gate
from softbench.gates.maps import GateMap, gate_map_for
from softbench.gates.options import GatesOptions, rescale_threshold, resolve_options
from softbench.gates.readback import Readback, load_readback, readback_path, same_inputs
from softbench.gates.record import record_gates
from softbench.gates.render import gates_markdown
from softbench.gates.tolerances import ENVELOPE
from softbench.runtime.session_runner import describe_failure

READBACK_FILE = "readbacks.jsonl"


class GatesFailed(SoftbenchError):
    """At least one correctness gate failed. The session is complete; the kernel is what failed."""

    exit_code = 1


def default_runner(label: str, backend: str, variant: str, options: dict):
    """A worker process per kernel (FA4 can hold one flash_attn per process)."""
    from softbench.runtime.client import WorkerProcess

    return WorkerProcess(label, backend, variant, options)


def evaluate(single: dict[str, Readback], multi: dict[str, Readback], base: str, var: str, tau: float,
             gmap: GateMap) -> list[Gate]:
    for seq_pair in (single, multi):
        if not same_inputs(seq_pair[base], seq_pair[var]):
            raise MeasurementError("the two kernel processes built different inputs from the same seed")
    return [readback_gate(single[base]), single_tile_gate(single[var], gmap),
            *multi_tile_gates(multi[base], multi[var], rescale_threshold=tau, gmap=gmap)]


def run_gates(opts: GatesOptions, progress: Callable[[str], None] | None = None,
              runner: Callable[..., object] | None = None):
    """Run both kernels' readbacks at one tile and at several, evaluate the gates and record a session.
    Returns (session, summary). `runner(label, backend, variant, options)` makes a worker (a process by default)."""
    from softbench.core.envinfo import collect_env
    from softbench.core.session import Session
    from softbench.core.utc import utc_iso

    say = progress or (lambda _msg: None)
    runner = runner or default_runner  # looked up at call time, so a test can swap it
    opts = resolve_options(opts)
    base, var = opts.labels()
    gmap, map_note = gate_map_for(opts.variant)
    if map_note:
        say(map_note)
    session = Session.create(opts.out_dir, "gates", opts.tag())
    session.write_yaml("protocol.yaml", {
        "command": "gates", "command_line": opts.command_line, "backend": opts.backend,
        "backend_options": opts.backend_options, "baseline": opts.baseline, "variant": opts.variant,
        "labels": [base, var], "seed": opts.seed,
        "shapes": {"single_tile": opts.shape(opts.single_seq).to_dict(),
                   "multi_tile": opts.shape(opts.multi_seq).to_dict()},
        "envelope": list(ENVELOPE), "reference": gmap.name, "started_utc": utc_iso(),
    })
    workers = {}
    summary = {"command": "gates", "backend": opts.backend, "baseline": opts.baseline, "variant": opts.variant,
               "tag": opts.tag(), "reference": gmap.to_dict(), "complete": False,
               **({"reference_note": map_note} if map_note else {})}
    try:
        workers = {base: runner(base, opts.backend, opts.baseline, opts.backend_options),
                   var: runner(var, opts.backend, opts.variant, opts.backend_options)}
        say(f"loading {opts.backend} {opts.baseline} and {opts.variant}, one process each")
        with concurrent.futures.ThreadPoolExecutor(len(workers)) as pool:  # both import at once
            list(pool.map(lambda w: w.load(), workers.values()))
        info = {label: w.info for label, w in workers.items()}
        session.write_json("env.json", {**collect_env(gpu=True), "workers": info})
        tau = rescale_threshold(opts.backend, info[var].get("device", {}).get("arch"), opts.dtype,
                                opts.backend_options)
        readbacks: dict[int, dict[str, Readback]] = {}
        non_finite: dict[str, dict[int, int]] = {label: {} for label in workers}
        for seq in (opts.single_seq, opts.multi_seq):
            shape = opts.shape(seq)
            readbacks[seq] = {}
            for label, w in workers.items():
                say(f"{shape.tag()}: reading back {label}'s probabilities ({math.ceil(seq / opts.head_dim)} forwards)")
                path = readback_path(session.path, label, seq)
                res = w.request("probabilities", shape=shape.to_dict(), seed=opts.seed, path=str(path))["result"]
                # non-finite probabilities are the kernel's fault: they make the gates fail (NaN never passes)
                session.append(READBACK_FILE, {"label": label, "variant": w.variant, "utc": utc_iso(), **res})
                non_finite[label][seq] = res["non_finite"]
                readbacks[seq][label] = load_readback(path, opts.causal)
        say("evaluating the gates")
        gates = evaluate(readbacks[opts.single_seq], readbacks[opts.multi_seq], base, var, tau, gmap)
    except BaseException as exc:
        reason = describe_failure(exc)
        summary.update({"incomplete_reason": reason, "finished_utc": utc_iso()})
        session.write_json("summary.json", summary)
        session.write_text("summary.md", gates_markdown(summary, session.path.name))
        session.set_status(complete=False, state="partial", reason=reason)
        for label, w in workers.items():
            if hasattr(w, "copy_log"):
                w.copy_log(session.path / f"worker-{file_label(label)}.log")
        raise
    finally:
        for w in workers.values():
            w.close()
    summary["non_finite_readback_values"] = non_finite
    record_gates(session, summary, gates, tau, readbacks[opts.multi_seq][var].storage,
                 {"single_tile": opts.shape(opts.single_seq).tag(), "multi_tile": opts.shape(opts.multi_seq).tag()})
    return session, summary
