"""The Gluon forward's configuration: every option softbench.kernels.gluon_attn compiles in, its label suffix (what
sessions record and --triton-config takes), the checks that refuse combinations the kernel is not written for, and
the two defaults with the measurements that chose them.

Kept apart from the kernel so that reading or naming a configuration needs neither Gluon's language nor a GPU; the
kernel module turns a GluonConfig into its compile-time constants (gluon_attn.kernel_constants). The comments beside
each option say what it changes in the schedule, whether the output stays the same bit for bit, and what it did on
the H200 (docs/hopper-notes.md has the longer story)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace

import triton

from softbench.core.errors import UnsupportedError, UsageError
from softbench.kernels import ptx_trim
from softbench.kernels.capability import GLUON_HEAD_DIMS, TRITON_HEAD_DIMS, dims_text
from softbench.kernels.triton_attn import _FP8, FOLDED_VARIANTS, FP8_MAX_OFFSET
from softbench.operators import HYBRID_BITS

# the ping-pong's turn hand-overs: their label suffixes, and the kernel's PINGPONG constant for each (0: no ping-pong)
HANDOVERS = {"mbarrier": "-pp", "named": "-ppn"}
PINGPONG_MODE = {"mbarrier": 1, "named": 2}
# O's rescale per tile, and its label suffix: "always" multiplies O by alpha after every tile; "moved" lets a warp
# jump over the multiply where all 16 of its rows kept their running maximum (alpha = 1 exactly, and o * 1 is o,
# so the output is the same bit for bit). The multiply is one FMUL per element of O: at head dim 128 and 128-key
# tiles as many as the tile has scores per thread, one of the about seven instructions per score of the loop.
RESCALES = {"always": "", "moved": "-rs", "lazy": "-rl", "lazy-anchor": "-rla", "lazy-anchor-near": "-rlan"}
# "lazy" (A0 only; other variants take it as "moved"): FA4's conditional rescale on top of "moved". The running
# maximum moves only where a tile's exceeds it by more than LAZY_THRESHOLD (log2 units), so that alpha is 1, and the
# multiply jumped over, in most tiles rather than only where no row of the warp found a larger score. P's weights
# are then up to 2^threshold above the usual largest, so at FP8 the offset that places them in E4M3's range is
# lowered by as much (LAZY_FP8_MAX_OFFSET: the largest weight stays at most 2^8). Rowmax-H15's forms keep the exact
# running maximum: their operator anchors the lattice at it. "lazy-anchor" (label -rla) is "lazy" for A0 and for
# h15-folded too, whose lattice is then anchored at the lazily moved maximum (triton_attn._folded_weights): under
# "moved" h15-folded multiplies O in 61% of a warp's tiles at FP8 causal 8K against A0's 13% under "lazy"
# (tools/analysis/rescale_skip_rates.py), and the exponential-free control, which saves only h15-folded's shift,
# ran 9 points of FA3 faster (20261202T174104Z against 173207Z).
LAZY_THRESHOLD = {8: 2.0, 16: 8.0}  # by the operands' bits; 8.0 is FA4's (log2 of 256)
# the rescale modes that move a maximum lazily, and the variants whose maximum (h15-folded: anchor) they move
LAZY_VARIANTS = {"lazy": ("A0", ), "lazy-anchor": ("A0", *FOLDED_VARIANTS),
                 "lazy-anchor-near": ("A0", *FOLDED_VARIANTS)}
# "lazy-anchor-near" (label -rlan, 16-bit inputs only) is "lazy-anchor" with h15-folded's anchor moved past 2 octaves,
# FP8's threshold, while A0 keeps 8. Under the 16-bit default's exact anchor (-rl) h15-folded multiplies O in about
# 61% of a warp's tiles at causal 8K (tools/analysis/rescale_skip_rates.py) where A0 almost never does, and read 2.6%
# slower than A0 (20261204T101505Z); under -rla's 8 octaves its gates failed at BF16 (recovered error -0.352 octaves
# against the bound's -0.285, 20261203T165642Z: tiles of a row on lattices of other phases), while at FP8 the same
# rule with 2 octaves passes them. At FP8 -rlan would be -rla itself, so it is refused there. On the H200 (2026-12-04
# 10:30, tools/gpu/bf16_near_anchor.sh) its outputs are the simulation's with the same rule, but the gates fail at
# BF16 as under -rla (recovered error -0.352 octaves against -0.285, 20261204T103047Z) and h15-folded gains nothing
# (0.977 of A0 at causal 8K, 103133Z): no default takes it; it stays so that those sessions can be run again.
ANCHOR_NEAR_THRESHOLD = LAZY_THRESHOLD[8]  # FP8's, under which -rla's gates pass
LAZY_FP8_MAX_OFFSET = FP8_MAX_OFFSET - LAZY_THRESHOLD[8]
# How a consumer warpgroup's warps synchronize around the K/V ring, and the label suffix: "membar" keeps the
# partition barrier Triton 3.6 puts before every mbarrier wait and release (three per tile); "mbarrier" takes them
# out of the PTX (softbench.kernels.ptx_trim says why none is needed), leaving the mbarriers alone, as in FA3's loop.
SYNCS = {"membar": "", "mbarrier": "-tb"}
# The running row sums, and the label suffix: "row" keeps each row's full sum, reduced across the four threads of a
# quad after every tile (two shuffles and two adds per row); "thread" keeps each thread's own part and adds the
# parts once, after the last tile, as FA3's softmax does. The same operator, but the sum is added in another order,
# so its last bits differ from the plain kernel's. "mma" leaves the sums to the tensor core: P times a tile of ones
# (keys x 8), one m64n8 wgmma per key step issued beside P.V, its 8 columns each the rows' sums, so the loop has no
# adds for them at all (64 FADD per tile and thread at 128 keys). It sums P as P.V reads it (rounded to the operand
# dtype) rather than in FP32, so the normalizer is the sum of the very weights O was built from. At FP8 the wgmma's
# accumulator keeps fewer bits than FP32 and truncates (DeepSeek-V3 reports about 14): over a whole row of positive
# weights the losses add up, and on the H200 "mma" doubled A0's error against FP32 at FP8 causal 8K (1.48e-2
# against 7.1e-3, the default's and FA3's; 20261202T132424Z). "mma-tile" (-lmt) takes each tile's sums from a
# fresh accumulator and adds them to FP32 running sums (2 adds per tile and thread): the limited accumulation then
# spans one tile of 128 keys, not the row.
ROW_SUMS = {"row": "", "thread": "-lt", "tree": "-ltt", "mma": "-lm", "mma-tile": "-lmt"}
# the kernel's ROW_SUM_PARTS: 0 full row sums, 1 and 2 per thread, 3 and 4 on the tensor core
ROW_SUM_MODE = {"row": 0, "thread": 1, "tree": 2, "mma": 3, "mma-tile": 4}
ONES_COLS = 8  # the ones tile's columns: wgmma's smallest N
# A0's exponentials partly emulated (label -e<N>): one score in N takes softbench.operators.exp2_emulated, eight
# FMA-pipe instructions, instead of MUFU.EX2, as FA4's sm_100 kernel does for a share of its scores. At FP8 on
# Hopper the tensor cores finish 16 scores per clock and SM, exactly the MUFU's rate, so A0 waits on the MUFU while
# about 8 issue slots per score are left and A0 uses about 7: taking one score in 16 off the MUFU adds 7/16 of an
# instruction per score. 0: off.
EMULATE_EVERY = (0, 2, 4, 8, 16, 32)
# the variants the split Q.K^T (-sq) computes as their operators: those whose weights any positive factor may scale
SPLIT_VARIANTS = ("A0", "noexp")
# The key loop's form, and the label suffix: "one" loop whose body branches per tile to the weights with or without
# the mask; "two" loops, the tiles without a mask first, then those with one (causal: the diagonal), so that the hot
# loop's body is one basic block that ptxas can schedule whole (it interleaves one row's exponentials with the other
# row's maximum, as nvcc does in FA3's loop, but also hoists P.V's wait above the exponentials); "two-fenced" the
# same with that wait held below the weights (_schedule_fence). The same arithmetic in the same order: the same output
# bit for bit.
TILE_LOOPS = {"one": "", "two": "-ml", "two-fenced": "-mlf"}
TILE_LOOPS_MODE = {"one": 0, "two": 1, "two-fenced": 2}  # the kernel's MASKED_LOOP
# Where O is multiplied by a tile's alpha, and the label suffix: "tail" at the end of the tile, once its P.V has
# completed, before the next tile's Q.K^T can be issued; "pv" (FA3's RescaleOBeforeGemm, which it uses above head
# dim 128) in the next iteration, between that Q.K^T's issue and P.V's, so that the multiply runs beside Q.K^T. The
# same multiplies of the same values in the same order: the same output bit for bit.
RESCALE_AT = {"tail": "", "pv": "-ro"}
# Where a 16-bit P is rounded to its operand, and the label suffix: "tail" at the end of the tile (a cast to packed
# pairs that ptxas then moves into the operand's order with one PRMT per register, 32 per tile and thread), "wgmma"
# (-pm) carried across the loop in FP32 and rounded just before P.V is issued, as at FP8, where the conversion
# packs the pairs in the operand's order itself: no PRMT, and nothing after P.V's wait but O's rescale. The same
# rounding of the same values: the same output bit for bit. FP8 always rounds at the wgmma (_p_carry).
P_ROUND = {"tail": "", "wgmma": "-pm"}
# How query blocks reach programs, and the label suffix: "blocks" one program per block, dispatched by the hardware
# as SMs free up; "rounds" (-pt) as many programs as the SMs hold, block r * programs + p in round r (_round_item);
# "dynamic" (-pd) as many programs, each taking its first block by its id and every further one from a global counter
# (FA3's DynamicPersistentTileScheduler does the same), in the program order of "blocks", so that SMs that finish
# early take more, as under the hardware's dispatch, while a program's next block starts behind its current one: the
# producer fetches the next block's number, loads its Q once the consumers are done with the current Q, and its first
# key tiles while they finish. The same output bit for bit as "blocks".
# "dynamic-deferred" (-pde): "dynamic" with each block's O normalized and stored only once the next block's first
# Q.K^T has been issued, so that the tensor core works through the epilogue (one block's idle tensor time is about 2.3
# tiles' at BF16, tools/analysis/tensor_idle_fit.py); the same output bit for bit. On the H200 it was slower (2026-12-04
# 12:44-12:47): A0 / FA3 0.979 at BF16 causal 8K, 0.988 at 16K, 1.042 at FP8 causal 8K (20261204T124448Z, 124605Z,
# 124526Z), against -pd's 1.004, 0.997 and 1.064 across sessions. Under Nsight Compute (130844Z, 130909Z) it takes 1.9%
# more SM cycles and its tensor core is idler (82.8% busy against 84.3%); its warps wait no longer at the mbarriers
# (the Q wait included) but longer at the wgmma's issue (HGMMA samples +30%, more of them memory-throttled), and the
# 33 spill loads it adds run once per block. The extra wgmma samples are the key loop's (3,117 to 4,097), not those of
# the Q.K^T the epilogue sits under (175 to 180): the boundary slows the loop after it. No default takes it.
# "dynamic-overlap" (-pdo): "dynamic" with one block's last P.V issued after the next block's first Q.K^T and waited for
# after that tile's weights, as the key loop overlaps tile i's Q.K^T with tile i - 1's P.V, so that the tensor core
# works through the first tile's softmax; each consumer has two Q buffers, so that the producer loads a block's Q while
# the block before is still running (once the producer has issued that block's key tiles, not only once its last
# Q.K^T has completed). O, P and the row sums cross into the next block as the loop carries them from tile to tile, so
# ptxas sees the loop's own pattern. The same output bit for bit. Written for whole Q.K^T tiles, row sums kept in
# registers and O rescaled at the next P.V (not with -sq, -lm, -lmt; with -ro). On the H200 it was not faster
# (2026-12-04 14:37-14:51):
# at BF16 causal 8K, 12 s against FA3, A0 / FA3 0.957, 0.949, 0.955 without -pm against -pd's 0.964, 0.969, 0.948
# alternating (20261204T143756Z-145025Z), and 0.883 with -pm (143931Z), whose FP32 P leaves the first consumer
# spilling in its key loops, against the -pd default's 0.999 (144013Z). Under Nsight Compute without -pm (144118Z for
# -pd; 144139Z, 145058Z for -pdo) it takes 1.8-2.2% more SM cycles, the tensor core busy 79.3-79.6% against 80.8%: its
# warps wait less at the wgmma waits and the mbarriers, and more at the key loop's wgmma issue (+209 to +381 samples,
# the second consumer's most) and at spill loads (two per key-loop iteration of the first consumer). No default takes
# it.
# The producer's order of loads, and the label suffix: "paired" issues tile i's K, then its V, then tile i + 1's K;
# "k-ahead" (-ka) tile i + 1's K before tile i's V, as FA3's producer does under its intra-warpgroup overlap. A
# consumer frees tile i's K slot once its Q.K^T has completed, early in its iteration i, and its V slot only once
# P.V(i) has, at the end of iteration i + 1. In pairs the producer waits for that V slot before it may issue the next
# K into the slot Q.K^T freed half an iteration before, so each K is issued about one iteration before its Q.K^T.
# Under Nsight Compute the 16-bit default's consumers took about twice FA3's samples at their waits for K and V
# (both consumers 3,363 and 2,521 against FA3's 1,516 and 1,459 at BF16 causal 16K, 20261204T100505Z). K ahead
# gives each K about half an iteration more; V keeps its lead. The same tiles into the same slots: the same output
# bit for bit. The 16-bit default takes it since 2026-12-04 17:40 (DEFAULT says why, and why the FP8 default does not).
LOADS = {"paired": "", "k-ahead": "-ka"}
# V's ring on its own length (GluonConfig.v_stages, label -v<N>): K keeps `stages` buffers and V takes N. Under -ka
# the producer issues K(i + 1), then V(i), whose slot frees when P.V(i - STAGES) has completed, at the end of the
# consumers' iteration i - STAGES + 1; K(i + 2) waits behind that V. With two stages each V is issued about one
# iteration before its P.V, each K about one and a half before its Q.K^T, and the audit of -ka at BF16 causal 16K
# put more of the consumers' samples at the V waits (2,823) than at the K waits (2,521; 20261204T172302Z). A third V
# buffer frees V's slot one iteration earlier. At BF16 under the dynamic schedule the shared memory holds two Q
# tiles, two O tiles, two K and three V tiles (224 KiB of the 227 a block may take); a third K as well does not fit.
# The same tiles in the same order, another slot each: the same output bit for bit. On the H200 (2026-12-04
# 19:26-20:05, tools/gpu/v_ring.sh) it was level with the default at every shape, after -ka and in pairs: A0 against
# FA3 per pair +0.21% and +0.35% at BF16 causal 16K against -ka's +0.12% and +0.49% beside them (20261204T192650Z-
# 193026Z), h15-folded at FP8 causal 8K +13.10% against +13.59% (193812Z, 193851Z). The consumers' V waits fell by an
# eighth and the tensor core stayed as busy (88.3%, 194925Z; tools/analysis/mbarrier_waits.py): the producer now
# waits at K's free slot alone, so V(i) still goes out behind K(i + 1). The mirror, three K buffers and two V (s3-v2,
# the same bytes), was level as well (21:17-21:24: +0.12% and -0.05% at causal 16K, 20261204T211715Z, 212130Z): the
# length of neither ring is what holds A0 at BF16. No default takes either.
SCHEDULES = {"blocks": "", "rounds": "-pt", "dynamic": "-pd", "dynamic-deferred": "-pde", "dynamic-overlap": "-pdo"}
SCHEDULE_MODE = {"blocks": 0, "rounds": 1, "dynamic": 2, "dynamic-deferred": 3,
                 "dynamic-overlap": 4}  # the kernel's PERSISTENT


@dataclass(frozen=True)
class GluonConfig:
    """block_n: keys per K/V tile; stages: K/V buffers in the ring; consumer_registers / loader_registers: the
    per-thread register counts the worker partitions ask for (setmaxnreg: the second consumer and the producer;
    the first consumer, the default partition, gets what the launch leaves, 240 with two consumers and 232 with
    one, where consumer_registers has no partition to apply to); head_group as KernelConfig.head_group;
    pingpong: the two consumers take turns issuing their wgmmas (FA3's inter-warpgroup schedule: one's softmax
    runs while the other's matrix products do), handing the turn over through a pair of mbarriers (handover
    "mbarrier", label -pp) or, as FA3 does, through two named barriers (bar.sync / bar.arrive, handover "named",
    label -ppn): no shared-memory word to poll, the hardware barrier releases the waiting warpgroup (of the persistent
    schedules only "dynamic" takes a ping-pong, -ppn-pd: the turns run on from block to block; on the H200 at parity
    with -pd at the three BF16 shapes, 2026-12-04 15:29-15:35, no default takes it);
    consumers: 2 (a program holds 128 query rows, both warpgroups sharing each K/V tile) or 1 (64 rows, a third
    of the shared memory, so that two programs share an SM as the Triton kernel's FP8 configuration does).
    rescale: "always" multiplies O by each tile's alpha; "moved" (label -rs) lets a warp jump over that multiply
    where all its rows kept their maximum (the same output bit for bit; on the H200 no faster at FP8 causal 8K,
    docs/hopper-notes.md); "lazy" (label -rl): the same jump, with A0's running maximum kept until a tile's exceeds
    it by more than LAZY_THRESHOLD (not bit for bit: P is rounded at another scale); "lazy-anchor" (label -rla):
    "lazy", and h15-folded's lattice anchored at such a lazily moved maximum (its weights' phase follows the
    anchor in force; softbench.kernels.sim computes the same with rescale_threshold); "lazy-anchor-near" (label
    -rlan, 16 bits only): "lazy-anchor" with h15-folded's anchor moved past ANCHOR_NEAR_THRESHOLD octaves.
    sync: "membar" (Triton's barriers as placed) or "mbarrier" (label -tb): the warpgroup barrier before each
    mbarrier wait and release removed from the PTX (softbench.kernels.ptx_trim; the same arithmetic).
    row_sum: "row" (each tile's row sums reduced across the quad), "thread" (label -lt) or "tree" (-ltt, the
    tile's parts added pairwise): each thread's partial sums carried across the loop and added once at the end, as
    FA3 does (the same operator summed in another order: not bit for bit the plain kernel's output); "mma" (-lm):
    summed by the tensor core, P times a tile of ones, from P as P.V reads it, accumulated over the row there;
    "mma-tile" (-lmt): the same per tile, the tiles' sums added in FP32 (ROW_SUMS says why).
    rescale_at: "tail" (O multiplied at the end of each tile) or "pv" (label -ro): just before the next P.V is
    issued, beside the next Q.K^T (the same output bit for bit).
    split_qk (label -sq, 16 bits, A0 and noexp only): each key tile's Q.K^T as two wgmma groups of half the keys;
    the first half's weights are computed while the second half is still in the tensor core, the running maximum
    moves once per half (the first half's weights then take the second's alpha, jumped over where no row of a warp
    moved), and P.V is two chained wgmmas on V's halves. The same online softmax at half-tile steps: not bit for
    bit the plain kernel's output. On the H200 it was slower (2026-12-03, docs/hopper-notes.md): no default takes it.
    tile_loops (TILE_LOOPS): "two" (label -ml) runs the tiles that need a mask in a key loop of their own, "two-fenced"
    (-mlf, both defaults) also holds P.V's wgmma wait below the exponentials; the same output bit for bit.
    emulate (label -e<N>): A0 computes one exp2 in N (the scores whose key bits hybrid_picks tests, fixed per
    register) on the FMA pipe (EMULATE_EVERY), the others on the MUFU; other variants are unchanged.
    schedule (SCHEDULES): "rounds" (label -pt): as many programs as the SMs hold at once (one per SM with two
    consumers, two with one), each taking query blocks in rounds, longest first, alternating direction
    (_round_item), the producer loading the next block's keys while the consumers finish this one's (FA3 runs
    causal attention on a persistent schedule); the same output bit for bit. The rounds balance when the blocks
    are numbered longest first across the whole launch, that is when head_group holds all of batch x heads (hg16 at
    b1 h16); with a smaller group each group restarts from its longest blocks. On the H200 (2026-12-03,
    docs/hopper-notes.md) it was slower where it matters: h15-folded 1.004-1.006 of FA3 at FP8 causal 8K against
    1.066 for the same order without it, and 6-8 points lost by every variant at non-causal 8K; so no default takes
    it. "dynamic" (-pd):
    the same programs, each block after a program's first taken from a global counter in the order of "blocks"
    (_loader_persistent), its Q loaded by the producer; O leaves through a buffer of its own at every dtype. Both
    defaults take it since 2026-12-04 06:10. (From 06:10 to 07:35 it was refused at FP8 with two consumers, for
    outputs that turned out to be -ro's: _key_tile says why.) "dynamic-deferred" (-pde): "dynamic" with each block's
    O normalized and stored after the next block's first Q.K^T is issued (SCHEDULES; slower on the H200, no default
    takes it); not with -sq. "dynamic-overlap" (-pdo): "dynamic" with each block's last P.V in the tensor core while
    the next block's first Q.K^T and weights are computed, and two Q buffers per consumer (SCHEDULES); not with -sq,
    -lm, -lmt; with -ro (not faster on the H200, no default takes it).
    p_round (label -pm): a 16-bit P carried in FP32 and rounded at P.V's wgmma (P_ROUND); the same output bit for
    bit.
    loads (LOADS): "k-ahead" (label -ka): the producer issues tile i + 1's K before tile i's V; the same output bit
    for bit.
    v_stages (label -v<N>): V's ring takes N buffers, K's keeps `stages` (LOADS says why); the same output bit for bit.
    grid_dependency (label -gdc; h15-proved and h15-folded, the variants whose call starts with the key norms'
    kernel): the forward is launched with programmatic dependent launch, the norms' programs let it start as soon
    as they have all begun, and its consumers wait for the norms (griddepcontrol.wait) just before they first read
    them, so that its launch and prologue (barriers, Q and the first K and V tiles in flight) overlap the norms'
    last programs instead of following them; other variants launch as without it. The same output bit for bit.
    Labels read gluon-n128s2-c240l24-hg8[-pp|-ppn][-g1][-pt|-pd|-pde|-pdo][-rs|-rl|-rla][-ro][-lt|-ltt|-lm|-lmt][-pm]
    [-tb][-ml|-mlf][-sq][-e16][-ka][-v3][-gdc] (what sessions record and --triton-config takes)."""

    block_n: int = 128
    stages: int = 2
    consumer_registers: int = 240
    loader_registers: int = 24
    head_group: int = 8
    pingpong: bool = False
    consumers: int = 2
    handover: str = "mbarrier"  # how the ping-pong passes the turn: "mbarrier" or "named" (barriers)
    rescale: str = "always"  # O's rescale per tile: "always", or "moved" (label -rs): skipped by a warp whose
    # rows all kept their maximum (alpha = 1 exactly, so the result is the same bit for bit)
    sync: str = "membar"  # SYNCS: "mbarrier" (label -tb) leaves the consumers' mbarriers as their only sync
    row_sum: str = "row"  # ROW_SUMS: "thread" (label -lt) keeps per-thread partial row sums across the loop,
    # "tree" (label -ltt) the same with each tile's parts added pairwise (a shorter chain of adds), "mma" (-lm) by
    # the tensor core, "mma-tile" (-lmt) by the tensor core per tile and added in FP32
    rescale_at: str = "tail"  # RESCALE_AT: "pv" (label -ro) multiplies O just before the next P.V is issued
    schedule: str = "blocks"  # SCHEDULES: "rounds" (label -pt) and "dynamic" (-pd) run as many programs as the SMs
    # hold, each taking query blocks in turn
    split_qk: bool = False  # label -sq: each tile's Q.K^T in two halves, the first weighed while the second runs
    emulate: int = 0  # label -e<N>: A0 takes one exp2 in N on the FMA pipe (EMULATE_EVERY), not the MUFU; 0: none
    p_round: str = "tail"  # P_ROUND: "wgmma" (label -pm) carries a 16-bit P in FP32, rounded at P.V's issue
    tile_loops: str = "one"  # TILE_LOOPS: "two" (label -ml) runs the tiles that need a mask in a key loop of their
    # own; "two-fenced" (-mlf) also holds P.V's wait below the weights (_schedule_fence)
    loads: str = "paired"  # LOADS: "k-ahead" (label -ka) has the producer issue the next K before this tile's V
    v_stages: int = 0  # label -v<N>: V's ring takes N buffers, K's keeps `stages` (0: V's as K's; LOADS says why)
    grid_dependency: bool = False  # label -gdc: the forward launched to overlap the key norms' kernel before it

    def __post_init__(self):
        if self.block_n not in (64, 128):
            raise UsageError(f"the Gluon forward takes key tiles of 64 or 128, not {self.block_n}")
        if self.stages < 2:
            raise UsageError(f"the Gluon forward needs at least 2 K/V stages, got {self.stages}")
        for name in ("consumer_registers", "loader_registers"):
            v = getattr(self, name)
            if not 24 <= v <= 256 or v % 8:
                raise UsageError(f"{name} must be a multiple of 8 in 24..256 (setmaxnreg), got {v}")
        if self.head_group < 1:
            raise UsageError(f"head_group must be >= 1, got {self.head_group}")
        if self.consumers not in (1, 2):
            raise UsageError(f"the Gluon forward runs 1 or 2 consumer warpgroups per program, not {self.consumers}")
        if self.pingpong and self.consumers != 2:
            raise UsageError("ping-pong needs two consumer warpgroups")
        if self.handover not in HANDOVERS:
            raise UsageError(f"the ping-pong hands the turn over by {' or '.join(HANDOVERS)}, not {self.handover!r}")
        if self.handover != "mbarrier" and not self.pingpong:
            raise UsageError("a turn hand-over needs the ping-pong (pingpong=True)")
        if self.rescale not in RESCALES:
            raise UsageError(f"O is rescaled {' or '.join(RESCALES)}, not {self.rescale!r}")
        if self.sync not in SYNCS:
            raise UsageError(f"the consumers synchronize by {' or '.join(SYNCS)}, not {self.sync!r}")
        if self.row_sum not in ROW_SUMS:
            raise UsageError(f"the row sums are kept per {' or '.join(ROW_SUMS)}, not {self.row_sum!r}")
        if self.rescale_at not in RESCALE_AT:
            raise UsageError(f"O is rescaled at the {' or '.join(RESCALE_AT)}, not {self.rescale_at!r}")
        if self.schedule not in SCHEDULES:
            raise UsageError(f"the query blocks are scheduled as {' or '.join(SCHEDULES)}, not {self.schedule!r}")
        if self.schedule != "blocks" and self.pingpong and (self.schedule != "dynamic" or self.handover != "named"):
            raise UsageError("of the persistent schedules (-pt, -pd, -pde, -pdo) only -pd is written with a "
                             "ping-pong, and only with the named barriers' hand-over (-ppn)")
        if self.split_qk and self.schedule == "dynamic-deferred":
            raise UsageError("the deferred epilogue (-pde) is written for whole Q.K^T tiles, not with -sq")
        if self.schedule == "dynamic-overlap" and (self.split_qk or self.row_sum in ("mma", "mma-tile")
                                                   or self.rescale_at != "pv"):
            raise UsageError("the overlapped block boundary (-pdo) is written for whole Q.K^T tiles, row sums in "
                             "registers and O rescaled at the next P.V (-ro), not with -sq, -lm or -lmt")
        if self.split_qk and (self.block_n != 128 or self.pingpong or self.row_sum in ("mma", "mma-tile")
                              or self.rescale_at == "pv"):
            raise UsageError("the split Q.K^T (-sq) is written for 128-key tiles without the ping-pong (-pp, -ppn), "
                             "the tensor core's row sums (-lm, -lmt) and -ro")
        if self.p_round not in P_ROUND:
            raise UsageError(f"P is rounded to its operand at the {' or '.join(P_ROUND)}, not {self.p_round!r}")
        if self.p_round != "tail" and self.split_qk:
            raise UsageError("P rounded at the wgmma (-pm) is written for whole Q.K^T tiles, not with -sq")
        if self.tile_loops not in TILE_LOOPS:
            raise UsageError(f"the key tiles run in {' or '.join(TILE_LOOPS)} loops, not {self.tile_loops!r}")
        if self.tile_loops != "one" and self.split_qk:
            raise UsageError("the masked tiles' own loop (-ml) is written for whole Q.K^T tiles, not with -sq")
        if self.loads not in LOADS:
            raise UsageError(f"the producer orders its loads {' or '.join(LOADS)}, not {self.loads!r}")
        if self.v_stages and (self.v_stages < 2 or self.v_stages == self.stages):
            raise UsageError(f"V's own ring (-v<N>) takes at least 2 buffers and not K's {self.stages} (leave -v out "
                             f"for that), not {self.v_stages}")
        if self.emulate not in EMULATE_EVERY or (self.emulate and HYBRID_BITS[self.emulate] >= self.block_n):
            raise UsageError(f"A0 emulates one exp2 in {', '.join(str(n) for n in EMULATE_EVERY if n)} "
                             f"(-e<N>; N up to {self.block_n // 4} with {self.block_n}-key tiles), "
                             f"not one in {self.emulate}")

    def label(self) -> str:
        return (f"gluon-n{self.block_n}s{self.stages}-c{self.consumer_registers}l{self.loader_registers}"
                f"-hg{self.head_group}" + (HANDOVERS[self.handover] if self.pingpong else "")
                + ("-g1" if self.consumers == 1 else "") + SCHEDULES[self.schedule] + RESCALES[self.rescale]
                + RESCALE_AT[self.rescale_at]
                + ROW_SUMS[self.row_sum] + P_ROUND[self.p_round] + SYNCS[self.sync] + TILE_LOOPS[self.tile_loops]
                + ("-sq" if self.split_qk else "")
                + (f"-e{self.emulate}" if self.emulate else "") + LOADS[self.loads]
                + (f"-v{self.v_stages}" if self.v_stages else "") + ("-gdc" if self.grid_dependency else ""))

    @property
    def value_stages(self) -> int:
        """V's buffers: v_stages where the label names them, else as many as K's."""
        return self.v_stages or self.stages

    def to_dict(self) -> dict:
        return {**asdict(self), "kernel": "gluon", "label": self.label()}

    def plain(self) -> "GluonConfig":
        """This configuration without the options that change no output bit (-rs, -ro, -pm, -tb, -pt, -ml, -mlf, -ka,
        -v<N>, -gdc):
        what their outputs are checked against, bit for bit. The row sums' form stays: -lt and -ltt add them in
        another order, -lm adds the rounded P; so does -rl, which rounds A0's P at another scale, and -e<N>, whose
        emulated exponentials differ from the MUFU's in their last bits."""
        return replace(self, rescale=self.rescale if self.rescale in LAZY_VARIANTS else "always", rescale_at="tail",
                       p_round="tail", sync="membar", schedule="blocks", tile_loops="one", loads="paired",
                       v_stages=0, grid_dependency=False)

    @classmethod
    def from_label(cls, label: str) -> "GluonConfig":
        m = re.fullmatch(r"gluon-n(\d+)s(\d+)-c(\d+)l(\d+)-hg(\d+)(-ppn|-pp)?(-g1)?(-pt|-pdo|-pde|-pd)?(-rs|-rlan|-rla|-rl)?(-ro)?(-ltt|-lt|-lmt|-lm)?(-pm)?(-tb)?(-mlf|-ml)?(-sq)?(?:-e(\d+))?(-ka)?(?:-v(\d+))?(-gdc)?",
                         label.strip())
        if not m:
            raise UsageError(f"not a Gluon configuration label: {label!r} (expected e.g. gluon-n128s2-c240l24-hg8: "
                             "key tile, K/V stages, consumer and loader registers, heads per group; -pp: ping-pong "
                             "(-ppn: through named barriers); -g1: one consumer warpgroup; -pt: persistent programs, "
                             "one per SM slot, taking query blocks in rounds (-pd: each its next from a counter; "
                             "-pde: and each block's O stored under the next block's first Q.K^T; -pdo: each "
                             "block's last P.V under the next block's first Q.K^T, two Q buffers per consumer); "
                             "-rs: O's rescale skipped "
                             "where no row of a warp moved its maximum (-rl: A0's maximum moved lazily; -rla: A0's and h15-folded's; -rlan: h15-folded's past 2 octaves at 16 bits); -ro: O rescaled just before the next P.V; "
                             "-lt: per-thread partial row sums (-ltt: added pairwise; -lm: on the tensor core; -lmt: per tile there, "
                             "added in FP32); -pm: a 16-bit P rounded at P.V's wgmma; -tb: "
                             "no warpgroup barrier before the mbarrier waits and releases; -ml: the masked tiles in a loop of "
                             "their own (-mlf: P.V's wait held below the weights); -sq: Q.K^T in two halves of "
                             "keys (16 bits); -e16: A0 emulates one "
                             "exp2 in 16 on the FMA pipe; -ka: the producer loads the next K before this tile's V; -v3: three V "
                             "buffers, K keeping s<N>; -gdc: the forward's launch overlaps the key norms' kernel)")
        handover = _option_named(HANDOVERS, m.group(6)) if m.group(6) else "mbarrier"
        return cls(*(int(g) for g in m.groups()[:5]), pingpong=m.group(6) is not None,
                   consumers=1 if m.group(7) else 2, handover=handover, schedule=_option_named(SCHEDULES, m.group(8)),
                   rescale=_option_named(RESCALES, m.group(9)), rescale_at=_option_named(RESCALE_AT, m.group(10)),
                   row_sum=_option_named(ROW_SUMS, m.group(11)), p_round=_option_named(P_ROUND, m.group(12)),
                   sync=_option_named(SYNCS, m.group(13)), tile_loops=_option_named(TILE_LOOPS, m.group(14)),
                   split_qk=m.group(15) is not None, emulate=int(m.group(16) or 0),
                   loads=_option_named(LOADS, m.group(17)), v_stages=int(m.group(18) or 0),
                   grid_dependency=m.group(19) is not None)


def _option_named(suffixes: dict, suffix: str | None) -> str:
    """The option whose label suffix this is (a table of option -> suffix; no suffix: the option whose is "")."""
    return next(name for name, own in suffixes.items() if own == (suffix or ""))


# Since 15:35 both defaults move A0's running maximum lazily (-rl: only where a tile's exceeds it by more than 2
# octaves at FP8, 8 at BF16), so O's rescale is jumped over in most tiles. In one lease against FA3 in the same
# interleavings: FP8 A0 / FA3 0.993 causal 8K, 0.989 non-causal 8K, 1.003 causal 16K (A0 the fastest exact kernel
# timed; 20261202T152332Z, 152542Z, 152641Z) against -lmt's 0.977, 0.997, 0.980 (134042Z, 134203Z, 134302Z, the
# lease before); sustained at the cap 0.977 against 0.960 (153052Z, 134403Z). BF16 0.916 causal 8K, 0.927
# non-causal 8K, 0.905 causal 16K (152429Z, 152743Z, 152834Z) against the full rescale's 0.893 causal 8K (132827Z).
# A0's error against FP32 stays within 1.05x of FA3's (sessions/gluon-probe-h200-20261202-1522-rl-fp8, the
# smoke checks). Rowmax-H15's forms keep the exact maximum (their outputs are unchanged bit for bit).
# With O's rescale mostly gone, the BF16 loop also gains from per-thread row sums added pairwise (-ltt), which gave
# nothing under the full rescale (0.896 beside 0.896, 114034Z, 115238Z): A0 / FA3 0.934 and 0.931 causal 8K against
# -rl's 0.913 in the same lease (155108Z, 155439Z; 155536Z), 0.937 non-causal 8K, 0.925 causal 16K (155202Z,
# 155304Z). So the 16-bit default is -rl-ltt-tb. h15-sat, which takes -rl as -rs, reads 0.929-0.930 causal 8K under it
# against 0.938 under -rl: the BF16 Rowmax-H15 figures name their configuration.
# Since 2026-12-04 01:30 both defaults run the masked tiles in a loop of their own with P.V's wait fenced below the
# exponentials (-mlf): in one lease, 12 s interleavings at causal 8K, BF16 A0 / FA3 0.936 against the default's 0.905
# beside it (20261204T000032Z, 20261203T235902Z; -ml without the fence 0.914, 235947Z), FP8 A0 the fastest exact
# kernel with FA3 at 0.973 of it against 1.000 (000244Z, 000119Z; -ml 0.992, 000202Z). At the other shapes, a later
# lease: FP8 non-causal 8K FA3 0.957 of A0, causal 16K 0.960 (011846Z, 012007Z); BF16 A0 / FA3 0.947 non-causal
# 8K, 0.935 causal 16K, 0.948 causal 8K (012052Z, 012139Z, 012232Z). Outputs equal bit for bit to one loop's
# (sessions/gluon-probe-h200-20261203-2334-loops-bf16, -20261204-0003-loops-fp8).
# Since 2026-12-04 04:20 the 16-bit default also rounds P at P.V's wgmma (-pm: 32 PRMT fewer per tile, no conversion
# left between P.V's wait and the next Q.K^T) and multiplies O by alpha beside the next Q.K^T (-ro). In one lease at
# equal clock against FA3: BF16 A0 / FA3 at causal 8K 0.968 (12 s, 20261204T035057Z) against -pm's 0.941 and the
# -mlf default's 0.925 in the same minutes (035014Z, 034933Z); with 30 s, 0.978 causal 8K, 1.000 non-causal 8K (A0
# the fastest exact kernel, FA3 0.998 of it), 0.995 causal 16K (035746Z, 035844Z, 035953Z) against the -mlf
# default's 0.932, 0.949, 0.938 (035244Z, 035431Z, 035637Z); 0.981 causal 8K in two processes per kernel (040628Z).
# -ro without -pm: 0.937 (040743Z). Outputs equal bit for bit to the plain kernel's
# (sessions/gluon-probe-h200-20261204-0348-p-round-bf16, -0408-p-round-repeat-bf16). h15-sat is slower under it
# (0.909-0.916 of FA3 against 0.917-0.935 under -mlf alone): the BF16 Rowmax-H15 figures name their configuration.
# Since 2026-12-04 06:10 both defaults run the dynamic persistent schedule (-pd): one program per SM slot, each
# taking its next query block from a global counter, its producer loading the next Q and key tiles while the
# consumers finish. In one lease at equal clock against FA3, 30 s each: BF16 A0 / FA3 0.993 causal 8K, 1.015
# non-causal 8K (A0 the fastest exact kernel, FA3 0.985 of it), 0.993 causal 16K, 0.992 causal 8K in two processes
# per kernel (20261204T054755Z, 054858Z, 054959Z, 055446Z) against the -ro-pm default's 0.973-0.981 causal 8K
# (20261204T052604Z the same morning; 035746Z, 040628Z), 1.002 and 0.995; FP8 A0 / FA3 1.059 causal 8K, 1.031
# non-causal 8K, 1.056 causal 16K (055156Z, 055251Z, 055350Z; 1.065 in 055053Z) against 1.019-1.027, 1.022-1.045
# and 1.022-1.034 without it, and h15-folded / FA3 at FP8 1.127-1.138 causal 8K, 1.099 non-causal, 1.146 causal 16K.
# Outputs equal bit for bit to the one-block kernel's on ragged shapes, head dims 64 and 128, more blocks than
# programs, and in three launches in a row at 8K on one counter (sessions/gluon-probe-h200-20261204-0540-dynamic-
# bf16, -fp8).
# Since 2026-12-04 07:44 the 16-bit default takes its blocks four heads at a time (hg4): with the counter the programs
# in flight work on consecutive blocks, and fewer heads' keys compete for the L2. BF16 A0 / FA3 at equal clock, 30 s:
# 1.005 and 1.008 causal 8K (20261204T072512Z, 072831Z; hg8 0.993 in 071236Z, 13 minutes before), 0.995 and 0.993 causal
# 16K (072618Z, 072932Z; hg8 0.989 in 071339Z), 1.025 and 1.032 non-causal 8K (072715Z, 073033Z); the 12 s screens of
# hg2, hg4, hg8, hg16 read 0.981, 0.995, 0.986, 0.972 (071519Z, 071559Z, 071443Z, 071636Z). FP8 keeps hg8: h15-folded /
# FA3 1.129 under hg4 against 1.135 under hg8 (071841Z, 071723Z), A0 / FA3 1.041 against 1.073.
# Since 2026-12-04 17:40 the 16-bit default's producer issues the next K before this tile's V (-ka, LOADS). At equal
# clock against FA3 in one lease, per pair (tools/gpu/k_ahead.sh, sealed/k-ahead.yaml 3 of 3 met): BF16 A0 at causal
# 16K, 30 s with two processes per kernel, +0.14% and +0.17% against the paired order's -0.94% and -0.51%,
# alternating (20261204T171424Z, 172333Z; 171535Z, 172452Z); at causal 8K ahead of the paired order by 0.2-0.5
# points in three pairs (171149Z-171347Z, 173201Z, 173316Z), level non-causal (172759Z, 172842Z). Under Nsight
# Compute at causal 16K (172236Z, 172302Z) the first consumer's waits for K fall from 1,867 samples to 1,075, the
# tensor core is busy 88.3% of the cycles against 87.4%, and the launch takes 0.6% less time. Outputs equal bit for
# bit to the one-block kernel's (sessions/gluon-probe-h200-20261204-1706-k-ahead-bf16). At FP8 it was level (A0 0.3-0.6
# points ahead at causal 8K and non-causal 8K, 0.5-0.7 behind at causal 16K; h15-folded either way), so the FP8
# default, whose sessions carry issue 15's FP8 figures, keeps the paired order.
DEFAULT = GluonConfig(head_group=4, rescale="lazy", rescale_at="pv", row_sum="tree", p_round="wgmma",
                      tile_loops="two-fenced", schedule="dynamic", loads="k-ahead")
# FP8: one consumer warpgroup per program, two programs per SM (the fastest FP8 A0 in both H200 probes,
# sessions/gluon-probe-h200-20261130-{1906,1913}; 754 against the Triton kernel's 719 TFLOP/s in sessions
# 20261130T191642Z and 20261130T191733Z, the same hour), with per-thread row sums added pairwise (-ltt). Per-thread
# sums (-lt) took A0 from 0.919 to 0.944-0.947 of FA3 at FP8 causal 8K at equal clock (20261202T092343Z against
# 092243Z, 092746Z); adding each tile's parts pairwise shortened the chain of dependent adds at the tile's end from 16
# to 5 and took A0 to 0.950-0.952 against -lt's 0.942-0.943 in the same leases (113234Z, 114700Z against 113429Z,
# 114756Z), 0.956 against 0.936 non-causal 8K (114851Z, 114950Z) and 0.947 against 0.933 causal 16K (115048Z,
# 115144Z). At BF16, -lt read 0.897-0.898 against the default's 0.906-0.908 (092441Z, 093437Z against 092537Z,
# 093340Z) and -ltt 0.896 beside the default's 0.896 (114034Z, 115238Z), so the BF16 default keeps full row sums.
# Since 13:50 the FP8 row sums come from the tensor core, a fresh accumulator per tile added in FP32 (-lmt): A0 /
# FA3 0.977 causal 8K (20261202T134042Z; -ltt 0.948 in 132514Z), 0.997 non-causal 8K (134203Z), 0.980 causal 16K
# (134302Z), with A0's error against FP32 the default's and FA3's (sessions/gluon-probe-h200-20261202-1340-long-fp8).
# -lm, the same sums accumulated over the row, was as fast but doubled that error. BF16 -lm read 0.862 against the
# default's 0.893 (132728Z, 132827Z): not taken there.
# Since 18:10 the FP8 default also moves h15-folded's anchor lazily (-rla; A0 is -rl's bit for bit): h15-folded /
# FA3 1.061 and 1.059 causal 8K (20261202T175227Z, 175728Z) against 1.041-1.048 under -rl (152332Z, 154558Z,
# 173207Z), 1.093 non-causal 8K (175331Z; 1.063 in 152542Z), 1.100 causal 16K (175422Z; 1.079 in 152641Z);
# sustained 1.019 (175513Z; 1.018 in 153052Z). Its gates pass (175303Z, 175316Z), its outputs are the simulation's
# with the same lazy anchor (sessions/gluon-probe-h200-20261202-1752-rla-fp8). With two consumer warpgroups the
# same option gave h15-folded more (1.072-1.075 causal 8K, 1.110 non-causal, 1.101 at 16K, 1.100 of FA3
# sustained: 175907Z-180335Z) but A0 less (0.966-0.974 of FA3), so the default, which is A0's as well, keeps -g1.
DEFAULT_FP8 = GluonConfig(consumers=1, rescale="lazy-anchor", row_sum="mma-tile", tile_loops="two-fenced",
                          schedule="dynamic")
# With Triton 3.6 (ptx_trim's), both defaults leave the warpgroup barriers out (-tb): the same output bit for bit,
# and at equal clock against FA3 in the same interleavings A0 went from 0.887 to 0.910 of FA3 at BF16 causal 8K and
# from 0.911 to 0.914 at FP8 (the sweeps 20261202T053442Z / 053342Z and 053235Z / 053136Z, one lease)
DEFAULT_SYNC = "mbarrier"


def default_config(torch_dtype, head_dim: int) -> GluonConfig:
    """The configuration the backend runs when none is named: DEFAULT at 16 bits, DEFAULT_FP8 at FP8, with
    DEFAULT_SYNC where this Triton is the one ptx_trim was written for; a head dim this kernel lacks is refused
    (check_head_dim)."""
    check_head_dim(head_dim)
    base = DEFAULT_FP8 if torch_dtype in _FP8 else DEFAULT
    return replace(base, sync=DEFAULT_SYNC) if ptx_trim.supported(triton.__version__) else base


def check_head_dim(head_dim: int) -> None:
    """Refuse head dims other than 64 and 128 (GLUON_HEAD_DIMS). The Triton-language kernel also takes 256, and
    check_inputs, which this kernel shares with it, accepts that; this kernel is written and checked (on the
    H200, tools/gpu/gluon_probe.py) at 64 and 128 only."""
    if head_dim not in GLUON_HEAD_DIMS:
        raise UnsupportedError(f"the Gluon forward is written for head dims {dims_text(GLUON_HEAD_DIMS)}, "
                               f"not {head_dim}",
                               hint=f"the Triton-language kernel takes head dims {dims_text(TRITON_HEAD_DIMS)} and is "
                                    "the default at 256: leave --triton-config out, or pass a triton label "
                                    "(e.g. m64n64w4s2)")
