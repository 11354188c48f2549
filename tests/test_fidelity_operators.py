"""The operator zoo against independent float64 references and the paper's error envelopes (A.4-A.6, B.1, B.2,
and the companion paper's K-interval operators)."""

import math

import pytest
import torch

from softbench.core.errors import UsageError
from softbench.fidelity.operator_zoo import grid_boundaries, list_operators, parse_operator
from softbench.operators import rowmax_h15

LN2 = math.log(2.0)


def _xs(lo=-126.0, hi=0.0, n=200001, seed=0):
    g = torch.Generator().manual_seed(seed)
    rand = lo + (hi - lo) * torch.rand(n, generator=g, dtype=torch.float64)
    # quarter and eighth steps hit the rounding ties of every k <= 3
    ties = torch.arange(int(lo * 8), int(hi * 8) + 1, dtype=torch.float64) / 8
    return torch.cat([rand, ties]).to(torch.float32)


def _rne(v: float) -> float:
    return float(round(v))  # Python's round() is round-half-to-even


def _S(x: float) -> float:
    f = math.floor(x)
    return math.ldexp(1.0 + (x - f), f)


def test_rowmax_h15_octave_error_within_the_b1_envelope():
    x = _xs()
    w = parse_operator("rowmax-h15").fn(x).double()
    err = torch.log2(w) - x.double()
    lo, hi = -0.25, math.log2(1.5) - 0.25
    assert err.min().item() >= lo - 1e-12 and err.max().item() <= hi + 1e-12
    # the sample comes close to both ends: the envelope is tight, not a loose bound
    assert err.min().item() == pytest.approx(lo, abs=1e-4) and err.max().item() == pytest.approx(hi, abs=1e-4)


def test_rowmax_h15_is_schraudolph_of_half_octave_input_bit_for_bit():
    """B.1: the ideal operator identity H(x) = S(Q_{1/2}(x)) (k = 1 of the S(Q_{2^-k}) family)."""
    x = _xs()
    assert torch.equal(parse_operator("schraudolph-q:k=1").fn(x), rowmax_h15(x))


@pytest.mark.parametrize("k", [0, 2, 3])
def test_schraudolph_q_against_float64_reference(k):
    x = _xs(n=20001)
    got = parse_operator(f"schraudolph-q:k={k}").fn(x)
    ref = torch.tensor([_S(_rne(max(v, -126.0) * 2**k) / 2**k) for v in x.double().tolist()], dtype=torch.float32)
    assert torch.equal(got, ref)


def test_schraudolph_unshifted_reference_and_envelope():
    x = _xs(n=20001)
    got = parse_operator("schraudolph").fn(x)
    ref = torch.tensor([_S(max(v, -126.0)) for v in x.double().tolist()], dtype=torch.float32)
    assert torch.allclose(got, ref, rtol=2e-7, atol=0)
    # log2(1 + f) - f is in [0, log2(1/ln2) - 1/ln2 + 1] (about 0.0861): S over-estimates, never under
    err = torch.log2(got.double()) - x.double()
    assert err.min().item() >= -1e-6
    assert err.max().item() <= math.log2(1 / LN2) - 1 / LN2 + 1 + 1e-6


@pytest.mark.parametrize("m", [1, 2])
def test_pot_m_reference_and_a6_bound(m):
    x = _xs(lo=-40.0, n=20001)
    got = parse_operator(f"pot-m:m={m}").fn(x)
    ref = torch.tensor([2.0 ** (-_rne(m * -v) / m) for v in x.double().tolist()], dtype=torch.float32)
    assert torch.equal(got, ref)
    eps = torch.log(got.double()) - x.double() * LN2  # natural-log error, Eq. 18
    assert eps.abs().max().item() <= LN2 / (2 * m) + 1e-9


@pytest.mark.parametrize("tail", ["clamp", "drop"])
def test_rowmax_pot_reference(tail):
    kmax = 5
    x = _xs(lo=-12.0, hi=0.5, n=20001)
    got = parse_operator(f"rowmax-pot:kmax={kmax},tail={tail}").fn(x)
    ref = []
    for v in x.double().tolist():
        d = math.floor(-v + 0.5)
        ref.append(0.0 if (tail == "drop" and d > kmax) else 2.0 ** -min(kmax, d))
    assert torch.equal(got, torch.tensor(ref, dtype=torch.float32))
    inside = x.double() >= -(kmax + 0.5) + 1e-6
    err = torch.log2(got.double()[inside]) - x.double()[inside]
    assert err.abs().max().item() <= 0.5 + 1e-9


def test_masked_scores_get_zero_weight_except_the_kernel_operator():
    minus_inf = torch.tensor([-math.inf])
    for name in ("exp2", "pot-m", "rowmax-pot", "schraudolph", "schraudolph-q", "temperature:alpha=0.8"):
        assert parse_operator(name).fn(minus_inf).item() == 0.0, name
    # Rowmax-H15 keeps the patched kernel's clamp: a masked score becomes 2^-126
    assert parse_operator("rowmax-h15").fn(minus_inf).item() == 2.0 ** -126
    # the folded form's clamp gives 0 (its kernel's too): a TileMap of the scores and the anchor
    folded = parse_operator("rowmax-h15-folded").fn
    assert folded.weights(minus_inf, torch.zeros(1), 0.25, 0.0).item() == 0.0


def test_hybrid_operators_take_h15_on_their_keys():
    from softbench import operators as ops
    from softbench.kernels.sim_weights import weight_fn

    s = torch.randn(3, 64, generator=torch.Generator().manual_seed(0)) * 5
    m = s.amax(-1, keepdim=True)
    for every in (2, 4):
        op = parse_operator(f"rowmax-h15-1of{every}")
        assert op.fn is weight_fn(f"h15-1of{every}") and not op.whole_row
        x = s * 0.3 - m * 0.3
        assert torch.equal(op.fn.weights(s, m, 0.3, 0.0), ops.rowmax_h15_hybrid(x, torch.arange(64), every))


def test_folded_operator_is_the_kernels_tile_map():
    """rowmax-h15-folded in the zoo is the simulation's map: softbench.operators' weights and anchor rescale."""
    from softbench import operators as ops
    from softbench.kernels.sim import H15_FOLDED
    from softbench.kernels.sim_weights import weight_fn

    op = parse_operator("rowmax-h15-folded")
    assert op.fn is H15_FOLDED is weight_fn("h15-folded")
    assert op.scope == "element" and op.anchor == "running" and not op.whole_row
    s = torch.tensor([[3.0, 1.0, -2.5, -7.0]])
    m = s.amax(-1, keepdim=True)
    assert torch.equal(op.fn.weights(s, m, 0.3, 0.0), ops.rowmax_h15_folded(s, m, 0.3))
    assert op.fn.weights(s, m, 0.3, 8.0)[0, 0].item() == 256.0  # FP8's lift: the anchor's weight 2^8


def _row_eps(s: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """log w_hat - log w with w = exp(s - max): the local log-weight error (A.1 Eq. 7) before normalization."""
    return torch.log(w.double()) - (s.double() - s.double().max())


def test_grid_boundaries_eq2():
    b = grid_boundaries(21, 4.0)
    widths = b[1:] - b[:-1]
    assert b[0] == 0 and b[-1] == pytest.approx(1.0)
    assert widths[0] / widths[-1] == pytest.approx(4.0)  # lowest interval R times the one at the maximum
    assert bool((widths[1:] < widths[:-1]).all())
    assert torch.allclose(grid_boundaries(8, 1.0), torch.arange(9, dtype=torch.float64) / 8)


def _grid_reference_h(s: torch.Tensor, K: int, R: float) -> torch.Tensor:
    """Interval width h of each score's interval, computed in float64 by a plain scan."""
    sd = s.double()
    C = sd.max() - sd.min()
    e = grid_boundaries(K, R) * C
    u = sd - sd.min()
    out = []
    for v in u.tolist():
        a = max(i for i in range(K) if e[i] <= v + 1e-12) if v < C else K - 1
        out.append(float(e[a + 1] - e[a]))
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("recon", ["upper", "nearest", "lerp"])
def test_grid_reconstruction_envelopes_a5(recon):
    g = torch.Generator().manual_seed(1)
    s = torch.randn(1, 300, generator=g) * 4
    K, R = 21, 4.0
    w = parse_operator(f"grid:K={K},R={R},recon={recon}").fn(s)[0]
    eps = _row_eps(s[0], w)
    h = _grid_reference_h(s[0], K, R)
    tol = 1e-5
    if recon == "upper":
        assert eps.min().item() >= -tol and bool((eps <= h + tol).all())
    elif recon == "nearest":
        assert bool((eps.abs() <= h / 2 + tol).all())
    else:  # exponential-secant error: 0 <= eps <= max_t log((1-t) + t e^h) - t h
        t = torch.linspace(0, 1, 2001, dtype=torch.float64)
        bound = torch.stack([(torch.log((1 - t) + t * math.exp(hh)) - t * hh).max() for hh in h.tolist()])
        assert eps.min().item() >= -tol and bool((eps <= bound + tol).all())
    assert w.max().item() == pytest.approx(1.0, abs=1e-6)  # the row maximum is on the grid


def test_grid_degenerate_rows_and_masks():
    op = parse_operator("grid:K=4,R=2")
    s = torch.tensor([[1.0, 1.0, 1.0, -math.inf], [3.0, -math.inf, -math.inf, -math.inf]])
    w = op.fn(s)
    assert w.tolist() == [[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]]


def test_grid_nearest_takes_the_lower_boundary_at_a_midpoint():
    s = torch.tensor([[0.0, 0.5, 2.5, 4.0]])  # C = 4, R = 1: boundaries at the integers; 0.5 and 2.5 are midpoints
    w = parse_operator("grid:K=4,R=1").fn(s)
    assert torch.allclose(w, torch.exp(torch.tensor([[0.0, 0.0, 2.0, 4.0]]) - 4.0), rtol=1e-6)


def test_grid_linear_weight_is_the_upper_bin_index():
    s = torch.tensor([[0.0, 0.5, 1.0, 2.6, 4.0]])
    w = parse_operator("grid:K=4,R=1,recon=upper,weight=linear").fn(s)
    assert w.tolist() == [[1.0, 1.0, 2.0, 3.0, 4.0]]


def test_kint_minmax_nearest_rounds_midpoints_up_and_lerp_matches_uniform_grid():
    # m = 0, M = 4, K = 4: h = 1, grid points at integers; 1.5 is a midpoint
    s = torch.tensor([[0.0, 1.5, 2.4, 2.6, 4.0]])
    w = parse_operator("kint-minmax:K=4").fn(s)
    expect = torch.exp(torch.tensor([[0.0, 2.0, 2.0, 3.0, 4.0]]) - 4.0)
    assert torch.allclose(w, expect, rtol=1e-6)
    g = torch.Generator().manual_seed(2)
    r = torch.randn(3, 50, generator=g)
    lerp = parse_operator("kint-minmax:K=6,recon=lerp").fn(r)
    assert torch.allclose(lerp, parse_operator("grid:K=6,R=1,recon=lerp").fn(r), rtol=1e-5)
    assert parse_operator("kint-minmax:K=4").fn(torch.tensor([[2.0, 2.0]])).tolist() == [[1.0, 1.0]]


def test_kint_fwm_window_tail_and_ties():
    # tau = 4, K = 4: h = 1 from the top; M = 10
    s = torch.tensor([[10.0, 9.5, 8.4, 6.0, 5.9, -math.inf]])
    w = parse_operator("kint-fwm:K=4,tau=4").fn(s)
    # z = 0, 0.5 (tie -> higher value, 0), 1.6 -> 2, 4 (window edge, kept), 4.1 (below the window: 0), masked
    expect = torch.tensor([[1.0, 1.0, math.exp(-2.0), math.exp(-4.0), 0.0, 0.0]])
    assert torch.allclose(w, expect, rtol=1e-6)
    lerp = parse_operator("kint-fwm:K=4,tau=4,recon=lerp").fn(s)
    assert lerp[0, 1].item() == pytest.approx(0.5 + 0.5 * math.exp(-1.0), rel=1e-6)
    assert lerp[0, 4].item() == 0.0


def test_temperature_is_softmax_of_scaled_scores():
    g = torch.Generator().manual_seed(3)
    x = -torch.rand(100, generator=g) * 20
    w = parse_operator("temperature:alpha=0.7").fn(x)
    assert torch.allclose(w / w.sum(), torch.softmax(0.7 * x * LN2, dim=0), rtol=1e-5)


def test_parse_errors_are_clear():
    with pytest.raises(UsageError) as e:
        parse_operator("rowmax-h16")
    assert "rowmax-h15" in (e.value.hint or "")
    with pytest.raises(UsageError) as e:
        parse_operator("rowmax-pot:kmx=20")
    assert "kmax" in (e.value.hint or "")
    with pytest.raises(UsageError, match="alpha"):
        parse_operator("temperature")
    with pytest.raises(UsageError, match="one of"):
        parse_operator("rowmax-pot:tail=cut")
    with pytest.raises(UsageError, match="not a int"):
        parse_operator("pot-m:m=two")
    with pytest.raises(UsageError, match="R has no meaning"):
        parse_operator("grid:K=1,R=4")
    with pytest.raises(UsageError, match="must be positive"):
        parse_operator("temperature:alpha=0")
    with pytest.raises(UsageError, match="must be in 0..13"):
        parse_operator("schraudolph-q:k=14")
    with pytest.raises(UsageError, match="weight=linear is defined with recon=upper"):
        parse_operator("grid:weight=linear")  # recon defaults to nearest
    with pytest.raises(UsageError, match="given twice"):  # which was meant? not the last one silently
        parse_operator("rowmax-pot:kmax=20,kmax=10")
    assert parse_operator("rowmax-pot:kmax=12,kmax=12").params["kmax"] == 12  # the same value twice is one


def test_schraudolph_takes_rowmax_h15s_clamp_at_minus_126():
    w = parse_operator("schraudolph").fn(torch.tensor([-200.0, -126.5, -126.0]))
    assert w.tolist() == [2.0 ** -126] * 3


def test_row_anchored_element_operators_take_the_whole_row_path():
    """An element operator the paper defines on the final row maximum (anchor "row") runs on the whole-row path, as
    the row operators do; the running-anchored ones do not."""
    assert parse_operator("pot-m").whole_row and parse_operator("schraudolph").whole_row
    assert parse_operator("grid").whole_row and not parse_operator("rowmax-h15").whole_row


def test_canonical_names_and_listing():
    assert parse_operator("rowmax-pot").canonical == "rowmax-pot:kmax=20,tail=clamp"
    assert parse_operator("rowmax-h15").canonical == "rowmax-h15"
    names = {o["name"] for o in list_operators()}
    assert {"rowmax-h15", "rowmax-pot", "pot-m", "schraudolph", "schraudolph-q", "grid", "temperature",
            "kint-minmax", "kint-fwm", "exp2", "rowmax-h15-folded"} <= names
