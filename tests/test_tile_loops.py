"""The key loop's form (GluonConfig.tile_loops, labels -ml and -mlf): the tiles that need a mask in a loop of their
own, so that the hot loop's body has no branch to the masked weights. Its label, its refusals, the kernel constant,
plain() (the same arithmetic in the same order: checked bit for bit against one loop on the H200), and the sm_90a
cross-compile: the hot loop holds one tile form's exponentials, and where ptxas puts P.V's wgmma wait among them."""

import pytest

from softbench.core.errors import UsageError
from softbench.kernels import gluon_attn as ga
from softbench.kernels.gluon_config import GluonConfig

BF16 = "gluon-n128s2-c240l24-hg8-rl-ltt-tb"
FP8 = "gluon-n128s2-c240l24-hg8-g1-rla-lmt-tb"


def test_tile_loop_labels_read_back_and_plain_is_one_loop():
    for suffix, form, mode in (("", "one", 0), ("-ml", "two", 1), ("-mlf", "two-fenced", 2)):
        cfg = GluonConfig.from_label(BF16 + suffix)
        assert cfg.tile_loops == form and cfg.label() == BF16 + suffix
        assert ga.kernel_constants(cfg, 8192, 128, True, False, "A0")["MASKED_LOOP"] == mode
        # the same arithmetic in the same order: what the probe compares it with, bit for bit
        assert cfg.plain().tile_loops == "one" and cfg.plain() == GluonConfig.from_label(BF16).plain()
    # its place: after -tb, before -sq and -e<N>
    assert GluonConfig.from_label(FP8 + "-mlf-e16").emulate == 16
    with pytest.raises(UsageError, match="Gluon configuration label"):
        GluonConfig.from_label("gluon-n128s2-c240l24-hg8-ml-rl")
    with pytest.raises(UsageError, match="not with -sq"):
        GluonConfig.from_label(BF16 + "-ml-sq")
    with pytest.raises(UsageError, match="loops, not"):
        GluonConfig(tile_loops="three")


def _bundled_ptxas() -> bool:
    from softbench.kernels.triton_compile import _bundled_tool

    return _bundled_tool("ptxas") is not None


@pytest.mark.skipif(not _bundled_ptxas(), reason="needs Triton's bundled ptxas")
@pytest.mark.parametrize("dtype, label", [("bf16", BF16), ("fp8", FP8)])
def test_hot_loop_holds_one_tile_form_and_the_fence_holds_pv_wait_below_the_exponentials(dtype, label):
    """Causal A0. One loop: both tile forms' 64 exponentials per thread in one body, P.V's wait in the join after
    both. -ml: the hot (unmasked) loop holds one form's, no selects for the mask, and ptxas hoists the wait above
    all of them. -mlf: the same loop with the wait below all but a few; the fence costs one NOP per row."""
    from test_gluon_attn import _compile

    one, two, fenced = (_compile(dtype, "A0", label + s) for s in ("", "-ml", "-mlf"))
    for r in (one, two, fenced):
        assert r["stack_bytes"] == 0 and r["spill_stores"] == 0 and r["ptxas_advisories"] == [], r
    assert one["loop_mufu_ex2"] == 132 and one["loop_mufu_after_last_wait"] == 0, one
    assert two["loop_mufu_ex2"] == fenced["loop_mufu_ex2"] == 66, (two, fenced)
    assert two["loop_fsel"] <= 2 < 64 <= one["loop_fsel"], (one, two)
    assert two["loop_instructions"] < one["loop_instructions"] // 2 + 40, (one, two)
    assert two["loop_mufu_after_last_wait"] == 66, two
    assert fenced["loop_mufu_after_last_wait"] <= 8, fenced
    assert fenced["loop_instructions"] - two["loop_instructions"] == 2, (two, fenced)
