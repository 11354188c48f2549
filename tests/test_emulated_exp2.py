"""A0's exponentials partly emulated on the FMA pipe (GluonConfig.emulate, label -e<N>): the operator in torch
(softbench.operators.exp2_emulated), the kernels' shared tile step through Triton's interpreter (TRITON_INTERPRET=1
before triton is imported, as in test_triton_attn), the label, and the sm_90a cross-compile: one MUFU.EX2 in N
gone from A0's loop, about seven FMA-pipe instructions in its place, every other variant's loop unchanged."""

import math
import os

os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton

import pytest
import torch

pytest.importorskip("triton")

from softbench import operators as ops  # noqa: E402
from softbench.core.errors import UsageError  # noqa: E402
from softbench.kernels import gluon_attn as ga  # noqa: E402
from softbench.kernels import triton_attn as ta  # noqa: E402
from softbench.kernels.gluon_config import GluonConfig  # noqa: E402

from tile_step import COLS, ROWS, TILES, run_tiles  # noqa: E402


def test_emulated_exp2_is_within_its_fit_of_the_exponential():
    x = torch.linspace(-125.5, 127.9, 2_000_001)
    rel = (ops.exp2_emulated(x).double() / torch.exp2(x.double()) - 1).abs()
    assert 5e-5 < rel.max().item() < 7.6e-5  # the cubic's minimax error, reached (so the cubic is the one used)
    # exact where f = 0 up to the cubic's constant term: 2^n * c0
    n = torch.arange(-125, 128, dtype=torch.float32)
    assert torch.equal(ops.exp2_emulated(n), torch.ldexp(torch.full_like(n, ops.EXP2_CUBIC[0]), n.int()))


def test_emulated_exp2_floors_masked_and_undefined_scores():
    """-inf (a masked score) and NaN take the floor, 2^-126 to within the fit, as A1's clamp gives; nothing wraps
    below it (the exponent field is never negative)."""
    out = ops.exp2_emulated(torch.tensor([-math.inf, math.nan, -1000.0, -126.0, -125.6]))
    assert torch.all(torch.isfinite(out)) and torch.all(out > 0)
    assert torch.allclose(out[:4].double(), torch.tensor(2.0 ** -126, dtype=torch.float64), rtol=2e-4, atol=0)
    assert torch.allclose(out[4].double(), torch.tensor(2.0 ** -125.6, dtype=torch.float64), rtol=2e-4, atol=0)


@pytest.mark.parametrize("every", [8, 16, 32])
def test_emulated_keys_are_one_in_every_and_fixed_per_register(every):
    """The keys the emulation takes are hybrid_picks' for `every`, bits 0 and 3 up: in the sm_80/sm_90 accumulator
    lane t of a quad holds keys 8 i + 2 t + j, so each register holds a picked key for every t or for none."""
    keys = torch.arange(4096)
    picks = ops.hybrid_picks(keys, every)
    assert picks.float().mean().item() == 1 / every
    for t in range(4):
        held = torch.tensor([8 * i + 2 * t + j for i in range(16) for j in range(2)])
        assert torch.equal(picks[held], ops.hybrid_picks(torch.tensor([8 * i + j for i in range(16)
                                                                       for j in range(2)]), every))
    assert ta.emulated_key_bits(0) == 0 and ta.emulated_key_bits(every) == ops.HYBRID_BITS[every]


@pytest.mark.parametrize("every", [4, 8])
@pytest.mark.parametrize("offset, mask", [(0.0, False), (8.0, True)])
def test_tile_step_emulates_a0s_exp2_on_the_picked_keys_only(every, offset, mask):
    """A0 with EMULATE through the kernels' shared tile step: the emulated exp2 on the picked keys (to 2 ulp of
    the torch operator: the interpreter may round the cubic's FMAs twice), the MUFU's exp2 on the others, the
    running maximum and the rescale untouched."""
    g = torch.Generator().manual_seed(5)
    s = torch.randn(TILES, ROWS, COLS, generator=g) * 8 + torch.arange(TILES).view(TILES, 1, 1) * 4.0
    if mask:
        s[:, :, ::3] = -math.inf  # a third of the keys, some of them picked
    scale = ta.log2_scale(64, None, (1.0, 1.0, 1.0))
    p, m, alpha = run_tiles(s, scale, mask, "A0", offset, emulate=every)
    p0, m0, alpha0 = run_tiles(s, scale, mask, "A0", offset)
    picks = ops.hybrid_picks(torch.arange(COLS), every)
    assert picks.any()
    c = torch.tensor(scale, dtype=torch.float32)
    x = s * c - (m - offset)[..., None]
    torch.testing.assert_close(p[..., picks], ops.exp2_emulated(x[..., picks]), rtol=2.0 ** -22, atol=2.0 ** -140)
    assert torch.equal(p[..., ~picks], p0[..., ~picks])
    live = torch.isfinite(s[..., picks])
    assert not torch.equal(p[..., picks][live], p0[..., picks][live])  # the emulation is what ran there
    torch.testing.assert_close(p[..., picks][live], p0[..., picks][live], rtol=8e-5, atol=0)
    assert torch.equal(m, m0) and torch.equal(alpha, alpha0)


def test_emulation_label_reads_back_and_is_a0s_alone():
    cfg = GluonConfig.from_label("gluon-n128s2-c240l24-hg8-g1-rla-lmt-tb-e16")
    assert cfg.emulate == 16 and cfg.label() == "gluon-n128s2-c240l24-hg8-g1-rla-lmt-tb-e16"
    assert cfg.plain().emulate == 16  # other bits than the MUFU's: compared with itself, not with the plain kernel
    assert ga.kernel_constants(cfg, 8192, 128, True, True, "A0")["EMULATE"] == ops.HYBRID_BITS[16]
    for variant in ("h15-folded", "h15-sat", "A1", "noexp"):
        assert ga.kernel_constants(cfg, 8192, 128, True, True, variant)["EMULATE"] == 0
    assert ga.kernel_constants(GluonConfig(), 8192, 128, True, False, "A0")["EMULATE"] == 0
    for bad in ("gluon-n128s2-c240l24-hg8-e3", "gluon-n64s2-c240l24-hg8-e32", "gluon-n128s2-c240l24-hg8-e64"):
        with pytest.raises(UsageError, match="emulates one exp2 in"):
            GluonConfig.from_label(bad)
    assert GluonConfig.from_label("gluon-n64s2-c240l24-hg8-e16").emulate == 16


def _bundled_ptxas() -> bool:
    from softbench.kernels.triton_compile import _bundled_tool

    return _bundled_tool("ptxas") is not None


@pytest.mark.skipif(not _bundled_ptxas(), reason="needs Triton's bundled ptxas")
def test_emulation_takes_one_mufu_in_sixteen_off_a0s_loop():
    """FP8 under the default's options: A0's loop (both branches, 64 scores each per thread) loses 8 MUFU.EX2 and
    gains about seven instructions for each (the floor's FMNMX, three FADDs, three FFMAs, the shift-and-add),
    without spills; h15-folded's loop is the same with or without the option."""
    from test_gluon_attn import _compile

    base, emu = "gluon-n128s2-c240l24-hg8-g1-rla-lmt-tb", "gluon-n128s2-c240l24-hg8-g1-rla-lmt-tb-e16"
    a0, a0e = _compile("fp8", "A0", base), _compile("fp8", "A0", emu)
    assert a0["loop_mufu_ex2"] - a0e["loop_mufu_ex2"] == 8, (a0, a0e)
    assert a0e["stack_bytes"] == 0 and a0e["spill_stores"] == 0 and a0e["ptxas_advisories"] == [], a0e
    assert a0e["loop_ffma"] - a0["loop_ffma"] == 24 and a0e["loop_fadd"] - a0["loop_fadd"] == 24, (a0, a0e)
    assert a0e["loop_fmnmx"] - a0["loop_fmnmx"] == 8, (a0, a0e)
    assert 8 * 6 <= a0e["loop_instructions"] - a0["loop_instructions"] <= 8 * 8, (a0, a0e)
    folded, folded_e = _compile("fp8", "h15-folded", base), _compile("fp8", "h15-folded", emu)
    assert folded["loop_instructions"] == folded_e["loop_instructions"], (folded, folded_e)
