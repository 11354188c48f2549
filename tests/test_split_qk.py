"""The split Q.K^T (GluonConfig.split_qk, label -sq): its label and refusals, and the sm_90a cross-compile of the
16-bit kernel: each key tile's Q.K^T as two wgmma groups of half the keys, P.V as two, every group waited for
inside the iteration (no serialized wgmma, no spills)."""

import pytest

from softbench.core.errors import UnsupportedError, UsageError
from softbench.kernels import gluon_attn as ga
from softbench.kernels.gluon_config import GluonConfig

SPLIT = "gluon-n128s2-c240l24-hg8-rl-ltt-tb-sq"


def test_split_label_reads_back_and_is_refused_where_it_is_not_written():
    cfg = GluonConfig.from_label(SPLIT)
    assert cfg.split_qk and cfg.label() == SPLIT and cfg.plain().split_qk
    assert GluonConfig.from_label("gluon-n128s2-c240l24-hg8-rl-ltt-tb-sq-e16").emulate == 16
    assert ga.kernel_constants(cfg, 8192, 128, True, False, "A0")["SPLIT"] is True
    assert ga.kernel_constants(GluonConfig(), 8192, 128, True, False, "A0")["SPLIT"] is False
    for bad in ("gluon-n64s2-c240l24-hg8-sq", "gluon-n128s2-c240l24-hg8-ppn-sq", "gluon-n128s2-c240l24-hg8-lmt-sq",
                "gluon-n128s2-c240l24-hg8-ro-sq"):
        with pytest.raises(UsageError, match="split Q.K"):
            GluonConfig.from_label(bad)
    with pytest.raises(UnsupportedError, match="16-bit inputs, not FP8"):
        ga.kernel_constants(cfg, 8192, 128, True, True, "A0")
    # Rowmax-H15's weights would leave their lattice when the first half takes the second half's alpha
    assert ga.kernel_constants(cfg, 8192, 128, True, False, "noexp")["SPLIT"] is True
    for variant in ("h15-sat", "h15-folded", "A1", "h15-1of4"):
        with pytest.raises(UnsupportedError, match="written for A0 and noexp"):
            ga.kernel_constants(cfg, 8192, 128, True, False, variant)


def _bundled_ptxas() -> bool:
    from softbench.kernels.triton_compile import _bundled_tool

    return _bundled_tool("ptxas") is not None


@pytest.mark.skipif(not _bundled_ptxas(), reason="needs Triton's bundled ptxas")
def test_split_loop_issues_four_groups_and_waits_for_each_in_the_iteration():
    """BF16 causal, A0 under the 16-bit default with -sq: Q.K^T's 8 wgmma k-steps become two groups of 8 on half
    the keys (m64n64k16), P.V's 8 two of 4; no spills, and ptxas serializes nothing (no C7514: no accumulator is
    read while its group is in flight)."""
    from test_gluon_attn import _compile

    base, split = _compile("bf16", "A0", SPLIT[:-3]), _compile("bf16", "A0", SPLIT)
    assert base["loop_gmma"] == 16 and split["loop_gmma"] == 24, (base, split)
    assert split["loop_gmma_waits"] > base["loop_gmma_waits"], (base, split)
    assert split["stack_bytes"] == 0 and split["spill_stores"] == 0 and split["ptxas_advisories"] == [], split
    qk = split["ptx_loop_groups"][:2]  # the loop's first two groups: Q.K^T's halves, 8 k-steps each from shared memory
    assert [(g["shape"], g["a"], g["wgmma"]) for g in qk] == [("m64n64k16.f32.bf16.bf16", "shared", 8)] * 2, qk
    # both halves' exponentials: the same 64 per thread and tile as without the split
    assert split["loop_mufu_ex2"] - base["loop_mufu_ex2"] <= 8, (base, split)
