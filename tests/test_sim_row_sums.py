"""Row sums of P as P.V reads it (sim_attention's sum_rounded, the Gluon kernel's row sums on the tensor core,
GluonConfig.row_sum "mma"): the normalizer is then the sum of the very weights O was built from, so attention to a
constant V returns that constant, where FP32 sums of the unrounded weights miss it by the rounding of P."""

import torch

from softbench.kernels.sim import sim_attention


def exact_exp2(x):
    return torch.exp2(x)


def _inputs(dtype, seq=512, heads=2, d=64, seed=3):
    g = torch.Generator().manual_seed(seed)
    q = (torch.randn(1, seq, heads, d, generator=g) * 2).to(dtype)
    k = torch.randn(1, seq, heads, d, generator=g).to(dtype)
    v = torch.ones(1, seq, heads, d).to(dtype)  # exactly 1 in every dtype
    return q, k, v


def _miss(dtype, sum_rounded: bool, causal: bool) -> float:
    q, k, v = _inputs(dtype)
    out = sim_attention(q, k, v, causal, exact_exp2, tile=128, out_dtype=torch.float32, sum_rounded=sum_rounded)
    return float((out - 1).abs().max())


def test_sums_of_rounded_p_return_a_constant_v_at_fp8():
    for causal in (True, False):
        assert _miss(torch.float8_e4m3fn, True, causal) < 1e-5
        # E4M3 keeps 3 bits of P: FP32 sums of the unrounded weights are off by parts in a thousand
        assert _miss(torch.float8_e4m3fn, False, causal) > 1e-3


def test_sums_of_rounded_p_return_a_constant_v_at_bf16():
    assert _miss(torch.bfloat16, True, True) < 1e-5
    assert _miss(torch.bfloat16, False, True) > _miss(torch.bfloat16, True, True)


def test_sum_rounded_changes_only_the_normalizer():
    """Both forms weigh V alike: their outputs differ by one factor per row (the two normalizers' ratio)."""
    g = torch.Generator().manual_seed(5)
    q, k, _ = _inputs(torch.float8_e4m3fn)
    v = torch.randn(1, 512, 2, 64, generator=g).to(torch.float8_e4m3fn)
    a, b = (sim_attention(q, k, v, True, exact_exp2, tile=128, out_dtype=torch.float32, sum_rounded=r)
            for r in (False, True))
    ratio = a / b
    spread = (ratio.amax(-1) - ratio.amin(-1)).abs().max()
    assert spread < 1e-5 and float((ratio - 1).abs().max()) > 1e-4
