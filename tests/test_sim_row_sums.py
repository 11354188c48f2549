"""Row sums of P as P.V reads it (sim_attention's sum_rounded, the Gluon kernel's row sums on the tensor core,
GluonConfig.row_sum "mma"): the normalizer is then the sum of the very weights O was built from, so attention to a
constant V returns that constant, where FP32 sums of the unrounded weights miss it by the rounding of P."""

import torch

from softbench.kernels.refs import reference_rows
from softbench.kernels.sim import LOG2_E, sim_attention
from softbench.operators import no_exp, rowmax_h15


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


# --- sim_attention's other rules, against whole-row FP32 attention and at the rescale threshold's boundary -------

def test_exact_map_is_whole_row_attention_for_gqa_and_unequal_lengths():
    """The exact map through the tiles is FP32 attention itself (softbench.kernels.refs.reference_rows): query
    heads read their own kv head (4 query heads on 2 kv heads: heads 0 and 1 read kv head 0), and with
    seq_q != seq_k the causal mask is aligned bottom-right, as FA4's (queries before the first key give 0)."""
    g = torch.Generator().manual_seed(11)
    for sq, sk in ((96, 300), (200, 200), (300, 96)):
        q = torch.randn(1, sq, 4, 32, generator=g)
        k, v = torch.randn(2, 1, sk, 2, 32, generator=g)
        out = sim_attention(q, k, v, True, exact_exp2, tile=64, out_dtype=torch.float32)
        want = torch.nan_to_num(reference_rows(q, k, v, True, torch.arange(sq)), nan=0.0)
        torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
        assert (out[:, : max(sq - sk, 0)] == 0).all()
    # Rowmax-H15 gives a masked score 2^-126, not 0: a row without any key must still give 0, not V's mean
    out = sim_attention(q, k, v, True, rowmax_h15, tile=64, out_dtype=torch.float32)  # seq_q 300, seq_k 96
    assert (out[:, :204] == 0).all() and (out[:, 204:] != 0).all()


def test_a_maximum_grown_by_exactly_the_threshold_is_kept():
    """rescale_threshold tau: the rescale is skipped while the row maximum grows by at most tau octaves (FA4's
    acc_scale >= -tau), the boundary included. The identity map (noexp) shows the anchor in force in O."""
    q = torch.ones(1, 1, 1, 1)
    k = torch.tensor([0.0, -1.0, 3.0, 2.0]).view(1, 4, 1, 1)  # tile 0's maximum 0, tile 1's 3
    v = torch.arange(1.0, 5.0).view(1, 4, 1, 1)
    growth = torch.tensor([3.0]) * LOG2_E  # (3 - 0) c in FP32, as the simulation computes it (softmax_scale 1)
    below, above = (torch.nextafter(growth, torch.tensor([t])) for t in (0.0, 9.0))

    def out(tau):
        return sim_attention(q, k, v, False, no_exp, softmax_scale=1.0, tile=2, rescale_threshold=tau.item()).item()

    # kept: weights 0, -c, 3c, 2c against the old maximum, O = (0 - 2c + 9c + 8c) / 4c
    assert out(growth) == out(above) == 3.75
    assert out(below) != 3.75  # grown by more than tau: rescaled
