"""Latency matrices across GPUs (issue 19 part 3) on the CPU: the --gpus value and its refusals, the static
deal of cells to ranks, the pinning by CUDA_VISIBLE_DEVICES, the control's barriers, the index; and, under
torchrun with gloo on the sim path, a matrix, the control and failing workers end to end (slow)."""

import json
import os
import subprocess
import sys
import types
from contextlib import contextmanager
from pathlib import Path

import pytest

from softbench.cli import main
from softbench.core.errors import UnsupportedError, UsageError
from softbench.latency import gpus, matrix
from softbench.latency.matrix_index import expected_runs, write_index
from softbench.runtime import launch
from softbench.runtime.distributed import Ranks
from test_vocabulary import assert_covered

ROOT = Path(__file__).resolve().parents[1]
TINY_SHAPE = ["--backend", "sim", "--seq", "128", "--heads", "1", "--head-dim", "32"]


def test_gpus_parses_indices_in_order():
    assert gpus.parse_gpus("0,1") == (0, 1)
    assert gpus.parse_gpus(" 3, 1 ") == (3, 1)
    assert gpus.parse_gpus("7") == (7,)


@pytest.mark.parametrize("text, words", [
    ("", "names no GPU"), (" , ", "names no GPU"), ("0,0", "names GPU 0 twice"), ("1,0,1", "names GPU 1 twice"),
    ("a", "'a' is not a GPU index"), ("-1", "'-1' is not a GPU index"), ("1.5", "'1.5' is not a GPU index"),
    ("0,,1", "'' is not a GPU index"), ("²", "is not a GPU index")])
def test_a_bad_gpus_value_is_one_sentence_and_exit_2(text, words, capsys, tmp_path):
    with pytest.raises(UsageError, match=words):
        gpus.parse_gpus(text)
    assert main(["latency", *TINY_SHAPE, "--gpus", text, "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --gpus") and words in err[0]
    assert not (tmp_path / "s").exists()


def test_more_gpus_than_this_cuda_machine_has_are_refused(monkeypatch, capsys, tmp_path):
    import torch

    with pytest.raises(UsageError, match="GPU 2 does not exist here"):
        gpus.check_gpus((0, 2), "0,2", "triton", visible=2)
    gpus.check_gpus((1, 0), "1,0", "triton", visible=2)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)  # a CUDA machine with two GPUs, as far as --gpus asks
    assert main(["latency", *TINY_SHAPE, "--gpus", "0,1,2", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --gpus 0,1,2: GPU 2 does not exist here (CUDA sees 2 GPU(s), indices 0 to 1)"]


def test_on_a_cpu_gpus_runs_the_simulation_only(capsys, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    gpus.check_gpus((0, 1), "0,1", "sim", visible=0)
    for backend in ("fa4", "triton", "auto"):
        with pytest.raises(UnsupportedError, match=f"--backend {backend} needs CUDA GPUs"):
            gpus.check_gpus((0, 1), "0,1", backend, visible=0)
    code = main(["latency", "--backend", "fa4", "--seq", "128", "--gpus", "0,1", "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == UnsupportedError.exit_code and len(err) == 1
    assert err[0] == ("error: --gpus with --backend fa4 needs CUDA GPUs and none is visible here; on a CPU only "
                      "--backend sim runs under --gpus")
    # a packaged matrix names its backend (fa4): the same sentence
    assert main(["latency", "--protocol", "paper-main-matrix", "--gpus", "0,1", "--out", str(tmp_path / "s")]) == 3
    assert "--backend fa4 needs CUDA GPUs" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_control_needs_gpus_and_takes_no_second_kernel(capsys, tmp_path):
    assert main(["latency", *TINY_SHAPE, "--control", "--out", str(tmp_path)]) == 2
    assert "--control compares GPUs measuring together and alone; it needs --gpus" in capsys.readouterr().err
    for extra, flag in ((["--variant", "A1"], "--variant"), (["--null"], "--null"), (["--no-null"], "--no-null"),
                        (["--reference", "sdpa"], "--reference")):
        assert main(["latency", *TINY_SHAPE, "--gpus", "0,1", "--control", *extra, "--out", str(tmp_path)]) == 2
        assert f"--control times the baseline against itself alone; drop {flag}" in capsys.readouterr().err


def test_every_shape_is_checked_once_before_the_launch_and_ranks_follow_the_order_given(monkeypatch):
    from softbench.latency.across import run_across

    calls = []
    monkeypatch.setattr(sys, "argv", ["softbench", "latency", "--gpus", "1,0"])
    monkeypatch.setattr(launch, "launch", lambda n, command, args, hint=None, extra_env=None:
                        calls.append(("launch", n, command, args, extra_env)))
    opts = types.SimpleNamespace(shapes=["shape-a", "shape-b"])
    run_across(opts, (1, 0), None, None, False, "source", lambda shape: calls.append(("check", shape)))
    # rank r runs on the r-th GPU listed: GPU 1 first
    assert calls == [("check", "shape-a"), ("check", "shape-b"),
                     ("launch", 2, "latency", ["--gpus", "1,0"], {gpus.GPUS_ENV: "1,0"})]


def test_a_rank_other_than_the_first_runs_its_share_and_prints_nothing(monkeypatch, capsys):
    from softbench.latency.across import run_across

    ran = []
    monkeypatch.setattr(matrix, "run_matrix", lambda *args: ran.append(args))
    opts = types.SimpleNamespace(shapes=["shape-a"], command_line="softbench latency --gpus 0,1")
    ranks = Ranks(1, 2, 1)
    run_across(opts, (0, 1), ranks, "pin", False, "source", lambda shape: None)
    # no progress display and no tables: rank 0 alone reports the run
    assert ran == [(opts, ranks, "pin", False, "source", "softbench latency --gpus 0,1")]
    assert capsys.readouterr().out == ""


def test_one_rank_is_launched_per_gpu_listed(monkeypatch):
    from softbench.latency.across import run_across

    launched = []
    monkeypatch.setattr(sys, "argv", ["softbench", "latency", "--gpus", "3,1,2"])
    monkeypatch.setattr(launch, "launch", lambda n, *args, **kwargs: launched.append(n))
    run_across(types.SimpleNamespace(shapes=[]), (3, 1, 2), None, None, False, "source", lambda shape: None)
    assert launched == [3]


def test_the_control_takes_the_first_cell_alone():
    from softbench.latency.across import control_cell

    ctx = types.SimpleNamespace(params={}, get_parameter_source=lambda name: None)
    assert control_cell(ctx, ("shape-a", "shape-b"), "A0") == (("shape-a",), "A0", False, "none")


def test_a_rank_records_the_command_line_the_user_gave(monkeypatch):
    from softbench.latency.across import launch_command_line

    monkeypatch.setattr(sys, "argv", ["softbench", "latency", "--seq", "8K"])
    monkeypatch.delenv(gpus.GPUS_ENV, raising=False)
    assert launch_command_line(None) == "softbench latency --seq 8K"
    under_torchrun = launch_command_line(types.SimpleNamespace(world=2))
    assert under_torchrun == "torchrun --nproc-per-node 2 -m softbench latency --seq 8K"
    monkeypatch.setenv(gpus.GPUS_ENV, "1,0")
    assert launch_command_line(types.SimpleNamespace(world=2)) == "softbench latency --seq 8K --gpus 1,0"


def test_gpus_under_torchrun_is_refused(monkeypatch, capsys):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    assert main(["latency", *TINY_SHAPE, "--gpus", "0,1"]) == 2
    assert "under torchrun (WORLD_SIZE is set) drop --gpus" in capsys.readouterr().err


@pytest.mark.parametrize("n_cells", range(0, 10))
@pytest.mark.parametrize("world", (1, 2, 3, 4))
def test_every_cell_goes_to_exactly_one_rank_round_robin(n_cells, world):
    dealt = [s.cell for r in range(world) for s in matrix.matrix_steps(n_cells, Ranks(r, world, r))]
    assert sorted(dealt) == list(range(n_cells))
    for r in range(world):
        assert all(s.cell % world == r for s in matrix.matrix_steps(n_cells, Ranks(r, world, r)))
    assert sorted(c for c, _, _ in expected_runs(n_cells, world, control=False)) == list(range(n_cells))


@pytest.mark.parametrize("world", (1, 2, 3, 4))
def test_the_control_runs_together_then_each_alone_between_the_same_barriers(world):
    plans = [matrix.control_steps(Ranks(r, world, r)) for r in range(world)]
    # every rank passes the same number of barriers, or one would wait for the others forever
    assert len({sum(s is matrix.BARRIER for s in p) for p in plans}) == 1
    for r, plan in enumerate(plans):
        runs = [(i, s) for i, s in enumerate(plan) if s is not matrix.BARRIER]
        assert [s.phase for _, s in runs] == ["together", "alone"] and {s.cell for _, s in runs} == {0}
        # 'together' after the first barrier; rank r's 'alone' after barrier r + 2: one GPU alone at a time
        before = [sum(s is matrix.BARRIER for s in plan[:i]) for i, _ in runs]
        assert before == [1, r + 2]


def test_each_rank_is_pinned_to_its_gpu_by_cuda_visible_devices():
    r1 = Ranks(1, 2, 1)
    assert gpus.pin_for(r1, {gpus.GPUS_ENV: "2,3"}) == gpus.Pin(3, "3", None)
    # indices count the launch's own visible GPUs
    assert gpus.pin_for(r1, {gpus.GPUS_ENV: "1,3", "CUDA_VISIBLE_DEVICES": "4,5,6,7"}) == gpus.Pin(3, "7", "4,5,6,7")
    assert gpus.pin_for(r1, {"CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b"}).cuda_visible_devices == "GPU-b"
    assert gpus.pin_for(r1, {}) == gpus.Pin(1, "1", None)  # torchrun by hand: LOCAL_RANK
    assert gpus.pin_for(r1, {"CUDA_VISIBLE_DEVICES": ""}).cuda_visible_devices == ""  # hidden stays hidden
    with pytest.raises(UsageError, match="local rank 1 has no GPU"):
        gpus.pin_for(r1, {gpus.GPUS_ENV: "0"})
    with pytest.raises(UsageError, match="not among the launch's CUDA_VISIBLE_DEVICES=0,1"):
        gpus.pin_for(r1, {gpus.GPUS_ENV: "0,2", "CUDA_VISIBLE_DEVICES": "0,1"})


def test_the_launcher_runs_latency_without_gpus_and_with_nvls_off():
    argv = launch.torchrun_argv(2, "latency", ["--protocol", "m.yaml", "--gpus", "0,1", "--control"])
    assert argv[1:] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "softbench",
                        "latency", "--protocol", "m.yaml", "--control"]
    env = launch.torchrun_env({"NCCL_NVLS_ENABLE": "1"}, extra={gpus.GPUS_ENV: "0,1"})
    assert env == {**launch.NO_NVLS, gpus.GPUS_ENV: "0,1"} and env["NCCL_NVLS_ENABLE"] == "0"
    assert launch.command_args(["latency", "--seq", "128"], "latency") == ["--seq", "128"]


def test_a_failed_launch_raises_with_torchruns_status_and_a_clean_one_returns(monkeypatch):
    statuses = iter([3, 0])
    monkeypatch.setattr(launch.subprocess, "run", lambda argv, env: types.SimpleNamespace(returncode=next(statuses)))
    with pytest.raises(launch.RanksFailed) as failed:
        launch.launch(2, "latency", ["--seq", "128"], hint="see the index")
    assert failed.value.exit_code == 3 and failed.value.hint == "see the index"
    assert launch.launch(2, "latency", ["--seq", "128"]) is None


def test_arguments_without_the_commands_name_are_passed_whole():
    assert launch.command_args(["--seq", "128"], "latency") == ["--seq", "128"]


def _entry(cell, rank, phase=None, complete=True):
    return {"cell": cell, "phase": phase, "rank": rank, "session": f"s{cell}{phase}{rank}", "complete": complete,
            "state": "complete" if complete else "partial", "gpu": rank, "shape_tag": f"t{cell}",
            "baseline_ms": 1.0 + rank, "null_pct": 0.1, "null_ci95_pct": [-0.2, 0.3],
            "measured_from_utc": "2026-12-01T12:00:00+00:00", "measured_to_utc": f"2026-12-01T12:00:0{5 + rank}+00:00"}


def _opts(tmp_path, n_cells):
    from softbench.core.protocol import InterleavedProtocol
    from softbench.core.shapes import Shape
    from softbench.latency.engine import LatencyOptions

    return LatencyOptions(shapes=tuple(Shape(seq=128 * (i + 1), heads=1, head_dim=32) for i in range(n_cells)),
                          protocol=InterleavedProtocol(), out_dir=tmp_path)


def _report(rank, entries, error=None):
    return {"rank": rank, "gpu": rank, "cuda_visible_devices": str(rank), "launch_cuda_visible_devices": None,
            "error": error, "sessions": entries}


def test_the_index_lists_every_session_and_names_the_cells_without_one(tmp_path):
    opts = _opts(tmp_path, 3)
    full = write_index(opts, 2, False, [_report(0, [_entry(2, 0), _entry(0, 0)]), _report(1, [_entry(1, 1)])],
                       "plan.yaml", "softbench latency --gpus 0,1")
    index = full.read_json("index.json")
    assert [e["cell"] for e in index["sessions"]] == [0, 1, 2] and index["missing"] == []
    assert index["complete"] and full.status()["complete"] and full.command == "matrix"
    assert [c["rank"] for c in index["cells"]] == [0, 1, 0]
    # rank 1 stopped before it reported: its cell is named, the index is partial
    part = write_index(opts, 2, False, [_report(0, [_entry(0, 0), _entry(2, 0, complete=False)])], "plan.yaml", "x")
    index = part.read_json("index.json")
    assert index["missing"] == [{"cell": 1, "phase": None, "rank": 1}] and not index["complete"]
    assert {"rank": 1, "error": "no report (the rank stopped before the end)"} in index["ranks"]
    assert part.status()["state"] == "partial" and "no session" in (part.path / "index.md").read_text()


def test_the_control_index_compares_each_gpu_together_and_alone(tmp_path):
    reports = [_report(r, [_entry(0, r, "together"), {**_entry(0, r, "alone"), "baseline_ms": 1.0}])
               for r in (0, 1)]
    index = write_index(_opts(tmp_path, 1), 2, True, reports, "quick.yaml", "x").read_json("index.json")
    assert index["missing"] == [] and index["complete"]
    g0, g1 = index["control"]["gpus"]
    assert g0["together_vs_alone_pct"] == pytest.approx(0.0) and g1["together_vs_alone_pct"] == pytest.approx(100.0)
    assert g0["together_aa"] == 0.1 and g0["alone_aa_ci95"] == [-0.2, 0.3]
    assert index["control"]["together_overlap_s"] == pytest.approx(5.0)


def test_the_control_table_signs_the_slow_down_and_the_index_lists_only_the_ranks_that_stopped(tmp_path):
    from softbench.latency.render import control_rows

    # rank 1's baseline: 2.0 ms together, 1.0 ms alone (+100%); rank 0 the same either way
    reports = [_report(r, [_entry(0, r, "together"), {**_entry(0, r, "alone"), "baseline_ms": 1.0}]) for r in (0, 1)]
    session = write_index(_opts(tmp_path, 1), 2, True, reports, "quick.yaml", "x")
    assert [row[6] for row in control_rows(session.read_json("index.json"))] == ["+0.00", "+100.00"]
    assert "Ranks that stopped" not in (session.path / "index.md").read_text()
    reports[1]["error"] = "worker A0 exited (code 17)"
    stopped = write_index(_opts(tmp_path, 1), 2, True, reports, "quick.yaml", "x")
    md = (stopped.path / "index.md").read_text()
    assert md.endswith("Ranks that stopped:\n- rank 1: worker A0 exited (code 17)\n")
    # every session is there and complete, but a rank stopped: the index is not complete
    assert stopped.read_json("index.json")["missing"] == [] and not stopped.read_json("index.json")["complete"]


def test_a_control_index_lists_together_before_alone_and_reads_each_gpu_from_whichever_session_it_has(tmp_path):
    # rank 1's alone run made no session; rank 0's sessions arrive alone first
    reports = [_report(0, [{**_entry(0, 0, "alone"), "sm_clock_mhz_median": 1900.0},
                           {**_entry(0, 0, "together"), "sm_clock_mhz_median": 1700.0}]),
               _report(1, [{**_entry(0, 1, "together"), "gpu": 5}])]
    opts = _opts(tmp_path, 2)  # the control runs the first cell only
    session = write_index(opts, 2, True, reports, "quick.yaml", "x")
    index = session.read_json("index.json")
    assert [(e["phase"], e["rank"]) for e in index["sessions"]] == [("together", 0), ("together", 1), ("alone", 0)]
    assert index["cells"] == [{"cell": 0, "shape_tag": opts.shapes[0].tag(), "rank": None}]
    g0, g1 = index["control"]["gpus"]
    assert (g0["together_sm_clock_mhz"], g0["alone_sm_clock_mhz"]) == (1700.0, 1900.0)
    assert g1["gpu"] == 5 and g1["alone_baseline_ms"] is None
    assert session.path.name.endswith(f"-matrix-control-{opts.shapes[0].tag()}-2gpus")


def test_an_index_with_a_partial_session_is_partial_and_is_named_after_its_plan(tmp_path):
    reports = [_report(0, [_entry(0, 0)]), _report(1, [_entry(1, 1, complete=False)])]
    session = write_index(_opts(tmp_path, 2), 2, False, reports, "plans/hopper-bf16.yaml", "x")
    index = session.read_json("index.json")
    assert index["missing"] == [] and not index["complete"] and session.status()["state"] == "partial"
    assert session.path.name.endswith("-matrix-hopper-bf16-2gpus")


def test_an_index_entry_reads_its_session_back_from_its_files(tmp_path):
    from softbench.core.session import Session
    from softbench.latency.matrix_index import session_entry

    # a paper-protocol session: its windows carry no phase, its interval is the window bootstrap's, and its
    # windows.jsonl need not be in time order (the warm-up window is no measurement)
    s = Session.create(tmp_path, "latency", "cell")
    s.write_json("summary.json", {"shape_tag": "t0", "baseline": "A0", "variant": "A1",
                                  "median_ms": {"A0": 1.1, "A1": 1.0}, "speedup_pct": 10.0,
                                  "bootstrap_ci95_pct": [9.0, 11.0],
                                  "placement": {"rank": 1, "gpu": 1, "cuda_visible_devices": "1", "gpu_uuid": "GPU-b"}})
    for utc, mhz, phase in (("2026-12-01T12:00:03+00:00", 1700, None), ("2026-12-01T12:00:01+00:00", 1500, None),
                            ("2026-12-01T12:00:09+00:00", 1900, "warmup"), ("2026-12-01T12:00:02+00:00", 1600, None)):
        s.append("windows.jsonl", {"label": "A0", "utc": utc, "gpu_sm_clock_mhz": mhz, "phase": phase})
    s.set_status(complete=True, state="complete")
    e = session_entry(0, None, s)
    assert (e["rank"], e["gpu"], e["cuda_visible_devices"], e["gpu_uuid"]) == (1, 1, "1", "GPU-b")
    assert (e["speedup_pct"], e["speedup_ci95_pct"], e["baseline_ms"]) == (10.0, [9.0, 11.0], 1.1)
    assert e["sm_clock_mhz_median"] == 1600.0  # of 1500, 1600 and 1700: the warm-up's 1900 is left out
    assert (e["measured_from_utc"], e["measured_to_utc"]) == ("2026-12-01T12:00:01+00:00",
                                                              "2026-12-01T12:00:03+00:00")
    assert e["complete"] and e["state"] == "complete"
    s.set_status(complete=False, state="partial")  # a session cut short is listed as such
    assert not session_entry(0, None, s)["complete"]


def test_a_control_sessions_aa_estimate_is_its_null_even_at_exactly_zero():
    from softbench.latency.matrix_index import aa_estimate

    assert aa_estimate({"null_pct": 0.0, "null_ci95_pct": [-0.1, 0.1], "speedup_pct": None}) == (0.0, [-0.1, 0.1])
    # the paper's rounds have no null: their A/A is the speed-up of the baseline's second process
    assert aa_estimate({"null_pct": None, "speedup_pct": 0.2, "speedup_ci95_pct": [0.0, 0.4]}) == (0.2, [0.0, 0.4])


def test_the_controls_overlap_is_of_the_together_sessions_alone_and_missing_runs_are_named_in_run_order(tmp_path):
    # together: rank 0 12:00:00-05, rank 1 12:00:00-06 (5 s in common); alone, later: 12:01:00-05 and 12:02:00-06
    reports = [_report(r, [_entry(0, r, "together"),
                           {**_entry(0, r, "alone"), "measured_from_utc": f"2026-12-01T12:0{1 + r}:00+00:00",
                            "measured_to_utc": f"2026-12-01T12:0{1 + r}:0{5 + r}+00:00"}]) for r in (0, 1)]
    index = write_index(_opts(tmp_path, 1), 2, True, reports, "quick.yaml", "x").read_json("index.json")
    assert index["control"]["together_overlap_s"] == pytest.approx(5.0)
    assert index["control"]["together_spans_s"] == [5.0, 6.0]
    # nobody reported: every run is missing, the together runs first as they run first
    empty = write_index(_opts(tmp_path, 1), 2, True, [], "quick.yaml", "x").read_json("index.json")
    assert [(m["phase"], m["rank"]) for m in empty["missing"]] == [("together", 0), ("together", 1), ("alone", 0),
                                                                    ("alone", 1)]


def _fake_group(rank, world, log):
    return types.SimpleNamespace(ranks=Ranks(rank, world, rank), barrier=lambda: log.append("barrier"))


def _without_workers(monkeypatch, log=None):
    """run_steps loads no kernel workers: each load is noted in `log` where one is given."""
    @contextmanager
    def no_workers(opts, progress):
        if log is not None:
            log.append("load")
        yield {}, {}

    monkeypatch.setattr(matrix, "loaded_workers", no_workers)


def test_a_rank_whose_cell_fails_still_passes_every_barrier_it_owes(monkeypatch, tmp_path):
    from softbench.core.errors import MeasurementError
    from softbench.latency.engine import Progress

    log = []

    def crash(*args, **kwargs):
        raise MeasurementError("worker A0 exited (code 17)")

    _without_workers(monkeypatch, log)
    monkeypatch.setattr(matrix, "run_shape", crash)
    steps = matrix.control_steps(Ranks(0, 3, 0))
    error = matrix.run_steps(_opts(tmp_path, 1), steps, _fake_group(0, 3, log), gpus.Pin(0, "0", None),
                             Progress(), done=[])
    assert isinstance(error, MeasurementError)
    assert log == ["load"] + ["barrier"] * sum(s is matrix.BARRIER for s in steps)  # the others are not kept waiting
    log.clear()  # more GPUs than cells: a rank with no cell loads no workers
    assert matrix.run_steps(_opts(tmp_path, 1), matrix.matrix_steps(1, Ranks(1, 2, 1)), _fake_group(1, 2, log),
                            gpus.Pin(1, "1", None), Progress(), done=[]) is None
    assert log == []


def test_each_session_records_its_cell_and_control_phase_and_a_failed_cells_partial_session_is_kept(
        monkeypatch, tmp_path):
    from softbench.core.errors import MeasurementError
    from softbench.core.session import Session
    from softbench.latency.engine import Progress

    placements = []
    partial = Session.create(tmp_path, "latency", "cut")

    def shape_run(opts, shape, workers, env, progress, clock):
        placements.append({**opts.placement, "shape": shape})
        if opts.placement.get("phase") == "alone":  # the second run fails after it wrote its session
            err = MeasurementError("worker A0 exited (code 17)")
            err.partial_session = str(partial.path)
            raise err
        return Session.create(tmp_path, "latency", "ran")

    _without_workers(monkeypatch)
    monkeypatch.setattr(matrix, "run_shape", shape_run)
    log, done = [], []
    error = matrix.run_steps(_opts(tmp_path, 1), matrix.control_steps(Ranks(0, 1, 0)), _fake_group(0, 1, log),
                             gpus.Pin(0, "0", None), Progress(), done)
    assert isinstance(error, MeasurementError)
    assert [(p["cell"], p["phase"], p["rank"]) for p in placements] == [(0, "together", 0), (0, "alone", 0)]
    # the failed run's partial session is indexed with its step, beside the one that completed
    assert [(step.phase, sess.path) for step, sess in done][1] == ("alone", partial.path) and len(done) == 2
    placements.clear()
    matrix.run_steps(_opts(tmp_path, 2), matrix.matrix_steps(2, Ranks(0, 1, 0)), _fake_group(0, 1, log),
                     gpus.Pin(0, "0", None), Progress(), [])
    opts = _opts(tmp_path, 2)
    assert [(p["cell"], p["shape"]) for p in placements] == [(0, opts.shapes[0]), (1, opts.shapes[1])]
    assert not any("phase" in p for p in placements)


def test_the_progress_bar_counts_the_windows_of_the_runs_not_the_barriers(monkeypatch, tmp_path):
    from dataclasses import replace

    from softbench.core.protocol import LatencyProtocol
    from softbench.latency.engine import Progress

    totals = []

    class Counted(Progress):
        def start(self, total_windows):
            totals.append(total_windows)

    _without_workers(monkeypatch)
    monkeypatch.setattr(matrix, "run_shape", lambda *args, **kwargs: None)
    opts = replace(_opts(tmp_path, 1), protocol=LatencyProtocol(rounds=3, windows=7))
    matrix.run_steps(opts, matrix.control_steps(Ranks(0, 1, 0)), _fake_group(0, 1, []), gpus.Pin(0, "0", None),
                     Counted(), [])
    # the control's two runs (together, then alone) of 3 rounds of 2 kernels' 7 windows: 84, whatever the barriers
    assert totals == [2 * 3 * 2 * 7]


def test_once_a_barrier_fails_no_further_barrier_is_tried():
    from softbench.core.errors import SoftbenchError

    tried = []

    def broken():  # a peer is gone: gloo raises after its timeout, at every barrier after it too
        tried.append("barrier")
        raise SoftbenchError("gloo barrier timed out")

    group = types.SimpleNamespace(ranks=Ranks(0, 3, 0), barrier=broken)
    error = matrix.pass_barriers(matrix.control_steps(Ranks(0, 3, 0)), group)
    assert str(error) == "gloo barrier timed out" and tried == ["barrier"]


def test_a_ranks_own_failure_is_what_it_raises_even_when_the_gather_then_fails(monkeypatch, tmp_path):
    from softbench.core.errors import MeasurementError, SoftbenchError

    class GoneGroup:  # every peer is gone by the time this rank reports
        def __init__(self, ranks, backend):
            self.ranks = ranks

        def gather(self, report):
            raise SoftbenchError("gloo gather timed out")

        def close(self):
            pass

    own = MeasurementError("worker A0 exited (code 17)")
    monkeypatch.setattr(matrix.distributed, "Group", GoneGroup)
    monkeypatch.setattr(matrix, "run_steps", lambda *args, **kwargs: own)
    with pytest.raises(MeasurementError) as raised:
        matrix.run_matrix(_opts(tmp_path, 1), Ranks(0, 2, 0), gpus.Pin(0, "0", None), False, "plan.yaml", "x")
    assert raised.value is own
    # rank 0 still indexed what it had: its own report, with the reason it stopped
    (index_dir,) = list(tmp_path.glob("*-matrix-*"))
    index = json.loads((index_dir / "index.json").read_text())
    assert {"rank": 0, "gpu": 0, "cuda_visible_devices": "0", "launch_cuda_visible_devices": None,
            "error": str(own)} in index["ranks"]


def test_a_ranks_placement_names_its_one_gpu_uuid():
    def workers(*uuids):
        return {f"k{i}": types.SimpleNamespace(info={"gpu": {"uuid": u}} if u else {}) for i, u in enumerate(uuids)}

    def uuid(ws):
        return matrix.rank_placement(Ranks(0, 1, 0), gpus.Pin(0, "0", None), ws)["gpu_uuid"]

    # every worker on the rank reads the same board: one UUID; a worker without NVML adds nothing
    assert uuid(workers("GPU-a", "GPU-a", None)) == "GPU-a"
    assert uuid(workers(None, None)) is None
    assert uuid(workers("GPU-b", "GPU-a")) == ["GPU-a", "GPU-b"]  # not one board: all of them, for the reader


# --- end to end: torchrun, gloo, two ranks, the simulation ---------------------------------------------------

MATRIX_PLAN = ("backend: sim\nvariant: A1\nprotocol: {kind: paper, rounds: 1, windows: 1, calls: 2, warmup: 1}\n"
               "shape: {heads: 1, head_dim: 32}\ncells: [{seq: 128}, {seq: 128, causal: false}, {seq: 256}]\n")
QUICK_INTERLEAVED = ("protocol:\n  kind: interleaved\n  calls: 2\n  untimed: 0\n  min_pairs: 5\n  check_every: 5\n"
                     "  budget_s: 1\n  warmup_min_s: 0.1\n  warmup_max_s: 0.5\n")


def _env(**extra):
    # one thread per process (two ranks with two workers each share two cores); no GPU list or launch inherited
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUDA_VISIBLE_DEVICES", gpus.GPUS_ENV, "WORLD_SIZE", "RANK", "LOCAL_RANK")}
    return {**env, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])), **extra}


def _run(argv, **env):
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=ROOT, env=_env(**env),
                          timeout=300)


def _sessions(out: Path) -> tuple[dict, list[Path]]:
    (index_dir,) = list(out.glob("*-matrix-*"))
    return json.loads((index_dir / "index.json").read_text()), sorted(out.glob("*-latency-*"))


@pytest.mark.slow
def test_a_matrix_on_two_ranks_writes_every_cell_once_and_an_index(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(MATRIX_PLAN)
    out = tmp_path / "s"
    r = _run(["-m", "softbench", "latency", "--protocol", str(plan), "--gpus", "0,1", "--out", str(out)])
    assert r.returncode == 0, r.stderr[-3000:]
    index, sessions = _sessions(out)
    assert len(sessions) == 3 and index["complete"] and index["world_size"] == 2
    assert sorted(e["session"] for e in index["sessions"]) == sorted(s.name for s in sessions)  # every session
    cells = {}
    for s in sessions:
        summary = json.loads((s / "summary.json").read_text())
        env = json.loads((s / "env.json").read_text())
        place = summary["placement"]
        cells[place["cell"]] = place["rank"]
        assert place["rank"] == place["cell"] % 2 and place["world_size"] == 2 and place["gpu"] == place["rank"]
        # the CUDA_VISIBLE_DEVICES the rank was given, in the rank's environment and in each of its workers'
        assert place["cuda_visible_devices"] == str(place["gpu"]) == env["env_vars"]["CUDA_VISIBLE_DEVICES"]
        assert {w["cuda_visible_devices"] for w in env["workers"].values()} == {str(place["gpu"])}
        assert env["placement"] == place and "gpu_uuid" in place and summary["complete"]
        assert s.name.endswith(f"-gpu{place['gpu']}")
    assert cells == {0: 0, 1: 1, 2: 0}
    assert "--gpus 0,1" in index["command_line"] and "cells on 2 GPU(s)" in r.stdout
    for folder in out.iterdir():  # what they record is what a prediction may name (the index: nothing)
        assert_covered(folder)


@pytest.mark.slow
def test_the_control_under_torchrun_runs_the_aa_cell_together_then_alone(tmp_path):
    proto = tmp_path / "quick.yaml"
    proto.write_text(QUICK_INTERLEAVED)
    out = tmp_path / "s"
    # torchrun started by hand: each rank takes the GPU of its LOCAL_RANK
    r = _run(["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "softbench", "latency",
              *TINY_SHAPE, "--protocol", str(proto), "--control", "--out", str(out)])
    assert r.returncode == 0, r.stderr[-3000:]
    index, sessions = _sessions(out)
    assert index["kind"] == "control" and index["complete"] and len(sessions) == 4
    runs = sorted((e["phase"], e["rank"], e["cuda_visible_devices"]) for e in index["sessions"])
    assert runs == [("alone", 0, "0"), ("alone", 1, "1"), ("together", 0, "0"), ("together", 1, "1")]
    summary = json.loads((sessions[0] / "summary.json").read_text())
    assert set(summary["kernels"]) == {"A0", "A0'"} and summary["null"] == "A0'"
    times = {(e["phase"], e["rank"]): (e["measured_from_utc"], e["measured_to_utc"]) for e in index["sessions"]}
    assert times[("alone", 0)][1] < times[("alone", 1)][0]  # one GPU alone at a time
    assert max(times[("together", r)][1] for r in (0, 1)) < times[("alone", 0)][0]
    assert [g["rank"] for g in index["control"]["gpus"]] == [0, 1]
    assert all(g["together_aa"] is not None and g["alone_aa"] is not None for g in index["control"]["gpus"])


@pytest.mark.slow
def test_failing_workers_leave_partial_sessions_in_a_partial_index_and_nobody_hangs(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(MATRIX_PLAN)
    out = tmp_path / "s"
    r = _run(["-m", "softbench", "latency", "--protocol", str(plan), "--gpus", "0,1", "--out", str(out)],
             SOFTBENCH_FAULT_AFTER_WINDOWS="1")
    assert r.returncode != 0 and "exited (code 17)" in r.stderr
    index, sessions = _sessions(out)
    assert not index["complete"] and all(rk["error"] for rk in index["ranks"])
    # each rank's first cell is kept as a partial session; the cell it did not reach is named as missing
    assert sorted((e["cell"], e["state"]) for e in index["sessions"]) == [(0, "partial"), (1, "partial")]
    assert index["missing"] == [{"cell": 2, "phase": None, "rank": 0}] and len(sessions) == 2
