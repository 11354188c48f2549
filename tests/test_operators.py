"""Rowmax-H15 in torch against an independent definition of paper Eq. 5, bit for bit."""

import math
import struct

import pytest
import torch

from softbench import operators as ops


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
