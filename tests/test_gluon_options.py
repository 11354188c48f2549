"""The Gluon kernel's options as one constexpr aggregate (softbench.kernels.gluon_options): each field holds the
argument of its own name, so that the kernel's positional construction (gluon_attn._attn_fwd_ws, in this order)
reaches the right constexpr. Built here without a GPU."""

import pytest

pytest.importorskip("triton")

from softbench.kernels.gluon_options import KernelOptions  # noqa: E402

# _attn_fwd_ws's order (V_RING is passed as V_STAGES)
NAMES = ("HEAD_DIM", "BLOCK_N", "STAGES", "CAUSAL", "WEIGHT", "MAX_OFFSET", "V_KMAJOR", "KN_WIDTH", "RESCALE_SKIP",
         "ROW_SUM_PARTS", "RESCALE_AT_PV", "LAZY", "EMULATE", "SPLIT", "MASKED_LOOP", "P_AT_MMA", "V_STAGES",
         "GDC_WAIT")


def test_each_field_holds_the_argument_of_its_own_name():
    values = {name: 100 + i for i, name in enumerate(NAMES)}
    options = KernelOptions(*values.values())
    assert {name: getattr(options, name).value for name in NAMES} == values
    assert KernelOptions(**values).GDC_WAIT.value == values["GDC_WAIT"]
