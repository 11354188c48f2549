"""The gates' weight maps (softbench.gates.maps): each variant is held to its own operator's reference. h15-folded
and the hybrids pass on the simulation; the same readbacks fail against another map, and kernels that get the map
subtly wrong (a rescale that ignores the anchors, hybrids on the wrong keys) fail theirs."""

import math
import pathlib

import pytest
import torch
import yaml

from softbench import operators
from softbench.core.errors import UsageError
from softbench.gates import engine as gates_engine
from softbench.gates.checks import multi_tile_gates, single_tile_gate
from softbench.gates.engine import run_gates
from softbench.gates.maps import GATE_MAPS, H15, gate_map_for, gate_map_named
from softbench.gates.options import GatesOptions
from softbench.gates.readback import Readback, load_readback, readback_path
from softbench.gates.references import (ExactScores, exact_exponents, reference_probabilities, row_phases,
                                         step_below_open)
from softbench.gates.tolerances import Storage, rounding_octaves
from softbench.kernels.catalog import VARIANTS
from softbench.kernels.sim import TileMap, element_map

from inprocess_worker import InProcessRunner
from wrong_variants import register_wrong_variant

FOLDED = GATE_MAPS["rowmax-h15-folded"]
SMALL = dict(backend="sim", heads=1, head_dim=64)


# h15-folded's weights rescaled by 2^(c (m_old - m_new)), as every other map is: each earlier tile keeps its own
# phase in its weights, which the anchor-to-anchor rescale exists to remove
PLAIN_RESCALE = register_wrong_variant("test-folded-plain-rescale", TileMap(
    operators.rowmax_h15_folded, lambda m_old, m_new, c, _offset: torch.exp2((m_old - m_new) * c)))


def _even_keys(x):
    pick = (torch.arange(x.shape[-1]) & 1) == 0  # h15-1of2 takes the odd keys
    return torch.where(pick, operators.rowmax_h15(x), operators.exact_exp2(x))


WRONG_KEYS = register_wrong_variant("test-hybrid-even-keys", element_map(_even_keys))


def _run(tmp_path_factory, variant, gmap=None, monkeypatch=None, **kw):
    if gmap is not None:
        monkeypatch.setattr(gates_engine, "gate_map_for", lambda _v: (gmap, ""))
    out = pathlib.Path(tmp_path_factory.mktemp(variant))
    return run_gates(GatesOptions(out_dir=out, variant=variant, **{**SMALL, **kw}), runner=InProcessRunner)


@pytest.fixture(scope="module")
def folded_run(tmp_path_factory):
    return _run(tmp_path_factory, "h15-folded")


# --- which map a variant is held to ------------------------------------------------------------------------------

def test_each_variant_is_gated_against_its_own_operator():
    assert gate_map_for("A1") == (H15, "")
    assert gate_map_for("h15-sat")[0] is H15  # its near-tie flips lie inside the scores' error bound
    assert gate_map_for("h15-folded")[0] is FOLDED
    assert gate_map_for("h15-1of4")[0].hybrid_every == 4 and gate_map_for("h15-1of2")[0].hybrid_every == 2
    assert gate_map_for("A0")[0].exact
    gmap, note = gate_map_for("noexp")
    assert gmap is H15 and "no gate reference of its own" in note


def test_a_recorded_map_name_reads_back_and_an_unknown_one_is_refused():
    assert gate_map_named(None) is H15  # sessions from before maps were recorded
    assert gate_map_named("rowmax-h15-folded") is FOLDED
    with pytest.raises(UsageError, match="no gate reference 'rowmax-h17'") as refused:
        gate_map_named("rowmax-h17")
    assert all(name in refused.value.hint for name in GATE_MAPS)  # the hint lists every map it knows


# --- the references on hand-computed rows --------------------------------------------------------------------------

def test_folded_reference_on_a_hand_computed_row():
    # c m = 0.2: r = rne(0.4) = 0, phase 0.4. 2x + 0.4 = 0.4, -0.2, -2.0 -> n = 0, 0, -2 -> weights 1, 1, 0.5
    # (Rowmax-H15 anchored at the maximum gives 1, 0.75, 0.5)
    x = torch.tensor([[0.0, -0.3, -1.2]], dtype=torch.float64)
    valid = torch.ones_like(x, dtype=torch.bool)
    ref = reference_probabilities(ExactScores(x, valid, torch.zeros_like(x), torch.tensor([[0.2]])), FOLDED)
    assert torch.equal(ref.probabilities, torch.tensor([[1.0, 1.0, 0.5]], dtype=torch.float64) / 2.5)
    assert ref.open_anchor_rows == 0 and float(ref.phase) == pytest.approx(0.4)
    a1 = reference_probabilities(ExactScores(x, valid, torch.zeros_like(x), torch.tensor([[0.2]])), H15)
    assert torch.equal(a1.probabilities, torch.tensor([[1.0, 0.75, 0.5]], dtype=torch.float64) / 2.25)


def test_folded_anchor_is_open_only_within_the_error_bound_of_a_rounding_boundary():
    x = torch.zeros(1, 3, 1, dtype=torch.float64)
    valid = torch.ones_like(x, dtype=torch.bool)
    eta = torch.full_like(x, 1e-4)
    scaled_max = torch.tensor([[[0.25 + 1e-5], [0.25 + 1e-3], [-7.1]]], dtype=torch.float64)  # 2cm = 0.5 + ...
    lo, hi = row_phases(scaled_max, eta, valid)
    assert lo.flatten().tolist()[0] == pytest.approx(0.5 + 2e-5) and hi.flatten().tolist()[0] == pytest.approx(
        -0.5 + 2e-5)
    assert torch.equal(lo.flatten()[1:], hi.flatten()[1:])  # clear of the boundary: one anchor


def test_folded_step_below_is_open_near_either_boundary_of_the_phase():
    # eta_row 1e-3: phi = 2cm - rne(2cm) opens the step below within 6 eta above -1/2, and within 2 eta below +1/2
    # (there the kernel's maximum can round to the next anchor, phase phi - 1, near -1/2 again)
    eta = torch.full((1, 7, 1), 1e-3, dtype=torch.float64)
    valid = torch.ones_like(eta, dtype=torch.bool)
    phi = [-0.5 + 5e-3, -0.5 + 7e-3, 0.0, 0.5 - 3e-3, 0.5 - 1e-3, 0.5 - 1e-4]
    scaled_max = torch.tensor([[[(3.0 + x) / 2] for x in phi] + [[-math.inf]]], dtype=torch.float64)
    assert step_below_open(scaled_max, eta, valid).flatten().tolist() == [True, False, False, False, True, True,
                                                                         False]
    none_valid = torch.zeros_like(valid)  # a row without keys has eta_row 0: only an exact boundary would open it
    assert step_below_open(scaled_max, eta, none_valid).flatten().tolist() == [False] * 7


def test_hybrid_reference_takes_the_exponential_off_the_chosen_keys():
    x = torch.full((1, 16), -0.3, dtype=torch.float64)
    x[0, 0] = 0.0
    valid = torch.ones_like(x, dtype=torch.bool)
    ref = reference_probabilities(ExactScores(x, valid, torch.zeros_like(x), None), GATE_MAPS["rowmax-h15-1of4"])
    w = ref.probabilities[0] / ref.probabilities[0, 0]  # relative to the maximum (key 0, weight 1)
    lattice = {9, 11, 13, 15}
    for key in range(1, 16):
        assert float(w[key]) == pytest.approx(0.75 if key in lattice else 2.0 ** -0.3), key


def test_folded_row_maximum_may_sit_one_step_below_only_where_that_step_is_open():
    """One row: the exact maximum (key 0) and key 1 within eta of it, the kernel's weights putting key 1 at the
    maximum and key 0 one lattice step below, at 3/4. With the phase just above -1/2 (a row step_below_open names)
    the row-maximum gate allows that step, and only there (phase 0: the same weights fail)."""
    x = torch.tensor([[[[0.0, -1e-4, -1.1, -2.3]]]], dtype=torch.float64)
    valid = torch.ones_like(x, dtype=torch.bool)
    eta = torch.full_like(x, 1e-4)
    stock_p = torch.exp2(x) / torch.exp2(x).sum(-1, keepdim=True)
    w = torch.tensor([[[[0.75, 1.0, 0.375, 0.1875]]]], dtype=torch.float64)  # key 1 the kernel's maximum
    storage = Storage(torch.bfloat16, torch.bfloat16, 4)

    def gate(phi):
        scaled_max = torch.tensor([[[[(4.0 + phi) / 2]]]], dtype=torch.float64)  # 2cm = 4 + phi
        stock, patched = (Readback(p=p, x=x, valid=valid, eta=eta, storage=storage, q=x, k=x,
                                   scaled_max=scaled_max) for p in (stock_p, w / w.sum()))
        return {g.name: g for g in multi_tile_gates(stock, patched, gmap=FOLDED)}["row_max_attained"]

    assert gate(-0.5 + 2e-4).passed and gate(-0.5 + 2e-4).details["rows_one_step_allowed"] == 1
    assert gate(0.0).passed is False


def test_folded_gates_read_the_exact_maximum_not_the_stock_argmax():
    """Key 0 lies 0.0005 octave below the exact maximum (key 1): BF16 stores both stock weights as 1, so the stock
    argmax is key 0. With the phase at -0.4995 (the step below not open: eta is 1e-5) key 0 is one lattice step
    below, at 3/4, and key 1 has weight 1: the kernel is right, and the gates must read key 1 to see it."""
    x = torch.tensor([[[[-0.0005, 0.0, -1.1, -2.3]]]], dtype=torch.float64)
    valid = torch.ones_like(x, dtype=torch.bool)
    eta = torch.full_like(x, 1e-5)
    scaled_max = torch.tensor([[[[(4.0 - 0.4995) / 2]]]], dtype=torch.float64)  # 2cm = 4 + phi
    assert not step_below_open(scaled_max, eta, valid).any()
    stock_w = torch.exp2(x).to(torch.bfloat16).double()
    w = torch.tensor([[[[0.75, 1.0, 0.375, 0.1875]]]], dtype=torch.float64)  # n = -1, 0, -3, -5
    storage = Storage(torch.bfloat16, torch.bfloat16, 4)
    stock, patched = (Readback(p=p, x=x, valid=valid, eta=eta, storage=storage, q=x, k=x, scaled_max=scaled_max)
                      for p in (stock_w / stock_w.sum(), w / w.sum()))
    assert int(stock.p.argmax()) == 0 != int(stock.argmax)
    gates = {g.name: g for g in multi_tile_gates(stock, patched, gmap=FOLDED)}
    assert gates["row_max_attained"].passed
    assert gates["recovered_error"].passed  # its shift, too, is read at the exact maximum


def test_folded_single_tile_reads_the_kernels_weights_against_its_own_maximum():
    """One row of BF16 scores summed in FP32 as a one-tile kernel does, product by product: key 0 holds the exact
    maximum, 1 + (15/32) 2^-23, whose small product FP32 drops (score 1); key 1 lies 1/32 of an FP32 step below it,
    yet its first small product rounds it up to 1 + 2^-23, so the kernel's maximum is key 1. With 2c just under 3.5,
    key 1 anchors the lattice at r = 4 with its phase just above -1/2, and key 0 falls one step below, to 3/4: the
    weights a correct h15-folded kernel makes (those of operators.rowmax_h15_folded, the simulation's). Read against
    its own maximum the single-tile gate passes them; read against the exact maximum's entry every weight is 4/3
    too large, and the reference picks the other anchor and wrong lattice points."""
    ulp = 2.0 ** -23  # FP32's step at 1
    q = torch.ones(1, 1, 1, 64)
    k = torch.zeros(1, 4, 1, 64)
    k[0, 0, 0, 0], k[0, 0, 0, 5] = 1.0, 15 / 32 * ulp
    k[0, 1, 0, 0], k[0, 1, 0, 1], k[0, 1, 0, 2] = 1.0, 0.75 * ulp, -5 / 16 * ulp
    k[0, 2, 0, 0], k[0, 3, 0, 0] = 0.5, 0.25
    q, k = q.to(torch.bfloat16), k.to(torch.bfloat16)
    assert k.float()[0, 1, 0, 1] == 0.75 * ulp  # every product is exact in BF16 x BF16
    scale_log2 = 1.75 - ulp  # an FP32 value: 2c = 3.5 - 2^-22
    products = (q.float() * k.float())[0, :, 0]
    scores = torch.zeros(4)
    for i in range(64):  # in order, each sum rounded to FP32
        scores = scores + products[:, i]
    w = operators.rowmax_h15_folded(scores, scores.max(), scale_log2).double()
    assert w.tolist() == [0.75, 1.0, 0.5, 0.375]
    p = (w / w.sum()).to(torch.bfloat16).double().view(1, 1, 1, 4)
    x, valid, eta, scaled_max = exact_exponents(q, k, False, scale_log2 / math.log2(math.e))
    patched = Readback(p=p, x=x, valid=valid, eta=eta, storage=Storage(torch.bfloat16, torch.bfloat16, 4), q=q, k=k,
                       scaled_max=scaled_max)
    assert int(patched.argmax) == 0 and bool(step_below_open(scaled_max, eta, valid).all())
    gate = single_tile_gate(patched, FOLDED)
    assert gate.passed, gate.to_dict()


# --- the engine on the simulation -----------------------------------------------------------------------------------

def test_simulated_h15_folded_passes_its_own_gates_and_records_the_map(folded_run):
    session, summary = folded_run
    assert summary["all_passed"] is True, summary["failed"]
    assert summary["reference"]["name"] == "rowmax-h15-folded"
    assert yaml.safe_load((session.path / "protocol.yaml").read_text())["reference"] == "rowmax-h15-folded"
    rec = summary["gates"]["recovered_error"]
    assert rec["phase_half_min"] < -0.2 and rec["phase_half_max"] > 0.2  # the phases span their range
    assert "reference rowmax-h15-folded" in (session.path / "summary.md").read_text()
    assert FOLDED.description in (session.path / "summary.md").read_text()  # the record says what the map is


def test_the_same_folded_readbacks_fail_against_rowmax_h15(folded_run):
    session, summary = folded_run
    single, multi = (load_readback(readback_path(session.path, "h15-folded", n), True) for n in (128, 512))
    stock = load_readback(readback_path(session.path, "A0", 512), True)
    assert single_tile_gate(single, FOLDED).passed and not single_tile_gate(single, H15).passed
    by_name = {g.name: g for g in multi_tile_gates(stock, multi, gmap=H15)}
    assert by_name["recovered_error"].passed is False  # the phase takes the errors out of A1's envelope


def test_folded_gates_add_the_phase_allowance_and_record_the_open_anchors(folded_run):
    """On the same readbacks, h15-folded's recovered error allows eta_max more than Rowmax-H15's (the exact
    maximum's phase is the kernel's within eta_max), its row-maximum gate less, and its single-tile gate records
    how many rows had an open anchor, as its reference counted them."""
    session, _ = folded_run
    single = load_readback(readback_path(session.path, "h15-folded", 128), True)
    multi = load_readback(readback_path(session.path, "h15-folded", 512), True)
    stock = load_readback(readback_path(session.path, "A0", 512), True)
    eta_max = float(stock.eta.masked_fill(~stock.valid, 0.0).max())
    folded, a1 = ({g.name: g for g in multi_tile_gates(stock, multi, gmap=m)} for m in (FOLDED, H15))
    assert folded["recovered_error"].details["tolerance"] == pytest.approx(
        a1["recovered_error"].details["tolerance"] + eta_max)
    # its row-maximum gate reads the exact maximum, not the stock argmax: two P1 readings and the FP32 slack only
    r, rs = rounding_octaves(multi.storage.u_out), rounding_octaves(multi.storage.slack)
    assert folded["row_max_attained"].details["tolerance"] == pytest.approx(2 * r + rs)
    gate = single_tile_gate(single, FOLDED)
    assert gate.details["open_anchor_rows"] == reference_probabilities(single.exact, FOLDED).open_anchor_rows
    assert "open_anchor_rows" not in single_tile_gate(single, H15).details  # Rowmax-H15 has no anchor to open


def test_a1_fails_the_folded_reference(tmp_path_factory, monkeypatch):
    _, summary = _run(tmp_path_factory, "A1", FOLDED, monkeypatch)
    assert {"single_tile", "recovered_error"} <= set(summary["failed"])


def test_folded_with_the_plain_rescale_fails_the_multi_tile_gates(tmp_path_factory, monkeypatch):
    _, summary = _run(tmp_path_factory, PLAIN_RESCALE, FOLDED, monkeypatch)
    assert summary["gates"]["single_tile"]["passed"] is True  # one tile: no rescale, the weights are right
    assert "recovered_error" in summary["failed"]


@pytest.mark.parametrize("causal", [True, False])
def test_simulated_h15_folded_passes_at_fp8(tmp_path_factory, causal):
    _, summary = _run(tmp_path_factory, "h15-folded", dtype="fp8", causal=causal)
    assert summary["all_passed"] is True, summary["failed"]


@pytest.mark.parametrize("variant", ["h15-1of2", "h15-1of4"])
def test_simulated_hybrids_pass_their_own_gates(tmp_path_factory, variant):
    _, summary = _run(tmp_path_factory, variant)
    assert summary["all_passed"] is True, summary["failed"]
    assert summary["reference"]["name"] == f"rowmax-{variant}"


def test_a_hybrid_on_the_wrong_keys_fails(tmp_path_factory, monkeypatch):
    _, summary = _run(tmp_path_factory, WRONG_KEYS, GATE_MAPS["rowmax-h15-1of2"], monkeypatch)
    assert "single_tile" in summary["failed"]


def test_reevaluation_keeps_the_recorded_map(tmp_path, folded_run):
    from softbench.gates.reevaluate import reevaluate_gates

    source, first = folded_run
    again, summary = reevaluate_gates(source.path, tmp_path / "cpu")
    assert summary["reference"]["name"] == "rowmax-h15-folded" and summary["gates"] == first["gates"]


def test_every_correct_catalog_variant_has_a_map_or_is_named_as_lacking_one():
    """A new operator must get a gate map (or join this list knowingly): otherwise its gates would hold it to
    Rowmax-H15 and fail a correct kernel."""
    lacking = {"mixed"}  # FA4's h15-wg: Rowmax-H15 in one MMA warpgroup's rows, exp2 in the other's
    for name, v in VARIANTS.items():
        if v.correct and v.role != "control" and not name.startswith("test-"):
            assert gate_map_for(name)[1] == "" or v.operator in lacking, name
