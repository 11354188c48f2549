"""Rowmax-H15 in torch against an independent definition of paper Eq. 5, bit for bit."""

import math
import struct

import pytest
import torch

from softbench import operators as ops

from folded_inputs import beside_ties


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32)


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def test_hand_values_from_eq5():
    # n = rne(2x); even n -> 2^(n/2), odd n -> 1.5 * 2^floor(n/2)
    cases = {0.0: 1.0, -0.5: 0.75, -1.0: 0.5, -1.5: 0.375, -2.0: 0.25, 0.5: 1.5, 1.0: 2.0, 3.2: 8.0,
             -0.25: 1.0,   # 2x = -0.5 ties to 0 (even)
             -0.75: 0.5,   # 2x = -1.5 ties to -2 (even)
             0.75: 2.0,    # 2x = 1.5 ties to 2
             -1.25: 0.5,   # 2x = -2.5 ties to -2
             -126.0: 2.0 ** -126, -126.25: 2.0 ** -126, -300.0: 2.0 ** -126}
    x = torch.tensor(list(cases), dtype=torch.float32)
    want = torch.tensor(list(cases.values()), dtype=torch.float32)
    assert torch.equal(ops.rowmax_h15(x), want)
    assert torch.equal(ops.rowmax_h15_reference(x), want)


def test_masked_and_nan_inputs_take_the_clamp_like_the_kernel():
    x = torch.tensor([float("-inf"), float("nan")])
    assert torch.equal(ops.rowmax_h15(x), torch.full((2,), 2.0 ** -126))
    # the float64 reference treats NaN as the clamp too (the tests and gates compare against it)
    assert torch.equal(ops.rowmax_h15_reference(x), torch.full((2,), 2.0 ** -126))


def test_bit_exact_on_millions_of_inputs_with_ties_and_clamp():
    g = torch.Generator().manual_seed(1234)
    uniform = (torch.rand(3_000_000, generator=g, dtype=torch.float64) * 257.0 - 130.0).float()
    quarter_ties = torch.arange(-130 * 4, 127 * 4 + 1, dtype=torch.float32) / 4  # every 2x = k + 1/2
    fine = torch.arange(-130 * 2**14 // 7, 127 * 2**14 // 7, dtype=torch.float64).mul(7 * 2.0**-14).float()
    near_zero = torch.linspace(-4, 4, 200_001)
    x = torch.cat([uniform, quarter_ties, fine, near_zero, torch.tensor([float("-inf"), -0.0, 0.0])])
    assert x.numel() > 3_500_000
    got, want = bits(ops.rowmax_h15(x)), bits(ops.rowmax_h15_reference(x))
    mismatch = (got != want).nonzero()
    assert mismatch.numel() == 0, f"first mismatch at x={x[mismatch[0]].item()!r}"


def test_half_octave_envelope():
    x = torch.linspace(-125.9, 0.0, 1_000_003, dtype=torch.float32)  # the kernel's inputs are FP32
    err = torch.log2(ops.rowmax_h15(x).double()) - x.double()
    lo, hi = ops.half_octave_error_bounds()
    assert hi == pytest.approx(math.log2(1.5) - 0.25)
    assert err.min() >= lo - 1e-12 and err.max() <= hi + 1e-12
    # both ends are approached (the envelope is tight, not loose)
    assert err.min() < lo + 1e-3 and err.max() > hi - 1e-3


def test_constants_are_the_kernels():
    # the PTX in the FA4 patch writes these as hex literals; they must be the torch operator's constants
    assert f32_bits(ops.CLAMP_DOUBLED) == 0xC37C0000
    assert f32_bits(ops.MAGIC) == 0x4B400000
    assert f32_bits(ops.MAGIC_FOLDED) == 0x4B4000FE


def test_outputs_are_the_two_values_per_octave():
    x = torch.linspace(-20, 0, 100_001)
    w = ops.rowmax_h15(x).double()
    mant = w / torch.exp2(torch.floor(torch.log2(w)))
    assert set(torch.unique(mant).tolist()) == {1.0, 1.5}


def test_saturated_construction_is_h15_except_next_to_rounding_ties():
    """h15-sat (the clamp as an FMA's saturation) against rowmax_h15: equal on a dense sweep of the kernel's range
    and on the special values; where they differ, 2x lies within one step of u's resolution (2^-15) of a
    half-integer, and the two n differ by one (adjacent weights)."""
    g = torch.Generator().manual_seed(3)
    x = torch.cat([torch.linspace(-140.0, 8.0, 3_000_001), (torch.rand(1_000_000, generator=g) - 0.9) * 150])
    ties = torch.arange(-252, 17).float() / 2 + 0.25  # 2x = k + 0.5 exactly, and a step either side
    x = torch.cat([x, ties, torch.nextafter(ties, ties + 1), torch.nextafter(ties, ties - 1)])
    a, s = ops.rowmax_h15(x), ops.rowmax_h15_sat(x)
    differ = a != s
    two_x = 2.0 * x.double()
    to_tie = (two_x - torch.floor(two_x) - 0.5).abs()
    assert differ.float().mean() < 1e-4
    assert (to_tie[differ] <= 2.0 ** -15).all()
    ratio = (a[differ].double() / s[differ].double()).log2().abs()
    assert ((ratio - math.log2(1.5)).abs() < 1e-9).logical_or((ratio - math.log2(4 / 3)).abs() < 1e-9).all()
    assert torch.equal(ops.rowmax_h15_sat(ties), ops.rowmax_h15(ties))  # exact ties are exact in u too
    # masked, NaN and far-below inputs all give 2^-126; the top of A1's range (x = 127) is inside the span too
    special = torch.tensor([float("-inf"), float("nan"), -1e30, -300.0, -126.0, -126.25, 0.0, 8.0, 127.0])
    assert torch.equal(bits(ops.rowmax_h15_sat(special)), bits(ops.rowmax_h15(special)))


def test_saturated_construction_saturates_at_the_top_of_its_span_like_ffma_sat():
    """u = sat((2x + 252) / 512) stops at 1 (2x = 260), as FFMA.SAT does: every larger input, +inf included, gives
    the bits of x = 130 (an overflowed exponent field, as in the kernel, but the one FFMA.SAT gives)."""
    top = bits(ops.rowmax_h15_sat(torch.tensor([130.0])))
    above = torch.tensor([130.5, 200.0, 1e30, math.inf])
    assert torch.equal(bits(ops.rowmax_h15_sat(above)), top.expand(4))


# --- h15-folded: the magic add inside the scaling FMA ------------------------------------------------------------

LOG2_E = math.log2(math.e)
# softmax scales in log2 units: FA's 1/sqrt(d) at d = 128 and 64, and two powers of two, with which 2cs is often a
# half-integer, so that every rounding tie is exercised
SCALES = (LOG2_E / math.sqrt(128), LOG2_E / math.sqrt(64), 0.25, 1.0)


def test_fma_fp32_rounds_once():
    # (1 + 2^-23) + (1 + 2^-23)(2^-24 - 2^-47) = 1 + 2^-23 + 2^-24 - 2^-70, just under a midpoint of FP32: FP32's
    # product and float64's sum both round onto the midpoint, which then ties to the even 1 + 2^-22
    a = torch.tensor([1 + 2.0 ** -23])
    b = torch.tensor([2.0 ** -24 - 2.0 ** -47])
    assert b.double().item() == 2.0 ** -24 - 2.0 ** -47  # representable: the test is about the sum alone
    assert (a * b + a).item() == 1 + 2.0 ** -22
    assert (a.double() * b.double() + a.double()).float().item() == 1 + 2.0 ** -22
    assert ops.fma_fp32(a, b, a).item() == 1 + 2.0 ** -23
    # against exact rational arithmetic over magnitudes far apart, and the special values
    from fractions import Fraction

    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(2, 2000, generator=g) * torch.exp2(torch.randint(-30, 30, (2, 2000), generator=g).float())
    z = torch.randn(2000, generator=g) * 1e3
    got = ops.fma_fp32(x, y, z)
    for i in range(0, 2000, 7):
        exact = Fraction(x[i].item()) * Fraction(y[i].item()) + Fraction(z[i].item())
        mine = Fraction(got[i].item())
        for towards in (math.inf, -math.inf):
            neighbour = torch.nextafter(got[i], torch.tensor(towards)).item()
            assert abs(mine - exact) <= abs(Fraction(neighbour) - exact)
    inf = math.inf
    special = ops.fma_fp32(torch.tensor([-inf, 2.0, 1.0, 3e38]), torch.tensor([2.0, inf, math.nan, 10.0]),
                           torch.tensor([5.0, -inf, 0.0, 0.0]))
    assert special[0].item() == -inf and math.isnan(special[1].item()) and math.isnan(special[2].item())
    assert special[3].item() == inf


def _rows(seed: int, rows: int = 64, keys: int = 4096, spread: float = 40.0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(rows, keys, generator=g) * spread * torch.rand(rows, 1, generator=g)
    return s, s.amax(-1, keepdim=True)


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("offset", [0.0, 8.0])
def test_folded_weight_of_the_maximum_is_exact(scale, offset):
    s, m = _rows(1)
    w = ops.rowmax_h15_folded(s, m, scale, offset)
    assert (w.amax(-1) == 2.0 ** offset).all()
    assert (w.gather(-1, s.argmax(-1, keepdim=True)) == 2.0 ** offset).all()
    # maxima whose 2cm lies exactly half-way between lattice points (phase +-1/2): rne of the tie is 0 either way
    m_tie = (torch.arange(-40, 40, dtype=torch.float32) + 0.5) / 0.5  # 2cm = k + 1/2 at c = 0.25
    assert torch.equal(ops.rowmax_h15_folded(m_tie, m_tie, 0.25, offset), torch.full_like(m_tie, 2.0 ** offset))


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("offset", [0.0, 8.0])
def test_folded_is_the_float64_definition_bit_for_bit(scale, offset):
    s, m = _rows(2, rows=256)
    c2 = 2 * float(torch.tensor(scale))
    # scores half a lattice step from ties, on ties, and down across the clamp (n from -250 to -260)
    m_tie = torch.full((1, 1), 2.5)  # r = rne(2cm) odd at c = 0.25 and 1: ties of 2cs - r are not those of 2cs
    ties = (torch.arange(-600, 20).float() / 2 + 0.25) / c2 + m_tie
    clamp = torch.linspace(-261.0, -249.0, 20001) / c2 + m_tie
    odd = torch.tensor([[-math.inf]])
    beside = beside_ties(c2, torch.arange(-200, 200).double() + 0.5)  # for the scores' FMA and the bias's
    assert beside.numel() > 20 or c2 in (0.5, 2.0)  # a power of two makes every product exact: none exist
    cases = [(s, m), (ties[None], m_tie), (clamp[None], m_tie), (odd, m_tie), (beside[None], m_tie),
             (beside[:, None] - torch.arange(60.0) * 0.37, beside[:, None])]
    for scores, anchor in cases:
        got = bits(ops.rowmax_h15_folded(scores, anchor, scale, offset))
        want = bits(ops.rowmax_h15_folded_reference(scores, anchor, scale, offset))
        bad = (got != want).nonzero()
        assert bad.numel() == 0, f"first mismatch at s={scores[tuple(bad[0])].item()!r}"
    assert s.numel() > 1_000_000


@pytest.mark.parametrize("scale", SCALES[:2])
def test_folded_lattice_is_h15_shifted_by_the_anchor_phase(scale):
    """Against y = 2cs - rne(2cm) the weight is Rowmax-H15 (its envelope, tight); against x = c (s - m) it carries
    the row's phase (2cm - rne(2cm))/2 too, up to a quarter octave either way."""
    s, m = _rows(3, spread=6.0)
    w = ops.rowmax_h15_folded(s, m, scale).double()
    c = float(torch.tensor(scale))
    keep = s.double() * c - m.double() * c > -120  # clear of the clamp
    y = 2 * c * s.double() - torch.round(2 * c * m.double())
    err_y = (torch.log2(w) - y / 2)[keep]
    lo, hi = ops.half_octave_error_bounds()
    assert err_y.min() >= lo - 1e-9 and err_y.max() <= hi + 1e-9
    assert err_y.min() < lo + 1e-3 and err_y.max() > hi - 1e-3
    err_x = (torch.log2(w) - c * (s.double() - m.double()))[keep]
    assert err_x.min() >= lo - 0.25 - 1e-9 and err_x.max() <= hi + 0.25 + 1e-9
    assert err_x.min() < lo - 0.2 and err_x.max() > hi + 0.2  # the phase is there: not A1's lattice


def test_folded_is_a1_where_the_anchor_is_on_the_lattice():
    """2cm an integer (phase 0) and x = c (s - m) exact in FP32: the same weights as rowmax_h15(x) (+ FP8's 8)."""
    g = torch.Generator().manual_seed(4)
    s = torch.randint(-2000, 2000, (50_000,), generator=g).float() / 64
    m = torch.full((1,), 32.0)  # 2cm = 16 at c = 0.25
    x = (s - m) * 0.25
    assert torch.equal(ops.rowmax_h15_folded(s, m, 0.25), ops.rowmax_h15(x))
    assert torch.equal(ops.rowmax_h15_folded(s, m, 0.25, 8.0), ops.rowmax_h15(x + 8.0))


def test_folded_clamp_gives_zero_below_the_lattice_and_to_masked_keys():
    m = torch.zeros(1)
    n = torch.tensor([-250.0, -252.0, -253.0, -254.0, -255.0, -300.0, -1e6])  # 2cs - r at c = 0.5: s = n
    w = ops.rowmax_h15_folded(n, m, 0.5)
    assert w.tolist() == [2.0 ** -125, 2.0 ** -126, 2.0 ** -127, 0.0, 0.0, 0.0, 0.0]
    # the clamp-free form is the same down to n = -254 and garbage below (why unproved tiles keep the clamp)
    free = ops.rowmax_h15_folded(n, m, 0.5, clamp=False)
    assert torch.equal(free[:4], w[:4])
    assert math.isnan(free[4].item()) and free[5].item() < 0  # the field wraps: NaN, a negative weight
    # masked (-inf) and NaN scores: weight 0 through the clamp; -inf also without it (its bits shift to 0)
    special = torch.tensor([-math.inf, math.nan])
    assert ops.rowmax_h15_folded(special, m, 0.5).tolist() == [0.0, 0.0]
    assert ops.rowmax_h15_folded(special[:1], m, 0.5, clamp=False).tolist() == [0.0]
    assert f32_bits(ops.MAGIC) & 0x3FF == 0  # the clamp value's shifted bits are the weight 0


@pytest.mark.parametrize("scale", SCALES)
def test_folded_rescale_is_the_ratio_of_the_two_anchors(scale):
    g = torch.Generator().manual_seed(6)
    m_old = torch.randn(10_000, generator=g) * 30
    m_new = m_old + torch.rand(10_000, generator=g) * 20
    alpha = ops.rowmax_h15_folded_rescale(m_old, m_new, scale, 8.0).double()
    c2 = 2 * float(torch.tensor(scale))
    want = torch.exp2((torch.round(c2 * m_old.double()) - torch.round(c2 * m_new.double())) / 2)
    torch.testing.assert_close(alpha, want, rtol=2.0 ** -23, atol=0)
    # not the exact exp2 of the max difference, which the element maps use
    assert (alpha / torch.exp2(c2 / 2 * (m_old.double() - m_new.double())) - 1).abs().max() > 0.1
    assert ops.rowmax_h15_folded_rescale(torch.tensor([-math.inf]), torch.tensor([1.0]), scale).item() == 0.0
    assert torch.equal(ops.rowmax_h15_folded_rescale(m_new, m_new, scale), torch.ones_like(m_new))


# --- the hybrids h15-1of2 and h15-1of4: Rowmax-H15 on part of the keys ---------------------------------------

@pytest.mark.parametrize("every, picked", [(2, [1, 3, 5, 7, 9, 11, 13, 15]), (4, [9, 11, 13, 15])])
def test_hybrid_picks_one_key_in_every(every, picked):
    keys = torch.arange(4096)
    picks = ops.hybrid_picks(keys, every)
    assert picks.float().mean().item() == 1 / every
    assert keys[:16][picks[:16]].tolist() == picked and torch.equal(picks[16:32], picks[:16])
    # the sm_80/sm_90 accumulator: lane t of a quad holds keys 8 i + 2 t + j; the last of each `every` it holds
    for t in range(4):
        held = torch.tensor([8 * i + 2 * t + j for i in range(8) for j in range(2)])
        assert torch.equal(picks[held], torch.arange(held.numel()) % every == every - 1)


def test_hybrid_is_h15_on_its_keys_and_exp2_on_the_others():
    x = torch.linspace(-30.0, 0.0, 16 * 1000).view(1000, 16)
    keys = torch.arange(16)
    for every in (2, 4):
        w = ops.rowmax_h15_hybrid(x, keys, every)
        picks = ops.hybrid_picks(keys, every)
        assert torch.equal(w[:, picks], ops.rowmax_h15(x[:, picks]))
        assert torch.equal(w[:, ~picks], torch.exp2(x[:, ~picks]))
