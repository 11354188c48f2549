"""Where a 16-bit P is rounded to P.V's operand (GluonConfig.p_round, label -pm): at the end of the tile (a cast to
packed pairs, then one PRMT per register into the operand's order) or, under -pm, carried in FP32 and rounded just
before P.V is issued, as FP8 always does. Its label, its refusals, the kernel constant, plain() (the same rounding of
the same values: checked bit for bit on the H200), and the sm_90a cross-compile: the PRMTs gone, and no conversion
left between P.V's wait and the next Q.K^T."""

import pytest

from softbench.core.errors import UnsupportedError, UsageError
from softbench.kernels import gluon_attn as ga
from softbench.kernels.gluon_config import GluonConfig

BF16 = "gluon-n128s2-c240l24-hg8-rl-ltt-tb-mlf"
BF16_PM = "gluon-n128s2-c240l24-hg8-rl-ltt-pm-tb-mlf"


def test_p_round_label_reads_back_and_plain_rounds_at_the_tail():
    cfg = GluonConfig.from_label(BF16_PM)
    assert cfg.p_round == "wgmma" and cfg.label() == BF16_PM
    assert GluonConfig.from_label(BF16).p_round == "tail"
    assert ga.kernel_constants(cfg, 8192, 128, True, False, "A0")["P_AT_MMA"] is True
    assert ga.kernel_constants(GluonConfig.from_label(BF16), 8192, 128, True, False, "A0")["P_AT_MMA"] is False
    # what the probe compares it with, bit for bit
    assert cfg.plain() == GluonConfig.from_label(BF16).plain() and cfg.plain().p_round == "tail"
    # its place: after the row sums, before -tb
    with pytest.raises(UsageError, match="Gluon configuration label"):
        GluonConfig.from_label("gluon-n128s2-c240l24-hg8-rl-tb-pm")


def test_p_round_refuses_fp8_split_qk_and_unknown_places():
    # at FP8 P is always rounded at the wgmma: a second label for the same kernel would split its sessions
    with pytest.raises(UnsupportedError, match="16-bit inputs"):
        ga.kernel_constants(GluonConfig.from_label("gluon-n128s2-c240l24-hg8-g1-rla-lmt-pm-tb-mlf"), 8192, 128,
                            True, True, "A0")
    with pytest.raises(UsageError, match="not with -sq"):
        GluonConfig.from_label("gluon-n128s2-c240l24-hg8-rl-pm-tb-sq")
    with pytest.raises(UsageError, match="rounded to its operand"):
        GluonConfig(p_round="early")


def _bundled_ptxas() -> bool:
    from softbench.kernels.triton_compile import _bundled_tool

    return _bundled_tool("ptxas") is not None


@pytest.mark.skipif(not _bundled_ptxas(), reason="needs Triton's bundled ptxas")
def test_p_rounded_at_the_wgmma_drops_the_permutes_and_the_tail_conversions():
    """BF16 causal A0 under -mlf: rounded at the tail, the hot loop converts P after P.V's wait (32 F2FP) and moves
    the pairs into the operand's order (32 PRMT); rounded at the wgmma, the conversions land before P.V's issue and
    the PRMTs are gone: 32 instructions fewer per tile and thread, the same exponentials and no spills."""
    from test_gluon_attn import _compile

    tail, at_mma = _compile("bf16", "A0", BF16), _compile("bf16", "A0", BF16_PM)
    for r in (tail, at_mma):
        assert r["stack_bytes"] == 0 and r["spill_stores"] == 0 and r["ptxas_advisories"] == [], r
        assert r["loop_f2fp"] == 32 and r["loop_mufu_ex2"] == 66, r
    assert tail["loop_prmt"] == 32 and tail["loop_f2fp_after_last_wait"] == 32, tail
    assert at_mma["loop_prmt"] == 0 and at_mma["loop_f2fp_after_last_wait"] == 0, at_mma
    assert tail["loop_instructions"] - at_mma["loop_instructions"] == 32, (tail, at_mma)
