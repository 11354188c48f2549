"""softbench's own FlashAttention-style forward in Triton, so that BF16/FP16 and FP8 (e4m3) run on Hopper.

One program computes BLOCK_M query rows of one head: online softmax over key tiles of BLOCK_N, the exponent kept
in log2 units (softmax scale, log2(e) and the Q/K descale factors folded into one multiplier), the row maximum,
the rescale (always exact exp2 of the max difference, tau = 0) and the row sum as in FA4; only the map from
exponent to weight changes with the variant (a constexpr string):

  A0     exact exp2 (tl.math.exp2, the MUFU ex2 instruction)
  A1     Rowmax-H15 with softbench.operators.rowmax_h15's bit construction: t = max(2x, -252); y = t + 12583166.0
         (FP32 add, round to nearest even); weight = bits(y) << 22 read as FP32
  h15-proved   A1, with the clamp dropped from the unmasked key tiles of every program whose rows provably
               never reach it (Cauchy-Schwarz bound from the query norms and the head's largest key norm,
               found by a prologue kernel inside the same call): bit-identical to A1 on every input
  h15-sat      Rowmax-H15 with the clamp as a saturation (softbench.operators.rowmax_h15_sat): u = (2x + 252)/512
               in one FMA that saturates to [0, 1] (FFMA.SAT), u * 512 + (magic - 252) in a second FMA, the shift:
               three instructions where A1 takes four; equal to A1 except within 2^-15 of a rounding tie of 2x
  h15-folded   the magic add folded into the FMA that scales the scores (softbench.operators.rowmax_h15_folded):
               per row B = fma(-m, 2c, 12583166 + 2 MAX_OFFSET) with m the raw running maximum, per score
               t = fma(s, 2c, B) and the shift, two instructions where h15-proved's bound drops the clamp (the
               masked loop clamps t at the magic constant, which gives masked keys weight 0); the rescale is
               2^((B_new - B_old)/2)
  h15-1of2, h15-1of4   FA4's hybrids: A1 on the odd keys, or on keys 9, 11, 13, 15 of every 16
               (softbench.operators.hybrid_picks), exact exp2 on the others; each score computes one of the two
  h15-noclamp  A1 without its clamp (timing control: equal to A1 where every 2x >= -252)
  noexp  the exponent itself (timing control; results wrong on purpose)

The row sum and the P.V product take the same weights (the row sum before P is rounded, as FA4 and
softbench.kernels.sim do). FP8: P is rounded to e4m3 for P.V after FA4's max_offset trick, x lifted by 8 so
the largest weight is 2^8 and E4M3's range holds the probability tail; the factor cancels because the row sum
carries it too. Output is BF16 for FP8 inputs, the input dtype otherwise.

Layout as FA4: q (batch, seq, heads, dim), k/v (batch, seq, kv_heads, dim); GQA maps query head h to kv head
h // (heads / kv_heads). Causal masking is top-left = bottom-right here, since seq_q == seq_k.

`TRITON_INTERPRET=1` (set before triton is imported) runs this file on the CPU, FP8 included (tests)."""

from __future__ import annotations

import math
import os
import re
from dataclasses import asdict, dataclass, replace

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents

from softbench.core.errors import UnsupportedError, UsageError
from softbench.kernels.capability import TRITON_HEAD_DIMS, dims_text
from softbench.kernels.catalog import built_by
from softbench.operators import (CLAMP_DOUBLED, EXP2_CUBIC, EXP2_EMULATED_FLOOR, EXP2_EMULATED_SHIFT, HYBRID_BITS,
                                 MAGIC, MAGIC_FOLDED, MAGIC_SAT, SAT_SPAN, SHIFT)

LOG2_E = math.log2(math.e)
FP8_MAX_OFFSET = 8.0  # FA4's max_offset for FP8: the largest weight becomes 2^8, well inside E4M3's 448
# the variants this kernel implements, each a WEIGHT branch below (the Gluon kernel implements the same ones)
WEIGHT_MAPS = built_by("triton")
HEAD_DIMS = TRITON_HEAD_DIMS  # 64, 128 and 256 (Gemma-3's); the Gluon kernel takes 64 and 128 only
_FP8 = (torch.float8_e4m3fn,)
_SIXTEEN_BIT = (torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class KernelConfig:
    """Tile sizes and launch settings of one compiled kernel. `v_kmajor` (FP8): read V from a (b, kv_heads, d, s)
    copy made once outside the timed call, so that the P.V operand arrives key-major, as Hopper's FP8 wgmma needs.

    `tma`: Q, K, V and O move through host-made tensor descriptors (the copy engine, mbarrier waits) instead of
    cp.async through registers' address arithmetic; results are bit-identical (the descriptors' bounds give the
    zeros the masked loads give). On sm_90a it cuts registers (BF16 m128n128: 247 -> 189) and loop instructions.
    `warp_specialize`: tl.range(warp_specialize=True) on the unmasked loop. Triton 3.6's Hopper pass ignores it at
    num_warps=8 and fails to compile this kernel at num_warps=4, so it is for probing newer Tritons only.
    `max_registers`: Triton's maxnreg; 128 lets two 8-warp programs share an SM (BLOCK_N 64 fits without spills),
    so that one program's softmax overlaps the other's wgmma, the ping-pong FA3 schedules by hand.
    `rotate`: software-pipeline the unmasked key loop by hand, issuing tile j+1's Q.K^T before tile j's softmax
    (FA3's intra-warpgroup overlap), so that the tensor cores could run while the softmax does; the scores of one
    tile stay live across the loop's back edge. Same operations on the same values: bit-identical results.
    With Triton 3.6 the PTX does defer that wait, but ptxas then serializes every wgmma of the kernel (its note
    C7514: the carried scores are copied out of an in-flight accumulator) and the peeled first K tile takes its
    own 16 KB of shared memory; whether the net is a gain is for the GPU probe to say.
    `head_group`: the order in which programs are handed to the SMs. 1 (default) walks all query blocks of one
    (batch, head) before the next; G > 1 walks the query blocks of G heads at once (under causal the longest
    block of each of the G heads first, then the next longest), longest-processing-time-first across heads so
    that the last wave holds short blocks of every head, while K and V of only G heads compete for L2 at a time
    (FA4's SingleTileLPTScheduler does the same, with G the largest power of two of heads whose K and V fit in
    50 MB: 8 at BF16 8K d128; the H200 probes found 8 and 16 equal within their noise). It only reorders
    independent programs: results are bit-identical. A G that does not divide batch x heads is reduced to their
    greatest common divisor at launch."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    v_kmajor: bool = False
    tma: bool = False
    warp_specialize: bool = False
    max_registers: int = 0  # ptxas's per-thread register cap (Triton's maxnreg); 0 leaves the choice to ptxas
    rotate: bool = False
    head_group: int = 1

    def __post_init__(self):
        for name in ("block_m", "block_n"):
            v = getattr(self, name)
            if v < 16 or v & (v - 1):
                raise UsageError(f"{name} must be a power of two >= 16, got {v}")
        if self.num_warps not in (1, 2, 4, 8, 16):
            raise UsageError(f"num_warps must be 1, 2, 4, 8 or 16, got {self.num_warps}")
        if self.num_stages < 1:
            raise UsageError(f"num_stages must be >= 1, got {self.num_stages}")
        if self.head_group < 1:
            raise UsageError(f"head_group must be >= 1 (1: one head's query blocks after another), got {self.head_group}")
        if self.max_registers and not 24 <= self.max_registers <= 255:
            raise UsageError(f"max_registers must be 0 (no cap) or 24..255, got {self.max_registers}")

    def label(self) -> str:
        extra = ("-vk" if self.v_kmajor else "") + ("-tma" if self.tma else "")
        extra += ("-ws" if self.warp_specialize else "") + (f"-r{self.max_registers}" if self.max_registers else "")
        extra += ("-rot" if self.rotate else "") + (f"-hg{self.head_group}" if self.head_group > 1 else "")
        return f"m{self.block_m}n{self.block_n}w{self.num_warps}s{self.num_stages}{extra}"

    def to_dict(self) -> dict:
        return {**asdict(self), "label": self.label()}

    @classmethod
    def from_label(cls, label: str) -> "KernelConfig":
        """The configuration a label() names, e.g. m128n64w8s4-vk-tma-r128 (what sessions record), so that a
        configuration found by tools/gpu/triton_probe.py can be run again by name."""
        m = re.fullmatch(r"m(\d+)n(\d+)w(\d+)s(\d+)((?:-vk|-tma|-ws|-r\d+|-rot|-hg\d+)*)", label.strip())
        if not m:
            raise UsageError(f"not a Triton configuration label: {label!r} (expected e.g. m128n128w8s3-vk-tma-r128: "
                             "block_m, block_n, warps, stages, then optional -vk, -tma, -ws, -r<max registers>, -rot, "
                             "-hg<heads per group>)")
        flags = re.findall(r"-(vk|tma|ws|rot|r\d+|hg\d+)", m.group(5))
        regs = [int(f[1:]) for f in flags if re.fullmatch(r"r\d+", f)]
        groups = [int(f[2:]) for f in flags if f.startswith("hg")]
        config = cls(*(int(g) for g in m.groups()[:4]), v_kmajor="vk" in flags, tma="tma" in flags,
                     warp_specialize="ws" in flags, max_registers=regs[-1] if regs else 0, rotate="rot" in flags,
                     head_group=groups[-1] if groups else 1)
        if config.label() != label.strip():
            raise UsageError(f"Triton configuration label {label!r} repeats or misorders its flags; "
                             f"write it as {config.label()}")
        return config


# Chosen per (dtype family, head dim), without autotuning, so that every run of a variant compiles the same kernel.
# Resource figures are from cross-compiling for sm_90a with Triton 3.6 (softbench.kernels.triton_compile):
# - BLOCK_M 128 with 8 warps: two warpgroups, each issuing Hopper's native m64 wgmma on its own 64 rows.
# - BLOCK_N 128: the FP32 score tile is 128x128 / 256 threads = 64 registers per thread, as much again for the
#   output accumulator at d=128 (BF16 d=128: 248 registers, FP8: 224-231, no spills); BLOCK_N 256 doubles the
#   scores and hits the 255-register ceiling. With 248 registers x 256 threads one program fills an SM's registers.
# - num_stages: 2 at BF16 d=128, where Q (32 KB) and two K/V stages (4 x 32 KB) take 160 KB of the 227 KB an SM
#   offers (3 stages would take 224 KB); 3 elsewhere (FP8 d=128: 112 KB), where tiles are half as large.
# - FP8 reads V key-major (see KernelConfig.v_kmajor): otherwise V is loaded into registers and stored
#   transposed to shared memory every tile, outside the asynchronous-copy pipeline.
# - head dim 128: the fastest A0 that tools/gpu/triton_probe.py found on the H200 (sessions/triton-probe-h200-*),
#   so that A1 is measured against the strongest baseline this kernel has. Both let two programs share an SM,
#   one's softmax overlapping the other's matrix instructions: BF16 m128n64w8s2-tma-r128 (127 registers, 96 KB),
#   FP8 m64n128w4s3-vk-tma (180 registers, 105 KB). Both hand out their programs 16 heads at a time (head_group
#   16: under causal masking, every head's longest query blocks first): in the probe of 2026-11-30 16:05 that took
#   BF16 causal 8K from 408 to 505 TFLOP/s and FP8 causal from 716 to 773, and cost BF16 non-causal 1% (520 ->
#   515). Sessions record the configuration each ran; those of 2026-11-30 before 16:00 ran without head_group,
#   and before 14:40 m128n128w8s2 / m128n128w8s3-vk.
# - head dim 64: not yet probed on the GPU.
# - head dim 256 (Gemma-3): chosen for shared-memory fit and correctness only, not probed for speed on the GPU.
#   One warpgroup on 64 rows, 64-key tiles, 2 stages: the FP32 output accumulator alone is 64x256 / 128 threads =
#   128 registers per thread. Cross-compiled for sm_90a, every variant, causal: BF16 160 KB of shared memory (Q
#   32 KB, two K/V stages 4 x 32 KB; 3 stages would take 224 KB, at the 227 KB limit), 254-255 registers, no
#   spills; FP8 80 KB, 247-253 registers, no spills (m64n128w4s2-vk spills there: 144 stack bytes).
_TABLE: dict[tuple[str, int], KernelConfig] = {
    ("16bit", 64): KernelConfig(128, 128, 8, 3),
    ("16bit", 128): KernelConfig(128, 64, 8, 2, tma=True, max_registers=128, head_group=16),
    ("fp8", 64): KernelConfig(128, 128, 8, 3, v_kmajor=True),
    ("fp8", 128): KernelConfig(64, 128, 4, 3, v_kmajor=True, tma=True, head_group=16),
    ("16bit", 256): KernelConfig(64, 64, 4, 2),
    ("fp8", 256): KernelConfig(64, 64, 4, 2, v_kmajor=True),
}
# The simple configuration used when the tuned one fails to compile: small tiles, 4 warps, 2 stages.
_FALLBACK = KernelConfig(64, 64, 4, 2)
# At head dim 256 that is the table's own entry, so the fallback halves the tiles: 50 KB of shared memory at BF16
# and no spills when cross-compiled for sm_80, sm_89 and sm_90, where m64n64 needs 104 KB on sm_80/sm_89 (more
# than sm_89's 99 KB per block) and spills there
_FALLBACK_256 = KernelConfig(32, 32, 4, 2)


if os.environ.get("TRITON_INTERPRET") == "1":  # the CPU interpreter (tests): make its arithmetic match the GPU's
    from softbench.kernels import triton_interpret

    triton_interpret.apply()


def _family(dtype: torch.dtype) -> str:
    if dtype in _FP8:
        return "fp8"
    if dtype in _SIXTEEN_BIT:
        return "16bit"
    raise UnsupportedError(f"the Triton forward takes bf16, fp16 or float8_e4m3fn inputs, not {dtype}")


def default_config(dtype: torch.dtype, head_dim: int) -> KernelConfig:
    if head_dim not in HEAD_DIMS:
        raise UnsupportedError(f"the Triton forward is written for head dims {dims_text(HEAD_DIMS)}, "
                               f"not {head_dim}")
    return _TABLE[(_family(dtype), head_dim)]


def fallback_config(dtype: torch.dtype, head_dim: int) -> KernelConfig:
    return replace(_FALLBACK_256 if head_dim == 256 else _FALLBACK, v_kmajor=_family(dtype) == "fp8")


# Rowmax-H15's constants from softbench.operators, as compile-time values of the kernel
CLAMP_DOUBLED_C = tl.constexpr(CLAMP_DOUBLED)
MAGIC_C = tl.constexpr(MAGIC_FOLDED)
SHIFT_C = tl.constexpr(SHIFT)
MAGIC_SAT_C = tl.constexpr(MAGIC_SAT)
MAGIC_ZERO_C = tl.constexpr(MAGIC)  # h15-folded's clamp: the magic constant's low bits are 0, so is the weight
SAT_SPAN_C = tl.constexpr(SAT_SPAN)
# the emulated exp2's (softbench.operators.exp2_emulated)
EXP2_C0, EXP2_C1, EXP2_C2, EXP2_C3 = (tl.constexpr(c) for c in EXP2_CUBIC)
EXP2_FLOOR_C = tl.constexpr(EXP2_EMULATED_FLOOR)
EXP2_SHIFT_C = tl.constexpr(EXP2_EMULATED_SHIFT)


def emulated_key_bits(every: int) -> int:
    """The EMULATE constant of _tile_weights for one score in `every` taken by the emulated exp2 (0: none): the
    key-index bits hybrid_picks tests, fixed per register in the accumulator, so each score computes one map."""
    return HYBRID_BITS[every] if every else 0


@triton.jit
def _key_scores(q, K, k_base, b32, hk32, start_n, keys, offs_d, seq, stride_ks,
                MASK: tl.constexpr, TMA: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    """Q.K^T of one key tile (raw scores, before the scale). MASK: the tile may hold keys past the end, which the
    pointer path reads as zeros (the copy engine gives zeros for them by itself). keys = start_n + arange."""
    if TMA:  # rows past seq come back as zeros from the copy engine, as other=0.0 gives below
        k = K.load([b32, start_n, hk32 * HEAD_DIM]).reshape(BLOCK_N, HEAD_DIM)
    elif MASK:
        k = tl.load(k_base + keys[:, None] * stride_ks + offs_d[None, :], mask=keys[:, None] < seq, other=0.0)
    else:
        k = tl.load(k_base + keys[:, None] * stride_ks + offs_d[None, :])
    return tl.dot(q, tl.trans(k))


@triton.jit
def _folded_weights(s, m_i, qk_scale, MASK: tl.constexpr, MAX_OFFSET: tl.constexpr, LAZY: tl.constexpr = 0.0):
    """h15-folded (softbench.operators.rowmax_h15_folded), its running maximum m in raw score units. Per row
    B = fma(-m, 2c, MAGIC_FOLDED + 2 MAX_OFFSET), an integer in FP32 (MAGIC_FOLDED + 2 MAX_OFFSET - rne(2cm));
    per score t = fma(s, 2c, B), whose single rounding gives rne(2cs - rne(2cm)) in t's low bits with the bias in
    place, then the shift: two instructions. Unmasked tiles reach here only in programs whose rows satisfy
    _clamp_free (both kernels send the others through the masked branch), so n >= -252 there and the clamp is
    left out; the masked branch clamps t at MAGIC (n = -254, the field's zero): weight 0 from there down, masked
    keys included. MASK: whether to clamp (h15-folded-clamped passes True for every tile).
    LAZY > 0 (log2 units; GluonConfig.rescale "lazy-anchor"): the anchor is a maximum moved only where a tile's
    exceeds it by more than LAZY, as A0's under -rl, so the bias, and O's scale with it, stay put in most tiles.
    The weights are then up to 2^(LAZY + MAX_OFFSET) x 1.5, and each tile's lattice phase is that of the anchor in
    force, which need not be the running maximum's: the same family of weights, not h15-folded's bit for bit
    (softbench.kernels.sim with rescale_threshold computes the same). A stale anchor is itself a score of the row,
    so _clamp_free's bound holds for it as for the maximum."""
    m_tile = tl.max(s, 1)
    if LAZY > 0.0:
        # the simulation's test, (m_tile - m) c > LAZY, in the same order of operations; m = -inf on the first
        # tile: always taken (a row with no key yet keeps -inf, whose difference is NaN)
        m_new = tl.where((m_tile - m_i) * qk_scale > LAZY, m_tile, m_i)
    else:
        m_new = tl.maximum(m_i, m_tile)  # finite from the first tile on: it always holds key 0
    c2 = 2.0 * qk_scale
    bias_new = tl.fma(-m_new, c2, MAGIC_C + 2.0 * MAX_OFFSET)
    t = tl.fma(s, c2, bias_new[:, None])
    if MASK:
        t = tl.maximum(t, MAGIC_ZERO_C)  # one FMNMX: -inf (masked keys) and n < -254 alike give weight 0
    p = (t.to(tl.int32, bitcast=True) << SHIFT_C).to(tl.float32, bitcast=True)
    # the old weights sit on the old anchor's lattice, 2^(-r_old/2) times the scores' 2^cs: the factor is
    # 2^((r_old - r_new)/2), from the exact difference of the two integer biases (0 on the first tile: B_old = inf)
    bias_old = tl.fma(-m_i, c2, MAGIC_C + 2.0 * MAX_OFFSET)
    alpha = tl.math.exp2((bias_new - bias_old) * 0.5)
    return p, m_new, alpha


@triton.jit
def _tile_weights(s, m_i, keep, keys, qk_scale, MASK: tl.constexpr, WEIGHT: tl.constexpr, MAX_OFFSET: tl.constexpr,
                  LAZY: tl.constexpr = 0.0, EMULATE: tl.constexpr = 0):
    """One key tile's weights p, new running maximum and rescale factor alpha from its raw scores s: the operator
    itself, the one place both kernels take it from (the Gluon kernel calls this as it is). keep: the mask, read
    only when MASK; keys: the tile's key indices (the hybrids choose by them). The running maximum is in log2
    units, except h15-folded's (raw scores: _folded_weights). LAZY (A0 and h15-folded only, log2 units; 0: off):
    the running maximum (h15-folded: its anchor) moves only where a tile's maximum exceeds it by more than LAZY
    (_exponent_weights, _folded_weights). EMULATE (A0 only; 0: off): the key-index bits (emulated_key_bits) of the
    scores whose exp2 is computed on the FMA pipe (_exp2_emulated) instead of the MUFU."""
    if MASK:
        s = tl.where(keep, s, float("-inf"))
    if WEIGHT == "h15-folded":
        p, m_new, alpha = _folded_weights(s, m_i, qk_scale, MASK, MAX_OFFSET, LAZY)
    elif WEIGHT == "h15-folded-clamped":  # the clamp in every tile, masked or not (FOLDED_VARIANTS)
        p, m_new, alpha = _folded_weights(s, m_i, qk_scale, True, MAX_OFFSET, LAZY)
    else:
        p, m_new, alpha = _exponent_weights(s, m_i, keep, keys, qk_scale, MASK, WEIGHT, MAX_OFFSET, LAZY, EMULATE)
    return p, m_new, alpha


@triton.jit
def _exp2_emulated(x):
    """softbench.operators.exp2_emulated: 2^x in eight FMA-pipe instructions (the floor's FMNMX, the magic add,
    two FADDs for f, three FFMAs, and one shift-and-add that puts n into the exponent field), no MUFU."""
    x = tl.maximum(x, EXP2_FLOOR_C)
    y = x + MAGIC_ZERO_C
    f = x - (y - MAGIC_ZERO_C)
    p = tl.fma(tl.fma(tl.fma(f, EXP2_C3, EXP2_C2), f, EXP2_C1), f, EXP2_C0)
    bits = p.to(tl.int32, bitcast=True) + (y.to(tl.int32, bitcast=True) << EXP2_SHIFT_C)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _h15_doubled(s, m_use, qk_scale, CLAMP: tl.constexpr):
    """Rowmax-H15 with softbench.operators.rowmax_h15's construction: 2x in one FMA (doubling commutes with
    rounding), the clamp that keeps the exponent field >= 1 (CLAMP), the magic add that rounds to an integer with
    the exponent bias already in place, the shift into the field."""
    t = s * (2.0 * qk_scale) - (2.0 * m_use)[:, None]
    if CLAMP:
        t = tl.maximum(t, CLAMP_DOUBLED_C)
    y = t + MAGIC_C
    return (y.to(tl.int32, bitcast=True) << SHIFT_C).to(tl.float32, bitcast=True)


@triton.jit
def _exponent_weights(s, m_i, keep, keys, qk_scale, MASK: tl.constexpr, WEIGHT: tl.constexpr,
                      MAX_OFFSET: tl.constexpr, LAZY: tl.constexpr = 0.0, EMULATE: tl.constexpr = 0):
    """The maps of x = s * qk_scale - m + MAX_OFFSET, m in log2 units, with the exact rescale exp2(m_i - m_new).
    LAZY > 0 (A0 only; FA4's conditional rescale, softbench.kernels.sim's rescale_threshold): the running maximum
    stays where a tile's maximum exceeds it by at most LAZY, so alpha is exactly 1 in most tiles and a kernel that
    jumps over O's rescale where alpha is 1 (GluonConfig.rescale "lazy") mostly does. The weights are then up to
    2^(LAZY + MAX_OFFSET), the caller's MAX_OFFSET leaving room for them; the normalized output is the same
    softmax, rounded from a P scaled by up to 2^LAZY more."""
    # running maximum in log2 units; the first tile always holds key 0, so it is finite from then on
    if LAZY > 0.0:
        m_tile = tl.max(s, 1) * qk_scale
        m_new = tl.where(m_tile > m_i + LAZY, m_tile, m_i)  # m_i = -inf on the first tile: always taken
    else:
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
    m_use = m_new - MAX_OFFSET  # FP8: exponents measured from (max - MAX_OFFSET), weights up to 2^MAX_OFFSET
    if (WEIGHT == "A1") or (WEIGHT == "h15-noclamp"):
        # h15-noclamp leaves the clamp out: equal to A1 wherever every t >= -252 (masked -inf gives weight 0 there
        # and 2^-126 in A1, both lost in a row sum >= 1 and in P's FP8 rounding), garbage below -254.5. A timing
        # control for what a proof of that bound would save, not a kernel for arbitrary inputs
        p = _h15_doubled(s, m_use, qk_scale, WEIGHT == "A1")
    elif (WEIGHT == "h15-1of2") or (WEIGHT == "h15-1of4"):
        # FA4's hybrids: A1's weight on the keys softbench.operators.hybrid_picks chooses (odd keys; keys 9, 11,
        # 13, 15 of every 16), the hardware exp2 on the others. The MMA layouts fix bits 0 and 3 of the key a
        # register holds, so the choice is made at compile time and each score computes one of the two
        if WEIGHT == "h15-1of2":
            pick = (keys & 1) == 1
        else:
            pick = (keys & 9) == 9
        exact = tl.math.exp2(s * qk_scale - m_use[:, None])
        p = tl.where(pick[None, :], _h15_doubled(s, m_use, qk_scale, True), exact)
    elif WEIGHT == "h15-sat":
        # u = (2x + 252) / 512 in one FMA whose result is clamped to [0, 1]: ptxas folds the max and min into
        # FFMA.SAT (NaN -> 0, -inf -> 0: 2^-126, as A1's clamp gives), then u * 512 + magic - 252 in a second FMA
        # (its RNE is n = rne(2x) with the bias in place), then the shift
        c = (-CLAMP_DOUBLED_C - 2.0 * m_use) * (1.0 / SAT_SPAN_C)
        u = tl.minimum(tl.maximum(s * (2.0 * qk_scale / SAT_SPAN_C) + c[:, None], 0.0), 1.0)
        y = u * SAT_SPAN_C + MAGIC_SAT_C
        p = (y.to(tl.int32, bitcast=True) << SHIFT_C).to(tl.float32, bitcast=True)
    elif WEIGHT == "A0":
        x = s * qk_scale - m_use[:, None]
        if EMULATE:  # FA4's share of the exponentials on the FMA pipe, on the keys whose bits are all set
            p = tl.where(((keys & EMULATE) == EMULATE)[None, :], _exp2_emulated(x), tl.math.exp2(x))
        else:
            p = tl.math.exp2(x)
    else:
        p = s * qk_scale - m_use[:, None]
        if MASK:  # keep the timing control finite: masked keys would otherwise give -inf * v
            p = tl.where(keep, p, 0.0)
    alpha = tl.math.exp2(m_i - m_new)  # exact rescale; 0 on the first tile (m_i = -inf)
    return p, m_new, alpha


@triton.jit
def _kept(keys, offs_m, seq, CAUSAL: tl.constexpr):
    """Which scores of a tile count: key < seq and, causal, key <= row. Causal as one comparison per score against
    each row's last key, min(row, seq - 1), which costs one select per score where the two tests cost two. Shared
    with the Gluon kernel, which calls it as it is."""
    if CAUSAL:
        keep = keys[None, :] <= tl.minimum(offs_m, seq - 1)[:, None]
    else:
        keep = keys[None, :] < seq  # one comparison per key, shared by the rows
    return keep


@triton.jit
def _softmax_pv(acc, l_i, m_i, s, V, v_base, b32, hk32, start_n, keys, offs_m, offs_d, seq,
                stride_vs, stride_vd, qk_scale,
                MASK: tl.constexpr, CAUSAL: tl.constexpr, WEIGHT: tl.constexpr, MAX_OFFSET: tl.constexpr,
                TMA: tl.constexpr, V_KMAJOR: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    """The rest of one key tile, given its scores s: masking, the online-softmax update and P.V."""
    keep = None
    if MASK:
        keep = _kept(keys, offs_m, seq, CAUSAL)
    p, m_new, alpha = _tile_weights(s, m_i, keep, keys, qk_scale, MASK, WEIGHT, MAX_OFFSET)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    if TMA:
        if V_KMAJOR:  # the (b, kv_heads * d, s) copy: a (d, keys) box, transposed as a view of shared memory
            v = tl.trans(V.load([b32, hk32 * HEAD_DIM, start_n]).reshape(HEAD_DIM, BLOCK_N))
        else:
            v = V.load([b32, start_n, hk32 * HEAD_DIM]).reshape(BLOCK_N, HEAD_DIM)
    else:
        v_ptrs = v_base + keys[:, None] * stride_vs + offs_d[None, :] * stride_vd
        if MASK:
            v = tl.load(v_ptrs, mask=keys[:, None] < seq, other=0.0)
        else:
            v = tl.load(v_ptrs)
    acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, l_i, m_new


@triton.jit
def _key_tile(acc, l_i, m_i, q, K, V, k_base, v_base, b32, hk32, start_n, offs_m, offs_n, offs_d, seq,
              stride_ks, stride_vs, stride_vd, qk_scale,
              MASK: tl.constexpr, CAUSAL: tl.constexpr, WEIGHT: tl.constexpr, MAX_OFFSET: tl.constexpr,
              TMA: tl.constexpr, V_KMAJOR: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    """One key tile of the online softmax. MASK: this tile holds keys past the end or above the diagonal.
    TMA: K and V are tensor descriptors of the (batch, rows, columns) views prepare_operands describes, indexed by
    b32/hk32 (int32, as descriptor offsets are); otherwise k_base/v_base are pointers to this head's K and V."""
    keys = start_n + offs_n
    s = _key_scores(q, K, k_base, b32, hk32, start_n, keys, offs_d, seq, stride_ks, MASK, TMA, HEAD_DIM, BLOCK_N)
    return _softmax_pv(acc, l_i, m_i, s, V, v_base, b32, hk32, start_n, keys, offs_m, offs_d, seq,
                       stride_vs, stride_vd, qk_scale,
                       MASK, CAUSAL, WEIGHT, MAX_OFFSET, TMA, V_KMAJOR, HEAD_DIM, BLOCK_N)


@triton.jit
def _unmasked_tiles(acc, l_i, m_i, q, K, V, k_base, v_base, b32, hk32, full_end, offs_m, offs_n, offs_d, seq,
                    stride_ks, stride_vs, stride_vd, qk_scale,
                    CAUSAL: tl.constexpr, WEIGHT: tl.constexpr, MAX_OFFSET: tl.constexpr, TMA: tl.constexpr,
                    V_KMAJOR: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    ROTATE: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    """Key tiles [0, full_end), none of which needs a mask: the hot loop."""
    if ROTATE:
        # the unmasked loop rotated by one Q.K^T: tile 0's scores before the loop; each iteration issues the next
        # tile's dot, then runs this tile's softmax and P.V; the last unmasked tile's softmax follows the loop.
        # Tile 0 is read with the mask (seq < BLOCK_N, or no unmasked tile at all): the same values wherever it
        # is unmasked
        HAND_K: tl.constexpr = 32 if q.dtype.primitive_bitwidth == 8 else 16
        s = _key_scores(q, K, k_base, b32, hk32, 0, offs_n, offs_d, seq, stride_ks, True, TMA, HEAD_DIM, BLOCK_N)
        for start_n in tl.range(0, full_end - BLOCK_N, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            # The hand-over: the carried scores pass through a zero-operand wgmma (s + 0 * 0, the same values; a
            # -0 becomes +0, which no weight can tell apart). Triton 3.6 keeps a wgmma in flight across the back
            # edge only if its carried result is first read by another wgmma's accumulator; without this it
            # puts wait_group 0 right after the next tile's Q.K^T. The wait now sits here, before that issue
            s = tl.dot(tl.zeros([BLOCK_M, HAND_K], q.dtype), tl.zeros([HAND_K, BLOCK_N], q.dtype), s)
            s_next = _key_scores(q, K, k_base, b32, hk32, start_n + BLOCK_N, start_n + BLOCK_N + offs_n, offs_d,
                                 seq, stride_ks, False, TMA, HEAD_DIM, BLOCK_N)
            acc, l_i, m_i = _softmax_pv(acc, l_i, m_i, s, V, v_base, b32, hk32, start_n, start_n + offs_n, offs_m,
                                        offs_d, seq, stride_vs, stride_vd, qk_scale,
                                        False, CAUSAL, WEIGHT, MAX_OFFSET, TMA, V_KMAJOR, HEAD_DIM, BLOCK_N)
            s = s_next
        if full_end > 0:
            last = full_end - BLOCK_N
            acc, l_i, m_i = _softmax_pv(acc, l_i, m_i, s, V, v_base, b32, hk32, last, last + offs_n, offs_m,
                                        offs_d, seq, stride_vs, stride_vd, qk_scale,
                                        False, CAUSAL, WEIGHT, MAX_OFFSET, TMA, V_KMAJOR, HEAD_DIM, BLOCK_N)
    else:
        # WARP_SPECIALIZE asks Triton to split the unmasked loop into producer (loads) and consumer partitions
        for start_n in tl.range(0, full_end, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            acc, l_i, m_i = _key_tile(acc, l_i, m_i, q, K, V, k_base, v_base, b32, hk32, start_n, offs_m, offs_n,
                                      offs_d, seq, stride_ks, stride_vs, stride_vd, qk_scale,
                                      False, CAUSAL, WEIGHT, MAX_OFFSET, TMA, V_KMAJOR, HEAD_DIM, BLOCK_N)
    return acc, l_i, m_i


# Keys per program of the key-norm prologue: 16 heads x 8K keys -> 2048 programs, each one read of 64 key rows.
# With 256 rows (512 programs, about 4 per SM, one load each) it took 11.0 us at FP8 8K on the H200, three times
# what reading K at its bandwidth needs; with 64 rows 5.7 us (traces 20261130T164721Z, 20261130T165031Z). At head
# dim 256 a program reads 64 rows of 256 values: 32 registers and no spills when cross-compiled for sm_90a
KEY_NORM_BLOCK = 64
# the variants whose unmasked tiles drop the clamp where _clamp_free proves it idle: each forward runs the key-norm
# prologue first (both kernels)
NORM_BOUND_VARIANTS = ("h15-proved", "h15-folded")
# h15-folded's weights (_folded_weights): h15-folded drops the clamp in the unmasked tiles of proved programs, after
# the key-norm pass that proves it idle; h15-folded-clamped keeps it in every tile, one FMNMX per score, and needs no
# pass. The same weights wherever the proof holds (where it does, the clamp never binds) and the same elsewhere (the
# proof's failures run the clamped branch).
FOLDED_VARIANTS = ("h15-folded", "h15-folded-clamped")
# The proved variant drops the clamp where 4 * qk_scale * |q_i| * max_j |k_j| - 2 * MAX_OFFSET <= PROOF_LIMIT: the
# clamp binds at t = -252; the margin covers the FP32 rounding of the norms, the bound and the kernel's own
# scores and maximum (relative 1e-5 at most on values of a few hundred). h15-folded takes one unit of it: its
# n = rne(2cs - rne(2cm)) + 2 MAX_OFFSET lies at most 1 under 2c (s - m) + 2 MAX_OFFSET (half from each rounding)
PROOF_LIMIT = 250.0
PROOF_LIMIT_C = tl.constexpr(PROOF_LIMIT)


@triton.jit
def _clamp_free(q_norm_max, k_norm_max, qk_scale, MAX_OFFSET: tl.constexpr):
    """Whether rows whose query norms are at most q_norm_max provably never reach A1's clamp against keys whose
    norms are at most k_norm_max (h15-proved and h15-folded, both kernels): |s| <= |q| |k| and the running maximum
    is at most |q| max|k| qk_scale, so t = 2 (s qk_scale - m + MAX_OFFSET) >= -4 qk_scale |q| max|k| + 2 MAX_OFFSET
    (h15-folded's n one less at worst: PROOF_LIMIT's margin)."""
    return 4.0 * qk_scale * q_norm_max * k_norm_max - 2.0 * MAX_OFFSET <= PROOF_LIMIT_C


@triton.jit
def _key_norm_max(K, KN, seq, kv_heads, stride_kb, stride_ks, stride_kh,
                  HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr, LAUNCH_DEPENDENTS: tl.constexpr = False):
    """KN[b * kv_heads + hk, block] = the largest Euclidean norm of this block's key rows of that head (raw
    stored values; descale factors live in qk_scale). One partial maximum per program, so no atomics and no
    zero-fill: the attention kernel reduces the few partials of its head. LAUNCH_DEPENDENTS (the Gluon forward's
    -gdc): each program first lets a kernel launched after it with programmatic dependent launch start, which
    that kernel may do once every program here has; it still waits for this grid's writes before it reads KN
    (griddepcontrol.wait), so the trigger can come before them."""
    if LAUNCH_DEPENDENTS:
        gdc_launch_dependents()
    bh = tl.program_id(0)
    blk = tl.program_id(1)
    b = (bh // kv_heads).to(tl.int64)
    hk = (bh % kv_heads).to(tl.int64)
    rows = blk * BLOCK + tl.arange(0, BLOCK)
    cols = tl.arange(0, HEAD_DIM)
    k = tl.load(K + b * stride_kb + hk * stride_kh + rows[:, None] * stride_ks + cols[None, :],
                mask=rows[:, None] < seq, other=0.0).to(tl.float32)
    norms = tl.sqrt(tl.sum(k * k, 1))
    tl.store(KN + bh * tl.num_programs(1) + blk, tl.max(norms, 0))


@triton.jit
def _program_tile(pid, n_m, head_group, CAUSAL: tl.constexpr):
    """(batch x head index, query block) of program pid on one flat grid: (batch x heads) / head_group groups of
    head_group heads; inside a group the query block index moves slowest, so the G heads' blocks of one index are
    handed out together (KernelConfig.head_group); causal: the longest rows first, so that the last wave holds the
    short ones. Shared with the Gluon kernel (gluon_attn), which calls it as it is."""
    span = n_m * head_group
    g = pid // span
    r = pid - g * span
    m_idx = r // head_group
    bh = g * head_group + (r - m_idx * head_group)
    start_m = (n_m - 1 - m_idx) if CAUSAL else m_idx
    return bh, start_m


@triton.jit
def _attn_fwd(Q, K, V, O, KN, kn_blocks, qk_scale, v_scale, seq, heads, group, head_group,
              stride_qb, stride_qs, stride_qh,
              stride_kb, stride_ks, stride_kh,
              stride_vb, stride_vs, stride_vh, stride_vd,
              stride_ob, stride_os, stride_oh,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
              WEIGHT: tl.constexpr, MAX_OFFSET: tl.constexpr, EVEN_M: tl.constexpr, EVEN_N: tl.constexpr,
              TMA: tl.constexpr = False, V_KMAJOR: tl.constexpr = False, WARP_SPECIALIZE: tl.constexpr = False,
              KN_WIDTH: tl.constexpr = 1, ROTATE: tl.constexpr = False):
    bh, start_m = _program_tile(tl.program_id(0), tl.cdiv(seq, BLOCK_M), head_group, CAUSAL)
    b32 = bh // heads
    h32 = bh % heads
    hk32 = h32 // group
    b, h, hk = b32.to(tl.int64), h32.to(tl.int64), hk32.to(tl.int64)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    if TMA:
        q = Q.load([b32, start_m * BLOCK_M, h32 * HEAD_DIM]).reshape(BLOCK_M, HEAD_DIM)
        k_base, v_base = K, V  # unused: the descriptors carry the addresses
    else:
        q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qs + offs_d[None, :]
        if EVEN_M:
            q = tl.load(q_ptrs)
        else:
            q = tl.load(q_ptrs, mask=offs_m[:, None] < seq, other=0.0)
        k_base = K + b * stride_kb + hk * stride_kh
        v_base = V + b * stride_vb + hk * stride_vh
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    # tiles [0, full_end) need no mask; [full_end, end) hold the diagonal or the ragged last tile
    if CAUSAL:
        full_end = (start_m * BLOCK_M) // BLOCK_N * BLOCK_N
        end = tl.minimum((start_m + 1) * BLOCK_M, seq)
    else:
        full_end = seq // BLOCK_N * BLOCK_N
        end = seq
    if not EVEN_N:
        full_end = tl.minimum(full_end, seq // BLOCK_N * BLOCK_N)
    if (WEIGHT == "h15-proved") or (WEIGHT == "h15-folded"):  # one forward: the key-norm prologue, then this kernel
        # The bound is _clamp_free's, from the program's largest query norm and the head's largest key norm.
        # A program whose rows all satisfy it runs its unmasked tiles without the clamp; the others send
        # every tile through the masked loop below, which keeps it (with nothing to mask there, the same
        # values). Not a branch around the clamp inside the loop: ptxas if-converts that into predicated
        # instructions, which still take their issue slots; not a second copy of the loop: Triton gives each copy
        # its own pipeline buffers, and two programs no longer fit in one SM's shared memory
        qf = q.to(tl.float32)
        q_norm_max = tl.max(tl.sqrt(tl.sum(qf * qf, 1)), 0)
        kn = tl.load(KN + (b32 * (heads // group) + hk32) * kn_blocks + tl.arange(0, KN_WIDTH),
                     mask=tl.arange(0, KN_WIDTH) < kn_blocks, other=0.0)
        full_end = tl.where(_clamp_free(q_norm_max, tl.max(kn, 0), qk_scale, MAX_OFFSET), full_end, 0)
    UNMASKED_WEIGHT: tl.constexpr = "h15-noclamp" if WEIGHT == "h15-proved" else WEIGHT
    acc, l_i, m_i = _unmasked_tiles(acc, l_i, m_i, q, K, V, k_base, v_base, b32, hk32, full_end, offs_m, offs_n,
                                    offs_d, seq, stride_ks, stride_vs, stride_vd, qk_scale, CAUSAL,
                                    UNMASKED_WEIGHT, MAX_OFFSET, TMA, V_KMAJOR, HEAD_DIM, BLOCK_M, BLOCK_N, ROTATE,
                                    WARP_SPECIALIZE)
    # the masked tiles (diagonal, ragged end) keep the clamp under the proof: -inf must give A1's 2^-126
    MASKED_WEIGHT: tl.constexpr = "A1" if WEIGHT == "h15-proved" else WEIGHT
    for start_n in range(full_end, end, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        acc, l_i, m_i = _key_tile(acc, l_i, m_i, q, K, V, k_base, v_base, b32, hk32, start_n, offs_m, offs_n,
                                  offs_d, seq, stride_ks, stride_vs, stride_vd, qk_scale,
                                  True, CAUSAL, MASKED_WEIGHT, MAX_OFFSET, TMA, V_KMAJOR, HEAD_DIM, BLOCK_N)
    if WEIGHT == "noexp":  # rows whose exponents sum to 0 (the first causal row): keep the control finite
        l_i = tl.where(l_i == 0.0, 1.0, l_i)
    out = acc * (v_scale / l_i)[:, None]  # V's descale and the softmax normalisation in one multiply
    if TMA:  # the copy engine drops rows past seq
        O.store([b32, start_m * BLOCK_M, h32 * HEAD_DIM], out.to(O.dtype).reshape(1, BLOCK_M, HEAD_DIM))
    else:
        o_ptrs = O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_os + offs_d[None, :]
        if EVEN_M:
            tl.store(o_ptrs, out.to(O.dtype.element_ty))
        else:
            tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=offs_m[:, None] < seq)


@dataclass
class Operands:
    """Inputs in the layout the kernel reads, made once before timing (build), never inside the timed call."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor  # (b, s, hk, d), or a (b, hk, d, s) copy read through strides when v_kmajor
    v_strides: tuple[int, int, int, int]  # (batch, seq, head, dim) strides of v as the kernel indexes it
    out: torch.Tensor
    descs: tuple | None = None  # config.tma: TensorDescriptors of q, k, v, out, passed in place of the pointers
    kn: torch.Tensor | None = None  # the key-norm partials h15-proved's prologue writes (read by no other variant)


def check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.dim() != 4 or k.shape != v.shape or k.dim() != 4:
        raise UsageError(f"expected q (b, s, h, d) and k, v (b, s, kv_heads, d); got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    b, s, h, d = q.shape
    if k.shape[0] != b or k.shape[1] != s or k.shape[3] != d:
        raise UnsupportedError("the Triton forward takes q and k/v with the same batch, sequence length and "
                               f"head dim; got {tuple(q.shape)} and {tuple(k.shape)}")
    if h % k.shape[2]:
        raise UsageError(f"heads ({h}) must be a multiple of kv heads ({k.shape[2]})")
    if not (q.dtype == k.dtype == v.dtype):
        raise UsageError(f"q, k, v must share one dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    default_config(q.dtype, d)  # raises for dtypes and head dims the kernel does not implement


def prepare_operands(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: KernelConfig) -> Operands:
    check_inputs(q, k, v)
    q, k = q.contiguous(), k.contiguous()
    b, s, hk, d = k.shape
    if config.v_kmajor:
        # (b, hk, d, s): keys contiguous. With TMA the row pitch must be a multiple of 16 bytes, so the key axis
        # is padded (with zeros, never read: the descriptor's shape stops at s)
        s_pad = -(-s * v.element_size() // 16) * 16 // v.element_size() if config.tma else s
        vt = key_major_copy(v, s_pad)[..., :s]
        v_use, v_strides = vt, (vt.stride(0), vt.stride(3), vt.stride(1), vt.stride(2))
    else:
        v_use = v.contiguous()
        v_strides = (v_use.stride(0), v_use.stride(1), v_use.stride(2), v_use.stride(3))
    out_dtype = torch.bfloat16 if q.dtype in _FP8 else q.dtype
    out = torch.empty(q.shape, dtype=out_dtype, device=q.device)
    descs = _descriptors(q, k, v_use, out, config) if config.tma else None
    kn = torch.empty(b * hk * key_norm_blocks(s), dtype=torch.float32, device=q.device)  # a few KB
    return Operands(q, k, v_use, v_strides, out, descs, kn)


def key_major_copy(v: torch.Tensor, s_pad: int) -> torch.Tensor:
    """V (b, s, kv_heads, d) copied to (b, kv_heads, d, s_pad), keys contiguous as FP8 wgmma reads its B operand;
    zeros past s when padded (the Gluon kernel renumbers keys in this copy too)."""
    b, s, hk, d = v.shape
    vt = (torch.zeros if s_pad != s else torch.empty)((b, hk, d, s_pad), dtype=v.dtype, device=v.device)
    vt[..., :s].copy_(v.permute(0, 2, 3, 1))
    return vt


def _descriptors(q, k, v, out, config: KernelConfig) -> tuple:
    """TMA descriptors over 3-D views (batch, rows, columns) of the operands, one (1, rows, head_dim) box per
    tile. The batch axis is kept separate so that a box at the end of one sequence reads zeros rather than the
    next batch's rows (the masked loads' other=0.0), and an output box drops the rows past seq. A box dimension
    may span at most 256 elements, which head dim 256 reaches (the key-major V box is (1, d, block_n))."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    d = q.shape[3]

    def rows(t, block_rows):  # (b, s, heads, d) contiguous -> (b, s, heads * d)
        bb, ss, hh, dd = t.shape
        return TensorDescriptor(t, [bb, ss, hh * dd], [t.stride(0), t.stride(1), 1], [1, block_rows, d])

    if config.v_kmajor:  # (b, hk, d, s) -> (b, hk * d, s): one (d, keys) box per tile
        bb, hk, dd, ss = v.shape
        v_desc = TensorDescriptor(v, [bb, hk * dd, ss], [v.stride(0), v.stride(2), 1], [1, d, config.block_n])
    else:
        v_desc = rows(v, config.block_n)
    return rows(q, config.block_m), rows(k, config.block_n), v_desc, rows(out, config.block_m)


def check_variant(variant: str) -> None:
    """Refuse a variant this kernel does not implement (the catalog knows more: FA4's patches, the simulation's)."""
    if variant not in WEIGHT_MAPS:
        raise UsageError(f"the Triton forward implements variants {', '.join(WEIGHT_MAPS)}, not {variant!r}")


def launch(ops: Operands, causal: bool, variant: str, config: KernelConfig, softmax_scale: float | None = None,
           descale: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> torch.Tensor:
    """One forward into ops.out (overwritten and returned)."""
    check_variant(variant)
    if config.tma and ops.descs is None:
        raise UsageError("a TMA configuration needs operands prepared for it (prepare_operands with that config)")
    q, k, v, o = ops.q, ops.k, ops.v, ops.out
    b, s, h, d = q.shape
    hk = k.shape[2]
    qk_scale = log2_scale(d, softmax_scale, descale)
    grid = (triton.cdiv(s, config.block_m) * b * h,)
    args = ops.descs if config.tma else (q, k, v, o)
    kn_blocks = key_norm_blocks(s)
    if variant in NORM_BOUND_VARIANTS:  # the key norms are part of the call: their cost is in every timing
        launch_key_norms(k, ops.kn)
    _attn_fwd[grid](
        *args, ops.kn, kn_blocks, qk_scale, float(descale[2]), s, h, h // hk, effective_head_group(config, b * h),
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        *ops.v_strides,
        o.stride(0), o.stride(1), o.stride(2),
        **kernel_constants(config, s, d, causal, q.dtype in _FP8, variant),
        num_warps=config.num_warps, num_stages=config.num_stages, **launch_options(config),
    )
    return o


def launch_key_norms(k: torch.Tensor, kn: torch.Tensor, launch_dependents: bool = False) -> None:
    """h15-proved's prologue (either kernel): the largest key norm of every KEY_NORM_BLOCK keys of each head of k
    (b, s, kv_heads, d) into kn, which holds key_norm_blocks(s) partials per head. launch_dependents: the next
    kernel, if launched with programmatic dependent launch, may start before these programs end (_key_norm_max)."""
    b, s, hk, d = k.shape
    _key_norm_max[(b * hk, key_norm_blocks(s))](k, kn, s, hk, k.stride(0), k.stride(1), k.stride(2),
                                               HEAD_DIM=d, BLOCK=KEY_NORM_BLOCK,
                                               LAUNCH_DEPENDENTS=launch_dependents)


def log2_scale(head_dim: int, softmax_scale: float | None, descale: tuple[float, float, float]) -> float:
    """The one multiplier that takes raw Q.K^T to log2 units: the softmax scale (1/sqrt(d) by default), log2(e)
    and the Q and K descale factors (both kernels)."""
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
    return scale * LOG2_E * descale[0] * descale[1]


def effective_head_group(config, batch_heads: int) -> int:
    """config.head_group (either kernel's configuration) reduced to a divisor of batch x heads, so that every group
    is whole."""
    return math.gcd(config.head_group, batch_heads)


def key_norm_blocks(seq: int) -> int:
    """Partial key-norm maxima per head that _key_norm_max writes (h15-proved)."""
    return triton.cdiv(seq, KEY_NORM_BLOCK)


def kernel_constants(config: KernelConfig, seq: int, head_dim: int, causal: bool, fp8: bool, variant: str) -> dict:
    """_attn_fwd's compile-time arguments (shared with triton_compile's cross-compilation)."""
    return dict(HEAD_DIM=head_dim, BLOCK_M=config.block_m, BLOCK_N=config.block_n, CAUSAL=bool(causal),
                WEIGHT=variant, MAX_OFFSET=FP8_MAX_OFFSET if fp8 else 0.0, EVEN_M=seq % config.block_m == 0,
                EVEN_N=seq % config.block_n == 0, TMA=config.tma, V_KMAJOR=config.v_kmajor,
                WARP_SPECIALIZE=config.warp_specialize,
                KN_WIDTH=triton.next_power_of_2(key_norm_blocks(seq)) if variant in NORM_BOUND_VARIANTS else 1,
                ROTATE=config.rotate)


def launch_options(config: KernelConfig) -> dict:
    """Compiler options beyond num_warps/num_stages (shared with triton_compile's cross-compilation)."""
    return {"maxnreg": config.max_registers} if config.max_registers else {}


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, variant: str = "A0",
              config: KernelConfig | None = None, softmax_scale: float | None = None,
              descale: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> torch.Tensor:
    """Convenience for one-off calls (tests): layout conversion and launch together. Timed code should call
    prepare_operands once and launch repeatedly."""
    config = config or default_config(q.dtype, q.shape[-1])
    ops = prepare_operands(q, k, v, config)
    return launch(ops, causal, variant, config, softmax_scale, descale)
