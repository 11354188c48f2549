"""Correctness gates: tolerances, pure gate functions on hand-made probabilities, the engine on the simulation
(the Rowmax-H15 kernel passes, deliberately wrong operators fail), sessions, exit codes."""

import hashlib
import json
import math
import pathlib
import re
import shutil
import statistics

import pytest
import yaml
import torch

from softbench import operators
from softbench.core.errors import MeasurementError
from softbench.gates import engine as gates_engine
from softbench.gates.checks import multi_tile_gates, readback_gate, single_tile_gate
from softbench.gates.engine import GatesFailed, run_gates
from softbench.gates.options import GatesOptions
from softbench.gates.readback import Readback, load_readback, readback_path, same_inputs
from softbench.gates.references import ExactScores, exact_exponents, reference_probabilities
from softbench.gates.tolerances import ACCUM_U_FP8, ENVELOPE, FP8_MMA_K, Storage, rounding_octaves, unit_roundoff

from conftest import run_cli
from inprocess_worker import InProcessRunner
from wrong_variants import register_wrong_variant

BF16 = torch.bfloat16


# deliberately wrong operators, visible to in-process workers only
OCTAVE = register_wrong_variant("test-octave-pot", lambda x: torch.exp2(torch.round(x.float())))  # whole-octave lattice
SHIFTED = register_wrong_variant("test-shifted-h15", lambda x: operators.rowmax_h15(x.float() + 0.3))  # lattice off the max


SMALL = dict(backend="sim", heads=1, head_dim=64)


# --- tolerances ------------------------------------------------------------------------------------------------

def test_unit_roundoff_follows_the_significand():
    # p significand bits (with the implicit one) give u = 2^-p under round to nearest
    for dtype in (BF16, torch.float16, torch.float8_e4m3fn, torch.float32):
        p = torch.finfo(dtype).nmant + 1 if hasattr(torch.finfo(dtype), "nmant") else None
        u = unit_roundoff(dtype)
        one_plus = torch.tensor(1.0 + u * 1.5, dtype=torch.float64).to(dtype).double().item()
        assert one_plus == 1.0 + 2 * u  # 1 + 1.5u rounds up to the next value, 1 + 2u: u is half the spacing
        if p:
            assert u == 2.0 ** -p
    assert unit_roundoff(BF16) == 2.0 ** -8


def test_rounding_octaves_bounds_both_sides():
    u = unit_roundoff(BF16)
    r = rounding_octaves(u)
    assert r >= abs(math.log2(1 + u)) and r == pytest.approx(abs(math.log2(1 - u)))


# --- hand-made probabilities ---------------------------------------------------------------------------------

def _readback(p, x, valid, eta, q, k, seq, dtype=BF16):
    return Readback(p=p, x=x, valid=valid, eta=eta, storage=Storage(dtype, dtype, seq), q=q, k=k)


def _hand_made(weight_fn, seq=256, heads=2, causal=True, seed=0, dtype=BF16, spread=1.0):
    """Whole-row (one tile) kernel semantics written out: weights from the exact exponents, P rounded to `dtype`
    (BF16) before P.V, row sum of the unrounded weights, output rounded to `dtype`. `spread` scales q, and so the
    range of the exponents."""
    g = torch.Generator().manual_seed(seed)
    q = (torch.randn(1, seq, heads, 64, generator=g) * spread).to(dtype)
    k = torch.randn(1, seq, heads, 64, generator=g).to(dtype)
    x, valid, eta, _ = exact_exponents(q, k, causal, 1 / 8)
    w = weight_fn(x.float()).double().masked_fill(~valid, 0.0)
    p = (w.to(dtype).double() / w.sum(-1, keepdim=True)).to(dtype).double()
    return _readback(p, x, valid, eta, q, k, seq, dtype)


def _exact(x):
    return torch.exp2(x)


def _h15(x):
    return operators.rowmax_h15(x)


def _octave(x):
    return torch.exp2(torch.round(x))


def _by_name(gates):
    return {g.name: g for g in gates}


def test_hand_made_rowmax_h15_passes_every_gate():
    stock, patched = _hand_made(_exact), _hand_made(_h15)
    gates = [readback_gate(stock), single_tile_gate(patched), *multi_tile_gates(stock, patched)]
    assert {g.name for g in gates} >= {"readback", "single_tile", "normalized_ratio", "recovered_error", "row_sums",
                                       "row_max_attained", "masked"}
    assert all(g.passed for g in gates), [g.to_dict() for g in gates if not g.passed]
    rec = _by_name(gates)["recovered_error"]
    a, b = ENVELOPE
    # the recovered error spans most of the envelope: the gate sees the operator's real error, not a constant
    assert rec.observed[0] < a + 0.05 and rec.observed[1] > b - 0.05


def test_octave_lattice_fails_the_envelope_and_the_reference():
    stock, wrong = _hand_made(_exact), _hand_made(_octave)
    g = _by_name([single_tile_gate(wrong), *multi_tile_gates(stock, wrong)])
    assert g["single_tile"].passed is False
    assert g["recovered_error"].passed is False
    assert g["recovered_error"].details["fraction_below_before_tolerance"] > 0


def test_row_sum_off_by_one_percent_fails_row_sums():
    stock, patched = _hand_made(_exact), _hand_made(_h15)
    scaled = _readback(patched.p * 1.01, patched.x, patched.valid, patched.eta, patched.q, patched.k, 256)
    g = _by_name(multi_tile_gates(stock, scaled))
    assert g["row_sums"].passed is False and g["recovered_error"].passed  # a uniform scale leaves ratios alone


def test_row_sums_just_outside_their_tolerance_fail():
    # P1 scaled so that its largest (smallest) row sum lies 1.5 tolerances above (below) 1: outside the bound
    # [1 - tol, 1 + tol], though within twice it
    stock, patched = _hand_made(_exact), _hand_made(_h15)
    tol = _by_name(multi_tile_gates(stock, patched))["row_sums"].details["tolerance"]
    sums = patched.p.sum(-1)
    for target, extreme in ((1 + 1.5 * tol, sums.max()), (1 - 1.5 * tol, sums.min())):
        p = patched.p * (target / float(extreme))
        scaled = _readback(p, patched.x, patched.valid, patched.eta, patched.q, patched.k, 256)
        assert _by_name(multi_tile_gates(stock, scaled))["row_sums"].passed is False, target


def test_recovered_error_counts_elements_outside_the_envelope_on_each_side():
    # Rowmax-H15's errors lie in [a, b]: only output roundings put a few elements outside before the tolerance.
    # The whole-octave lattice's errors reach -1/2 and +1/2, far out on both sides
    stock = _hand_made(_exact)
    right = _by_name(multi_tile_gates(stock, _hand_made(_h15)))["recovered_error"].details
    wrong = _by_name(multi_tile_gates(stock, _hand_made(_octave)))["recovered_error"].details
    for side in ("below", "above"):
        assert right[f"fraction_{side}_before_tolerance"] < 0.01 < 0.1 < wrong[f"fraction_{side}_before_tolerance"]


def test_masked_leak_fails_masked_gate():
    stock, patched = _hand_made(_exact), _hand_made(_h15)
    p = patched.p.clone()
    p[0, 0, 0, 5] = 1e-3  # key 5 is masked for query 0
    leaky = _readback(p, patched.x, patched.valid, patched.eta, patched.q, patched.k, 256)
    assert _by_name(multi_tile_gates(stock, leaky))["masked"].passed is False


def test_row_maximum_moved_fails_row_max_attained():
    stock, patched = _hand_made(_exact), _hand_made(_h15)
    p = patched.p.clone()
    i = stock.p.argmax(-1, keepdim=True)
    p.scatter_(-1, i, p.gather(-1, i) * 0.5)  # the stock maximum's weight halved: no longer the row maximum
    moved = _readback(p, patched.x, patched.valid, patched.eta, patched.q, patched.k, 256)
    g = _by_name(multi_tile_gates(stock, moved))["row_max_attained"]
    assert g.passed is False and g.details["rows_attained"] < g.details["rows"]


def test_nan_never_passes():
    stock, patched = _hand_made(_exact), _hand_made(_h15)
    p = patched.p.clone()
    p[0, 0, 3, 1] = math.nan
    broken = _readback(p, patched.x, patched.valid, patched.eta, patched.q, patched.k, 256)
    assert _by_name(multi_tile_gates(stock, broken))["row_sums"].passed is False


def test_deferred_rescale_marks_the_row_maximum_gates_not_applicable():
    stock, patched = _hand_made(_exact), _hand_made(_h15)
    g = _by_name(multi_tile_gates(stock, patched, rescale_threshold=8.0))
    assert g["recovered_error"].passed is None and g["row_max_attained"].passed is None
    assert g["normalized_ratio"].passed  # holds for any tau


def test_a_ratio_gate_over_no_resolved_element_fails():
    # a stock readback of zeros resolves no element: with nothing to bound, the ratio gates must fail (an empty
    # range reads as NaN), not pass as though every ratio were 0
    stock, patched = _hand_made(_exact), _hand_made(_h15)
    zeros = _readback(torch.zeros_like(stock.p), stock.x, stock.valid, stock.eta, stock.q, stock.k, 256)
    g = _by_name(multi_tile_gates(zeros, patched))
    assert g["normalized_ratio"].details["elements"] == 0
    assert g["normalized_ratio"].passed is False and g["recovered_error"].passed is False


def test_single_tile_l1_leaves_masked_entries_to_the_masked_gate():
    # the single-tile L1 runs over unmasked entries only: weight leaked onto a masked key changes no row's L1
    # (the multi-tile masked gate is the one that bounds it)
    patched = _hand_made(_h15)
    p = patched.p.clone()
    p[0, 0, 0, 5] = 0.5  # key 5 is masked for query 0; 0.5 is far above any row's L1 and its bound
    leaky = _readback(p, patched.x, patched.valid, patched.eta, patched.q, patched.k, 256)
    assert single_tile_gate(leaky).observed == single_tile_gate(patched).observed
    assert single_tile_gate(leaky).passed


def test_ratio_gates_leave_out_the_output_dtypes_subnormals():
    """FP16 output: probabilities below 2^-14 are subnormal and keep only a few bits, so their ratios are noise.
    Scores spread wide put many stock probabilities there; the correct Rowmax-H15 kernel still passes, those
    elements are counted as unresolved."""
    stock, patched = (_hand_made(fn, seq=1024, heads=1, dtype=torch.float16, spread=3.0) for fn in (_exact, _h15))
    g = _by_name(multi_tile_gates(stock, patched))
    subnormal = stock.valid & (stock.p > 0) & (stock.p < torch.finfo(torch.float16).tiny)
    assert int(subnormal.sum()) > 100, "the inputs must reach FP16's subnormal range"
    assert g["normalized_ratio"].details["unresolved_elements"] >= int(subnormal.sum())
    assert all(x.passed for x in g.values()), [x.to_dict() for x in g.values() if not x.passed]


def test_ratio_gates_count_both_sides_of_the_envelope_before_tolerance():
    # one element per row four times too large (2 octaves) lies above the normalized ratio's envelope [a - b, b - a]
    # and nothing lies below it: the fraction outside must count it
    stock, patched = _hand_made(_exact), _hand_made(_h15)
    p = patched.p.clone()
    p[..., 0] *= 4  # key 0 is visible to every query
    high = _readback(p, patched.x, patched.valid, patched.eta, patched.q, patched.k, 256)
    g = _by_name(multi_tile_gates(stock, high))["normalized_ratio"]
    assert g.observed[1] > 1.9 and g.details["fraction_outside_before_tolerance"] > 0
    assert g.passed is False


def test_gates_record_the_rows_and_elements_they_cover():
    # causal, 2 heads of 256 queries: query i sees keys 0..i, so 256 * 257 / 2 unmasked entries per head
    stock, patched = _hand_made(_exact), _hand_made(_h15)
    g = _by_name([readback_gate(stock), single_tile_gate(patched), *multi_tile_gates(stock, patched)])
    unmasked, rows = 2 * 256 * 257 // 2, 2 * 256
    for name in ("readback", "single_tile"):
        assert g[name].details["elements"] == unmasked and g[name].details["rows"] == rows, name
    assert g["row_sums"].details["rows"] == rows and g["row_max_attained"].details["rows"] == rows
    assert g["masked"].details["elements"] == 2 * 256 * 256 - unmasked


def test_multi_tile_details_summarize_the_rows():
    """The per-row statistics the record keeps: the normalization shift read at each row maximum (it varies from
    row to row), and how many keys share the patched row maximum (Rowmax-H15 gives weight 1, exactly, to every
    key within a half-step of the maximum: those are the ties)."""
    stock, patched = _hand_made(_exact), _hand_made(_h15)
    g = _by_name(multi_tile_gates(stock, patched))
    rec = g["recovered_error"].details
    assert rec["shift_min"] < rec["shift_mean"] < rec["shift_max"]
    att = g["row_max_attained"].details
    ties = (patched.valid & (patched.p == patched.p.amax(-1, keepdim=True))).sum(-1).flatten().tolist()
    assert max(ties) > statistics.median(ties)  # the two statistics differ on these inputs
    assert att["lattice_ties_median"] == statistics.median(ties) and att["lattice_ties_max"] == max(ties)


def test_a_key_read_back_one_output_rounding_below_the_row_maximum_is_counted_as_a_tie():
    """Over several key tiles a key can share the maximum's lattice point yet not read back equal to it: as the
    running maximum of a tile before the maximum's, its weight there is H(0) = 1, and the rescale to the final
    maximum multiplies it by 2^y, y its exponent below that maximum, where the whole row's lattice gives 1. A y
    under an output rounding reads back as the output dtype's next value below the maximum: still a tie."""
    stock, patched = _hand_made(_exact), _hand_made(_h15)
    p = patched.p.clone()
    p_max = p.amax(-1, keepdim=True)
    exact_ties = patched.valid & (p == p_max)
    # in each row that has one, the smallest visible weight becomes such a key: one BF16 step below the maximum
    below_max = torch.nextafter(p_max.to(BF16), torch.zeros_like(p_max, dtype=BF16)).double()
    smallest = torch.where(patched.valid, p, math.inf).argmin(-1, keepdim=True)
    has_room = ~exact_ties.gather(-1, smallest)  # a row of a single visible key has no other to move
    p.scatter_(-1, smallest, torch.where(has_room, below_max, p.gather(-1, smallest)))
    assert bool((below_max < p_max).all()) and int(has_room.sum()) > patched.p.shape[1]
    near = _readback(p, patched.x, patched.valid, patched.eta, patched.q, patched.k, 256)
    att = _by_name(multi_tile_gates(stock, near))["row_max_attained"].details
    ties = (exact_ties.sum(-1, keepdim=True) + has_room).flatten().tolist()
    assert att["lattice_ties_median"] == statistics.median(ties) and att["lattice_ties_max"] == max(ties)


def test_reference_on_a_hand_computed_row():
    # 2x = 0, -0.6, -2.4 -> n = 0, -1, -2 -> weights 1, 0.75, 0.5
    x = torch.tensor([[0.0, -0.3, -1.2]], dtype=torch.float64)
    valid = torch.ones_like(x, dtype=torch.bool)
    p, amb, _, _ = reference_probabilities(ExactScores(x, valid, torch.zeros_like(x), None))
    assert torch.equal(p, torch.tensor([[1.0, 0.75, 0.5]], dtype=torch.float64) / 2.25) and not amb.any()


def test_reference_follows_the_kernel_only_at_a_rounding_boundary():
    # x = -0.25 sits on the boundary 2x = -0.5: within eta both 0.75 and 1 are legal; the kernel's reading decides
    x = torch.tensor([[0.0, -0.25, -1.0]], dtype=torch.float64)
    valid = torch.ones_like(x, dtype=torch.bool)
    eta = torch.full_like(x, 1e-6)
    for kernel_w in (0.75, 1.0):
        kw = torch.tensor([[1.0, kernel_w, 1.0]], dtype=torch.float64)  # last entry disagrees and must not matter
        p, amb, _, _ = reference_probabilities(ExactScores(x, valid, eta, None), kernel_weights=kw)
        assert amb.tolist() == [[False, True, False]]
        w = torch.tensor([[1.0, kernel_w, 0.5]], dtype=torch.float64)
        assert torch.allclose(p, w / w.sum())


# --- the engine on the simulation ---------------------------------------------------------------------------

def _recorded(tmp_path_factory, variant: str):
    return run_gates(GatesOptions(out_dir=tmp_path_factory.mktemp(variant), variant=variant, **SMALL),
                     runner=InProcessRunner)


# one run of each per module (a run costs seconds of simulation): tests that change a session copy it first
@pytest.fixture(scope="module")
def a1_run(tmp_path_factory):
    return _recorded(tmp_path_factory, "A1")


@pytest.fixture(scope="module")
def shifted_run(tmp_path_factory):
    return _recorded(tmp_path_factory, SHIFTED)


def test_simulated_a1_passes_and_records_a_session(a1_run):
    session, summary = a1_run
    assert summary["all_passed"] is True and summary["failed"] == [] and summary["command"] == "gates"
    assert session.status()["complete"] is True
    for name in ("env.json", "protocol.yaml", "gates.json", "summary.json", "summary.md", "readbacks.jsonl"):
        assert session.has(name), name
    gates = session.read_json("gates.json")["gates"]
    assert {g["name"] for g in gates} == set(summary["gates"])
    assert all(set(g) >= {"value", "bound", "passed"} for g in summary["gates"].values())
    assert "all gates passed" in (session.path / "summary.md").read_text()
    assert len(session.read_records("readbacks.jsonl")) == 4  # two kernels, two lengths


@pytest.mark.parametrize("wrong", [OCTAVE, SHIFTED])
def test_wrong_operators_fail(tmp_path_factory, shifted_run, wrong):
    _, summary = shifted_run if wrong == SHIFTED else _recorded(tmp_path_factory, wrong)
    assert summary["all_passed"] is False
    assert {"single_tile", "recovered_error"} <= set(summary["failed"])
    assert "readback" not in summary["failed"]  # the stock kernel and the readback are fine


def test_noexp_control_fails_with_strict_json(tmp_path):
    # the no-exponential control turns masked scores into NaN: every patched gate fails, and the records stay
    # valid JSON (null, not NaN)
    session, summary = run_gates(GatesOptions(out_dir=tmp_path, variant="noexp", **SMALL), runner=InProcessRunner)
    assert summary["all_passed"] is False and "readback" not in summary["failed"]
    assert summary["non_finite_readback_values"]["noexp"][512] > 0

    def refuse(token):
        raise ValueError(f"non-standard JSON constant {token}")

    for name in ("summary.json", "gates.json"):
        json.loads((session.path / name).read_text(), parse_constant=refuse)


def test_non_causal_and_deferred_rescale(tmp_path):
    _, summary = run_gates(GatesOptions(out_dir=tmp_path, causal=False, backend_options={"rescale_threshold": 8.0},
                                        **SMALL), runner=InProcessRunner)
    assert "masked" not in summary["gates"]
    assert set(summary["not_applicable"]) == {"recovered_error", "row_max_attained"}
    assert summary["all_passed"] is True


def test_worker_failure_leaves_a_partial_session(tmp_path):
    class Broken(InProcessRunner):
        def request(self, op, **fields):
            raise MeasurementError("kernel crashed")

    with pytest.raises(MeasurementError):
        run_gates(GatesOptions(out_dir=tmp_path, **SMALL), runner=Broken)
    (session_dir,) = tmp_path.iterdir()
    status = json.loads((session_dir / "status.json").read_text())
    assert status["complete"] is False and "kernel crashed" in status["reason"]
    assert "PARTIAL" in (session_dir / "summary.md").read_text()


def test_single_tile_length_must_fit_one_tile(tmp_path):
    from softbench.core.errors import UsageError

    with pytest.raises(UsageError, match="at most 128 keys"):
        run_gates(GatesOptions(out_dir=tmp_path, single_seq=256, **SMALL), runner=InProcessRunner)
    with pytest.raises(UsageError, match="at most 64 keys"):
        run_gates(GatesOptions(out_dir=tmp_path, single_seq=128, backend_options={"tile": 64}, **SMALL),
                  runner=InProcessRunner)
    with pytest.raises(UsageError, match="more than one key tile"):
        run_gates(GatesOptions(out_dir=tmp_path, multi_seq=128, **SMALL), runner=InProcessRunner)
    assert not any(tmp_path.iterdir())  # refused before a session folder is made


def test_single_tile_length_defaults_to_one_whole_tile_and_is_recorded(tmp_path):
    assert GatesOptions().single_seq is None
    session, summary = run_gates(GatesOptions(out_dir=tmp_path, backend_options={"tile": 64}, **SMALL),
                                 runner=InProcessRunner)
    assert summary["all_passed"] is True
    proto = yaml.safe_load((session.path / "protocol.yaml").read_text())
    assert proto["shapes"]["single_tile"]["seq"] == 64 and proto["shapes"]["multi_tile"]["seq"] == 512
    assert session.has("readback-A1-64.pt") and summary["shapes"]["single_tile"].startswith("bf16-64-")


# --- the command ---------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_cli_end_to_end_with_worker_processes(tmp_path):
    r = run_cli("gates", "--backend", "sim", "--heads", "1", "--head-dim", "64", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "all gates passed" in r.stdout
    (session_dir,) = tmp_path.iterdir()
    summary = json.loads((session_dir / "summary.json").read_text())
    assert summary["all_passed"] is True and summary["backend"] == "sim"


def test_cli_exit_code_on_failed_gate(tmp_path, monkeypatch, capsys):
    from softbench import cli

    monkeypatch.setattr(gates_engine, "default_runner", InProcessRunner)
    code = cli.main(["gates", "--backend", "sim", "--variant", OCTAVE, "--heads", "1", "--head-dim", "64",
                     "--out", str(tmp_path)])
    assert code == GatesFailed.exit_code != 0
    captured = capsys.readouterr()
    assert "FAIL" in captured.out and "gate(s) failed" in captured.err


def test_cli_refuses_unknown_variant(tmp_path):
    r = run_cli("gates", "--backend", "sim", "--variant", "A7", "--out", str(tmp_path))
    assert r.returncode == 2 and "unknown" in r.stderr and not any(tmp_path.iterdir())


# --- FP8: the storage and accumulation model ----------------------------------------------------------------

FP8 = torch.float8_e4m3fn


def test_fp8_storage_rounds_only_the_subnormal_tail_of_h15_weights():
    st = Storage(FP8, BF16, 512, max_offset=8.0, accum_u=ACCUM_U_FP8)
    x = torch.arange(-60.0, 0.25, 0.25, dtype=torch.float64)
    w = operators.rowmax_h15_reference(x).double()
    stored = st.stored(w)
    normal = w * 2.0**8 >= 2.0**-6  # E4M3's smallest normal, in stored units
    assert torch.equal(stored[normal], w[normal])  # {1, 1.5} x 2^k is exact in E4M3's normal range
    assert not torch.equal(stored[~normal], w[~normal])  # its subnormals round the tail (1.5 x 2^-9 -> 2^-8 ...)
    assert (stored[~normal] - w[~normal]).abs().max() <= 2.0**-10 / 2.0**8  # half a subnormal step, unscaled
    assert torch.equal(Storage(BF16, BF16, 512).stored(w), w)
    assert st.to_dict()["accum_u"] == ACCUM_U_FP8


def test_fp8_scores_get_the_wider_accumulation_bound():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 64, 2, 128, generator=g).to(FP8)
    k = torch.randn(1, 64, 2, 128, generator=g).to(FP8)
    x32, _, eta32, _ = exact_exponents(q, k, True, 128 ** -0.5)
    x8, valid, eta8, _ = exact_exponents(q, k, True, 128 ** -0.5, accum_u=ACCUM_U_FP8, accum_chunk=FP8_MMA_K)
    assert torch.equal(x32, x8)
    # 4 wgmma steps at 2^-13 against 128 FP32 additions at 2^-23: 2^10 / 32 = 32 times wider on that term
    ratio = eta8[valid] / eta32[valid]
    assert 16 < float(ratio.min()) and float(ratio.max()) <= 32.0 + 1e-9
    # wide, but still well under one lattice step of 2x for these inputs: the ambiguity logic stays valid
    assert float(2 * eta8[valid].max()) < 0.25


def test_fp8_single_tile_reference_follows_the_kernel_storage():
    """A kernel that rounds its tiny weights into E4M3 as FA4 and softbench's Triton forward do passes; the same
    readback judged against unrounded reference weights would not."""
    g = torch.Generator().manual_seed(1)
    seq = 128
    q = (torch.randn(1, seq, 1, 64, generator=g) * 2).to(FP8)
    k = (torch.randn(1, seq, 1, 64, generator=g) * 2).to(FP8)
    x, valid, eta, _ = exact_exponents(q, k, False, 1 / 8, accum_u=ACCUM_U_FP8, accum_chunk=FP8_MMA_K)
    st = Storage(FP8, BF16, seq, max_offset=8.0, accum_u=ACCUM_U_FP8, accum_chunk=FP8_MMA_K)
    w = operators.rowmax_h15_reference(x.float()).double().masked_fill(~valid, 0.0)
    p = (st.stored(w) / w.sum(-1, keepdim=True)).to(BF16).double()
    rb = Readback(p=p, x=x, valid=valid, eta=torch.zeros_like(eta), storage=st, q=q, k=k)
    assert (w * 256 < 2.0**-6).sum() > 100, "the inputs must reach E4M3's subnormal range"
    assert single_tile_gate(rb).passed
    unrounded = Readback(p=p, x=x, valid=valid, eta=torch.zeros_like(eta),
                         storage=Storage(BF16, BF16, seq, max_offset=8.0), q=q, k=k)
    assert single_tile_gate(unrounded).observed[1] > single_tile_gate(rb).observed[1]


def test_fp8_accumulation_model_still_fails_a_shifted_lattice():
    """The wider FP8 eta makes elements near a rounding boundary ambiguous, not the whole lattice: weights from a
    lattice shifted by 0.3 (SHIFTED) still fail the single-tile gate, the right lattice passes."""
    g = torch.Generator().manual_seed(2)
    seq = 128
    q = torch.randn(1, seq, 2, 128, generator=g).to(FP8)
    k = torch.randn(1, seq, 2, 128, generator=g).to(FP8)
    x, valid, eta, _ = exact_exponents(q, k, True, 128 ** -0.5, accum_u=ACCUM_U_FP8, accum_chunk=FP8_MMA_K)
    st = Storage(FP8, BF16, seq, max_offset=8.0, accum_u=ACCUM_U_FP8, accum_chunk=FP8_MMA_K)

    def readback(fn):
        w = fn(x.float()).double().masked_fill(~valid, 0.0)
        p = (st.stored(w) / w.sum(-1, keepdim=True)).to(BF16).double()
        return Readback(p=p, x=x, valid=valid, eta=eta, storage=st, q=q, k=k)

    assert single_tile_gate(readback(_h15)).passed
    assert not single_tile_gate(readback(lambda t: operators.rowmax_h15(t + 0.3))).passed


# --- the readback files ----------------------------------------------------------------------------------------

def _written_readback(tmp_path, variant="A1", seed=3, seq=160, dtype="bf16"):
    """One readback written by the worker's `probabilities` op (in this process): its reply, file and shape."""
    from softbench.core.shapes import Shape

    shape = Shape(dtype=dtype, seq=seq, causal=True, batch=1, heads=1, head_dim=64)
    worker = InProcessRunner(variant, "sim", variant)
    worker.load()
    path = readback_path(tmp_path, variant, seq)
    reply = worker.request("probabilities", shape=shape.to_dict(), seed=seed, path=str(path))["result"]
    return reply, path, shape


def test_a_readback_holds_the_requested_inputs_and_its_reply_counts_forwards_and_non_finite_values(tmp_path):
    """The file holds the q and k of the requested seed (the parent rebuilds the scores from them); the reply
    counts one forward per head_dim keys (the last reads the 32 left) and every non-finite probability (noexp
    turns masked scores into NaN, many per row)."""
    from softbench.kernels.inputs import make_inputs

    reply, path, shape = _written_readback(tmp_path, "noexp")
    data = torch.load(path, weights_only=False)
    inputs = make_inputs(shape, 3, "cpu")
    assert torch.equal(data["q"], inputs.q) and torch.equal(data["k"], inputs.k)
    assert reply["forwards"] == math.ceil(160 / 64) == 3
    assert reply["non_finite"] == int((~torch.isfinite(data["p"])).sum()) > 1


def test_load_readback_takes_the_output_dtype_from_the_file_and_refuses_a_cut_probability_matrix(tmp_path):
    _, path, _ = _written_readback(tmp_path)
    rb = load_readback(path, True)
    assert rb.storage.out_dtype == BF16
    assert rb.p.dtype == torch.float64  # the gates' L1 sums and ratios run in FP64, as Readback promises
    _edit_readback(path, lambda d: d.update(out_dtype="float16"))  # an FP16 kernel's output rounds more
    assert load_readback(path, True).storage.u_out == unit_roundoff(torch.float16)
    _edit_readback(path, lambda d: d.update(p=d["p"][..., :-1]))  # one key short of the scores
    with pytest.raises(MeasurementError, match=r"readback has shape \(1, 1, 160, 159\), the scores"):
        load_readback(path, True)


def test_an_fp8_readback_loads_with_fp8_storage_and_the_wgmma_accumulation_bound(tmp_path):
    # FP8 inputs: P in E4M3 at FA4's offset 2^8, and eta from the tensor cores' FP8 accumulation (ACCUM_U_FP8 per
    # wgmma of FP8_MMA_K products), which the simulation's own FP32 scores would never need
    _, path, _ = _written_readback(tmp_path, dtype="fp8")
    rb = load_readback(path, True)
    st = rb.storage
    assert (st.p_dtype, st.max_offset, st.accum_u, st.accum_chunk) == (FP8, 8.0, ACCUM_U_FP8, FP8_MMA_K)
    data = torch.load(path, weights_only=False)
    wide = exact_exponents(data["q"], data["k"], True, data["softmax_scale"], tuple(data["descale"]),
                           accum_u=ACCUM_U_FP8, accum_chunk=FP8_MMA_K)
    assert torch.equal(rb.eta, wide.eta)


def test_two_readbacks_are_of_one_run_only_where_both_q_and_k_agree():
    # the two kernels' processes must have drawn the same q and the same k: either one differing is another input
    stock, other = _hand_made(_exact), _hand_made(_exact, seed=1)
    assert same_inputs(stock, stock)
    for q, k in ((stock.q, other.k), (other.q, stock.k)):
        assert not same_inputs(stock, _readback(stock.p, stock.x, stock.valid, stock.eta, q, k, 256))


def test_readback_file_names_carry_no_quote():
    # the A/A null's second label A0' must not put a quote into a file name (a shell would trip on it)
    name = readback_path(pathlib.Path("s"), "A0'", 512).name
    assert "'" not in name and name != readback_path(pathlib.Path("s"), "A0", 512).name


# --- re-evaluation from kept readbacks -----------------------------------------------------------------------

def test_reevaluation_reproduces_the_gates_and_names_its_source(tmp_path, shifted_run):
    from softbench.gates.reevaluate import reevaluate_gates

    source, first = shifted_run
    again, summary = reevaluate_gates(source.path, tmp_path / "cpu", "softbench gates --reevaluate x")
    assert summary["gates"] == first["gates"] and summary["failed"] == first["failed"] != []
    proto = yaml.safe_load((again.path / "protocol.yaml").read_text())
    assert proto["reevaluated_from"] == source.path.name and proto["variant"] == SHIFTED
    assert len(proto["readback_sha256"]) == 4
    for name, digest in proto["readback_sha256"].items():  # each the hash of that readback in the source
        assert digest == hashlib.sha256((source.path / name).read_bytes()).hexdigest(), name
    # its own command line, and the one that ran on the GPU
    source_proto = yaml.safe_load((source.path / "protocol.yaml").read_text())
    assert proto["command_line"] == "softbench gates --reevaluate x"
    assert proto["source_command_line"] == source_proto["command_line"]
    assert summary["reevaluated_from"] == source.path.name
    assert summary["tag"] == first["tag"] + "-reevaluated"  # the same shapes and kernels as the source
    assert again.read_json("env.json")["source_env"]["workers"]
    assert again.path.name.endswith("-reevaluated") and again.status()["complete"] is True


def test_reevaluation_refuses_what_it_cannot_read(tmp_path, a1_run):
    from softbench.core.errors import UsageError
    from softbench.gates.reevaluate import reevaluate_gates

    source = tmp_path / "gpu" / a1_run[0].path.name
    shutil.copytree(a1_run[0].path, source)
    next(source.glob("readback-A1-*.pt")).unlink()
    with pytest.raises(UsageError, match="lacks the readback files readback-A1-"):
        reevaluate_gates(source, tmp_path / "cpu")
    with pytest.raises(UsageError, match="not a session folder"):
        reevaluate_gates(tmp_path, tmp_path / "cpu")
    assert not (tmp_path / "cpu").exists()


def test_reevaluation_refuses_a_damaged_or_partial_source_in_one_sentence(tmp_path, a1_run):
    from softbench.core.errors import UsageError
    from softbench.gates.reevaluate import reevaluate_gates

    def copy(name):
        dest = tmp_path / name / a1_run[0].path.name
        shutil.copytree(a1_run[0].path, dest)
        return dest

    cut = copy("cut")
    readback = next(cut.glob("readback-A1-*.pt"))
    readback.write_bytes(readback.read_bytes()[:1000])  # a copy cut short
    with pytest.raises(UsageError, match=f"{readback.name} is not a whole readback"):
        reevaluate_gates(cut, tmp_path / "cpu")
    broken = copy("broken")
    (broken / "protocol.yaml").write_text("labels: [a\n")
    with pytest.raises(UsageError, match="protocol.yaml cannot be read"):
        reevaluate_gates(broken, tmp_path / "cpu")
    # nested past the parser's depth: once an internal error (RecursionError)
    (broken / "protocol.yaml").write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(UsageError, match=r"protocol.yaml cannot be read \(RecursionError\)"):
        reevaluate_gates(broken, tmp_path / "cpu")
    partial = copy("partial")
    status = json.loads((partial / "status.json").read_text())
    swapped = copy("swapped")  # one kernel's single-tile readback replaced by its multi-tile one
    small, large = sorted(swapped.glob("readback-A1-*.pt"), key=lambda p: p.stat().st_size)
    shutil.copy(large, small)
    with pytest.raises(UsageError, match=f"and {small.name} in .* hold different inputs, so they are not the two"):
        reevaluate_gates(swapped, tmp_path / "cpu")
    for complete in (False, "no", 1):  # only JSON true is complete: a truthy string passed a partial run
        (partial / "status.json").write_text(json.dumps({**status, "complete": complete, "state": "partial"}))
        with pytest.raises(UsageError, match="not a complete gates session"):
            reevaluate_gates(partial, tmp_path / "cpu")
    assert not (tmp_path / "cpu").exists()


def test_reevaluate_flag_takes_no_kernel_options(tmp_path):
    r = run_cli("gates", "--reevaluate", str(tmp_path), "--dtype", "fp8", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "drop --dtype" in r.stderr


def _edit_yaml(path, edit):
    data = yaml.safe_load(path.read_text())
    edit(data)
    path.write_text(yaml.safe_dump(data))


def _edit_readback(path, edit):
    data = torch.load(path, weights_only=False)
    edit(data)
    torch.save(data, path)


# each a damage that once escaped reevaluate_gates as an internal error (AttributeError, KeyError, IndexError)
DAMAGED_SOURCES = {
    "protocol without its backend": ("protocol.yaml", lambda p: p.pop("backend"), "'backend' is None, not a name"),
    "protocol without its variant": ("protocol.yaml", lambda p: p.pop("variant"), "'variant' is None, not a name"),
    "labels that are no names": ("protocol.yaml", lambda p: p.update(labels=[1, 2]), "not the two kernels' names"),
    "backend options as a list": ("protocol.yaml", lambda p: p.update(backend_options=[1]), "not a mapping"),
    "a threshold that is no number": ("protocol.yaml", lambda p: p.update(backend_options={"rescale_threshold": "x"}),
                                      "rescale threshold 'x' is not a number"),
    "a reference that is a list": ("protocol.yaml", lambda p: p.update(reference=[]), "has no gate reference []"),
    "a third shape": ("protocol.yaml", lambda p: p["shapes"].update(third=p["shapes"]["multi_tile"]),
                      "not one single_tile and one multi_tile shape"),
    "a readback of another dtype name": ("readback", lambda d: d.update(out_dtype="nope"), "is not a whole readback"),
    "a readback whose inputs are text": ("readback", lambda d: d.update(q="x"), "is not a whole readback"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGED_SOURCES))
def test_reevaluation_refuses_an_edited_source_in_one_sentence(tmp_path, a1_run, damage):
    from softbench.core.errors import UsageError
    from softbench.gates.reevaluate import reevaluate_gates

    where, edit, says = DAMAGED_SOURCES[damage]
    source = tmp_path / "gpu" / a1_run[0].path.name
    shutil.copytree(a1_run[0].path, source)
    if where == "readback":
        _edit_readback(next(source.glob("readback-A1-*.pt")), edit)
    else:
        _edit_yaml(source / where, edit)
    with pytest.raises(UsageError, match=re.escape(says)):
        reevaluate_gates(source, tmp_path / "cpu")
    assert not (tmp_path / "cpu").exists()


def _source_copy(tmp_path, run):
    """A copy of a recorded gates session to edit (the module's runs are shared)."""
    source = tmp_path / "gpu" / run[0].path.name
    shutil.copytree(run[0].path, source)
    return source


# fields of protocol.yaml a gates run writes in one form only: each other form is refused in one sentence
EDITED_PROTOCOLS = {
    "without its baseline": (lambda p: p.pop("baseline"), "'baseline' is None, not a name"),
    "an empty backend": (lambda p: p.update(backend=""), "'backend' is '', not a name"),
    "three labels": (lambda p: p.update(labels=["A0", "A1", "A2"]), "not the two kernels' names"),
    "an empty label": (lambda p: p.update(labels=["A0", ""]), "not the two kernels' names"),
    "a shape that is no mapping": (lambda p: p["shapes"].update(single_tile=128),
                                   "not one single_tile and one multi_tile shape"),
    "a shape with a field no shape has": (lambda p: p["shapes"]["multi_tile"].update(tiles=4),
                                          "does not describe a gates run (TypeError"),
    "another command's session": (lambda p: p.update(command="latency"), "is not a gates session"),
}


@pytest.mark.parametrize("edit", sorted(EDITED_PROTOCOLS))
def test_reevaluation_refuses_a_protocol_a_gates_run_does_not_write(tmp_path, a1_run, edit):
    from softbench.core.errors import UsageError
    from softbench.gates.reevaluate import reevaluate_gates

    change, says = EDITED_PROTOCOLS[edit]
    source = _source_copy(tmp_path, a1_run)
    _edit_yaml(source / "protocol.yaml", change)
    with pytest.raises(UsageError, match=re.escape(says)):
        reevaluate_gates(source, tmp_path / "cpu")
    assert not (tmp_path / "cpu").exists()


def test_reevaluation_refuses_a_source_without_status_or_whose_protocol_is_no_mapping(tmp_path, a1_run):
    from softbench.core.errors import UsageError
    from softbench.gates.reevaluate import reevaluate_gates

    source = _source_copy(tmp_path, a1_run)
    (source / "status.json").unlink()  # no status: nothing says the run finished
    with pytest.raises(UsageError, match="not a complete gates session"):
        reevaluate_gates(source, tmp_path / "cpu")
    (source / "protocol.yaml").write_text("[1, 2]\n")  # valid YAML, but a list
    with pytest.raises(UsageError, match="is not a gates session"):
        reevaluate_gates(source, tmp_path / "cpu")


def test_reevaluation_takes_the_rescale_threshold_of_the_variants_gpu(tmp_path, a1_run):
    """An FA4 session's threshold follows the architecture its variant's worker recorded: 8 on sm_100 at BF16,
    which makes the row-maximum gates not applicable; the baseline's architecture plays no part."""
    from softbench.gates.reevaluate import reevaluate_gates

    source = _source_copy(tmp_path, a1_run)
    _edit_yaml(source / "protocol.yaml", lambda p: p.update(backend="fa4", backend_options={}))
    for var_arch, base_arch, tau in ((100, 90, 8.0), (90, 100, 0.0)):
        workers = {"A0": {"device": {"arch": base_arch}}, "A1": {"device": {"arch": var_arch}}}
        (source / "env.json").write_text(json.dumps({"workers": workers}))
        _, summary = reevaluate_gates(source, tmp_path / f"cpu-{var_arch}")
        assert summary["rescale_threshold"] == tau
        assert set(summary["not_applicable"]) == ({"recovered_error", "row_max_attained"} if tau else set())


def test_reevaluation_of_a_non_causal_run_with_a_deferred_rescale_reproduces_it(tmp_path):
    # the re-evaluation must read the readbacks unmasked and keep the simulation's threshold, as the run did
    from softbench.gates.reevaluate import reevaluate_gates

    source, first = run_gates(GatesOptions(out_dir=tmp_path / "gpu", causal=False,
                                           backend_options={"rescale_threshold": 8.0}, **SMALL),
                              runner=InProcessRunner)
    _, summary = reevaluate_gates(source.path, tmp_path / "cpu")
    assert summary["gates"] == first["gates"] and "masked" not in summary["gates"]
    assert summary["not_applicable"] == first["not_applicable"] != []


def test_reevaluation_of_a_session_from_before_maps_were_recorded_names_rowmax_h15(tmp_path, a1_run):
    from softbench.gates.reevaluate import reevaluate_gates

    source = _source_copy(tmp_path, a1_run)
    _edit_yaml(source / "protocol.yaml", lambda p: p.pop("reference"))
    again, summary = reevaluate_gates(source, tmp_path / "cpu")
    assert yaml.safe_load((again.path / "protocol.yaml").read_text())["reference"] == "rowmax-h15"
    assert summary["reference"]["name"] == "rowmax-h15" and summary["gates"] == a1_run[1]["gates"]


@pytest.mark.parametrize("env", [{"workers": [1]}, {"workers": {"A1": "x"}}, {"workers": {"A1": {"device": "x"}}},
                                 {"workers": {"A1": {"device": {"arch": [9, 0]}}}}, [1, 2]])
def test_reevaluation_reads_past_an_env_without_the_workers_arch(tmp_path, a1_run, env):
    """env.json only lends the worker's architecture to the rescale threshold (the simulation's is its own option):
    a file edited into other kinds of value gives no architecture, and the gates are evaluated as recorded."""
    from softbench.gates.reevaluate import reevaluate_gates

    source = tmp_path / "gpu" / a1_run[0].path.name
    shutil.copytree(a1_run[0].path, source)
    (source / "env.json").write_text(json.dumps(env))
    _, summary = reevaluate_gates(source, tmp_path / "cpu")
    assert summary["gates"] == a1_run[1]["gates"]


def test_each_gates_tolerance_is_its_derivation():
    """The allowances the comments derive, for BF16 P and output over 256 keys: a gate widened by a factor of two
    (or a masked bound by 2^20) would still pass the correct and fail the grossly wrong weights above."""
    from softbench.gates.tolerances import fp32_slack

    stock, patched = _hand_made(_exact), _hand_made(_h15)
    g = _by_name([readback_gate(stock), single_tile_gate(patched), *multi_tile_gates(stock, patched)])
    u = unit_roundoff(BF16)
    assert u == 2.0 ** -8
    slack = fp32_slack(256)
    assert slack == (2 * 256 + 4) * 2.0 ** -24  # 256 sums, 256 rescalings, four more roundings
    r, rs = rounding_octaves(u), rounding_octaves(slack)
    a, b = ENVELOPE
    eta = float(stock.eta.masked_fill(~stock.valid, 0.0).max())
    assert 0 < eta < 1e-3
    assert g["readback"].bound == (0.0, pytest.approx((1 + u) ** 2 * 2.0 ** (2 * eta) * (1 + slack) - 1))
    assert g["single_tile"].bound == (0.0, pytest.approx(u + slack))
    tol_norm = 3 * r + rs  # P1: the output's rounding; P0: P's and the output's
    assert g["normalized_ratio"].details["tolerance"] == pytest.approx(tol_norm)
    assert g["normalized_ratio"].bound == pytest.approx((a - b - tol_norm, b - a + tol_norm))
    tol_rec = tol_norm + 3 * r + 2 * eta  # two more output readings, a P rounding, the argmax within 2 eta
    assert g["recovered_error"].details["tolerance"] == pytest.approx(tol_rec)
    assert g["recovered_error"].bound == pytest.approx((a - tol_rec, b + tol_rec))
    assert g["row_max_attained"].details["tolerance"] == pytest.approx(6 * r + rs)
    floor = 2.0 ** -126
    masked_keys = int((~stock.valid).sum(-1).max())
    assert g["row_sums"].details["tolerance"] == pytest.approx(u + slack + masked_keys * floor)
    assert g["masked"].bound == (0.0, pytest.approx(floor * 2.0 ** (-a) * (1 + u), rel=1e-9, abs=0.0))


def test_gates_tolerances_add_p_rounding_where_weights_are_exponentials():
    """The exp2 map (A0 against A0): the patched weights are exponentials, not exact in P's dtype, so P's rounding
    joins the patched side of every tolerance the derivation above gives for Rowmax-H15; the hybrids' too."""
    from softbench.gates.maps import GATE_MAPS
    from softbench.gates.tolerances import fp32_slack

    stock, patched = _hand_made(_exact), _hand_made(_exact)
    exp2 = GATE_MAPS["exp2"]
    g = _by_name([single_tile_gate(patched, exp2), *multi_tile_gates(stock, patched, gmap=exp2)])
    assert all(x.passed for x in g.values()), [x.to_dict() for x in g.values() if not x.passed]
    u = unit_roundoff(BF16)
    slack = fp32_slack(256)
    r, rs = rounding_octaves(u), rounding_octaves(slack)
    eta = float(patched.eta.masked_fill(~patched.valid, 0.0).max())
    assert g["single_tile"].bound == (0.0, pytest.approx((1 + u) ** 2 * 2.0 ** (2 * eta) * (1 + slack) - 1))
    assert g["normalized_ratio"].details["tolerance"] == pytest.approx(4 * r + rs)  # Rowmax-H15's 3 r + rs, + r
    masked_keys = int((~stock.valid).sum(-1).max())
    assert g["row_sums"].details["tolerance"] == pytest.approx(2 * u + slack + masked_keys * 2.0 ** -126)
    for hybrid in ("rowmax-h15-1of2", "rowmax-h15-1of4"):  # their exponential keys carry P's rounding as well
        h = _by_name(multi_tile_gates(stock, patched, gmap=GATE_MAPS[hybrid]))
        assert h["normalized_ratio"].details["tolerance"] == g["normalized_ratio"].details["tolerance"], hybrid


def _fp8_readbacks(*weight_fns, seed=1, seq=128):
    """Hand-made FP8 readbacks (one tile) as FA4 stores them: scores spread by 2 so many weights reach E4M3's
    subnormals, P = weight * 2^8 rounded to E4M3, the output to BF16."""
    g = torch.Generator().manual_seed(seed)
    q = (torch.randn(1, seq, 1, 64, generator=g) * 2).to(FP8)
    k = (torch.randn(1, seq, 1, 64, generator=g) * 2).to(FP8)
    x, valid, eta, _ = exact_exponents(q, k, False, 1 / 8, accum_u=ACCUM_U_FP8, accum_chunk=FP8_MMA_K)
    st = Storage(FP8, BF16, seq, max_offset=8.0, accum_u=ACCUM_U_FP8, accum_chunk=FP8_MMA_K)
    out = []
    for fn in weight_fns:
        w = fn(x.float()).double().masked_fill(~valid, 0.0)
        p = (st.stored(w) / w.sum(-1, keepdim=True)).to(BF16).double()
        out.append(Readback(p=p, x=x, valid=valid, eta=eta, storage=st, q=q, k=k))
    return out


def test_fp8_ratio_gates_leave_out_p_subnormals_and_keep_its_normal_range():
    """E4M3 P holds weight * 2^8: weights under 2^-14 fall into its subnormals, whose stored values are noise, and
    are left out; weights above stay gated, though under 2^-6 (E4M3's smallest normal without the offset)."""
    stock, patched, doubled = _fp8_readbacks(
        _exact, _h15, lambda t: torch.where(_h15(t) < 2.0 ** -6, 2 * _h15(t), _h15(t)))
    g = _by_name(multi_tile_gates(stock, patched))
    assert ((stock.p > 0) & (stock.p / stock.p.amax(-1, keepdim=True) < 2.0 ** -14)).sum() > 100
    assert all(x.passed for x in g.values()), [x.to_dict() for x in g.values() if not x.passed]
    # a kernel whose weights under 2^-6 are one octave too large fails: those elements are still resolved
    assert _by_name(multi_tile_gates(stock, doubled))["normalized_ratio"].passed is False


@pytest.mark.parametrize("seq_k, dv", [(10, 4), (8, 4), (3, 8)])
def test_one_hot_readback_gives_every_key_once_whatever_the_head_dim(seq_k, dv):
    """The readback takes dv keys per call; where dv does not divide seq_k the last call reads the keys left. A
    step of its own (once an argument, given larger than dv) skipped the keys between j0 + dv and the next j0."""
    from softbench.kernels.sim import probabilities_via_one_hot

    p = torch.rand(1, 5, 2, seq_k, generator=torch.Generator().manual_seed(1))  # (b, seq_q, h, seq_k)
    calls = []

    def run(v):  # O = P.V per head, as an attention forward of these probabilities gives
        calls.append(v)
        return torch.einsum("bqhk,bkhd->bqhd", p, v)

    got = probabilities_via_one_hot(run, seq_k, torch.zeros(1, seq_k, 2, dv))
    assert torch.equal(got, p) and len(calls) == math.ceil(seq_k / dv)
