"""The hybrids h15-1of2 and h15-1of4 (Rowmax-H15 on part of the keys, exp2 on the rest) in softbench's Triton
forward, through Triton's interpreter (TRITON_INTERPRET=1 before triton is imported, as in test_triton_attn): the
kernels' shared tile step picks softbench.operators.hybrid_picks' keys, whole forwards match the simulation, and
on sm_90a (cross-compiled, both kernels) each score computes one map: MUFU.EX2 on the others only."""

import json
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
from softbench.kernels.sim import HYBRIDS, sim_attention  # noqa: E402

from tile_step import COLS, ROWS, TILES, run_tiles  # noqa: E402

FP8 = torch.float8_e4m3fn
C = ta.KernelConfig
HYBRID = {"h15-1of2": 2, "h15-1of4": 4}


@pytest.mark.parametrize("variant", sorted(HYBRID))
@pytest.mark.parametrize("offset, mask", [(0.0, False), (8.0, True)])
def test_tile_step_takes_h15_on_the_picked_keys_and_exp2_on_the_others(variant, offset, mask):
    g = torch.Generator().manual_seed(2)
    s = torch.randn(TILES, ROWS, COLS, generator=g) * 8 + torch.arange(TILES).view(TILES, 1, 1) * 4.0
    scale = ta.log2_scale(64, None, (1.0, 1.0, 1.0))
    p, m, alpha = run_tiles(s, scale, mask, variant, offset)
    c = torch.tensor(scale, dtype=torch.float32)
    m_log2 = torch.cummax(s.amax(-1) * c, 0).values  # the running maximum in log2 units, as the kernel keeps it
    m_use = (m_log2 - offset)[..., None]
    picks = ops.hybrid_picks(torch.arange(COLS), HYBRID[variant])
    # A1's arithmetic where picked (2x = s * 2c - 2m, two roundings here as in the interpreter), exp2 elsewhere
    h15 = ops.rowmax_h15_from_doubled(s * (2.0 * c) - 2.0 * m_use)
    assert torch.equal(p[..., picks].view(torch.int32), h15[..., picks].view(torch.int32))
    torch.testing.assert_close(p[..., ~picks], torch.exp2(s * c - m_use)[..., ~picks], rtol=2.0 ** -22, atol=0)
    assert not torch.equal(h15[..., ~picks], p[..., ~picks])  # the two maps differ there: the pick is seen
    assert torch.equal(m, m_log2)
    torch.testing.assert_close(alpha[1:], torch.exp2(m_log2[:-1] - m_log2[1:]), rtol=2.0 ** -22, atol=0)


CASES = [
    pytest.param(torch.bfloat16, True, 4, 2, 64, 256, C(64, 64, 4, 2), id="bf16-causal-gqa-d64"),
    pytest.param(torch.float16, False, 2, 1, 128, 200, C(32, 16, 4, 2), id="fp16-noncausal-mqa-d128-ragged"),
    pytest.param(FP8, True, 4, 1, 64, 256, C(64, 64, 4, 2, v_kmajor=True), id="fp8-causal-gqa-d64-vkmajor"),
]


@pytest.mark.parametrize("dtype, causal, heads, kv_heads, head_dim, seq, config", CASES)
def test_forwards_match_the_simulation_and_sit_between_a0_and_a1(dtype, causal, heads, kv_heads, head_dim, seq,
                                                                 config):
    """Against the simulation as A1 is (the interpreter rounds 2x twice where FFMA rounds once: a near-tie weight
    can flip by 1.5); against exact attention the error grows with the share of Rowmax-H15 keys."""
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, seq, h, head_dim, generator=g).to(dtype) for h in (heads, kv_heads, kv_heads))
    ref = reference_rows(q, k, v, causal, torch.arange(seq))
    error = {}
    for variant in ("A0", "h15-1of4", "h15-1of2", "A1"):
        out = ta.attention(q, k, v, causal, variant, config)
        error[variant] = relative_error(out, ref)
        if variant in HYBRID:
            sim = sim_attention(q, k, v, causal, HYBRIDS[HYBRID[variant]], tile=config.block_n)
            assert relative_error(out, sim) < 1e-3, variant
    assert error["A0"] < error["h15-1of4"] < error["h15-1of2"] < error["A1"], error
    assert error["h15-1of4"] > 1.5 * error["A0"], error


def _bundled_ptxas() -> bool:
    from softbench.kernels.triton_compile import _bundled_tool

    return _bundled_tool("ptxas") is not None


def _report(dtype: str, variant: str, *label: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-m", "softbench.kernels.triton_compile", dtype, "128", variant, "--causal",
                        *(("--label", *label) if label else ())], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


@pytest.mark.skipif(not _bundled_ptxas(), reason="Triton's bundled ptxas is missing")
@pytest.mark.parametrize("label, scores", [((), 64), (("gluon-n128s4-c240l24-hg8",), 128)],
                         ids=["triton-fp8-table", "gluon-fp8"])
def test_each_score_computes_one_map(label, scores):
    """FP8 on sm_90a: per key tile and thread, `scores` weights (the Gluon loop holds the masked and unmasked
    branches, 64 each): MUFU.EX2 on 3/4 or 1/2 of them, the same scaling FFMAs as A0 (none computed twice), and A1's
    clamp on the rest."""
    a0 = _report("fp8", "A0", *label)
    for variant, every in HYBRID.items():
        rep = _report("fp8", variant, *label)
        assert rep["stack_bytes"] == 0 and rep["spill_stores"] == 0 and rep["ptxas_advisories"] == [], rep
        assert rep["loop_mufu_ex2"] - (a0["loop_mufu_ex2"] - scores) == scores - scores // every, (a0, rep)
        assert rep["loop_ffma"] == a0["loop_ffma"], (a0, rep)
        assert rep["loop_fmnmx"] - a0["loop_fmnmx"] == scores // every, (a0, rep)
