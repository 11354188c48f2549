"""The latency command: round order, summary arithmetic, sessions end to end, partial sessions, clear errors."""

import json
import sys

import pytest

from softbench.core.errors import UsageError
from softbench.latency.summary import summarize_latency
from softbench.core.protocol import LatencyProtocol, latency_protocol_from_mapping
from softbench.core.shapes import Shape, parse_seq

from conftest import ROOT, interrupt_when

TINY = ["--backend", "sim", "--protocol", "paper", "--seq", "256", "--heads", "2", "--rounds", "3", "--windows", "2", "--calls", "5",
        "--warmup", "2"]


def test_round_order_alternates():
    p = LatencyProtocol(rounds=4)
    assert p.round_order("A0", "A1") == [("A0", "A1"), ("A1", "A0"), ("A0", "A1"), ("A1", "A0")]
    assert LatencyProtocol(rounds=2, order="fixed").round_order("A0", "A1") == [("A0", "A1")] * 2


def test_protocol_validation():
    with pytest.raises(UsageError, match="rounds"):
        LatencyProtocol(rounds=0)
    with pytest.raises(UsageError, match="unknown paper protocol keys"):
        latency_protocol_from_mapping({"protocol": {"rounds": 3, "windowz": 7}})
    assert latency_protocol_from_mapping({"rounds": 5}).rounds == 5


def test_shapes():
    assert parse_seq("16K") == 16384 and parse_seq("8192") == 8192
    with pytest.raises(UsageError):
        parse_seq("lots")
    with pytest.raises(UsageError, match="multiple of kv-heads"):
        Shape(heads=16, kv_heads=5)
    s = Shape(dtype="fp8", seq=8192, causal=True)
    assert s.flops == 4 * 16 * 8192 * 8192 * 128 / 2
    assert s.tag() == "fp8-8K-causal-b1h16d128"


def _w(label, rnd, ms, clock=None):
    return {"label": label, "round": rnd, "ms_per_call": ms, "gpu_sm_clock_mhz": clock}


def test_summary_hand_computed():
    windows = [
        _w("A0", 0, 1.0), _w("A0", 0, 1.2), _w("A1", 0, 0.8), _w("A1", 0, 1.0),   # round 0: 1.1 / 0.9
        _w("A1", 1, 1.0), _w("A1", 1, 1.0), _w("A0", 1, 1.1), _w("A0", 1, 1.1),   # round 1: 1.1 / 1.0
    ]
    s = summarize_latency(windows, "A0", "A1", flops=1e12)
    assert s["median_ms"] == {"A0": pytest.approx(1.1), "A1": pytest.approx(1.0)}
    assert s["speedup_pct"] == pytest.approx(10.0)
    r0, r1 = 100 * (1.1 / 0.9 - 1), 100 * (1.1 / 1.0 - 1)
    assert s["per_round_speedup_pct"] == [pytest.approx(r0), pytest.approx(r1)]
    assert s["per_round_sd_pp"] == pytest.approx(abs(r0 - r1) / 2)
    assert s["tflops"]["A1"] == pytest.approx(1e12 / 1e-3 / 1e12)
    assert s["rounds_complete"] == 2


def test_summary_with_one_kernel_missing():
    s = summarize_latency([_w("A0", 0, 1.0)], "A0", "A1", flops=1.0)
    assert s["speedup_pct"] is None and s["rounds_complete"] == 0


@pytest.mark.slow
def test_latency_end_to_end_sim(tmp_path, cli):
    r = cli("latency", *TINY, "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    (session,) = list(tmp_path.iterdir())
    names = {p.name for p in session.iterdir()}
    assert {"env.json", "protocol.yaml", "windows.jsonl", "summary.json", "summary.md", "smoke.json",
            "status.json"} <= names
    summary = json.loads((session / "summary.json").read_text())
    assert summary["complete"] is True
    assert summary["order"] == [["A0", "A1"], ["A1", "A0"], ["A0", "A1"]]
    assert len(summary["per_round_speedup_pct"]) == 3
    windows = [json.loads(l) for l in (session / "windows.jsonl").read_text().splitlines()]
    assert len(windows) == 3 * 2 * 2
    assert {w["pid"] for w in windows if w["label"] == "A0"}.isdisjoint({w["pid"] for w in windows if w["label"] == "A1"})
    # the round order on disk is the order that ran
    firsts = [next(w["label"] for w in windows if w["round"] == r) for r in range(3)]
    assert firsts == ["A0", "A1", "A0"]
    # smoke check: exact A0 is close to FP32; A1 differs by the half-octave lattice but stays sane
    assert summary["smoke"]["A0"]["rel_error_vs_fp32"] < 1e-2
    assert 1e-3 < summary["smoke"]["A1"]["rel_error_vs_fp32"] < 0.3
    assert "speed-up of A1 over A0 (paper rounds" in r.stdout
    assert "A/A null: not in this run; the paper's rounds pair two kernels (--variant A0 gives one)" in r.stdout
    assert summary["exactness"] is None  # no exact reference kernel timed beside A0: nothing to hold it against


@pytest.mark.slow
def test_aa_null_uses_two_processes(tmp_path, cli):
    r = cli("latency", *TINY, "--variant", "A0", "--rounds", "2", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    summary = json.loads(next(tmp_path.iterdir()).joinpath("summary.json").read_text())
    assert set(summary["median_ms"]) == {"A0", "A0'"}
    assert summary["smoke"]["A0"]["activation_mean"] == summary["smoke"]["A0'"]["activation_mean"]


@pytest.mark.slow
def test_crashed_worker_leaves_a_partial_session(tmp_path, cli):
    r = cli("latency", *TINY, "--out", str(tmp_path), env={"SOFTBENCH_FAULT_AFTER_WINDOWS": "3"})
    assert r.returncode == 5, r.stderr
    assert "exited (code 17)" in r.stderr
    session = next(tmp_path.iterdir())
    status = json.loads((session / "status.json").read_text())
    assert status["complete"] is False and status["state"] == "partial"
    summary = json.loads((session / "summary.json").read_text())
    assert summary["complete"] is False and "MeasurementError" in summary["incomplete_reason"]
    kept = (session / "windows.jsonl").read_text().splitlines()
    assert len(kept) >= 3  # every finished window is kept
    assert "PARTIAL SESSION" in (session / "summary.md").read_text()


@pytest.mark.slow
def test_ctrl_c_keeps_a_partial_session(tmp_path):
    args = [sys.executable, "-m", "softbench", "latency", *TINY, "--rounds", "40", "--out", str(tmp_path)]
    def four_windows():
        found = list(tmp_path.glob("*/windows.jsonl"))
        return bool(found) and len(found[0].read_text().splitlines()) >= 4

    code, err = interrupt_when(args, ROOT, four_windows, "the run wrote no 4 windows")
    assert code == 130, err
    session = next(tmp_path.iterdir())
    summary = json.loads((session / "summary.json").read_text())
    assert summary["complete"] is False and summary["incomplete_reason"] == "interrupted by the user"
    assert len((session / "windows.jsonl").read_text().splitlines()) >= 4


def test_fa4_without_gpu_points_to_sim(tmp_path, cli):
    r = cli("latency", "--backend", "fa4", "--seq", "256", "--out", str(tmp_path))
    assert r.returncode == 3
    assert "--backend sim" in r.stderr
    assert not any(tmp_path.iterdir()), "a refused run writes no session"


def test_bad_inputs_are_clear(tmp_path, cli):
    r = cli("latency", *TINY, "--kv-heads", "3", "--out", str(tmp_path))
    assert r.returncode == 2 and "multiple of kv-heads" in r.stderr
    r = cli("latency", *TINY, "--variant", "A2", "--out", str(tmp_path))
    assert r.returncode == 2 and "known: A0, A1" in r.stderr
    r = cli("latency", *TINY, "--variant", "noxp", "--out", str(tmp_path))
    assert r.returncode == 2 and "did you mean noexp" in r.stderr
    bad = tmp_path / "p.yaml"
    bad.write_text("protocol: [1, 2\n")
    r = cli("latency", *TINY, "--protocol", str(bad), "--out", str(tmp_path))
    assert r.returncode == 2 and "not valid YAML" in r.stderr


def test_triton_without_gpu_is_refused_before_any_session(tmp_path, cli):
    r = cli("latency", "--backend", "triton", "--seq", "256", "--out", str(tmp_path), env={"TRITON_INTERPRET": None},
            timeout=120)
    assert r.returncode == 3 and "TRITON_INTERPRET=1" in r.stderr
    assert not any(tmp_path.iterdir())


def test_shipped_protocol_files_are_valid():
    from softbench.core.protocol import latency_plan_from_mapping, load_yaml_mapping

    for name, n_cells in (("hopper-bf16-matrix", 6), ("paper-main-matrix", 8), ("sequence-sweep-fp8", 6),
                          ("shape-robustness", 8)):
        path = ROOT / "softbench" / "protocols" / f"{name}.yaml"
        plan = latency_plan_from_mapping(load_yaml_mapping(path), str(path))
        shapes = plan.shapes()
        assert len(shapes) == n_cells and plan.protocol.rounds == 3
    gqa = latency_plan_from_mapping(load_yaml_mapping(ROOT / "softbench" / "protocols" / "shape-robustness.yaml")).shapes()[4]
    assert (gqa.heads, gqa.n_kv_heads, gqa.seq, gqa.dtype) == (32, 8, 8192, "fp8")


def test_protocol_cell_errors_name_the_cell():
    from softbench.core.protocol import latency_plan_from_mapping

    with pytest.raises(UsageError, match="cell 2 has unknown keys"):
        latency_plan_from_mapping({"protocol": {}, "cells": [{"seq": 128}, {"sequence": 128}]})
    with pytest.raises(UsageError, match="multiple of kv-heads"):
        latency_plan_from_mapping({"cells": [{"heads": 16, "kv_heads": 5}]})


@pytest.mark.slow
def test_latency_runs_the_cells_of_a_protocol_file(tmp_path, cli):
    plan = tmp_path / "plan.yaml"
    plan.write_text("backend: sim\nvariant: noexp\nprotocol: {rounds: 1, windows: 1, calls: 2, warmup: 1}\n"
                    "shape: {heads: 2}\ncells: [{seq: 128}, {seq: 256, causal: false}]\n")
    out = tmp_path / "s"
    r = cli("latency", "--protocol", str(plan), "--out", str(out))
    assert r.returncode == 0, r.stderr
    tags = sorted(json.loads((s / "summary.json").read_text())["shape_tag"] for s in out.iterdir())
    assert tags == ["bf16-128-causal-b1h2d128", "bf16-256-noncausal-b1h2d128"]
    assert all(json.loads((s / "summary.json").read_text())["variant"] == "noexp" for s in out.iterdir())
    clash = cli("latency", "--protocol", str(plan), "--seq", "512", "--out", str(out))
    assert clash.returncode == 2 and "lists its own cells; drop --seq" in clash.stderr


def test_fp8_through_fa4_on_hopper_points_to_the_triton_backend():
    from softbench.kernels.capability import Device, fa4_unsupported_reason

    reason = fa4_unsupported_reason(Shape(dtype="fp8", seq=16384), Device("cuda", "NVIDIA H200", 90))
    assert "sm_100" in reason and "--backend triton" in reason and "--backend sim" in reason
    assert fa4_unsupported_reason(Shape(dtype="bf16", seq=16384), Device("cuda", "NVIDIA H200", 90)) is None
    assert fa4_unsupported_reason(Shape(dtype="fp8", seq=16384), Device("cuda", "NVIDIA B200", 100)) is None



def test_fa4_as_the_reference_at_fp8_on_hopper_points_to_fa3(monkeypatch):
    """The backend's sentence sends an FA4 user to --backend triton; a Hopper FP8 run that asks for --reference fa4
    is on the Triton backend already, so the reference's sentence names the exact FP8 kernel that does run there."""
    from softbench.kernels import references
    from softbench.kernels.capability import Device
    from test_references import pretend_installed

    pretend_installed(monkeypatch, "flash_attn")  # FA4 installed, as on the GPU host
    h200 = Device("cuda", "NVIDIA H200", 90)
    reason = references.reference_reason("fa4", Shape(dtype="fp8", seq=8192), h200)
    assert reason.startswith("FA4 has no FP8 forward on sm_90") and reason.endswith("use --reference fa3")
    assert "--backend" not in reason
    assert references.reference_reason("fa4", Shape(dtype="bf16", seq=8192), h200) is None

# the stopping rule cannot be met in 1 s of CPU timings (their noise is far above 0.25 pp), so the budget ends the
# run: about 30 pairs, every kernel in every cycle
QUICK_INTERLEAVED = ("protocol:\n  kind: interleaved\n  calls: 2\n  untimed: 0\n  min_pairs: 10\n  check_every: 5\n"
                     "  budget_s: 1\n  warmup_min_s: 0.2\n  warmup_max_s: 1\n")


def test_interleaved_sim_run_names_its_quantity_its_null_and_cpu_timings(tmp_path, cli):
    proto = tmp_path / "quick.yaml"
    proto.write_text(QUICK_INTERLEAVED)
    out = tmp_path / "s"
    # no --null: the null runs by default where it can
    r = cli("latency", "--backend", "sim", "--seq", "128", "--heads", "1", "--head-dim", "64", "--variant", "h15-sat",
            "--protocol", str(proto), "--out", str(out))
    assert r.returncode == 0, r.stderr
    (session,) = list(out.iterdir())
    summary = json.loads((session / "summary.json").read_text())
    assert summary["protocol_kind"] == "interleaved" and summary["quantity"] == "at equal clock"
    assert set(summary["kernels"]) == {"A0", "h15-sat", "A0'"}
    assert summary["null"] == "A0'" and summary["comparisons"]["A0'"]["role"] == "null"
    assert summary["run"]["warmup"]["reason"] == "no readings: fixed warm-up"
    assert summary["run"]["rounds"][0]["stop_reason"]
    windows = [json.loads(l) for l in (session / "windows.jsonl").read_text().splitlines()]
    measured = [w for w in windows if w["phase"] == "measure"]
    # the default order: every kernel once per cycle, each cycle in a fresh (seeded) random order
    cycles = {}
    for w in measured:
        cycles.setdefault(w["cycle"], []).append(w["label"])
    assert all(sorted(v) == ["A0", "A0'", "h15-sat"] for v in cycles.values())
    assert summary["run"]["order"]["kind"] == "random"
    assert "speed-up at equal clock (interleaved protocol)" in r.stdout
    assert "A/A null (A0' vs A0, same run)" in r.stdout
    assert "CPU wall-clock timings of the pure-torch simulation, not kernel timings" in r.stdout


def test_no_null_leaves_the_null_out_and_the_headline_says_so(tmp_path, cli):
    proto = tmp_path / "quick.yaml"
    proto.write_text(QUICK_INTERLEAVED)
    r = cli("latency", "--backend", "sim", "--seq", "128", "--heads", "1", "--head-dim", "64", "--variant", "A1",
            "--no-null", "--reference", "none", "--protocol", str(proto), "--out", str(tmp_path / "s"))
    assert r.returncode == 0, r.stderr
    (session,) = list((tmp_path / "s").iterdir())
    summary = json.loads((session / "summary.json").read_text())
    assert set(summary["kernels"]) == {"A0", "A1"} and not summary.get("null")
    assert "A/A null: not measured in this run (--no-null)" in r.stdout


@pytest.mark.parametrize("args, kind, variants, expected", [
    ([], "interleaved", ("A1",), True), ([], "sustained", ("A1", "h15-sat"), True),
    ([], "paper", ("A1",), False),  # the rounds pair two kernels
    ([], "interleaved", ("A0",), False),  # an A/A run is the null itself
    ([], "interleaved", ("A0", "A1"), True),  # an A/A run beside a variant: the variant's speed-up needs its null
    (["--no-null"], "interleaved", ("A1",), False), (["--null"], "paper", ("A1",), True),  # as given: paper refuses it
])
def test_the_null_runs_wherever_it_can_unless_asked_otherwise(args, kind, variants, expected):
    import types

    import click

    from softbench.core.options import null_asked, null_option

    ctx = null_option(click.Command("latency", callback=lambda null: None)).make_context("latency", list(args))
    assert null_asked(ctx, types.SimpleNamespace(kind=kind), "A0", variants) is expected


@pytest.mark.parametrize("args, kind, expected", [
    ([], "interleaved", "auto"), ([], "paper", "none"),  # the rounds pair two kernels: no reference unless named
    (["--reference", "sdpa"], "paper", "sdpa"), (["--reference", "fa3,sdpa"], "sustained", "fa3,sdpa"),
])
def test_the_paper_rounds_time_a_reference_only_when_one_is_named(args, kind, expected):
    import types

    import click

    from softbench.core.options import reference_option, references_asked

    cmd = reference_option(click.Command("latency", callback=lambda references: None))
    ctx = cmd.make_context("latency", list(args))
    assert references_asked(ctx, types.SimpleNamespace(kind=kind)) == expected


def test_start_order_is_recorded_and_shuffled_on_request(tmp_path, cli):
    """--start-order shuffled starts the processes in a fresh random order, recorded in env.json with its seed, so
    that an offset between the baseline and its null twin can be told from the place a process started in."""
    proto = tmp_path / "quick.yaml"
    proto.write_text(QUICK_INTERLEAVED)
    common = ("latency", "--backend", "sim", "--seq", "128", "--heads", "1", "--head-dim", "64", "--variant",
              "h15-sat", "--null", "--protocol", str(proto))
    r = cli(*common, "--out", str(tmp_path / "listed"))
    assert r.returncode == 0, r.stderr
    (session,) = list((tmp_path / "listed").iterdir())
    env = json.loads((session / "env.json").read_text())
    assert env["start_order"] == {"rule": "listed", "labels": ["A0", "h15-sat", "A0'"]}
    r = cli(*common, "--start-order", "shuffled", "--out", str(tmp_path / "shuffled"))
    assert r.returncode == 0, r.stderr
    (session,) = list((tmp_path / "shuffled").iterdir())
    env = json.loads((session / "env.json").read_text())
    order = env["start_order"]
    assert order["rule"] == "shuffled" and isinstance(order["seed"], int)
    assert sorted(order["labels"]) == ["A0", "A0'", "h15-sat"]
    # the processes did start in that order: process ids rise with the start
    pid = {w["label"]: w["pid"] for w in map(json.loads, (session / "windows.jsonl").read_text().splitlines())}
    assert [pid[label] for label in order["labels"]] == sorted(pid.values())


def test_shuffled_start_orders_are_permutations_drawn_per_run():
    from softbench.core.shapes import Shape
    from softbench.latency.engine import LatencyOptions, ordered_specs

    opts = LatencyOptions(shapes=(Shape(seq=128, heads=1, head_dim=64),), variant="h15-sat", null=True,
                          start_order="shuffled")
    orders = {tuple(ordered_specs(opts, seed=s)[1]["labels"]) for s in range(40)}
    assert len(orders) == 6  # every order of three processes turns up
    specs, record = ordered_specs(opts, seed=7)
    assert [s.label for s in specs] == record["labels"] and record["seed"] == 7
    assert ordered_specs(opts, seed=7)[1] == record  # the recorded seed gives the order back


def test_the_kernels_of_a_run_and_their_roles():
    """What each kernel is for is recorded with every session (protocol.yaml's roles) and decides what is compared
    with what: the variant against the baseline; the baseline against itself (another process) is the A/A null."""
    from softbench.core.protocol import InterleavedProtocol
    from softbench.core.shapes import Shape
    from softbench.latency.engine import LatencyOptions

    shape = (Shape(seq=128, heads=1, head_dim=64),)
    assert LatencyOptions(shapes=shape, variant="A0").roles() == {"A0": "baseline", "A0'": "null"}
    assert LatencyOptions(shapes=shape, variant="h15-sat", more_variants=("A1",), null=True,
                          references=("fa3",)).roles() == {"A0": "baseline", "h15-sat": "variant", "A1": "variant",
                                                           "A0'": "null", "ref-fa3": "reference"}
    assert LatencyOptions(shapes=shape, variant="A1", null_in_process=True).roles() == {
        "A0": "baseline", "A1": "variant", "A0~": "null"}
    # 1 to 16 processes per kernel, the bounds included
    for n in (1, 16):
        LatencyOptions(shapes=shape, variant="A1", processes=n, protocol=InterleavedProtocol()).kernel_specs()
    for n in (0, 17):
        with pytest.raises(UsageError, match=f"--processes {n}: each kernel runs in 1 to 16 processes"):
            LatencyOptions(shapes=shape, variant="A1", processes=n).kernel_specs()


def test_the_baseline_may_be_the_first_variant_only():
    """The baseline as the first variant is its A/A run (labelled A0'); named after another variant it would take
    the baseline's label a second time. The sweep command refuses it among its variants first; the engine itself
    holds the rule for any other caller."""
    from softbench.latency.engine import LatencyOptions

    shape = (Shape(seq=128, heads=1, head_dim=64),)
    assert LatencyOptions(shapes=shape, variant="A0", more_variants=("A1",)).roles() == {
        "A0": "baseline", "A0'": "null", "A1": "variant"}
    with pytest.raises(UsageError, match="names the baseline A0 after another variant"):
        LatencyOptions(shapes=shape, variant="A1", more_variants=("A0",)).kernel_specs()


def test_what_the_paper_rounds_and_the_in_process_null_cannot_carry_is_refused():
    """The paper's rounds pair exactly two kernels: no second baseline process, no reference kernel; the null
    inside the baseline's process lives in its one process: no --processes beside it."""
    from softbench.core.protocol import InterleavedProtocol
    from softbench.core.shapes import Shape
    from softbench.latency.engine import LatencyOptions

    shape = (Shape(seq=128, heads=1, head_dim=64),)
    paper = LatencyProtocol()
    with pytest.raises(UsageError, match="--null needs the interleaved or sustained protocol"):
        LatencyOptions(shapes=shape, variant="A1", null=True, protocol=paper).kernel_specs()
    with pytest.raises(UsageError, match="--reference needs the interleaved or sustained protocol"):
        LatencyOptions(shapes=shape, variant="A1", references=("fa3",), protocol=paper).kernel_specs()
    with pytest.raises(UsageError, match="does not combine with --processes 2"):
        LatencyOptions(shapes=shape, variant="A1", null_in_process=True, processes=2,
                       protocol=InterleavedProtocol()).kernel_specs()
    from softbench.latency.engine import run_latency

    with pytest.raises(UsageError, match="no shapes to measure"):
        run_latency(LatencyOptions(shapes=(), variant="A1"), worker_factory=None)


def test_a_session_is_named_by_its_comparison_its_further_variants_and_its_gpu():
    """The folder name says what was timed against what: two further variants of a sweep as "+2", a matrix cell's
    GPU and control phase at the end, so that sessions of one cell on two GPUs never share a name."""
    from softbench.core.protocol import InterleavedProtocol
    from softbench.core.shapes import Shape
    from softbench.latency.engine import LatencyOptions, session_tag

    shape = Shape(seq=128, heads=1, head_dim=64)
    opts = LatencyOptions(shapes=(shape,), variant="A1", more_variants=("h15-sat", "noexp"),
                          protocol=InterleavedProtocol())
    assert session_tag(opts, shape) == f"{shape.tag()}-sim-A0-vs-A1+2-interleaved"
    placed = LatencyOptions(shapes=(shape,), variant="A1", protocol=InterleavedProtocol(),
                            placement={"gpu": 3, "phase": "control"})
    assert session_tag(placed, shape) == f"{shape.tag()}-sim-A0-vs-A1-interleaved-gpu3-control"


def test_a_session_says_what_its_timings_are():
    """The simulation's times are no kernel's: on the CPU wall-clock, on a GPU CUDA events; a kernel backend's
    are CUDA event timings of the kernel calls."""
    from softbench.latency.engine import timings_are

    assert timings_are("sim", "cpu") == "CPU wall-clock timings of the pure-torch simulation, not kernel timings"
    assert timings_are("sim", "cuda") == "CUDA event timings of the pure-torch simulation, not kernel timings"
    assert timings_are("triton", "cuda") == "CUDA event timings of the kernel calls"


def test_the_progress_bar_knows_its_length_under_the_paper_rounds_only():
    """Two shapes of 3 rounds, each round 2 kernels x 7 windows: 84 windows; the interleaved protocol stops by its
    rule, so its length is not known in advance."""
    from softbench.core.protocol import InterleavedProtocol
    from softbench.core.shapes import Shape
    from softbench.latency.engine import LatencyOptions, window_total

    shapes = (Shape(seq=128, heads=1, head_dim=64), Shape(seq=256, heads=1, head_dim=64))
    paper = LatencyOptions(shapes=shapes, variant="A1", protocol=LatencyProtocol(rounds=3, windows=7))
    assert window_total(paper, len(shapes)) == 84
    assert window_total(LatencyOptions(shapes=shapes, variant="A1", protocol=InterleavedProtocol()), 2) is None


def test_protocol_knobs_of_another_protocol_are_refused(tmp_path, cli):
    r = cli("latency", "--backend", "sim", "--seq", "128", "--windows", "3", "--out", str(tmp_path))
    assert r.returncode == 2 and "--windows does not apply to the interleaved protocol" in r.stderr
    r = cli("latency", "--backend", "sim", "--seq", "128", "--protocol", "sustained", "--rounds", "3",
            "--out", str(tmp_path))
    assert r.returncode == 2 and "--rounds does not apply to the sustained protocol" in r.stderr
    r = cli("latency", "--backend", "sim", "--seq", "128", "--protocol", "paper", "--null", "--out", str(tmp_path))
    assert r.returncode == 2 and "--null needs the interleaved or sustained protocol" in r.stderr
    r = cli("latency", "--backend", "sim", "--seq", "128", "--reference", "fa9", "--out", str(tmp_path))
    assert r.returncode == 2 and "unknown reference kernel fa9" in r.stderr
    r = cli("latency", "--backend", "sim", "--seq", "128", "--seq", "128", "--out", str(tmp_path))
    assert r.returncode == 2 and "same length" in r.stderr
    assert not any(tmp_path.iterdir()), "a refused run writes no session"


@pytest.mark.slow  # end to end; the fast tier checks the blocks' design and summary with stand-in workers
def test_sustained_sim_run_pairs_settled_blocks(tmp_path, cli):
    proto = tmp_path / "quick.yaml"
    proto.write_text("protocol:\n  kind: sustained\n  calls: 2\n  cycles: 2\n  measure_s: 0.3\n"
                     "  settle_min_s: 0.1\n  settle_max_s: 1\n")
    r = cli("latency", "--backend", "sim", "--seq", "128", "--heads", "1", "--head-dim", "64", "--variant", "A1",
            "--protocol", str(proto), "--out", str(tmp_path / "s"))
    assert r.returncode == 0, r.stderr
    (session,) = list((tmp_path / "s").iterdir())
    blocks = [json.loads(l) for l in (session / "blocks.jsonl").read_text().splitlines()]
    # the A/A null's second baseline process runs by default, in the mirrored order with the others
    assert [b["label"] for b in blocks] == ["A0", "A1", "A0'", "A0'", "A1", "A0"]
    assert all(b["settle"]["reason"] == "no readings: fixed warm-up" and b["windows"] >= 1 for b in blocks)
    summary = json.loads((session / "summary.json").read_text())
    assert summary["quantity"] == "sustained" and summary["comparisons"]["A1"]["paired"]["n_pairs"] == 2
    assert summary["null"] == "A0'" and summary["comparisons"]["A0'"]["paired"]["n_pairs"] == 2
    assert "speed-up sustained (sustained protocol)" in r.stdout and "A/A null (A0' vs A0, same run)" in r.stdout


@pytest.mark.slow  # end to end, four processes; the fast tier runs the interleaved engine end to end in latency
def test_sweep_variants_interleaves_every_variant_in_one_run(tmp_path, cli):
    proto = tmp_path / "quick.yaml"
    proto.write_text(QUICK_INTERLEAVED)
    out = tmp_path / "s"
    r = cli("sweep", "variants", "--backend", "sim", "--seq", "128", "--heads", "1", "--head-dim", "64",
            "--variants", "A1,h15-sat", "--null", "--protocol", str(proto), "--out", str(out))
    assert r.returncode == 0, r.stderr
    sessions = sorted(p.name for p in out.iterdir())
    assert len(sessions) == 2 and any("-latency-" in s for s in sessions) and any("-sweep-" in s for s in sessions)
    sweep = json.loads(next(out.glob("*-sweep-*/summary.json")).read_text())
    assert {row["variant"] for row in sweep["rows"]} == {"A1", "h15-sat", "A0'"}
    rows = {row["variant"]: row for row in sweep["rows"]}
    assert rows["A0'"]["description"].startswith("the A/A null: a second process of A0")
    assert rows["A1"]["description"].startswith("Rowmax-H15")
    assert sweep["quantity"] == "at equal clock" and sweep["complete"] is True
    lat = json.loads(next(out.glob("*-latency-*/summary.json")).read_text())
    assert set(lat["kernels"]) == {"A0", "A1", "h15-sat", "A0'"} and lat["variants"] == ["A1", "h15-sat"]
    from test_vocabulary import assert_covered

    for session in out.iterdir():  # what they record, a seal can scope
        assert_covered(session)


def test_the_default_simulation_on_a_cpu_is_refused_with_an_estimate(tmp_path, cli):
    r = cli("latency", "--backend", "sim", "--out", str(tmp_path))
    assert r.returncode == 2
    assert "one window of 5 simulated calls would take at least" in r.stderr and "GFLOP" in r.stderr
    assert not any(tmp_path.iterdir())


def test_a_run_stopped_before_its_first_pair_prints_no_pooled_figure():
    from softbench.latency.render import paired_headline

    summary = {"protocol_kind": "interleaved", "quantity": "at equal clock", "baseline": "A0", "variants": ["A1"],
               "comparisons": {"A1": {"paired": None, "pooled_speedup_pct": None}}}
    (first, *_) = paired_headline(summary)
    assert first == "A1 vs A0, speed-up at equal clock (interleaved protocol): not measured"
    summary["comparisons"]["A1"]["pooled_speedup_pct"] = 2.5
    assert paired_headline(summary)[0].endswith("; pooled medians +2.50%")


def test_the_paired_headline_names_the_clock_the_null_across_processes_and_the_ratio_to_the_fastest_exact_kernel():
    from softbench.latency.render import paired_headline

    paired = {"estimate_pct": 5.0, "ci95_pct": [4.0, 6.0], "n_pairs": 40}
    summary = {"protocol_kind": "interleaved", "quantity": "at equal clock", "baseline": "A0", "variants": ["A1"],
               "null": "A0'", "references": [],
               "comparisons": {"A1": {"paired": paired, "pooled_speedup_pct": 5.1},
                               "A0'": {"paired": {**paired, "estimate_pct": 0.1}, "pooled_speedup_pct": 0.0}},
               "clock_during_pairs": {"sm_clock_mhz_median": 1755.0, "power_w_median": None},
               "best_exact": {"label": "A0", "median_ms": 1.0, "tflops": 500.0}, "vs_best_exact": {"A0": 1.0, "A1": 1.05},
               "process_pairs": {"processes_per_kernel": 2, "comparisons": {
                   label: {"pairs_of_processes": [{}, {}], "across": {"estimate_pct": est, "ci95_pct": [est - 1, est + 1]},
                           "sd_between_pp": 0.2} for label, est in (("A1", 5.0), ("A0'", 0.1))}}}
    lines = paired_headline(summary)
    # a clock without its power is not the operating point: neither is quoted
    assert lines[0].startswith("A1 vs A0, speed-up at equal clock (interleaved protocol): ")
    (across,) = [x for x in lines if x.startswith("across 2 pairs of processes")]
    assert across.endswith("A1 +5.00% [+4.00, +6.00], sd between pairs 0.20 pp; "
                           "A0' +0.10% [-0.90, +1.10], sd between pairs 0.20 pp")
    (best,) = [x for x in lines if x.startswith("fastest exact kernel timed")]
    # the baseline's own ratio first (how far it is from the fastest exact kernel), then the variants'
    assert best.endswith("; A0 / A0 1.000; A1 / A0 1.050 (no reference kernel timed: add --reference)")
    summary["clock_during_pairs"]["power_w_median"] = 700.0
    summary["references"] = ["ref-fa3"]
    # zero is a figure like any other: equal pooled medians, and pairs of processes that agree exactly
    summary["comparisons"]["A1"]["pooled_speedup_pct"] = 0.0
    summary["process_pairs"]["comparisons"]["A1"]["sd_between_pp"] = 0.0
    lines = paired_headline(summary)
    assert lines[0].startswith("A1 vs A0, speed-up at equal clock (interleaved protocol, SM clock 1755 MHz median, "
                               "700 W): ")
    assert lines[0].endswith("; pooled medians +0.00%")
    assert "A1 +5.00% [+4.00, +6.00], sd between pairs 0.00 pp;" in next(x for x in lines if x.startswith("across"))
    assert not any("add --reference" in x for x in lines)


def test_the_paired_headline_reports_each_round_from_one_and_a_warm_up_without_readings():
    from softbench.latency.render import PAIRED_COLUMNS, paired_columns, paired_headline, paired_rows

    kernel = {"role": "baseline", "median_ms": 1.0, "tflops": 500.0, "units": 20, "sm_clock_mhz_median": None,
              "power_w_median": None, "power_capped_windows": 0, "windows": 20, "energy_per_forward_mj": 0.7}
    summary = {"protocol_kind": "interleaved", "quantity": "at equal clock", "baseline": "A0", "variants": [],
               "comparisons": {}, "kernels": {"A0": kernel},
               # fixed calls (no window sized in time) and a board without readings (the simulation)
               "run": {"rounds": [{"round": 0, "pairs": 20, "measure_s": 3.0, "stop_reason": "time budget of 3 s spent"}],
                       "window": {"calls": 10, "rule": "fixed by the protocol"},
                       "warmup": {"elapsed_s": 2.0, "reason": "no readings: fixed warm-up", "power_w": None}}}
    lines = paired_headline(summary)
    assert "round 1: 20 pairs in 3.0 s, stopped: time budget of 3 s spent" in lines
    assert "warm-up: 2.0 s, no readings: fixed warm-up" in lines
    assert not any(x.startswith("windows:") for x in lines)
    # the energy per forward is a column of sustained runs alone
    assert len(paired_rows(summary)[0]) == len(paired_columns(summary)) == len(PAIRED_COLUMNS)
    sustained = {**summary, "protocol_kind": "sustained"}
    assert paired_rows(sustained)[0][-1] == "0.70" and paired_columns(sustained)[-1] == "energy/forward mJ"


def test_a_matrix_cell_prints_an_interval_only_where_both_bounds_are_numbers():
    """A bound of NaN (too few pairs) on one side once printed as "[+1.00, +nan]"."""
    from softbench.latency.render import matrix_rows

    def cells(speedup, ci):
        entry = {"cell": 0, "session": "s", "speedup_pct": speedup, "speedup_ci95_pct": ci}
        return matrix_rows({"sessions": [entry], "missing": []})[0][7]

    assert cells(2.5, [1.0, 4.0]) == "+2.50 [+1.00, +4.00]"
    assert cells(2.5, [1.0, float("nan")]) == "+2.50"
    assert cells(2.5, None) == "+2.50" and cells(None, [1.0, 4.0]) == "-"


@pytest.mark.parametrize("value", ["Auto,fa3", "sdpa, NONE"])
def test_auto_or_none_beside_kernel_names_is_refused_however_it_is_written(value):
    # the names are read without case or spaces, so "Auto" is auto: beside a kernel it stands for the whole list
    import click

    from softbench.core.options import reference_option

    cmd = reference_option(click.Command("latency", callback=lambda references: None))
    with pytest.raises(UsageError, match="stands alone and cannot be combined"):
        cmd.make_context("latency", ["--reference", value])


def test_the_run_design_options_default_to_the_engines_own():
    """A command line that gives none of them runs what LatencyOptions runs unasked: one process per kernel, started
    in the listed order, no null inside the baseline's process."""
    import click

    from softbench.core.options import run_design_options
    from softbench.latency.engine import LatencyOptions

    params = click.command("latency")(run_design_options(lambda **_: None)).make_context("latency", []).params
    engine = LatencyOptions(shapes=(Shape(),))
    assert ((params["processes"], params["start_order"], params["null_in_process"])
            == (engine.processes, engine.start_order, engine.null_in_process))


def _shape_context(args, **kwargs):
    """The click context of a command that has only core.options.shape_options, read from `args`."""
    import click

    from softbench.core.options import shape_options

    return click.command("latency")(shape_options(**kwargs)(lambda **_: None)).make_context("latency", list(args))


def test_the_shape_options_default_to_a_shapes_own_fields():
    """A command line that gives no shape option runs the shape a file cell that gives no field runs (Shape()); a
    command's own default length replaces only the length."""
    from softbench.core.options import shapes_from
    from softbench.core.shapes import shape_from_mapping

    assert shapes_from(**_shape_context([]).params) == (Shape(),) == (shape_from_mapping({}, "cell"),)
    assert shapes_from(**_shape_context([], default_seq="16K").params) == (Shape(seq=16384),)


def test_each_seq_given_is_one_shape_in_the_order_given():
    from softbench.core.options import shapes_from

    params = _shape_context(["--seq", "2K", "--seq", "1024", "--heads", "4"]).params
    assert shapes_from(**params) == (Shape(seq=2048, heads=4), Shape(seq=1024, heads=4))


def test_a_length_given_twice_is_refused_with_what_to_do():
    from softbench.core.options import shapes_from

    params = _shape_context(["--seq", "8K", "--seq", "8192"]).params
    with pytest.raises(UsageError, match=r"^--seq 8K and --seq 8192 are the same length \(8192\)") as e:
        shapes_from(**params)
    assert "once" in e.value.hint


@pytest.mark.parametrize("args", [["--batch", "0"], ["--heads", "0"], ["--kv-heads", "0"], ["--head-dim", "4"]])
def test_the_shape_options_refuse_a_value_below_their_range_as_the_option(args):
    # refused while the command line is read, naming the option and its range (the range --help shows), not later
    # by Shape in a field's words ("multiple of kv-heads (0)")
    import click

    with pytest.raises(click.BadParameter) as e:
        _shape_context(args)
    assert f"'{args[0]}': {args[1]} is not in the range" in e.value.format_message()


def test_shapes_at_their_limits():
    from softbench.core.shapes import seq_label

    assert seq_label(65536) == "64K" and seq_label(131072) == "128K"
    assert Shape(seq=65536).tag() == "bf16-64K-causal-b1h16d128"
    for text in ("0", "0K"):
        with pytest.raises(UsageError, match=f"sequence length '{text}' must be a positive integer"):
            parse_seq(text)
    for field in ("seq", "batch", "head_dim"):
        with pytest.raises(UsageError, match=f"{field} must be a positive integer, got 0"):
            Shape(**{field: 0})
    assert Shape(head_dim=24).tag() == "bf16-8K-causal-b1h16d24"  # a multiple of 8 is enough


def test_shapes_name_their_mask_count_their_batch_and_refuse_bad_heads():
    from softbench.core.shapes import mask_words, seq_label

    assert Shape(causal=False).tag() == "bf16-8K-noncausal-b1h16d128"  # no hyphen inside a tag's field
    assert mask_words(False) == "non-causal" and mask_words(True) == "causal"
    assert Shape(batch=2).flops == 2 * Shape().flops
    assert Shape(heads=16, kv_heads=4).to_dict()["kv_heads"] == 4 and Shape().to_dict()["kv_heads"] == 16
    assert seq_label(1536) == "1536" and seq_label(1024) == "1K"
    assert parse_seq("16k") == 16384 and parse_seq(" 8K\n") == 8192
    with pytest.raises(UsageError, match="heads must be a positive integer, got 0"):
        Shape(heads=0)
    for field in ("seq", "heads"):
        with pytest.raises(UsageError, match=f"{field} must be a positive integer, got True"):
            Shape(**{field: True})
    for kv in (0, -4):
        with pytest.raises(UsageError, match=f"must be a multiple of kv-heads \\({kv}\\)"):
            Shape(heads=16, kv_heads=kv)


def test_kv_heads_that_are_not_an_integer_are_refused_in_a_sentence():
    # once accepted as tags "kvTrue" and "kv2.0", and a quoted "4" from a file ended in a TypeError
    from softbench.core.shapes import shape_from_mapping

    for kv in (True, 2.0, "4"):
        with pytest.raises(UsageError, match=f"cell: kv_heads must be a positive integer, got {kv!r}"):
            shape_from_mapping({"heads": 16, "kv_heads": kv}, "cell")
    assert Shape(heads=16, kv_heads=4).tag() == "bf16-8K-causal-b1h16kv4d128"
