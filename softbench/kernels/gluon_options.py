"""The Gluon kernel's compile-time choices that every consumer function hands on, as one constexpr value
(softbench.kernels.gluon_attn builds it once in _attn_fwd_ws).

Before, each of the sixteen was a positional argument of _consumer, _consumer_persistent, _persistent_partitions,
_consumer_item and _key_tile and of each partition list, so one more option meant the same edit in a dozen places.
Triton 3.6's aggregate (triton.language.core._aggregate, pinned with Triton; gluon.aggregate in later releases)
carries constexpr fields through warp_specialize's partitions as constexprs, where a tuple built beforehand turns
them into tensors. This module has no `from __future__ import annotations`: the aggregate checks each field against
its annotation, which must be the type itself, not its name."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.language.core import _aggregate


@_aggregate
class KernelOptions:
    """Field names as the kernel's constexprs (softbench.kernels.gluon_attn.kernel_constants names their values)."""
    HEAD_DIM: gl.constexpr
    BLOCK_N: gl.constexpr
    STAGES: gl.constexpr
    CAUSAL: gl.constexpr
    WEIGHT: gl.constexpr
    MAX_OFFSET: gl.constexpr
    V_KMAJOR: gl.constexpr
    KN_WIDTH: gl.constexpr
    RESCALE_SKIP: gl.constexpr
    ROW_SUM_PARTS: gl.constexpr
    RESCALE_AT_PV: gl.constexpr
    LAZY: gl.constexpr
    EMULATE: gl.constexpr
    SPLIT: gl.constexpr
    MASKED_LOOP: gl.constexpr
    P_AT_MMA: gl.constexpr
    V_STAGES: gl.constexpr  # V's ring (GluonConfig.value_stages); STAGES is K's
    GDC_WAIT: gl.constexpr  # GluonConfig.grid_dependency where the variant reads the key norms

    @gluon.constexpr_function
    def __init__(self, HEAD_DIM, BLOCK_N, STAGES, CAUSAL, WEIGHT, MAX_OFFSET, V_KMAJOR, KN_WIDTH, RESCALE_SKIP,
                 ROW_SUM_PARTS, RESCALE_AT_PV, LAZY, EMULATE, SPLIT, MASKED_LOOP, P_AT_MMA, V_STAGES, GDC_WAIT):
        self.HEAD_DIM = gl.constexpr(HEAD_DIM)
        self.BLOCK_N = gl.constexpr(BLOCK_N)
        self.STAGES = gl.constexpr(STAGES)
        self.CAUSAL = gl.constexpr(CAUSAL)
        self.WEIGHT = gl.constexpr(WEIGHT)
        self.MAX_OFFSET = gl.constexpr(MAX_OFFSET)
        self.V_KMAJOR = gl.constexpr(V_KMAJOR)
        self.KN_WIDTH = gl.constexpr(KN_WIDTH)
        self.RESCALE_SKIP = gl.constexpr(RESCALE_SKIP)
        self.ROW_SUM_PARTS = gl.constexpr(ROW_SUM_PARTS)
        self.RESCALE_AT_PV = gl.constexpr(RESCALE_AT_PV)
        self.LAZY = gl.constexpr(LAZY)
        self.EMULATE = gl.constexpr(EMULATE)
        self.SPLIT = gl.constexpr(SPLIT)
        self.MASKED_LOOP = gl.constexpr(MASKED_LOOP)
        self.P_AT_MMA = gl.constexpr(P_AT_MMA)
        self.V_STAGES = gl.constexpr(V_STAGES)
        self.GDC_WAIT = gl.constexpr(GDC_WAIT)
