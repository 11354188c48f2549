"""Correctness gates: tolerances, pure gate functions on hand-made probabilities, the engine on the simulation
(the Rowmax-H15 kernel passes, deliberately wrong operators fail), sessions, exit codes."""

import json
import math

import pytest
import torch

from softbench import operators
from softbench.errors import MeasurementError
from softbench.kernels.operators_for_sim import SIM_OPERATORS
from softbench.measure import gates as G
from softbench.measure.gates import GatesOptions, Readback, Storage, run_gates

from conftest import run_cli

BF16 = torch.bfloat16


def _register(name, fn):
    if name not in SIM_OPERATORS:
        SIM_OPERATORS.register(name, fn)
    return name


# deliberately wrong operators, visible to in-process workers only
OCTAVE = _register("test-octave-pot", lambda x: torch.exp2(torch.round(x.float())))  # whole-octave lattice
SHIFTED = _register("test-shifted-h15", lambda x: operators.rowmax_h15(x.float() + 0.3))  # lattice off the max


class InProcessRunner:
    """A worker that runs in this process (softbench.measure.worker.WorkerState without the pipe), so that
    operators registered by the test are visible to it."""

    def __init__(self, label, backend, variant, options=None):
        from softbench.measure.worker import WorkerState

        self.label, self.backend, self.variant, self.options = label, backend, variant, options or {}
        self.state = WorkerState()
        self.info = {}

    def load(self):
        self.info = self.state.load({"backend": self.backend, "variant": self.variant, "options": self.options})
        return self.info

    def request(self, op, **fields):
        return {"ok": True, "result": getattr(self.state, op)(fields)}

    def close(self):
        pass


SMALL = dict(backend="sim", heads=1, head_dim=64)


# --- tolerances ------------------------------------------------------------------------------------------------

def test_unit_roundoff_follows_the_significand():
    # p significand bits (with the implicit one) give u = 2^-p under round to nearest
    for dtype in (BF16, torch.float16, torch.float8_e4m3fn, torch.float32):
        p = torch.finfo(dtype).nmant + 1 if hasattr(torch.finfo(dtype), "nmant") else None
        u = G.unit_roundoff(dtype)
        one_plus = torch.tensor(1.0 + u * 1.5, dtype=torch.float64).to(dtype).double().item()
        assert one_plus == 1.0 + 2 * u  # 1 + 1.5u rounds up to the next value, 1 + 2u: u is half the spacing
        if p:
            assert u == 2.0 ** -p
    assert G.unit_roundoff(BF16) == 2.0 ** -8


def test_rounding_octaves_bounds_both_sides():
    u = G.unit_roundoff(BF16)
    r = G.rounding_octaves(u)
    assert r >= abs(math.log2(1 + u)) and r == pytest.approx(abs(math.log2(1 - u)))


# --- hand-made probabilities ---------------------------------------------------------------------------------

def _readback(p, x, valid, eta, q, k, seq):
    return Readback(p=p, x=x, valid=valid, eta=eta, storage=Storage(BF16, BF16, seq), q=q, k=k)


def _hand_made(weight_fn, seq=256, heads=2, causal=True, seed=0):
    """Whole-row (one tile) kernel semantics written out: weights from the exact exponents, P rounded to BF16
    before P.V, row sum of the unrounded weights, output rounded to BF16."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, seq, heads, 64, generator=g).to(BF16)
    k = torch.randn(1, seq, heads, 64, generator=g).to(BF16)
    x, valid, eta = G.exact_exponents(q, k, causal, 1 / 8)
    w = weight_fn(x.float()).double().masked_fill(~valid, 0.0)
    p = (w.to(BF16).double() / w.sum(-1, keepdim=True)).to(BF16).double()
    return _readback(p, x, valid, eta, q, k, seq)


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
    gates = [G.readback_gate(stock), G.single_tile_gate(patched), *G.multi_tile_gates(stock, patched)]
    assert {g.name for g in gates} >= {"readback", "single_tile", "normalized_ratio", "recovered_error", "row_sums",
                                       "row_max_attained", "masked"}
    assert all(g.passed for g in gates), [g.to_dict() for g in gates if not g.passed]
    rec = _by_name(gates)["recovered_error"]
    a, b = G.ENVELOPE
    # the recovered error spans most of the envelope: the gate sees the operator's real error, not a constant
    assert rec.observed[0] < a + 0.05 and rec.observed[1] > b - 0.05


def test_octave_lattice_fails_the_envelope_and_the_reference():
    stock, wrong = _hand_made(_exact), _hand_made(_octave)
    g = _by_name([G.single_tile_gate(wrong), *G.multi_tile_gates(stock, wrong)])
    assert g["single_tile"].passed is False
    assert g["recovered_error"].passed is False
    assert g["recovered_error"].details["fraction_below_before_tolerance"] > 0


def test_row_sum_off_by_one_percent_fails_row_sums():
    stock, patched = _hand_made(_exact), _hand_made(_h15)
    scaled = _readback(patched.p * 1.01, patched.x, patched.valid, patched.eta, patched.q, patched.k, 256)
    g = _by_name(G.multi_tile_gates(stock, scaled))
    assert g["row_sums"].passed is False and g["recovered_error"].passed  # a uniform scale leaves ratios alone


def test_masked_leak_fails_masked_gate():
    stock, patched = _hand_made(_exact), _hand_made(_h15)
    p = patched.p.clone()
    p[0, 0, 0, 5] = 1e-3  # key 5 is masked for query 0
    leaky = _readback(p, patched.x, patched.valid, patched.eta, patched.q, patched.k, 256)
    assert _by_name(G.multi_tile_gates(stock, leaky))["masked"].passed is False


def test_row_maximum_moved_fails_row_max_attained():
    stock, patched = _hand_made(_exact), _hand_made(_h15)
    p = patched.p.clone()
    i = stock.p.argmax(-1, keepdim=True)
    p.scatter_(-1, i, p.gather(-1, i) * 0.5)  # the stock maximum's weight halved: no longer the row maximum
    moved = _readback(p, patched.x, patched.valid, patched.eta, patched.q, patched.k, 256)
    g = _by_name(G.multi_tile_gates(stock, moved))["row_max_attained"]
    assert g.passed is False and g.details["rows_attained"] < g.details["rows"]


def test_nan_never_passes():
    stock, patched = _hand_made(_exact), _hand_made(_h15)
    p = patched.p.clone()
    p[0, 0, 3, 1] = math.nan
    broken = _readback(p, patched.x, patched.valid, patched.eta, patched.q, patched.k, 256)
    assert _by_name(G.multi_tile_gates(stock, broken))["row_sums"].passed is False


def test_deferred_rescale_marks_the_row_maximum_gates_not_applicable():
    stock, patched = _hand_made(_exact), _hand_made(_h15)
    g = _by_name(G.multi_tile_gates(stock, patched, rescale_threshold=8.0))
    assert g["recovered_error"].passed is None and g["row_max_attained"].passed is None
    assert g["normalized_ratio"].passed  # holds for any tau


def test_reference_on_a_hand_computed_row():
    # 2x = 0, -0.6, -2.4 -> n = 0, -1, -2 -> weights 1, 0.75, 0.5
    x = torch.tensor([[0.0, -0.3, -1.2]], dtype=torch.float64)
    valid = torch.ones_like(x, dtype=torch.bool)
    p, amb = G.rowmax_h15_probabilities(x, valid, torch.zeros_like(x))
    assert torch.equal(p, torch.tensor([[1.0, 0.75, 0.5]], dtype=torch.float64) / 2.25) and not amb.any()


def test_reference_follows_the_kernel_only_at_a_rounding_boundary():
    # x = -0.25 sits on the boundary 2x = -0.5: within eta both 0.75 and 1 are legal; the kernel's reading decides
    x = torch.tensor([[0.0, -0.25, -1.0]], dtype=torch.float64)
    valid = torch.ones_like(x, dtype=torch.bool)
    eta = torch.full_like(x, 1e-6)
    for kernel_w in (0.75, 1.0):
        kw = torch.tensor([[1.0, kernel_w, 1.0]], dtype=torch.float64)  # last entry disagrees and must not matter
        p, amb = G.rowmax_h15_probabilities(x, valid, eta, kw)
        assert amb.tolist() == [[False, True, False]]
        w = torch.tensor([[1.0, kernel_w, 0.5]], dtype=torch.float64)
        assert torch.allclose(p, w / w.sum())


# --- the engine on the simulation ---------------------------------------------------------------------------

def test_simulated_a1_passes_and_records_a_session(tmp_path):
    session, summary = run_gates(GatesOptions(out_dir=tmp_path, **SMALL), runner=InProcessRunner)
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
def test_wrong_operators_fail(tmp_path, wrong):
    _, summary = run_gates(GatesOptions(out_dir=tmp_path, variant=wrong, **SMALL), runner=InProcessRunner)
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
    from softbench.errors import UsageError

    with pytest.raises(UsageError, match="at most 128 keys"):
        run_gates(GatesOptions(out_dir=tmp_path, single_seq=256, **SMALL), runner=InProcessRunner)


# --- the command ---------------------------------------------------------------------------------------------

def test_cli_end_to_end_with_worker_processes(tmp_path):
    r = run_cli("gates", "--backend", "sim", "--heads", "1", "--head-dim", "64", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "all gates passed" in r.stdout
    (session_dir,) = tmp_path.iterdir()
    summary = json.loads((session_dir / "summary.json").read_text())
    assert summary["all_passed"] is True and summary["backend"] == "sim"


def test_cli_exit_code_on_failed_gate(tmp_path, monkeypatch, capsys):
    from softbench import cli

    monkeypatch.setattr(G, "default_runner", InProcessRunner)
    code = cli.main(["gates", "--backend", "sim", "--variant", OCTAVE, "--heads", "1", "--head-dim", "64",
                     "--out", str(tmp_path)])
    assert code == G.GatesFailed.exit_code != 0
    captured = capsys.readouterr()
    assert "FAIL" in captured.out and "gate(s) failed" in captured.err


def test_cli_refuses_unknown_variant(tmp_path):
    r = run_cli("gates", "--backend", "sim", "--variant", "A7", "--out", str(tmp_path))
    assert r.returncode == 2 and "unknown" in r.stderr and not any(tmp_path.iterdir())
