"""The A/A null inside the baseline's process (--null-in-process, softbench.runtime.twin): the baseline's worker
holds a second allocation of the same inputs (input slot 1) and times either on request. Real inputs: the
simulation's worker in this process, and the CLI end to end."""

from __future__ import annotations

import json

import pytest
import torch

from softbench.core.errors import SoftbenchError
from softbench.core.shapes import Shape
from softbench.runtime.worker import WorkerState

from test_vocabulary import assert_covered

# stops at 12 pairs; the budget only bounds a machine too loaded to reach them (1 s once gave 6 pairs under load)
QUICK = ("protocol:\n  kind: interleaved\n  calls: 2\n  untimed: 0\n  min_pairs: 10\n  max_pairs: 12\n"
         "  check_every: 5\n  budget_s: 20\n  warmup_min_s: 0.2\n  warmup_max_s: 1\n")
SMALL = ("--backend", "sim", "--seq", "128", "--heads", "1", "--head-dim", "64")


def test_the_second_slot_holds_the_same_inputs_in_memory_of_their_own():
    w = WorkerState()
    w.load({"backend": "sim", "variant": "A0"})
    shape = Shape(dtype="bf16", seq=64, heads=1, head_dim=64).to_dict()
    with pytest.raises(SoftbenchError, match="before prepare"):
        w.window({"calls": 1, "slot": 1})
    first = w.prepare({"shape": shape, "seed": 3})
    second = w.prepare({"shape": shape, "seed": 3, "slot": 1})
    assert (first["slot"], second["slot"]) == (0, 1)
    assert first["rel_error_vs_fp32"] == second["rel_error_vs_fp32"]
    for a, b in ((w.inputs.q, w.twin_inputs.q), (w.inputs.k, w.twin_inputs.k), (w.inputs.v, w.twin_inputs.v)):
        assert torch.equal(a, b) and a.data_ptr() != b.data_ptr()
    assert torch.equal(w.forward(), w.twin_forward())
    assert w.window({"calls": 2, "slot": 1})["calls"] == 2
    with pytest.raises(SoftbenchError, match="slots 0 and 1"):
        w.prepare({"shape": shape, "slot": 2})


def test_the_in_process_null_sends_prepare_and_window_to_slot_1_of_its_host_and_refuses_the_rest():
    import types

    from softbench.runtime.twin import InputTwin

    sent = []
    host = types.SimpleNamespace(label="A0", backend="sim", variant="A0", pid=41, info={"device": "cpu"},
                                 request=lambda op, on_stream=None, **fields: sent.append((op, fields)) or {})
    twin = InputTwin("A0~", host)
    twin.request("window", calls=3)
    assert sent == [("window", {"slot": 1, "calls": 3})]
    # a sustained block or a paper round would time the host's own slot: never forwarded
    with pytest.raises(ValueError, match="answers prepare and window only, not block"):
        twin.request("block", calls=3)
    assert len(sent) == 1
    assert twin.info == {"device": "cpu", "input_slot": 1, "process_of": "A0"} and twin.pid == 41


def test_latency_with_both_nulls_on_the_simulation(tmp_path, cli):
    proto = tmp_path / "quick.yaml"
    proto.write_text(QUICK)
    r = cli("latency", *SMALL, "--variant", "h15-sat", "--null", "--null-in-process", "--protocol", str(proto),
            "--out", str(tmp_path / "s"))
    assert r.returncode == 0, r.stderr
    (session,) = (tmp_path / "s").iterdir()
    env = json.loads((session / "env.json").read_text())
    twin, base = env["workers"]["A0~"], env["workers"]["A0"]
    assert twin["input_slot"] == 1 and twin["process_of"] == "A0" and twin["pid"] == base["pid"]
    windows = [json.loads(line) for line in (session / "windows.jsonl").read_text().splitlines()]
    assert {w["pid"] for w in windows if w["label"] == "A0~"} == {base["pid"]}
    assert {w["pid"] for w in windows if w["label"] == "A0'"} != {base["pid"]}
    summary = json.loads((session / "summary.json").read_text())
    assert summary["null"] == "A0'" and summary["null_in_process"] == "A0~"
    assert summary["comparisons"]["A0~"]["paired"]["n_pairs"] >= 10
    assert summary["smoke"]["A0~"]["slot"] == 1
    assert_covered(session)  # what it records is in the vocabulary that seal checks
    assert "A/A null inside the baseline's process (A0~ vs A0" in r.stdout

    from softbench.predictions.sessions import load_sessions
    from softbench.report.nulls import null_rows

    rows = {row.protocol: row for row in null_rows(load_sessions([tmp_path / "s"]))}
    assert set(rows) == {"interleaved", "interleaved, in the baseline's process"}
    twin_row = rows["interleaved, in the baseline's process"]
    assert twin_row.estimate_pct == summary["comparisons"]["A0~"]["paired"]["estimate_pct"]
    assert twin_row.null_first is None


@pytest.mark.parametrize("extra,says", [(("--processes", "2"), "does not combine with --processes 2"),
                                        (("--protocol", "sustained"), "needs the interleaved protocol")])
def test_the_in_process_null_is_refused_where_it_cannot_run(tmp_path, cli, extra, says):
    r = cli("latency", *SMALL, "--null-in-process", *extra, "--out", str(tmp_path / "s"))
    assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr


def test_sweep_variants_carries_both_options_and_names_the_in_process_null(tmp_path, cli):
    proto = tmp_path / "quick.yaml"
    proto.write_text(QUICK)
    out = tmp_path / "s"
    r = cli("sweep", "variants", *SMALL, "--variants", "A1,h15-sat", "--null-in-process", "--processes", "1",
            "--protocol", str(proto), "--out", str(out))
    assert r.returncode == 0, r.stderr
    sweep = json.loads(next(out.glob("*-sweep-*/summary.json")).read_text())
    rows = {row["variant"]: row for row in sweep["rows"]}
    assert rows["A0~"]["description"] == "the A/A null inside A0's process: a second allocation of its inputs"
    for session in out.iterdir():
        assert_covered(session)


def test_sweep_refuses_processes_under_the_paper_rounds_before_anything_runs(tmp_path, cli):
    r = cli("sweep", "variants", *SMALL, "--variants", "A1", "--processes", "2", "--protocol", "paper",
            "--out", str(tmp_path / "s"))
    assert r.returncode == 2 and "--processes 2 needs the interleaved protocol" in r.stderr
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())
