"""softbench.kernels.fp8_scaling: a 16-bit tensor into E4M3 with one scale, as the FP8 kernel path feeds the forward."""

import pytest
import torch

from softbench.kernels.fp8_scaling import E4M3, E4M3_MAX, operands, to_e4m3


def test_largest_magnitude_lands_on_448_and_the_rest_round_to_e4m3():
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(2, 64, 4, 32, generator=g) * 0.03).to(torch.bfloat16)  # small, as a model's keys can be
    x8, s = to_e4m3(x)
    assert x8.dtype == E4M3 and s == pytest.approx(float(x.abs().max()) / 448)
    assert float(x8.float().abs().max()) == E4M3_MAX == 448.0
    back = x8.float() * s
    normal = x.float().abs() >= s * 2.0 ** -6  # E4M3's normals: 3 mantissa bits, half an ULP at most 2^-4 relative
    assert torch.all((back - x.float()).abs()[normal] <= x.float().abs()[normal] * 2.0 ** -4)
    # without the scale the same tensor would have lost most of its values to E4M3's subnormals and zero
    assert (x.to(E4M3).float() == 0).sum() > 0 and (x8.float() == 0).sum() < (x.to(E4M3).float() == 0).sum()


def test_zeros_take_scale_one_and_nonfinite_values_are_refused():
    x8, s = to_e4m3(torch.zeros(3, 5))
    assert s == 1.0 and torch.all(x8.float() == 0)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="cannot scale"):
            to_e4m3(torch.tensor([1.0, bad]))


def test_operands_scale_each_tensor_on_its_own():
    q, k, v = torch.ones(4) * 2, torch.ones(4) * 0.5, torch.ones(4) * 10
    q8, k8, v8, descale = operands(q, k, v)
    assert descale == pytest.approx((2 / 448, 0.5 / 448, 10 / 448))
    assert all(float(t.float().max()) == 448 for t in (q8, k8, v8))


def test_each_element_is_the_e4m3_nearest_to_its_scaled_value():
    """x / s is computed in FP32 and rounded to E4M3 once: every element lies within half an E4M3 step of x / s.
    Dividing in BF16 first would round twice, and some elements would land a step off."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(2, 64, 4, 32, generator=g) * 0.03).to(torch.bfloat16)
    x8, s = to_e4m3(x)
    scaled = x.double() / s
    # E4M3 keeps 3 mantissa bits: a step of 2^(e-3) in the binade [2^e, 2^(e+1)); below 2^-6 (subnormals) 2^-9
    exponent = torch.floor(torch.log2(scaled.abs().clamp(min=2.0 ** -6)))
    half_step = 2.0 ** (exponent - 4)
    # the slack covers FP32's own rounding of the division, nothing more
    assert torch.all((x8.double() - scaled).abs() <= half_step * (1 + 2.0 ** -20))
