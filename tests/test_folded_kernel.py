"""h15-folded in softbench's Triton forward, through Triton's interpreter (TRITON_INTERPRET=1, set before triton is
imported, as in test_triton_attn; softbench.kernels.triton_interpret makes tl.fma round once, as FFMA does):
the per-tile step the Triton and Gluon kernels share (triton_attn._tile_weights) against
softbench.operators.rowmax_h15_folded bit for bit; whole forwards against the simulation; probabilities read
back through one-hot V on the final anchor's lattice; both sides of the clamp's proof. One test cross-compiles the
Triton-language kernel for sm_90a to count the weight's instructions (the Gluon kernel's: test_gluon_attn)."""

import json
import math
import os
import subprocess
import sys

os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton

import pytest
import torch

pytest.importorskip("triton")

from softbench import operators as ops  # noqa: E402
from softbench.kernels import triton_attn as ta  # noqa: E402
from softbench.kernels.refs import reference_rows, relative_error  # noqa: E402
from softbench.kernels.sim import H15_FOLDED, probabilities_via_one_hot, sim_attention  # noqa: E402

from folded_inputs import beside_ties  # noqa: E402
from tile_step import COLS, ROWS, TILES, run_tiles  # noqa: E402

FP8 = torch.float8_e4m3fn
C = ta.KernelConfig


def _run_tiles(s: torch.Tensor, scale: float, mask: bool, offset: float):
    return run_tiles(s, scale, mask, "h15-folded", offset)


def _score_tiles(seed: int, scale: float) -> torch.Tensor:
    """Score tiles whose row maxima grow from tile to tile (rescales happen), with keys on rounding ties at the
    power-of-two scale and, at the other, scores and row maxima beside ties (folded_inputs.beside_ties)."""
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(TILES, ROWS, COLS, generator=g) * 6 + torch.arange(TILES).view(TILES, 1, 1) * 10.0
    s[:, :, :4] = torch.randint(-40, 40, (TILES, ROWS, 4), generator=g).float()  # 2cs = s/2 at c = 0.25: ties
    c2 = 2 * float(torch.tensor(scale))
    low, high = beside_ties(c2, torch.arange(-60, 0) + 0.5), beside_ties(c2, torch.arange(60, 100) + 0.5)
    if low.numel():
        s[:, :, 8:16] = low[torch.randint(0, low.numel(), (TILES, ROWS, 8), generator=g)]
        s[:, :ROWS // 2, 16] = high[torch.randint(0, high.numel(), (TILES, ROWS // 2), generator=g)]  # the maxima
    return s


@pytest.mark.parametrize("scale", [ta.log2_scale(128, None, (1.0, 1.0, 1.0)), 0.25])
@pytest.mark.parametrize("offset", [0.0, 8.0])
@pytest.mark.parametrize("mask", [False, True])
def test_tile_step_is_the_operator_bit_for_bit(scale, offset, mask):
    s = _score_tiles(1, scale)
    if mask:  # masked keys and keys far under the maximum, which only the masked branch's clamp handles
        s[:, :, 5] = -math.inf
        s[1, :, 6] = -5000.0
    p, m, alpha = _run_tiles(s, scale, mask, offset)
    m_want = torch.cummax(s.amax(-1), 0).values  # the running maximum, raw units
    assert torch.equal(m, m_want)
    m_prev = torch.cat([torch.full((1, ROWS), -math.inf), m_want[:-1]])
    w = ops.rowmax_h15_folded(s, m_want[..., None], scale, offset, clamp=mask)
    assert torch.equal(p.view(torch.int32), w.view(torch.int32))
    if mask:
        assert (p[:, :, 5] == 0).all() and (p[1, :, 6] == 0).all()
    # the rescale: exp2 of the exact bias difference (NumPy's exp2 here, torch's in the operator; MUFU on a GPU)
    torch.testing.assert_close(alpha, ops.rowmax_h15_folded_rescale(m_prev, m_want, scale, offset),
                               rtol=2.0 ** -23, atol=0)
    assert (alpha[0] == 0).all() and ((alpha[1:] < 1).float().mean() > 0.25)  # the maximum moved, often


def test_unmasked_step_has_no_clamp():
    """Why programs without the proof take the masked branch: there a score ~600 log2 units under the maximum
    gives weight 0, in the clamp-free branch whatever the wrapped exponent field says."""
    scale = ta.log2_scale(128, None, (1.0, 1.0, 1.0))
    s = _score_tiles(2, scale)
    s[2, :, 7] = -5000.0
    masked, _, _ = _run_tiles(s, scale, True, 0.0)
    free, _, _ = _run_tiles(s, scale, False, 0.0)
    assert (masked[2, :, 7] == 0).all() and not (free[2, :, 7] == 0).all()
    other = torch.ones_like(s, dtype=torch.bool)
    other[2, :, 7] = False
    assert torch.equal(masked[other], free[other])


def _lazy_anchors(s: torch.Tensor, scale: float, lazy: float) -> torch.Tensor:
    """The anchor after each tile under the simulation's rule (softbench.kernels.sim, rescale_threshold): kept
    while (max(anchor, tile's maximum) - anchor) c <= lazy, else the running maximum."""
    anchors, m = [], torch.full((ROWS,), -math.inf)
    c = torch.tensor(scale, dtype=torch.float32)
    for tile in s.amax(-1):
        moved = torch.isneginf(m) | ((torch.maximum(m, tile) - m) * c > lazy)
        m = torch.where(moved, torch.maximum(m, tile), m)
        anchors.append(m)
    return torch.stack(anchors)


@pytest.mark.parametrize("mask", [False, True])
def test_lazy_anchor_step_is_the_operator_on_the_anchor_in_force(mask):
    """GluonConfig.rescale "lazy-anchor" (-rla): the step's anchor moves only where a tile's maximum passes it by
    more than 2 octaves, the weights are the operator's on that anchor bit for bit, and O's factor is exactly 1
    wherever the anchor stayed (so the kernel's warps jump over the multiply), the ratio of the two lattices
    where it moved."""
    scale, offset, lazy = ta.log2_scale(128, None, (1.0, 1.0, 1.0)), 6.0, 2.0
    g = torch.Generator().manual_seed(5)
    # row maxima that creep up by less than the threshold in most tiles and jump past it in some
    s = torch.randn(TILES, ROWS, COLS, generator=g) * 4 + torch.randint(0, 3, (TILES, ROWS, 1), generator=g) * 20.0
    if mask:
        s[:, :, 5] = -math.inf
    p, m, alpha = run_tiles(s, scale, mask, "h15-folded", offset, lazy)
    want = _lazy_anchors(s, scale, lazy)
    assert torch.equal(m, want)
    w = ops.rowmax_h15_folded(s, want[..., None], scale, offset, clamp=mask)
    assert torch.equal(p.view(torch.int32), w.view(torch.int32))
    kept = torch.cat([torch.zeros(1, ROWS, dtype=torch.bool), want[1:] == want[:-1]])
    assert kept.any() and (~kept[1:]).any()  # both happen on these tiles
    assert (alpha[kept] == 1.0).all()
    m_prev = torch.cat([torch.full((1, ROWS), -math.inf), want[:-1]])
    torch.testing.assert_close(alpha[1:], ops.rowmax_h15_folded_rescale(m_prev, want, scale, offset)[1:],
                               rtol=2.0 ** -23, atol=0)
    running = torch.cummax(s.amax(-1), 0).values
    assert (m < running).any() and (p.amax(-1) <= 1.5 * 2.0 ** (lazy + offset)).all()  # 384: E4M3 holds it


def test_lazy_anchor_keeps_h15_foldeds_error_at_fp8():
    """The lazy anchor (threshold 2, offset 6) in the simulation at FP8 against exact FP32 attention, beside
    h15-folded's own (exact running maximum, offset 8): the same Rowmax-H15 error to within 10% on 2048 keys of
    random inputs, causal and not, but not the same bits (other anchors, other phases)."""
    q, k, v = draw(FP8, 2, 2, 128, 2048, seed=3)
    for causal in (True, False):
        ref = reference_rows(q, k, v, causal, torch.arange(2048))
        usual = sim_attention(q, k, v, causal, H15_FOLDED, tile=128)
        lazy = sim_attention(q, k, v, causal, H15_FOLDED, tile=128, rescale_threshold=2.0, max_offset=6.0)
        e_usual, e_lazy = relative_error(usual, ref), relative_error(lazy, ref)
        assert 0.9 * e_usual <= e_lazy <= 1.1 * e_usual, (causal, e_usual, e_lazy)
        assert not torch.equal(usual, lazy)


def draw(dtype, heads, kv_heads, head_dim, seq, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, seq, h, head_dim, generator=g).to(dtype) for h in (heads, kv_heads, kv_heads))


def assert_simulated(out: torch.Tensor, sim: torch.Tensor) -> None:
    """The kernel's output is the simulation's but for the summation order of Q.K^T and P.V: a few outputs (under
    1 in 1000) one rounding step of the output dtype apart. A weight off by a lattice step, or a rescale off by a
    phase, moves whole rows by many steps."""
    assert out.dtype == sim.dtype
    o, s = out.float(), sim.float()
    differ = o != s
    assert differ.float().mean() < 1e-3, f"{int(differ.sum())} of {differ.numel()} outputs differ"
    step = torch.finfo(out.dtype).eps * s.abs() + 1e-6
    assert ((o - s).abs() <= step)[differ].all()


CASES = [
    pytest.param(torch.bfloat16, True, 4, 2, 64, 256, C(64, 64, 4, 2), id="bf16-causal-gqa-d64"),
    pytest.param(torch.float16, True, 2, 1, 128, 130, C(32, 16, 4, 2), id="fp16-causal-mqa-d128-ragged"),
    pytest.param(FP8, True, 4, 1, 64, 256, C(64, 64, 4, 2, v_kmajor=True), id="fp8-causal-gqa-d64-vkmajor"),
    pytest.param(FP8, False, 2, 2, 128, 192, C(64, 64, 4, 2, v_kmajor=False), id="fp8-noncausal-d128-vrows"),
]


@pytest.mark.parametrize("dtype, causal, heads, kv_heads, head_dim, seq, config", CASES)
def test_forward_matches_the_simulation(dtype, causal, heads, kv_heads, head_dim, seq, config):
    q, k, v = draw(dtype, heads, kv_heads, head_dim, seq, seed=1)
    out = ta.attention(q, k, v, causal, "h15-folded", config)
    assert_simulated(out, sim_attention(q, k, v, causal, H15_FOLDED, tile=config.block_n))
    # a Rowmax-H15 approximation, not A1's lattice and not exact attention
    ref = reference_rows(q, k, v, causal, torch.arange(seq))
    a1 = ta.attention(q, k, v, causal, "A1", config)
    assert 0.02 < relative_error(out, ref) < 0.2 and relative_error(out, a1) > 0.02


def test_probabilities_sit_on_the_final_anchors_lattice():
    """Read back through one-hot V: each key's probability over the final maximum's is Rowmax-H15 of
    2cs - rne(2cm) with m the final maximum, across the rescales of four key tiles (the maximum grows along the
    sequence). Scores are exact in FP32 whatever the summation order (multiples of 1/64 below 2^8), so the test's
    own scores are the kernel's."""
    seq, d = 256, 64
    g = torch.Generator().manual_seed(3)
    q = torch.randint(-8, 9, (1, seq, 2, d), generator=g).float() / 8
    k = torch.randint(-8, 9, (1, seq, 1, d), generator=g).float() / 8
    q[..., 0] = 2.0  # every row's scores grow along the keys by 2 k_0, k_0 from 0 to 16 in steps of 1/8
    k[0, :, 0, 0] = torch.floor(torch.arange(seq) * (128 / seq)) / 8
    q, k = q.half(), k.half()
    cfg = C(64, 64, 4, 2)
    p = probabilities_via_one_hot(lambda v: ta.attention(q, k, v, False, "h15-folded", cfg), seq, q[:, :, :1]
                                  ).double()[0].transpose(0, 1)  # (heads, rows, keys)
    s = torch.einsum("qhd,khd->hqk", q[0].double(), k[0].double().expand(seq, 2, d))
    c = float(torch.tensor(ta.log2_scale(d, None, (1.0, 1.0, 1.0))))
    top = s.argmax(-1, keepdim=True)
    assert (top // 64 >= 2).float().mean() > 0.9  # most rows' final maximum lies two rescales on
    y = 2 * c * s - torch.round(2 * c * s.gather(-1, top))
    err = torch.log2(p / p.gather(-1, top)) - y / 2
    lo, hi = ops.half_octave_error_bounds()
    rounding = 2.0 ** -10  # two FP16 outputs in the ratio, in log2
    assert err.min() >= lo - rounding and err.max() <= hi + rounding
    assert err.min() < lo + 0.01 and err.max() > hi - 0.01


@pytest.mark.parametrize("dtype, causal, config", [
    (torch.bfloat16, False, C(64, 64, 4, 2)),
    (FP8, True, C(64, 64, 4, 2, v_kmajor=True, tma=True)),
])
def test_both_sides_of_the_bound_match_the_simulation(dtype, causal, config):
    """Norms within the bound: unmasked tiles run without the clamp; keys of large norm, or one key ~570 log2
    units under its row's maximum: every tile through the clamp, whose weight 0 the simulation gives too (the
    clamp-free branch would put garbage there)."""
    q, k, v = draw(dtype, 2, 1, 64, 192, seed=6)
    big = (k.float() * 12.0).to(dtype)
    far = k.float().clone()
    far[0, 3, 0] = -50.0 * q.float()[0, 0, 0]
    for keys in (k, big, far.to(dtype)):
        out = ta.attention(q, keys, v, causal, "h15-folded", config)
        assert torch.isfinite(out.float()).all()
        assert_simulated(out, sim_attention(q, keys, v, causal, H15_FOLDED, tile=config.block_n))


@pytest.mark.parametrize("mask", [False, True])
def test_clamped_form_clamps_every_tile(mask):
    """h15-folded-clamped: the step's weights are the operator's with its clamp, masked tile or not, so a score
    ~600 log2 units under the maximum weighs 0 without any proof (h15-folded's unmasked branch, which relies on
    the proof, puts garbage there: test_unmasked_step_has_no_clamp); the maximum and O's factor as h15-folded's."""
    scale = ta.log2_scale(128, None, (1.0, 1.0, 1.0))
    s = _score_tiles(2, scale)
    s[2, :, 7] = -5000.0
    p, m, alpha = run_tiles(s, scale, mask, "h15-folded-clamped", 8.0)
    m_want = torch.cummax(s.amax(-1), 0).values
    w = ops.rowmax_h15_folded(s, m_want[..., None], scale, 8.0, clamp=True)
    assert torch.equal(p.view(torch.int32), w.view(torch.int32)) and (p[2, :, 7] == 0).all()
    _, m_folded, alpha_folded = _run_tiles(s, scale, mask, 8.0)
    assert torch.equal(m, m_folded) and torch.equal(alpha, alpha_folded)


@pytest.mark.parametrize("dtype, causal, config", [
    (torch.bfloat16, False, C(64, 64, 4, 2)),
    (FP8, True, C(64, 64, 4, 2, v_kmajor=True, tma=True)),
])
def test_clamped_form_is_h15_folded_without_the_proof(dtype, causal, config):
    """The whole forward of h15-folded-clamped is h15-folded's bit for bit on both sides of the bound (norms
    within it; keys of large norm; one key far under its row's maximum), where h15-folded proves the clamp idle
    or takes the clamped branch, and it runs no key-norm pass."""
    q, k, v = draw(dtype, 2, 1, 64, 192, seed=6)
    far = k.float().clone()
    far[0, 3, 0] = -50.0 * q.float()[0, 0, 0]
    for keys in (k, (k.float() * 12.0).to(dtype), far.to(dtype)):
        out = ta.attention(q, keys, v, causal, "h15-folded-clamped", config)
        assert torch.equal(out.view(torch.uint8), ta.attention(q, keys, v, causal, "h15-folded",
                                                             config).view(torch.uint8))
    assert "h15-folded-clamped" not in ta.NORM_BOUND_VARIANTS


def test_fp8_descale_factors_are_applied():
    q, k, v = draw(FP8, 2, 1, 64, 128, seed=4)
    descale = (0.5, 2.5, 3.0)
    cfg = C(64, 64, 4, 2, v_kmajor=True)
    out = ta.attention(q, k, v, True, "h15-folded", cfg, descale=descale)
    assert_simulated(out, sim_attention(q, k, v, True, H15_FOLDED, tile=64, descale=descale))
    assert relative_error(out, ta.attention(q, k, v, True, "h15-folded", cfg)) > 0.1


def _bundled_ptxas() -> bool:
    from softbench.kernels.triton_compile import _bundled_tool

    return _bundled_tool("ptxas") is not None


@pytest.mark.skipif(not _bundled_ptxas(), reason="Triton's bundled ptxas is missing")
def test_hopper_loop_takes_two_instructions_per_score():
    """The table's FP8 and BF16 configurations for sm_90a: the unmasked loop's weights are the scaling FFMA and the
    shift, where A0 has the FFMA and MUFU.EX2 (and h15-proved an FADD more); per-row work apart."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}

    def report(dtype, variant):
        r = subprocess.run([sys.executable, "-m", "softbench.kernels.triton_compile", dtype, "128", variant,
                            "--causal"], capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        return json.loads(r.stdout)

    for dtype, scores in (("fp8", 64), ("bf16", 32)):  # scores per thread and key tile
        a0, proved, folded = report(dtype, "A0"), report(dtype, "h15-proved"), report(dtype, "h15-folded")
        assert folded["stack_bytes"] == 0 and folded["spill_stores"] == 0, folded
        assert folded["loop_mufu_ex2"] <= 2 and folded["loop_shift"] == scores, folded
        assert 0 <= folded["loop_ffma"] - a0["loop_ffma"] < 8, (a0, folded)  # the scaling FFMA is the weight's
        assert folded["loop_fadd"] - a0["loop_fadd"] < 8 and proved["loop_fadd"] - folded["loop_fadd"] >= scores - 8
        assert folded["loop_fmnmx"] == a0["loop_fmnmx"]  # the row maximum only: no clamp in the unmasked loop
        # per score: A0's MUFU.EX2 became the shift, nothing else; the rest is per row
        assert abs(folded["loop_instructions"] - a0["loop_instructions"]) < 24, (a0, folded)


def test_cross_compile_tool_refuses_a_bad_label_in_one_sentence():
    r = subprocess.run([sys.executable, "-m", "softbench.kernels.triton_compile", "fp8", "128", "A1", "--label",
                        "m128"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("error: not a Triton configuration label: 'm128'")
