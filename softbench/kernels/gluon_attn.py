"""softbench's warp-specialized attention forward for Hopper (sm_90a), written in Gluon (Triton's tile-level
language with explicit layouts, shared memory, mbarriers, TMA and asynchronous wgmma).

Why a second kernel: the Triton forward (triton_attn) reaches ~80% of FA4's BF16 throughput on the H200. What it
lacks against FA3/FA4 is their schedule, which Triton 3.6 does not derive by itself on sm_90:
  * a producer warp that only moves K and V tiles (TMA into a ring of STAGES buffers, mbarrier hand-offs), so that
    the math warps never wait on address arithmetic or copies;
  * two consumer warpgroups, each with its own 64 query rows of one 128-row block, sharing every K/V tile and
    running independently (each in its own partition, so one's softmax overlaps the other's wgmma);
  * inside each consumer, the next tile's Q.K^T wgmma is issued before this tile's softmax, and P.V is issued
    asynchronously and waited for only before O is rescaled (FA3's intra-warpgroup overlap).
The partitions ask for registers with setmaxnreg: 240 per consumer thread, 24 for the producer.

The online softmax's per-tile step, with its weight maps (A0 exact exp2, A1 Rowmax-H15 with the clamp, h15-sat,
h15-folded, the hybrids h15-1of2 and h15-1of4, h15-noclamp, noexp), is triton_attn's own `_tile_weights`, called
from here as it is (log2 units, FA4's max offset at FP8), as are its program order, input checks, key-major V copy
and the key-norm prologue and bound of h15-proved and h15-folded, so the two kernels compute the same operator: with
equal key tiles their outputs agree bit for bit (H200, tools/gpu/gluon_probe.py). BF16/FP16 and FP8 e4m3 (V read
from a key-major copy, P rounded to e4m3 for P.V, BF16 out). On the H200 this kernel is the faster one at every
dtype: about 95% / 88% of FA4 causal / non-causal at BF16 8K (the Triton kernel 80% / 77%), and at FP8 causal 8K 754
against 719 TFLOP/s (since P's FP8 operand is packed at the wgmma, _p_carry / _p_operand), so it is the backend's
default on sm_90 (default_config per dtype).

Layout as triton_attn: q (batch, seq, heads, dim), k/v (batch, seq, kv_heads, dim), contiguous; TMA descriptors
over (batch, seq, heads * dim) views, one (1, rows, dim) box per tile, so that boxes past the end of a sequence
read zeros and the output box drops rows past seq. Head dims 64 and 128 (256 runs in the Triton-language kernel,
check_head_dim). Needs sm_90 and the compiled Triton (no interpreter). Its options, their labels and the two
defaults are softbench.kernels.gluon_config's; the producer warp's loads and the schedule's bookkeeping are
gluon_producer's, the running row sums gluon_row_sums'; this module holds the consumers' key loop, turns a
configuration into the kernel's compile-time constants (kernel_constants) and launches it."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

from softbench.core.errors import UnsupportedError, UsageError
from softbench.kernels import ptx_trim
from softbench.kernels.gluon_config import (ANCHOR_NEAR_THRESHOLD, DEFAULT, LAZY_FP8_MAX_OFFSET, LAZY_THRESHOLD,
                                           LAZY_VARIANTS, ONES_COLS, PINGPONG_MODE, ROW_SUM_MODE, SCHEDULE_MODE,
                                           SPLIT_VARIANTS, TILE_LOOPS_MODE, GluonConfig, check_head_dim)
from softbench.kernels.gluon_options import KernelOptions
from softbench.kernels.gluon_producer import (_issue_q, _item_coords, _loader, _loader_persistent, _ring,
                                             _round_item, _take_item)
from softbench.kernels.gluon_row_sums import (_final_row_sums, _one_column_per_thread, _ones_operand, _rescale_sums,
                                             _row_sum_update, _sums_done, _thread_row_sums)
from softbench.kernels.triton_attn import (_FP8, FOLDED_VARIANTS, FP8_MAX_OFFSET, NORM_BOUND_VARIANTS,
                                           _clamp_free, _kept, _tile_weights, WEIGHT_MAPS, check_inputs,
                                           effective_head_group, key_major_copy, key_norm_blocks, launch_key_norms,
                                           log2_scale, emulated_key_bits)

WG_ROWS = 64  # query rows per consumer warpgroup: one m64 wgmma row block
CONSUMER_WARPS = 4  # one warpgroup: the kernel's num_warps, the default partition's size
_DTYPES = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16, torch.float8_e4m3fn: gl.float8e4nv}


# named-barrier ids of the "named" hand-over, one per consumer warpgroup. Triton's own code uses 0 (its CTA-wide
# and default-partition barrier), 1 (warp_specialize's entry and exit) and one id per further partition (2, ...):
# tests/test_gluon_attn.py reads the ids out of the compiled PTX and checks that these stay apart
TURN_BARRIERS = (12, 13)
PTX_TRIM_MARKER = gl.constexpr(f"// {ptx_trim.MARK}\n\tmov.b32 $0, $1;")
# -gdc: the consumers' wait for the key norms' grid (PTX's griddepcontrol; Gluon 3.6 has no operation for it)
GRID_DEPENDENCY_WAIT = gl.constexpr("griddepcontrol.wait;\n\tmov.b32 $0, $1;")


def _warp_kept_max_asm() -> str:
    """One thread's two rows' alpha in (rows r and r + 8 of its warp's 16, the m64 accumulator's rows), a flag out
    that is 1 in every thread of the warp when all 16 alphas are exactly 1, else 0: uniform across the warp
    (vote.sync.all), so the branch that reads it does not diverge."""
    return ("{ .reg .pred p; setp.eq.f32 p, $2, 0f3F800000; setp.eq.and.f32 p, $3, 0f3F800000, p; "
            "vote.sync.all.pred p, p, 0xffffffff; selp.u32 $0, 1, 0, p; mov.u32 $1, $0; }")


def _skippable_rescale_asm(n: int) -> tuple[str, str]:
    """O *= alpha over one thread's n accumulator elements in one asm block, jumped over when the warp's flag
    (_warp_kept_max_asm) is set. Operands: O's n elements out ($0..), the same registers in (tied: so the jump
    leaves them as they are, with no copies), alpha per element, the flag per element (only the first read)."""
    body = [f"mul.f32 ${k}, ${k}, ${2 * n + k};" for k in range(n)]
    asm = " ".join(["{ .reg .pred kept;", f"setp.ne.u32 kept, ${3 * n}, 0;", "@kept bra.uni skip_rescale;", *body,
                    "skip_rescale: }"])
    constraints = ",".join(["=f"] * n + [str(k) for k in range(n)] + ["f"] * n + ["r"] * n)
    return asm, constraints


KEPT_MAX_ASM = gl.constexpr(_warp_kept_max_asm())
# one thread's elements of a 64-row O tile: 64 * head_dim / 128 threads
RESCALE_ASM_64, RESCALE_CONSTRAINTS_64 = (gl.constexpr(x) for x in _skippable_rescale_asm(32))
RESCALE_ASM_128, RESCALE_CONSTRAINTS_128 = (gl.constexpr(x) for x in _skippable_rescale_asm(64))


@gluon.jit
def _v_operand(v_bufs, slot, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, V_KMAJOR: gl.constexpr):
    """V of one ring slot as P.V's (keys, d) operand: FP8 wgmma needs it key-major, a transposed view of the
    (d, keys) box."""
    if V_KMAJOR:
        return v_bufs.index(slot).reshape([HEAD_DIM, BLOCK_N]).permute((1, 0))
    else:
        return v_bufs.index(slot).reshape([BLOCK_N, HEAD_DIM])


@gluon.jit
def _p_carry(p, dtype: gl.constexpr, p_layout: gl.constexpr, BLOCK_N: gl.constexpr, AT_MMA: gl.constexpr = False):
    """P as it waits for the next iteration's P.V: at 16 bits the operand itself (the accumulator's pairs are the
    operand's pairs: a cast), or under AT_MMA (GluonConfig.p_round "wgmma") still FP32 in the operand's layout and
    rounded by _p_operand at the wgmma, as at FP8. At FP8 still FP32, already in the operand's layout, rounded by
    _p_operand at the wgmma: carried across the loop as 8-bit values, LLVM kept every byte in its own register and
    rebuilt each operand register at the wgmma (LOP3/PRMT/SHF for four keys, 1.7 instructions per score; now 0.75,
    the conversions and one PRMT per four keys).
    The FP8 operand holds four consecutive keys per register, the accumulator two (keys 2t, 2t+1 of every 8 for
    thread t of a quad): moving them costs shuffles. Instead the keys are renumbered inside every 32: key
    16 gh + 8 gl + 2 t + j goes to 16 gh + 4 t + 2 gl + j, which is where the thread already holds it, and V's
    key-major copy is stored in that order (prepare_operands), so P.V sums the same products."""
    if dtype.primitive_bitwidth == 8:
        ROWS: gl.constexpr = p.shape[0]
        renumbered = p.reshape([ROWS, BLOCK_N // 32, 2, 2, 4, 2]).permute((0, 1, 2, 4, 3, 5))
        return gl.convert_layout(renumbered.reshape([ROWS, BLOCK_N]), p_layout)
    elif AT_MMA:
        return gl.convert_layout(p, p_layout)
    else:
        return gl.convert_layout(p.to(dtype), p_layout)


@gluon.jit
def _p_operand(p_carried, dtype: gl.constexpr):
    """P.V's A operand from _p_carry's value. FP8: four FP32 weights to one register of four e4m3 bytes (keys in
    order from the low byte), rounded as Triton's own conversion rounds (cvt.rn.satfinite), in one asm block so
    that the bytes are never apart. 16 bits carried in FP32 (p_round "wgmma"): rounded to nearest here, as the
    cast in _p_carry rounds, so the operand is the same bit for bit."""
    if dtype.primitive_bitwidth == 8:
        packed = gl.inline_asm_elementwise(
            "{ .reg .b16 lo, hi; cvt.rn.satfinite.e4m3x2.f32 lo, $2, $1; cvt.rn.satfinite.e4m3x2.f32 hi, $4, $3; "
            "mov.b32 $0, {lo, hi}; }", "=r,r,r,r,r", [p_carried], dtype=gl.int8, is_pure=True, pack=4)
        return packed.to(dtype, bitcast=True)
    elif p_carried.dtype != dtype:
        return p_carried.to(dtype)
    else:
        return p_carried


@gluon.jit
def _wait_pv(o_tok, p_op):
    """Wait for P.V. P's registers are its A operand and must outlive it: at 16 bits (p_op: the carried operand)
    they go through the wait as a dependency. Where the operand is made at the wgmma from FP32 (_p_operand: FP8,
    and 16 bits under p_round "wgmma") the carried value is not the operand (nor could it pass: Triton 3.6's wait
    takes no 8-bit values), and ptxas keeps the operand's registers alive by itself (it sees the wgmma read them)."""
    if p_op.dtype.primitive_bitwidth == 16:
        o, p_op = warpgroup_mma_wait(num_outstanding=0, deps=(o_tok, p_op))
    else:
        o = warpgroup_mma_wait(num_outstanding=0, deps=(o_tok, ))
    return o, p_op


@gluon.jit
def _proved_n_full(q_smem, KN, kn_row, kn_blocks, qk_scale, n_full, ROWS: gl.constexpr, HEAD_DIM: gl.constexpr,
                   MAX_OFFSET: gl.constexpr, KN_WIDTH: gl.constexpr, GDC_WAIT: gl.constexpr = False):
    """h15-proved and h15-folded: n_full where this warpgroup's rows provably never reach the clamp
    (triton_attn._clamp_free, from their largest query norm and the head's largest key norm, which the prologue
    left in KN), else 0, so that every tile goes through the masked branch, which keeps the clamp. GDC_WAIT (-gdc):
    the norms' kernel may still be running when this one starts, so wait for its grid, and its writes, first (at
    once after the first block: the grid is done by then)."""
    if GDC_WAIT:
        one_per_thread: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])  # the consumer warpgroup's 4 warps
        gl.inline_asm_elementwise(GRID_DEPENDENCY_WAIT, "=r,r", [gl.full([128], 0, gl.int32, one_per_thread)],
                                  dtype=gl.int32, is_pure=False, pack=1)
    q_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    qf = q_smem.reshape([ROWS, HEAD_DIM]).load(q_layout).to(gl.float32)
    q_norm_max = gl.max(gl.sqrt(gl.sum(qf * qf, 1)), 0)
    offs = gl.arange(0, KN_WIDTH, gl.BlockedLayout([1], [32], [4], [0]))
    kn = gl.load(KN + kn_row * kn_blocks + offs, mask=offs < kn_blocks, other=0.0)
    return gl.where(_clamp_free(q_norm_max, gl.max(kn, 0), qk_scale, MAX_OFFSET), n_full, 0)


@gluon.jit
def _named_barrier(BAR: gl.constexpr, ARRIVE: gl.constexpr):
    """bar.sync (wait) or bar.arrive (signal, no wait) on named barrier BAR for 256 threads: this warpgroup's
    128 and the other consumer's. Gluon has no operation for it, so one inline PTX block per thread: a tensor
    of one element per thread of the warpgroup's 4 warps, the asm marked impure so that it stays where it is."""
    one_per_thread: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    ids = gl.full([128], BAR, gl.int32, one_per_thread)
    if ARRIVE:
        gl.inline_asm_elementwise("bar.arrive $1, 256;\n\tmov.b32 $0, $1;", "=r,r", [ids], dtype=gl.int32,
                                  is_pure=False, pack=1)
    else:
        gl.inline_asm_elementwise("bar.sync $1, 256;\n\tmov.b32 $0, $1;", "=r,r", [ids], dtype=gl.int32,
                                  is_pure=False, pack=1)


@gluon.jit
def _wait_turn(my_turn, phase, PINGPONG: gl.constexpr, BAR_MINE: gl.constexpr):
    if PINGPONG == 1:
        mbarrier.wait(my_turn, phase)
    if PINGPONG == 2:
        _named_barrier(BAR_MINE, False)


@gluon.jit
def _pass_turn(their_turn, PINGPONG: gl.constexpr, BAR_THEIRS: gl.constexpr):
    if PINGPONG == 1:
        mbarrier.arrive(their_turn, count=1)
    if PINGPONG == 2:
        _named_barrier(BAR_THEIRS, True)


@gluon.jit
def _rescale_o(o, alpha, rows_o: gl.constexpr, HEAD_DIM: gl.constexpr, SKIP: gl.constexpr):
    """O * alpha per row, after P.V has completed. SKIP (GluonConfig.rescale "moved"): a warp whose rows all kept
    their maximum jumps over the multiply (_skippable_rescale_asm)."""
    a = gl.convert_layout(alpha, rows_o)
    if SKIP:
        kept = gl.inline_asm_elementwise(KEPT_MAX_ASM, "=r,=r,f,f", [a], dtype=gl.int32, is_pure=True, pack=2)
        if HEAD_DIM == 128:
            o = gl.inline_asm_elementwise(RESCALE_ASM_128, RESCALE_CONSTRAINTS_128, [o, a[:, None], kept[:, None]],
                                          dtype=gl.float32, is_pure=True, pack=64)
        else:
            o = gl.inline_asm_elementwise(RESCALE_ASM_64, RESCALE_CONSTRAINTS_64, [o, a[:, None], kept[:, None]],
                                          dtype=gl.float32, is_pure=True, pack=32)
    else:
        o = o * a[:, None]
    return o


@gluon.jit
def _consumer(desc_q, desc_o, desc_ones, q_smem, o_smem, ones_smem, q_bar, k_bufs, v_bufs, k_ready, v_ready,
              k_empty, v_empty, my_turn, their_turn, qk_scale, v_scale, b32, h32, row0, seq, n_full, n_tiles, KN,
              kn_row, kn_blocks, OPT: gl.constexpr, PINGPONG: gl.constexpr, BAR_MINE: gl.constexpr = 0,
              BAR_THEIRS: gl.constexpr = 0, FIRST: gl.constexpr = True):
    """One warpgroup of a program that holds one query block: its Q, its rows' softmax (_consumer_item), its O."""
    _issue_q(desc_q, desc_ones, q_bar, q_smem, ones_smem, b32, h32, row0, OPT.HEAD_DIM, OPT.ROW_SUM_PARTS >= 3)
    _consumer_item(desc_q, desc_o, desc_ones, q_smem, o_smem, ones_smem, q_bar, k_bufs, v_bufs, k_ready, v_ready,
                   k_empty, v_empty, my_turn, their_turn, qk_scale, v_scale, b32, h32, row0, seq, n_full, n_tiles,
                   KN, kn_row, kn_blocks, 0, 0, b32, h32, row0, False, q_bar, OPT, PINGPONG, BAR_MINE, BAR_THEIRS,
                   FIRST, 0)
    tma.store_wait(pendings=0)


@gluon.jit
def _consumer_persistent(desc_q, desc_o, desc_ones, q_smem, o_smem, ones_smem, q_bar, q_free, items, item_ready,
                         item_empty, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, my_turn, their_turn,
                         qk_scale, v_scale, seq, heads, group, head_group, n_items, KN, kn_blocks,
                         ROW_OFFSET: gl.constexpr, BLOCK_M: gl.constexpr, OPT: gl.constexpr,
                         DYNAMIC: gl.constexpr = False, DEFER: gl.constexpr = False, OVERLAP: gl.constexpr = False,
                         PINGPONG: gl.constexpr = 0, BAR_MINE: gl.constexpr = 0, BAR_THEIRS: gl.constexpr = 0,
                         FIRST: gl.constexpr = True):
    """One warpgroup under a persistent schedule: its 64 rows (ROW_OFFSET into each 128-row block) of every query
    block the program takes, in the same order as the producer, one ring position counted across them.
    Rounds (_round_item): where O has a buffer of its own (FP8 in, BF16 out) the next block's Q is loaded as soon
    as this block's last Q.K^T has completed, and O's store is waited for only before the next O is written; at
    16 bits O leaves through Q's buffer, so the next Q is loaded once O has left. DYNAMIC: the blocks' numbers come
    from the producer (_take_item), which also loads each Q once this warpgroup has released the one before
    (q_free); O always has a buffer of its own. DEFER (-pde): each block's O is written under the next block's first
    Q.K^T (_consumer_item's PERSISTENT 3), the last block's after the loop. OVERLAP (-pdo): each block's last P.V
    runs under the next block's first Q.K^T and weights (_consumer_item's PERSISTENT 4), the last block's after the
    loop; q_smem holds two buffers, block k taking buffer k % 2, and q_bar, q_free both consumers' barriers of both
    (_issue_block_q's DOUBLE_Q). PINGPONG 2 (-ppn-pd): the two consumers take turns issuing their wgmmas through
    named barriers BAR_MINE and BAR_THEIRS (_consumer_item), tile after tile across the blocks: both take n_tiles
    turns per block, so the turns run on from one block into the next; the second consumer (not FIRST) gives the
    first its first turn once per program, here."""
    CAUSAL: gl.constexpr = OPT.CAUSAL
    BLOCK_N: gl.constexpr = OPT.BLOCK_N
    base = 0
    if DYNAMIC:
        if (PINGPONG == 2) and (not FIRST):
            _named_barrier(BAR_THEIRS, True)  # the first consumer's first turn
        k = 0
        t = _take_item(items, item_ready, item_empty, 0)
        CARRY: gl.constexpr = DEFER or OVERLAP  # something of each block crosses into the next
        if DEFER:  # the block before's O, normalized (_consumer_item's deferred epilogue)
            o_layout: gl.constexpr = _o_layout(OPT.HEAD_DIM, desc_q.dtype.primitive_bitwidth)
            prev_o = gl.zeros([64, OPT.HEAD_DIM], desc_o.dtype, o_layout)
        if OVERLAP:  # the block before's state at its last tile (_consumer_item's PERSISTENT 4)
            prev_o, prev_p, prev_l = _carry_start(desc_q.dtype, OPT)
        if CARRY:  # and where its O goes
            prev_b32 = 0
            prev_h32 = 0
            prev_row0 = 0
        while t < n_items:
            b32, h32, hk32, start_m, n_full, n_tiles, kn_row = _item_coords(t, seq, heads, group, head_group,
                                                                            CAUSAL, BLOCK_M, BLOCK_N)
            row0 = start_m * BLOCK_M + ROW_OFFSET
            if DEFER:
                prev_o = _consumer_item(desc_q, desc_o, desc_ones, q_smem, o_smem, ones_smem, q_bar, k_bufs, v_bufs,
                                        k_ready, v_ready, k_empty, v_empty, my_turn, their_turn, qk_scale, v_scale,
                                        b32, h32, row0, seq, n_full, n_tiles, KN, kn_row, kn_blocks, base, k & 1,
                                        b32, h32, 0, False, q_free, OPT, 0, 0, 0, True, 3, prev_o, prev_b32,
                                        prev_h32, prev_row0, k > 0)
            elif OVERLAP:
                buf = k & 1
                bar = 2 * (ROW_OFFSET // 64) + buf  # this consumer's barriers of buffer buf (_issue_block_q's)
                prev_o, prev_p, prev_l = _consumer_item(
                    desc_q, desc_o, desc_ones, q_smem.index(buf), o_smem, ones_smem, q_bar.index(bar), k_bufs, v_bufs,
                    k_ready, v_ready, k_empty, v_empty, my_turn, their_turn, qk_scale, v_scale, b32, h32, row0, seq,
                    n_full, n_tiles, KN, kn_row, kn_blocks, base, (k >> 1) & 1, b32, h32, 0, False, q_free.index(bar),
                    OPT, 0, 0, 0, True, 4, prev_o, prev_b32, prev_h32, prev_row0, k > 0, prev_p, prev_l)
            else:
                _consumer_item(desc_q, desc_o, desc_ones, q_smem, o_smem, ones_smem, q_bar, k_bufs, v_bufs, k_ready,
                               v_ready, k_empty, v_empty, my_turn, their_turn, qk_scale, v_scale, b32, h32, row0,
                               seq, n_full, n_tiles, KN, kn_row, kn_blocks, base, k & 1, b32, h32, 0, False, q_free,
                               OPT, PINGPONG, BAR_MINE, BAR_THEIRS, FIRST, 2)
            if CARRY:
                prev_b32 = b32
                prev_h32 = h32
                prev_row0 = row0
            base += n_tiles
            k += 1
            t = _take_item(items, item_ready, item_empty, k)
        if DEFER:
            if k > 0:  # the last block's O
                _write_o(desc_o, o_smem, prev_o, prev_b32, prev_h32, prev_row0, OPT.HEAD_DIM, 3)
        if OVERLAP:  # the last block's last P.V and O (none where the program took no block: k == 0)
            last, last_phase = _ring(base - 1, OPT.V_STAGES)
            o_tok = _carried_pv(prev_o, prev_p, v_bufs, v_ready, last, last_phase, k > 0, OPT)
            _write_carried(o_tok, prev_p, prev_l, v_empty, last, desc_o, o_smem, v_scale, prev_b32, prev_h32,
                           prev_row0, k > 0, OPT, 4)
    else:
        SEPARATE_O: gl.constexpr = desc_o.dtype != desc_q.dtype
        pid = gl.program_id(0)
        nprog = gl.num_programs(0)
        n_rounds = gl.cdiv(n_items, nprog)
        for r in range(n_rounds):
            t = _round_item(r, pid, nprog)
            if t < n_items:  # false only in the last round, where some programs have no block left
                b32, h32, hk32, start_m, n_full, n_tiles, kn_row = _item_coords(t, seq, heads, group, head_group,
                                                                                CAUSAL, BLOCK_M, BLOCK_N)
                row0 = start_m * BLOCK_M + ROW_OFFSET
                if (r == 0) or (not SEPARATE_O):  # otherwise the previous block loaded it
                    _issue_q(desc_q, desc_ones, q_bar, q_smem, ones_smem, b32, h32, row0, OPT.HEAD_DIM,
                             OPT.ROW_SUM_PARTS >= 3)
                t_next = _round_item(r + 1, pid, nprog)
                has_next = t_next < n_items
                t_next = gl.where(has_next, t_next, t)
                nb32, nh32, nhk32, nstart_m, nn_full, nn_tiles, nkn_row = _item_coords(t_next, seq, heads, group,
                                                                                       head_group, CAUSAL, BLOCK_M,
                                                                                       BLOCK_N)
                _consumer_item(desc_q, desc_o, desc_ones, q_smem, o_smem, ones_smem, q_bar, k_bufs, v_bufs, k_ready,
                               v_ready, k_empty, v_empty, my_turn, their_turn, qk_scale, v_scale, b32, h32, row0, seq,
                               n_full, n_tiles, KN, kn_row, kn_blocks, base, r & 1, nb32, nh32,
                               nstart_m * BLOCK_M + ROW_OFFSET, has_next & SEPARATE_O, q_free, OPT, 0, 0, 0,
                               True, 1)
                if not SEPARATE_O:  # O is in Q's buffer: it must have left before the next Q lands there
                    tma.store_wait(pendings=0)
                    gl.thread_barrier()
                base += n_tiles
    tma.store_wait(pendings=0)


@gluon.jit
def _issue_qk(q, k_tile, zero_s, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr):
    """GluonConfig.split_qk: one key tile's Q.K^T as two wgmma groups, keys [0, BLOCK_N / 2) and the rest, each into
    a half-width accumulator (zero_s's), so that the first half can be waited for, and weighed, while the second
    is still in the tensor core. Returns the two groups' tokens, oldest first."""
    HALF: gl.constexpr = BLOCK_N // 2
    k = k_tile.reshape([BLOCK_N, HEAD_DIM])
    a_tok = warpgroup_mma(q, k.slice(0, HALF, dim=0).permute((1, 0)), zero_s, use_acc=False, is_async=True)
    b_tok = warpgroup_mma(q, k.slice(HALF, HALF, dim=0).permute((1, 0)), zero_s, use_acc=False, is_async=True)
    return a_tok, b_tok


@gluon.jit
def _issue_pv(p_op_a, p_op_b, v_bufs, slot, o, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, dtype: gl.constexpr):
    """P.V of a split tile (16 bits: V's rows are keys): the halves' P times V's two halves of rows, two chained
    wgmma groups on O. Returns the second's token."""
    HALF: gl.constexpr = BLOCK_N // 2
    v = v_bufs.index(slot).reshape([BLOCK_N, HEAD_DIM])
    o_tok = warpgroup_mma(_p_operand(p_op_a, dtype), v.slice(0, HALF, dim=0), o, is_async=True)
    return warpgroup_mma(_p_operand(p_op_b, dtype), v.slice(HALF, HALF, dim=0), o_tok, is_async=True)


@gluon.jit
def _halves_weights(s_a, b_tok, k_free, m_i, l_i, i, offs_h, offs_m, seq, qk_scale, b_outstanding: gl.constexpr,
                    MASK: gl.constexpr, WEIGHT: gl.constexpr, MAX_OFFSET: gl.constexpr, LAZY: gl.constexpr,
                    EMULATE: gl.constexpr, CAUSAL: gl.constexpr, ROW_SUM_PARTS: gl.constexpr,
                    RESCALE_SKIP: gl.constexpr):
    """Tile i's weights from its two halves of scores: the first half's (s_a, already waited for) while the
    second's Q.K^T runs, then the second's (waited for here, leaving b_outstanding groups in flight; then the K
    slot is released through k_free). The running maximum moves once per half, so the first half's weights are
    multiplied by the second half's alpha, jumped over by a warp whose rows all kept their maximum (RESCALE_SKIP,
    as O's), and the row sums take both halves' alphas (on tile 0 alpha is 0 and the sums start from zeros).
    Returns both halves' weights, the running maximum, the tile's alpha (both halves') and the row sums."""
    HALF: gl.constexpr = s_a.shape[1]
    keys_a = i * (2 * HALF) + offs_h
    p_a, m_a, alpha_a = _tile_weights(s_a, m_i, _kept(keys_a, offs_m, seq, CAUSAL), keys_a, qk_scale, MASK, WEIGHT,
                                      MAX_OFFSET, LAZY, EMULATE)
    l_i = _row_sum_update(l_i, p_a, alpha_a, HALF, ROW_SUM_PARTS)
    s_b = warpgroup_mma_wait(num_outstanding=b_outstanding, deps=(b_tok, ))
    mbarrier.arrive(k_free, count=1)
    keys_b = keys_a + HALF
    p_b, m_b, alpha_b = _tile_weights(s_b, m_a, _kept(keys_b, offs_m, seq, CAUSAL), keys_b, qk_scale, MASK, WEIGHT,
                                      MAX_OFFSET, LAZY, EMULATE)
    l_i = _row_sum_update(l_i, p_b, alpha_b, HALF, ROW_SUM_PARTS)
    p_a = _rescale_o(p_a, alpha_b, gl.SliceLayout(1, s_a.type.layout), HALF, RESCALE_SKIP)
    return p_a, p_b, m_b, alpha_a * alpha_b, l_i


@gluon.jit
def _schedule_fence(x):
    """x, passed through a warp barrier that ptxas schedules nothing across (a NOP in a converged warp, one per
    register of x): what is above it in the PTX stays above it in the SASS. GluonConfig.tile_loops "two-fenced": in a
    loop body without the mask's branch, ptxas hoists P.V's wgmma wait above the tile's exponentials (where the wait
    stalls the warp until the previous tile's P.V is done) unless something stops it."""
    return gl.inline_asm_elementwise("bar.warp.sync -1;\n\tmov.b32 $0, $1;", "=r,r", [x], dtype=gl.float32,
                                     is_pure=False, pack=1)


@gluon.jit
def _key_tile(i, q, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, ones_smem, my_turn, their_turn, zero_s,
              m_i, l_i, o, p_op, o_alpha, l_acc, l_run, offs_n, offs_m, seq, qk_scale, n_full, base,
              rows_o: gl.constexpr, p_layout: gl.constexpr, OPT: gl.constexpr, UNMASKED: gl.constexpr,
              MASKED: gl.constexpr, PINGPONG: gl.constexpr, BAR_MINE: gl.constexpr, BAR_THEIRS: gl.constexpr,
              TILE: gl.constexpr, PV_FENCE: gl.constexpr):
    """One step of _consumer_item's key loop for tile i >= 1: this tile's Q.K^T and the previous tile's P.V issued,
    both in flight while this tile's weights are computed, then P.V waited for and O rescaled (at once, or under
    RESCALE_AT_PV before the next P.V). TILE: 1 the tile needs no mask (UNMASKED's weights), 2 it does (MASKED's),
    0 decided here by i >= n_full (a branch inside the loop). PV_FENCE: P.V's wait held below the weights and row
    sums (_schedule_fence). l_acc, l_run: the tensor core's row sums (row_sum "mma", "mma-tile"), carried unread
    otherwise. Returns the loop's carried state."""
    HEAD_DIM: gl.constexpr = OPT.HEAD_DIM
    BLOCK_N: gl.constexpr = OPT.BLOCK_N
    STAGES: gl.constexpr = OPT.STAGES
    CAUSAL: gl.constexpr = OPT.CAUSAL
    MAX_OFFSET: gl.constexpr = OPT.MAX_OFFSET
    LAZY: gl.constexpr = OPT.LAZY
    EMULATE: gl.constexpr = OPT.EMULATE
    RESCALE_SKIP: gl.constexpr = OPT.RESCALE_SKIP
    RESCALE_AT_PV: gl.constexpr = OPT.RESCALE_AT_PV
    ROW_SUM_PARTS: gl.constexpr = OPT.ROW_SUM_PARTS
    V_KMAJOR: gl.constexpr = OPT.V_KMAJOR
    P_AT_MMA: gl.constexpr = OPT.P_AT_MMA
    SUMS_MMA: gl.constexpr = ROW_SUM_PARTS >= 3
    PER_TILE: gl.constexpr = ROW_SUM_PARTS == 4
    dtype: gl.constexpr = q.dtype
    slot, phase = _ring(base + i, STAGES)
    prev, prev_phase = _ring(base + i - 1, OPT.V_STAGES)
    _wait_turn(my_turn, i & 1, PINGPONG, BAR_MINE)
    mbarrier.wait(k_ready.index(slot), phase)
    s_tok = warpgroup_mma(q, k_bufs.index(slot).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0)), zero_s,
                          use_acc=False, is_async=True)
    if RESCALE_AT_PV:  # while Q.K^T runs, not at the end of the last tile, before Q.K^T could be issued
        o = _rescale_o(o, o_alpha, rows_o, HEAD_DIM, RESCALE_SKIP)
        if SUMS_MMA and not PER_TILE:  # the accumulator the next sums' wgmma adds to, as O (PER_TILE: below)
            l_acc, l_run = _rescale_sums(l_acc, l_run, o_alpha, PER_TILE)
    mbarrier.wait(v_ready.index(prev), prev_phase)
    p_a = _p_operand(p_op, dtype)
    o_tok = warpgroup_mma(p_a, _v_operand(v_bufs, prev, HEAD_DIM, BLOCK_N, V_KMAJOR), o, is_async=True)
    if SUMS_MMA:  # the same P times ones: a third group in flight, after Q.K^T's and P.V's
        l_tok = warpgroup_mma(p_a, _ones_operand(ones_smem), l_acc, use_acc=not PER_TILE, is_async=True)
    _pass_turn(their_turn, PINGPONG, BAR_THEIRS)
    if SUMS_MMA:  # Q.K^T's group is the oldest of three
        s = warpgroup_mma_wait(num_outstanding=2, deps=(s_tok, ))
    else:
        s = warpgroup_mma_wait(num_outstanding=1, deps=(s_tok, ))
    mbarrier.arrive(k_empty.index(slot), count=1)
    keys = i * BLOCK_N + offs_n
    keep = _kept(keys, offs_m, seq, CAUSAL)
    if TILE == 2:
        p, m_i, alpha = _tile_weights(s, m_i, keep, keys, qk_scale, True, MASKED, MAX_OFFSET, LAZY, EMULATE)
    elif TILE == 1:
        p, m_i, alpha = _tile_weights(s, m_i, keep, keys, qk_scale, False, UNMASKED, MAX_OFFSET, LAZY, EMULATE)
    elif i >= n_full:
        p, m_i, alpha = _tile_weights(s, m_i, keep, keys, qk_scale, True, MASKED, MAX_OFFSET, LAZY, EMULATE)
    else:
        p, m_i, alpha = _tile_weights(s, m_i, keep, keys, qk_scale, False, UNMASKED, MAX_OFFSET, LAZY, EMULATE)
    if not SUMS_MMA:
        l_i = _row_sum_update(l_i, p, alpha, BLOCK_N, ROW_SUM_PARTS)
    if PV_FENCE:
        alpha = _schedule_fence(alpha)
    o, p_op = _wait_pv(o_tok, p_op)
    if SUMS_MMA:  # complete with P.V's (the wait above took every group)
        l_acc, l_run = _sums_done(l_tok, l_run, PER_TILE)
    mbarrier.arrive(v_empty.index(prev), count=1)
    if RESCALE_AT_PV:
        o_alpha = alpha
        # PER_TILE's FP32 running sums take alpha here, as without RESCALE_AT_PV: multiplied before the next add
        # they were contracted with it into one FFMA (one rounding, not two), and -ro's output left the plain
        # kernel's wherever a row's maximum moved after its first tile (FP8 -hg2-rla-ro-lmt-tb on the H200,
        # 2026-12-04: sessions/gluon-probe-h200-20261204-0723-pd-diagnose-probe-data)
        if PER_TILE:
            l_acc, l_run = _rescale_sums(l_acc, l_run, alpha, PER_TILE)
    else:
        o = _rescale_o(o, alpha, rows_o, HEAD_DIM, RESCALE_SKIP)
        if SUMS_MMA:
            l_acc, l_run = _rescale_sums(l_acc, l_run, alpha, PER_TILE)
    p_op = _p_carry(p, dtype, p_layout, BLOCK_N, P_AT_MMA)
    return m_i, l_i, o, p_op, o_alpha, l_acc, l_run


@gluon.constexpr_function
def _o_layout(head_dim, bitwidth):
    """O's accumulator layout in a consumer warpgroup: the wgmma's, 64 rows by head_dim, k of 16 at 16 bits and 32 at
    FP8."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, head_dim, 256 // bitwidth])


@gluon.constexpr_function
def _s_layout(cols, bitwidth):
    """The scores' accumulator layout: Q.K^T's wgmma, 64 rows by cols keys."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, cols, 256 // bitwidth])


@gluon.constexpr_function
def _p_layout(head_dim, bitwidth):
    """P as P.V's A operand, from registers: O's accumulator layout is its parent."""
    return gl.DotOperandLayout(operand_index=0, parent=_o_layout(head_dim, bitwidth), k_width=32 // bitwidth)


@gluon.jit
def _consumer_item(desc_q, desc_o, desc_ones, q_smem, o_smem, ones_smem, q_bar, k_bufs, v_bufs, k_ready, v_ready,
                   k_empty, v_empty, my_turn, their_turn, qk_scale, v_scale, b32, h32, row0, seq, n_full, n_tiles,
                   KN, kn_row, kn_blocks, base, q_phase, next_b32, next_h32, next_row0, load_next_q, q_free,
                   OPT: gl.constexpr, PINGPONG: gl.constexpr, BAR_MINE: gl.constexpr = 0,
                   BAR_THEIRS: gl.constexpr = 0, FIRST: gl.constexpr = True, PERSISTENT: gl.constexpr = 0,
                   prev_o=0.0, prev_b32=0, prev_h32=0, prev_row0=0, has_prev=False, prev_p=0.0, prev_l=0.0):
    """One warpgroup's 64 query rows from row0, its Q already on its way (q_bar, phase q_phase): online softmax
    over n_tiles key tiles, the first n_full of which need no mask, from ring position base. The O tile is written
    and its store issued, not waited for; under the deferred epilogue (PERSISTENT 3, -pde) it is returned instead,
    normalized and in the output's dtype, and the previous block's (prev_o, at prev_b32, prev_h32, prev_row0;
    has_prev: there is one) is written once this block's first Q.K^T has been issued. Under the overlapped boundary
    (PERSISTENT 4, -pdo) the block ends before its last P.V: O (with the factor it owed), P and the row sums are
    returned as the key loop carries them, and the previous block's (prev_o, prev_p, prev_l) take their last P.V
    behind this block's first Q.K^T and are written once this block's first weights are computed (_carried_pv,
    _write_carried). PERSISTENT (SCHEDULE_MODE):
    the previous block's O store may still be reading o_smem, so it is waited for first; under rounds (1),
    load_next_q: the next block's Q (next_b32, next_h32, next_row0) is loaded once this block's last Q.K^T has
    completed; under the dynamic schedule (2) Q's buffer is released to the producer then (q_free). Without
    PERSISTENT (base 0, load_next_q False) the code is the one-block kernel's. PINGPONG (0: off, 1: mbarriers, 2:
    named barriers): before issuing tile i's wgmmas wait for turn i (my_turn's phase, or named barrier BAR_MINE),
    after issuing them pass the turn on (their_turn, or BAR_THEIRS); both consumers take n_tiles turns, the first
    consumer's first is given (named: the second consumer arrives on the first's barrier once before its own first
    wait, so one arrival is left over at the end, which the program's exit discards).
    h15-proved: the unmasked tiles take A1 without its clamp where _proved_n_full says so, the masked ones A1;
    h15-folded likewise its clamp-free and clamped forms (triton_attn._folded_weights)."""
    HEAD_DIM: gl.constexpr = OPT.HEAD_DIM
    BLOCK_N: gl.constexpr = OPT.BLOCK_N
    STAGES: gl.constexpr = OPT.STAGES
    CAUSAL: gl.constexpr = OPT.CAUSAL
    WEIGHT: gl.constexpr = OPT.WEIGHT
    MAX_OFFSET: gl.constexpr = OPT.MAX_OFFSET
    V_KMAJOR: gl.constexpr = OPT.V_KMAJOR
    KN_WIDTH: gl.constexpr = OPT.KN_WIDTH
    RESCALE_SKIP: gl.constexpr = OPT.RESCALE_SKIP
    ROW_SUM_PARTS: gl.constexpr = OPT.ROW_SUM_PARTS
    RESCALE_AT_PV: gl.constexpr = OPT.RESCALE_AT_PV
    LAZY: gl.constexpr = OPT.LAZY
    EMULATE: gl.constexpr = OPT.EMULATE
    SPLIT: gl.constexpr = OPT.SPLIT
    MASKED_LOOP: gl.constexpr = OPT.MASKED_LOOP
    P_AT_MMA: gl.constexpr = OPT.P_AT_MMA
    ROWS: gl.constexpr = 64
    dtype: gl.constexpr = desc_q.dtype
    K_STEP: gl.constexpr = 256 // dtype.primitive_bitwidth  # wgmma's k: 16 at 16 bits, 32 at FP8
    # SPLIT: each key tile's scores in two halves, one Q.K^T wgmma group each (_issue_qk), weighed half by half
    S_COLS: gl.constexpr = BLOCK_N // 2 if SPLIT else BLOCK_N
    s_layout: gl.constexpr = _s_layout(S_COLS, dtype.primitive_bitwidth)
    o_layout: gl.constexpr = _o_layout(HEAD_DIM, dtype.primitive_bitwidth)
    p_layout: gl.constexpr = _p_layout(HEAD_DIM, dtype.primitive_bitwidth)
    rows_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    cols_s: gl.constexpr = gl.SliceLayout(0, s_layout)
    rows_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    SUMS_MMA: gl.constexpr = ROW_SUM_PARTS >= 3  # the row sums on the tensor core (row_sum "mma", "mma-tile")
    PER_TILE: gl.constexpr = ROW_SUM_PARTS == 4  # "mma-tile": a fresh accumulator per tile, added in FP32
    PV_FENCE: gl.constexpr = MASKED_LOOP == 2  # GluonConfig.tile_loops "two-fenced"
    ONES_N: gl.constexpr = ones_smem.shape[0]
    l_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, ONES_N, K_STEP])

    mbarrier.wait(q_bar, q_phase)  # with it, on the first block, the ones tile of SUMS_MMA
    q = q_smem.reshape([ROWS, HEAD_DIM])
    UNMASKED: gl.constexpr = "h15-noclamp" if WEIGHT == "h15-proved" else WEIGHT
    MASKED: gl.constexpr = "A1" if WEIGHT == "h15-proved" else WEIGHT
    if (WEIGHT == "h15-proved") or (WEIGHT == "h15-folded"):
        n_full = _proved_n_full(q_smem, KN, kn_row, kn_blocks, qk_scale, n_full, ROWS, HEAD_DIM, MAX_OFFSET,
                                KN_WIDTH, OPT.GDC_WAIT)

    offs_m = row0 + gl.arange(0, ROWS, rows_s)
    offs_n = gl.arange(0, S_COLS, cols_s)
    zero_s = gl.zeros([ROWS, S_COLS], gl.float32, s_layout)
    m_i = gl.full([ROWS], float("-inf"), gl.float32, rows_s)
    l_i = gl.zeros([ROWS], gl.float32, rows_s)  # ROW_SUM_PARTS: replaced by tile 0's partial sums below
    o = gl.zeros([ROWS, HEAD_DIM], gl.float32, o_layout)

    # tile 0: its scores before the loop
    if (PINGPONG == 2) and (not FIRST) and (PERSISTENT == 0):  # (persistent: once per program, by the caller)
        _named_barrier(BAR_THEIRS, True)  # the first consumer's first turn
    _wait_turn(my_turn, 0, PINGPONG, BAR_MINE)
    slot0, phase0 = _ring(base, STAGES)
    mbarrier.wait(k_ready.index(slot0), phase0)
    if SPLIT:
        if ROW_SUM_PARTS:  # per-thread sums from zeros (_halves_weights adds tile 0's, alpha being 0 there)
            l_i = _thread_row_sums(zero_s, S_COLS, ROW_SUM_PARTS == 2)
        a_tok, b_tok = _issue_qk(q, k_bufs.index(slot0), zero_s, BLOCK_N, HEAD_DIM)
        _pass_turn(their_turn, PINGPONG, BAR_THEIRS)
        s = warpgroup_mma_wait(num_outstanding=1, deps=(a_tok, ))
        if n_full > 0:
            p, p_b, m_i, alpha, l_i = _halves_weights(s, b_tok, k_empty.index(slot0), m_i, l_i, 0, offs_n, offs_m,
                                                      seq, qk_scale, 0, False, UNMASKED, MAX_OFFSET, LAZY, EMULATE,
                                                      CAUSAL, ROW_SUM_PARTS, RESCALE_SKIP)
        else:
            p, p_b, m_i, alpha, l_i = _halves_weights(s, b_tok, k_empty.index(slot0), m_i, l_i, 0, offs_n, offs_m,
                                                      seq, qk_scale, 0, True, MASKED, MAX_OFFSET, LAZY, EMULATE,
                                                      CAUSAL, ROW_SUM_PARTS, RESCALE_SKIP)
        p_op_b = _p_carry(p_b, dtype, p_layout, S_COLS, P_AT_MMA)
    else:
        s = warpgroup_mma(q, k_bufs.index(slot0).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0)), zero_s,
                          use_acc=False, is_async=True)
        _pass_turn(their_turn, PINGPONG, BAR_THEIRS)
        if PERSISTENT == 3:  # the previous block's O leaves while the tensor core computes this one's first scores
            if has_prev:
                _write_o(desc_o, o_smem, prev_o, prev_b32, prev_h32, prev_row0, HEAD_DIM, PERSISTENT)
        if PERSISTENT == 4:  # the previous block's last P.V behind this Q.K^T, in flight through this tile's weights
            # (the first block's previous is _carry_start's zeros, its P.V one whose result is dropped: a wgmma inside
            # a branch on has_prev, which ptxas cannot tell is the same in every thread, serializes every wgmma of
            # the kernel, advisory C7518)
            prev_last, prev_last_phase = _ring(base - 1, OPT.V_STAGES)
            prev_tok = _carried_pv(prev_o, prev_p, v_bufs, v_ready, prev_last, prev_last_phase, has_prev, OPT)
            p, m_i, alpha = _first_tile_weights(s, 1, k_empty, slot0, m_i, offs_n, offs_m, seq, qk_scale,
                                                n_full, OPT, UNMASKED, MASKED)
            if PV_FENCE:  # as in the loop: the weights above P.V's wait
                alpha = _schedule_fence(alpha)
            _write_carried(prev_tok, prev_p, prev_l, v_empty, prev_last, desc_o, o_smem, v_scale, prev_b32, prev_h32,
                           prev_row0, has_prev, OPT, PERSISTENT)
        else:
            p, m_i, alpha = _first_tile_weights(s, 0, k_empty, slot0, m_i, offs_n, offs_m, seq, qk_scale,
                                                n_full, OPT, UNMASKED, MASKED)
        if SUMS_MMA:  # this tile's sums are added with its P.V, in the next iteration
            l_acc = gl.zeros([ROWS, ONES_N], gl.float32, l_layout)
            l_run = _one_column_per_thread(l_acc)  # PER_TILE's FP32 sums, one column per thread (otherwise unused)
        elif ROW_SUM_PARTS:  # alpha is 0 here (m was -inf) and l 0: the sums start from this tile's
            l_i = _thread_row_sums(p, BLOCK_N, ROW_SUM_PARTS == 2)
        else:
            l_i = l_i * alpha + gl.sum(p, 1)
    p_op = _p_carry(p, dtype, p_layout, S_COLS, P_AT_MMA)
    # RESCALE_AT_PV: the factor O still owes, applied just before the next P.V is issued (tile 0's is 0, on an O of
    # zeros: the same zeros)
    o_alpha = alpha

    if not SUMS_MMA:  # carried through _key_tile unread
        l_acc = 0.0
        l_run = 0.0
    if SPLIT:  # four groups: Q.K^T's halves, then P.V's (_issue_pv); each half waited for as it is needed
        for i in range(1, n_tiles):
            slot, phase = _ring(base + i, STAGES)
            prev, prev_phase = _ring(base + i - 1, OPT.V_STAGES)
            _wait_turn(my_turn, i & 1, PINGPONG, BAR_MINE)
            mbarrier.wait(k_ready.index(slot), phase)
            a_tok, b_tok = _issue_qk(q, k_bufs.index(slot), zero_s, BLOCK_N, HEAD_DIM)
            mbarrier.wait(v_ready.index(prev), prev_phase)
            o_tok = _issue_pv(p_op, p_op_b, v_bufs, prev, o, HEAD_DIM, BLOCK_N, dtype)
            _pass_turn(their_turn, PINGPONG, BAR_THEIRS)
            s = warpgroup_mma_wait(num_outstanding=3, deps=(a_tok, ))
            if i >= n_full:
                p, p_b, m_i, alpha, l_i = _halves_weights(s, b_tok, k_empty.index(slot), m_i, l_i, i, offs_n, offs_m,
                                                          seq, qk_scale, 2, True, MASKED, MAX_OFFSET, LAZY, EMULATE,
                                                          CAUSAL, ROW_SUM_PARTS, RESCALE_SKIP)
            else:
                p, p_b, m_i, alpha, l_i = _halves_weights(s, b_tok, k_empty.index(slot), m_i, l_i, i, offs_n, offs_m,
                                                          seq, qk_scale, 2, False, UNMASKED, MAX_OFFSET, LAZY,
                                                          EMULATE, CAUSAL, ROW_SUM_PARTS, RESCALE_SKIP)
            o, p_op, p_op_b = warpgroup_mma_wait(num_outstanding=0, deps=(o_tok, p_op, p_op_b))
            mbarrier.arrive(v_empty.index(prev), count=1)
            o = _rescale_o(o, alpha, rows_o, HEAD_DIM, RESCALE_SKIP)
            p_op = _p_carry(p, dtype, p_layout, S_COLS, P_AT_MMA)
            p_op_b = _p_carry(p_b, dtype, p_layout, S_COLS, P_AT_MMA)
    else:
        # MASKED_LOOP: the tiles without a mask here, those with one in a loop of their own below, so that neither
        # loop's body branches between the two forms; otherwise one loop whose tiles decide (_key_tile's TILE 0)
        FIRST_TILES: gl.constexpr = 1 if MASKED_LOOP else 0
        if MASKED_LOOP:
            first_end = gl.minimum(n_full, n_tiles)
        else:
            first_end = n_tiles
        for i in range(1, first_end):
            m_i, l_i, o, p_op, o_alpha, l_acc, l_run = _key_tile(
                i, q, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, ones_smem, my_turn, their_turn, zero_s,
                m_i, l_i, o, p_op, o_alpha, l_acc, l_run, offs_n, offs_m, seq, qk_scale, n_full, base, rows_o,
                p_layout, OPT, UNMASKED, MASKED, PINGPONG, BAR_MINE, BAR_THEIRS, FIRST_TILES, PV_FENCE)
        if MASKED_LOOP:
            for i in range(gl.maximum(n_full, 1), n_tiles):
                m_i, l_i, o, p_op, o_alpha, l_acc, l_run = _key_tile(
                    i, q, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, ones_smem, my_turn, their_turn, zero_s,
                    m_i, l_i, o, p_op, o_alpha, l_acc, l_run, offs_n, offs_m, seq, qk_scale, n_full, base, rows_o,
                    p_layout, OPT, UNMASKED, MASKED, PINGPONG, BAR_MINE, BAR_THEIRS, 2, PV_FENCE)

    # every Q.K^T of this block has completed: Q's buffer is free for the next block's
    if PERSISTENT >= 2:
        mbarrier.arrive(q_free, count=1)
    elif PERSISTENT:
        if load_next_q:
            _issue_q(desc_q, desc_ones, q_bar, q_smem, ones_smem, next_b32, next_h32, next_row0, HEAD_DIM, False)
    if PERSISTENT == 4:  # the last P.V, and O's write, come with the next block's first tile or after the last block
        # O takes the factor it owes now, by a plain multiply (the same product; the skip of -rl would leave them):
        # registers the FMA pipe wrote cross into the next block, where O's own, which a wgmma wrote, read after the
        # next wgmma's issue, make ptxas wait for that wgmma first (advisory C7517)
        return _rescale_o(o, o_alpha, rows_o, HEAD_DIM, False), p_op, l_i
    last, last_phase = _ring(base + n_tiles - 1, OPT.V_STAGES)
    if RESCALE_AT_PV:
        o = _rescale_o(o, o_alpha, rows_o, HEAD_DIM, RESCALE_SKIP)
        if SUMS_MMA and not PER_TILE:  # PER_TILE's running sums took it at the end of the last tile (_key_tile)
            l_acc, l_run = _rescale_sums(l_acc, l_run, o_alpha, PER_TILE)
    mbarrier.wait(v_ready.index(last), last_phase)
    if SPLIT:
        o_tok = _issue_pv(p_op, p_op_b, v_bufs, last, o, HEAD_DIM, BLOCK_N, dtype)
        o, p_op, p_op_b = warpgroup_mma_wait(num_outstanding=0, deps=(o_tok, p_op, p_op_b))
    else:
        p_a = _p_operand(p_op, dtype)
        o_tok = warpgroup_mma(p_a, _v_operand(v_bufs, last, HEAD_DIM, BLOCK_N, V_KMAJOR), o, is_async=True)
        if SUMS_MMA:
            l_tok = warpgroup_mma(p_a, _ones_operand(ones_smem), l_acc, use_acc=not PER_TILE, is_async=True)
        o, p_op = _wait_pv(o_tok, p_op)
    if SUMS_MMA:
        l_acc, l_run = _sums_done(l_tok, l_run, PER_TILE)
    mbarrier.arrive(v_empty.index(last), count=1)

    l_i = _final_row_sums(l_i, l_acc, l_run, OPT)
    if PERSISTENT == 3:  # written under the next block's first Q.K^T, or after the last block. Normalized and
        # converted here, so that what crosses into the next block are registers the FMA pipe wrote: O's own, which a
        # wgmma wrote, read after the next wgmma's issue made ptxas inject a wait for it (C7517) before the epilogue
        return _normalized(o, l_i, v_scale, rows_o).to(desc_o.dtype)
    else:
        _write_o(desc_o, o_smem, _normalized(o, l_i, v_scale, rows_o), b32, h32, row0, HEAD_DIM, PERSISTENT)


@gluon.jit
def _first_tile_weights(s_tok, outstanding: gl.constexpr, k_empty, slot, m_i, offs_n, offs_m, seq, qk_scale, n_full,
                        OPT: gl.constexpr, UNMASKED: gl.constexpr, MASKED: gl.constexpr):
    """A block's first key tile (whole Q.K^T): its scores waited for (leaving `outstanding` younger wgmma groups in
    flight), its K slot released (k_empty's `slot`), its weights (UNMASKED's where the block has tiles without a mask,
    MASKED's otherwise)."""
    s = warpgroup_mma_wait(num_outstanding=outstanding, deps=(s_tok, ))
    mbarrier.arrive(k_empty.index(slot), count=1)
    keys = offs_n
    keep = _kept(keys, offs_m, seq, OPT.CAUSAL)
    if n_full > 0:
        p, m_i, alpha = _tile_weights(s, m_i, keep, keys, qk_scale, False, UNMASKED, OPT.MAX_OFFSET, OPT.LAZY,
                                      OPT.EMULATE)
    else:
        p, m_i, alpha = _tile_weights(s, m_i, keep, keys, qk_scale, True, MASKED, OPT.MAX_OFFSET, OPT.LAZY,
                                      OPT.EMULATE)
    return p, m_i, alpha


@gluon.jit
def _carried_pv(o, p_op, v_bufs, v_ready, slot, phase, has_prev, OPT: gl.constexpr):
    """-pdo: a block's last P.V, issued behind the next block's first Q.K^T (or after the program's last block), from
    the state _consumer_item carried out of it: O, P as _p_carry left it, V in ring slot `slot` (phase `phase`).
    Without has_prev (no block before: O and P are zeros) V is not waited for, and the group's result is dropped
    (_write_carried): whatever the slot holds then, or is being loaded with, only reaches that result. Returns the
    group's token."""
    if has_prev:
        mbarrier.wait(v_ready.index(slot), phase)
    o_tok = warpgroup_mma(_p_operand(p_op, v_bufs.dtype), _v_operand(v_bufs, slot, OPT.HEAD_DIM, OPT.BLOCK_N,
                                                                    OPT.V_KMAJOR), o, is_async=True)
    return o_tok


@gluon.jit
def _write_carried(o_tok, p_op, l_i, v_empty, slot, desc_o, o_smem, v_scale, b32, h32, row0, has_prev,
                   OPT: gl.constexpr, PERSISTENT: gl.constexpr):
    """-pdo: a block's last P.V (_carried_pv's o_tok) waited for; where there was a block (has_prev), its V slot
    released and its O normalized by the row sums (l_i as the key loop kept them) and written at (b32, h32, row0)."""
    o, p_op = _wait_pv(o_tok, p_op)
    if has_prev:
        mbarrier.arrive(v_empty.index(slot), count=1)
        o = _normalized(o, _final_row_sums(l_i, 0.0, 0.0, OPT), v_scale, gl.SliceLayout(1, o.type.layout))
        _write_o(desc_o, o_smem, o, b32, h32, row0, OPT.HEAD_DIM, PERSISTENT)


@gluon.jit
def _carry_start(dtype: gl.constexpr, OPT: gl.constexpr):
    """-pdo: the state _consumer_item carries out of a block (O, P, the row sums), of its types and layouts, before
    the first block (zeros, whose P.V's result is dropped: the first block has no previous one)."""
    ROWS: gl.constexpr = 64
    s_layout: gl.constexpr = _s_layout(OPT.BLOCK_N, dtype.primitive_bitwidth)
    zero_s = gl.zeros([ROWS, OPT.BLOCK_N], gl.float32, s_layout)
    o = gl.zeros([ROWS, OPT.HEAD_DIM], gl.float32, _o_layout(OPT.HEAD_DIM, dtype.primitive_bitwidth))
    p_op = _p_carry(zero_s, dtype, _p_layout(OPT.HEAD_DIM, dtype.primitive_bitwidth), OPT.BLOCK_N, OPT.P_AT_MMA)
    if OPT.ROW_SUM_PARTS:
        l_i = _thread_row_sums(zero_s, OPT.BLOCK_N, OPT.ROW_SUM_PARTS == 2)
    else:
        l_i = gl.zeros([ROWS], gl.float32, gl.SliceLayout(1, s_layout))
    return o, p_op, l_i


@gluon.jit
def _normalized(o, l_i, v_scale, rows_o: gl.constexpr):
    """O divided by its row sums, with V's descale: both in one multiply per element."""
    return o * gl.convert_layout(v_scale / l_i, rows_o)[:, None]


@gluon.jit
def _write_o(desc_o, o_smem, o, b32, h32, row0, HEAD_DIM: gl.constexpr, PERSISTENT: gl.constexpr):
    """O, normalized, written to o_smem in the output's dtype and its store to global memory issued, not waited
    for."""
    if PERSISTENT:  # the previous block's O may still be leaving o_smem (its issuing thread waits, then all)
        tma.store_wait(pendings=0)
        gl.thread_barrier()
    # at 16 bits o_smem is Q's buffer (same dtype and box), free once the last Q.K^T has completed, except under the
    # dynamic schedule, whose producer may already be loading the next Q there (O has its own buffer then)
    o_smem.reshape([o.shape[0], HEAD_DIM]).store(o.to(desc_o.dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(desc_o, [b32, row0, h32 * HEAD_DIM], o_smem)


@gluon.jit
def _attn_fwd_ws(desc_q, desc_k, desc_v, desc_o, KN, kn_blocks, qk_scale, v_scale, seq, heads, group,
                 head_group, n_items, desc_ones, counter,
                 HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
                 WEIGHT: gl.constexpr, MAX_OFFSET: gl.constexpr, V_KMAJOR: gl.constexpr,
                 CONSUMER_REGS: gl.constexpr, LOADER_REGS: gl.constexpr, PINGPONG: gl.constexpr = 0,
                 CONSUMERS: gl.constexpr = 2, KN_WIDTH: gl.constexpr = 1, BAR_0: gl.constexpr = 0,
                 BAR_1: gl.constexpr = 0, RESCALE_SKIP: gl.constexpr = False, PTX_TRIM: gl.constexpr = False,
                 ROW_SUM_PARTS: gl.constexpr = False, RESCALE_AT_PV: gl.constexpr = False, LAZY: gl.constexpr = 0.0,
                 PERSISTENT: gl.constexpr = 0, EMULATE: gl.constexpr = 0, SPLIT: gl.constexpr = False,
                 MASKED_LOOP: gl.constexpr = 0, P_AT_MMA: gl.constexpr = False, K_AHEAD: gl.constexpr = False,
                 V_STAGES: gl.constexpr = 0, GDC_WAIT: gl.constexpr = False):
    """n_items: the launch's query blocks (batch x heads x 128- or 64-row blocks). Without PERSISTENT one program
    per block; with it (SCHEDULE_MODE), fewer programs than blocks, each taking blocks in rounds (_round_item, 1)
    or, 2, its next from `counter` (a global int32 at 0 before the launch, and left at 0 after it). K's ring has
    STAGES buffers, V's V_STAGES (kernel_constants passes GluonConfig.value_stages; 0: as many as K's)."""
    V_RING: gl.constexpr = V_STAGES if V_STAGES else STAGES
    ROWS: gl.constexpr = 64
    if PTX_TRIM:  # GluonConfig.sync "mbarrier": the mark ptx_trim looks for in the PTX
        one_per_thread: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])  # the launch's 4 warps
        gl.inline_asm_elementwise(PTX_TRIM_MARKER, "=r,r", [gl.full([128], 0, gl.int32, one_per_thread)],
                                  dtype=gl.int32, is_pure=False, pack=1)
    BLOCK_M: gl.constexpr = ROWS * CONSUMERS
    # the Triton kernel's program order: groups of head_group heads, query block slowest, causal longest first
    b32, h32, hk32, start_m, n_full, n_tiles, kn_row = _item_coords(gl.program_id(0), seq, heads, group,
                                                                    head_group, CAUSAL, BLOCK_M, BLOCK_N)

    q_layout: gl.constexpr = desc_q.layout
    kv_layout: gl.constexpr = desc_k.layout
    dtype: gl.constexpr = desc_q.dtype
    Q_BUFS: gl.constexpr = 2 if PERSISTENT == 4 else 1  # -pdo: each consumer's next Q loads beside its current one
    if Q_BUFS == 2:
        q0 = gl.allocate_shared_memory(dtype, [2, 1, ROWS, HEAD_DIM], q_layout)
        if CONSUMERS == 2:
            q1 = gl.allocate_shared_memory(dtype, [2, 1, ROWS, HEAD_DIM], q_layout)
        else:
            q1 = q0
    else:
        q0 = gl.allocate_shared_memory(dtype, [1, ROWS, HEAD_DIM], q_layout)
        if CONSUMERS == 2:
            q1 = gl.allocate_shared_memory(dtype, [1, ROWS, HEAD_DIM], q_layout)
        else:
            q1 = q0
    k_bufs = gl.allocate_shared_memory(dtype, [STAGES, 1, BLOCK_N, HEAD_DIM], kv_layout)
    if V_KMAJOR:
        v_bufs = gl.allocate_shared_memory(dtype, [V_RING, 1, HEAD_DIM, BLOCK_N], desc_v.layout)
    else:
        v_bufs = gl.allocate_shared_memory(dtype, [V_RING, 1, BLOCK_N, HEAD_DIM], kv_layout)
    if (desc_o.dtype == dtype) and (PERSISTENT < 2):  # the output tile leaves through Q's buffer
        o0 = q0
        o1 = q1
    else:  # FP8 in, BF16 out; or the dynamic schedule, whose producer loads the next Q while O may be leaving
        o0 = gl.allocate_shared_memory(desc_o.dtype, [1, ROWS, HEAD_DIM], desc_o.layout)
        if CONSUMERS == 2:
            o1 = gl.allocate_shared_memory(desc_o.dtype, [1, ROWS, HEAD_DIM], desc_o.layout)
        else:
            o1 = o0
    if ROW_SUM_PARTS >= 3:  # each consumer's own ones tile (GluonConfig.row_sum "mma", "mma-tile"), loaded with its Q
        ones0 = gl.allocate_shared_memory(dtype, desc_ones.block_type.shape, desc_ones.layout)
        if CONSUMERS == 2:
            ones1 = gl.allocate_shared_memory(dtype, desc_ones.block_type.shape, desc_ones.layout)
        else:
            ones1 = ones0
    else:  # not read
        ones0 = q0
        ones1 = q1
    bar_layout: gl.constexpr = mbarrier.MBarrierLayout()
    q_bars = gl.allocate_shared_memory(gl.int64, [2 * Q_BUFS, 1], bar_layout)  # consumer c's buffer j: Q_BUFS c + j
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    v_ready = gl.allocate_shared_memory(gl.int64, [V_RING, 1], bar_layout)
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    v_empty = gl.allocate_shared_memory(gl.int64, [V_RING, 1], bar_layout)
    turns = gl.allocate_shared_memory(gl.int64, [2, 1], bar_layout)  # PINGPONG 1: whose turn to issue wgmmas
    for i in gl.static_range(2 * Q_BUFS):
        mbarrier.init(q_bars.index(i), count=1)
    if PINGPONG == 1:
        mbarrier.init(turns.index(0), count=1)
        mbarrier.init(turns.index(1), count=1)
        mbarrier.arrive(turns.index(0), count=1)  # the first consumer's first turn
    if PERSISTENT >= 2:  # the dynamic schedule's hand-overs: block numbers (_post_item) and Q's buffers (q_free)
        items = gl.allocate_shared_memory(gl.int32, [2, 1], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        item_ready = gl.allocate_shared_memory(gl.int64, [2, 1], bar_layout)
        item_empty = gl.allocate_shared_memory(gl.int64, [2, 1], bar_layout)
        q_free = gl.allocate_shared_memory(gl.int64, [2 * Q_BUFS, 1], bar_layout)  # as q_bars
        for i in gl.static_range(2):
            mbarrier.init(item_ready.index(i), count=1)
            mbarrier.init(item_empty.index(i), count=CONSUMERS)
            mbarrier.init(q_free.index(i), count=1)
        for i in gl.static_range(2, 2 * Q_BUFS):
            mbarrier.init(q_free.index(i), count=1)
    else:  # not read
        items = q_bars
        item_ready = q_bars
        item_empty = q_bars
        q_free = q_bars
    RING: gl.constexpr = STAGES if STAGES > V_RING else V_RING
    for i in gl.static_range(RING):  # in this order, the PTX of equal rings as before V's could differ from K's
        if i < STAGES:
            mbarrier.init(k_ready.index(i), count=1)
        if i < V_RING:
            mbarrier.init(v_ready.index(i), count=1)
        if i < STAGES:
            mbarrier.init(k_empty.index(i), count=CONSUMERS)
        if i < V_RING:
            mbarrier.init(v_empty.index(i), count=CONSUMERS)

    row0 = start_m * BLOCK_M
    opt: gl.constexpr = KernelOptions(HEAD_DIM, BLOCK_N, STAGES, CAUSAL, WEIGHT, MAX_OFFSET, V_KMAJOR, KN_WIDTH,
                                      RESCALE_SKIP, ROW_SUM_PARTS, RESCALE_AT_PV, LAZY, EMULATE, SPLIT, MASKED_LOOP,
                                      P_AT_MMA, V_RING, GDC_WAIT)
    if PERSISTENT:
        _persistent_partitions(desc_q, desc_k, desc_v, desc_o, desc_ones, q0, q1, o0, o1, ones0, ones1, q_bars,
                               q_free, items, item_ready, item_empty, counter, k_bufs, v_bufs, k_ready, v_ready,
                               k_empty, v_empty, turns, qk_scale, v_scale, seq, heads, group, head_group, n_items, KN,
                               kn_blocks, opt, CONSUMER_REGS, LOADER_REGS, CONSUMERS, PERSISTENT >= 2,
                               PERSISTENT == 3, PERSISTENT == 4, PINGPONG, BAR_0, BAR_1, K_AHEAD)
    elif CONSUMERS == 1:  # (an else, not a return: the code after a return is still built, with -pdo's Q buffers)
        gl.warp_specialize([
            (_consumer, (desc_q, desc_o, desc_ones, q0, o0, ones0, q_bars.index(0), k_bufs, v_bufs, k_ready, v_ready,
                         k_empty, v_empty, turns.index(0), turns.index(1), qk_scale, v_scale, b32, h32, row0, seq,
                         n_full, n_tiles, KN, kn_row, kn_blocks, opt, 0)),
            (_loader, (desc_k, desc_v, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, b32, hk32, n_tiles,
                       HEAD_DIM, BLOCK_N, STAGES, V_RING, V_KMAJOR, K_AHEAD)),
        ], [1], [LOADER_REGS])
    else:
        gl.warp_specialize([
            (_consumer, (desc_q, desc_o, desc_ones, q0, o0, ones0, q_bars.index(0), k_bufs, v_bufs, k_ready, v_ready,
                         k_empty, v_empty, turns.index(0), turns.index(1), qk_scale, v_scale, b32, h32, row0, seq,
                         n_full, n_tiles, KN, kn_row, kn_blocks, opt, PINGPONG, BAR_0, BAR_1, True)),
            (_consumer, (desc_q, desc_o, desc_ones, q1, o1, ones1, q_bars.index(1), k_bufs, v_bufs, k_ready, v_ready,
                         k_empty, v_empty, turns.index(1), turns.index(0), qk_scale, v_scale, b32, h32, row0 + ROWS,
                         seq, n_full, n_tiles, KN, kn_row, kn_blocks, opt, PINGPONG, BAR_1, BAR_0, False)),
            (_loader, (desc_k, desc_v, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, b32, hk32, n_tiles,
                       HEAD_DIM, BLOCK_N, STAGES, V_RING, V_KMAJOR, K_AHEAD)),
        ], [4, 1], [CONSUMER_REGS, LOADER_REGS])


@gluon.jit
def _persistent_partitions(desc_q, desc_k, desc_v, desc_o, desc_ones, q0, q1, o0, o1, ones0, ones1, q_bars, q_free,
                           items, item_ready, item_empty, counter, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty,
                           turns, qk_scale, v_scale, seq, heads, group, head_group, n_items, KN, kn_blocks,
                           OPT: gl.constexpr, CONSUMER_REGS: gl.constexpr, LOADER_REGS: gl.constexpr,
                           CONSUMERS: gl.constexpr, DYNAMIC: gl.constexpr, DEFER: gl.constexpr = False,
                           OVERLAP: gl.constexpr = False, PINGPONG: gl.constexpr = 0, BAR_0: gl.constexpr = 0,
                           BAR_1: gl.constexpr = 0, K_AHEAD: gl.constexpr = False):
    """_attn_fwd_ws's partitions under a persistent schedule, rounds or DYNAMIC (a ping-pong only under DYNAMIC, and
    only the named one: GluonConfig refuses the others); DEFER: the dynamic schedule's O stored under the next block's first Q.K^T (-pde); OVERLAP: its last P.V
    there (-pdo), each consumer with two Q buffers and their two pairs of barriers; PINGPONG 2: the dynamic schedule's
    two consumers take turns through named barriers BAR_0 and BAR_1 (-ppn-pd); K_AHEAD: the producer's order of
    loads (_load_tiles)."""
    HEAD_DIM: gl.constexpr = OPT.HEAD_DIM
    BLOCK_N: gl.constexpr = OPT.BLOCK_N
    STAGES: gl.constexpr = OPT.STAGES
    V_KMAJOR: gl.constexpr = OPT.V_KMAJOR
    CAUSAL: gl.constexpr = OPT.CAUSAL
    BLOCK_M: gl.constexpr = 64 * CONSUMERS
    WITH_ONES: gl.constexpr = OPT.ROW_SUM_PARTS >= 3
    if OVERLAP:  # all four: consumer c's buffer j at 2 c + j (_attn_fwd_ws's Q_BUFS; a slice of a barrier array
        # crashed Triton 3.6's IR builder)
        q_bar0 = q_bars
        q_bar1 = q_bars
        q_free0 = q_free
        q_free1 = q_free
    else:
        q_bar0 = q_bars.index(0)
        q_bar1 = q_bars.index(1)
        q_free0 = q_free.index(0)
        q_free1 = q_free.index(1)
    # the partitions are spelled out in each call: a jit function cannot be held in a variable inside a kernel, and
    # a tuple of arguments built beforehand passes its bare constexprs (ROW_OFFSET, BLOCK_M, DYNAMIC) on as tensors
    # (OPT, an aggregate, would keep its own). Wrapping those in aggregates is not enough either (tried 2026-12-04
    # with tools/analysis/kernel_ptx_hashes.py): the arguments Triton specialized at launch (group, 1 without GQA)
    # also arrive as tensors, captured at run time, and h15-proved's key-norm rows were then computed with a division
    # by group (two of the 36 hashed kernels changed)
    if CONSUMERS == 1:
        gl.warp_specialize([
            (_consumer_persistent, (desc_q, desc_o, desc_ones, q0, o0, ones0, q_bar0, q_free0, items,
                                    item_ready, item_empty, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty,
                                    turns.index(0), turns.index(1), qk_scale, v_scale, seq, heads, group, head_group,
                                    n_items, KN, kn_blocks, 0, BLOCK_M, OPT, DYNAMIC, DEFER, OVERLAP)),
            (_loader_persistent, (desc_q, desc_k, desc_v, desc_ones, q0, q1, ones0, ones1, q_bars, q_free, items,
                                  item_ready, item_empty, counter, k_bufs, v_bufs, k_ready, v_ready, k_empty,
                                  v_empty, seq, heads, group, head_group, n_items, HEAD_DIM, BLOCK_N, STAGES,
                                  OPT.V_STAGES, V_KMAJOR, CAUSAL, BLOCK_M, CONSUMERS, DYNAMIC, WITH_ONES, OVERLAP,
                                  K_AHEAD)),
        ], [1], [LOADER_REGS])
    else:
        gl.warp_specialize([
            (_consumer_persistent, (desc_q, desc_o, desc_ones, q0, o0, ones0, q_bar0, q_free0, items,
                                    item_ready, item_empty, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty,
                                    turns.index(0), turns.index(1), qk_scale, v_scale, seq, heads, group, head_group,
                                    n_items, KN, kn_blocks, 0, BLOCK_M, OPT, DYNAMIC, DEFER, OVERLAP, PINGPONG, BAR_0,
                                    BAR_1, True)),
            (_consumer_persistent, (desc_q, desc_o, desc_ones, q1, o1, ones1, q_bar1, q_free1, items,
                                    item_ready, item_empty, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty,
                                    turns.index(1), turns.index(0), qk_scale, v_scale, seq, heads, group, head_group,
                                    n_items, KN, kn_blocks, 64, BLOCK_M, OPT, DYNAMIC, DEFER, OVERLAP, PINGPONG, BAR_1,
                                    BAR_0, False)),
            (_loader_persistent, (desc_q, desc_k, desc_v, desc_ones, q0, q1, ones0, ones1, q_bars, q_free, items,
                                  item_ready, item_empty, counter, k_bufs, v_bufs, k_ready, v_ready, k_empty,
                                  v_empty, seq, heads, group, head_group, n_items, HEAD_DIM, BLOCK_N, STAGES,
                                  OPT.V_STAGES, V_KMAJOR, CAUSAL, BLOCK_M, CONSUMERS, DYNAMIC, WITH_ONES, OVERLAP,
                                  K_AHEAD)),
        ], [4, 1], [CONSUMER_REGS, LOADER_REGS])


@dataclass
class GluonOperands:
    """Inputs and their descriptors, made once before timing (FP8: V's key-major copy too)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor  # (b, s, hk, d), or the (b, hk, d, s) copy at FP8
    out: torch.Tensor
    descs: tuple  # Q, K, V, O
    ones: torch.Tensor  # the (ONES_COLS, block_n) tile of ones row_sum "mma" multiplies P by, and its descriptor
    ones_desc: object
    kn: torch.Tensor  # h15-proved: the key-norm partials its prologue writes (triton_attn.launch_key_norms)
    counter: torch.Tensor  # the dynamic schedule's next-block counter: one int32, 0 between launches


def usable_here() -> str | None:
    """Why the Gluon forward cannot run in this process (None when it can): it needs the compiled Triton (not
    the interpreter) and an sm_90 GPU, whose wgmma, TMA and setmaxnreg it is written for."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "Triton's interpreter (TRITON_INTERPRET=1) does not run Gluon kernels"
    if not torch.cuda.is_available():
        return "no CUDA GPU in this process"
    cap = torch.cuda.get_device_capability()
    if cap != (9, 0):
        return f"the Gluon forward is written for Hopper (sm_90); this GPU is sm_{cap[0]}{cap[1]}"
    return None


def check_variant(variant: str) -> None:
    if variant not in WEIGHT_MAPS:
        raise UsageError(f"the Gluon forward implements variants {', '.join(WEIGHT_MAPS)}, not {variant!r}",
                         hint="run it in the Triton kernel: --triton-config with a triton label, e.g. "
                              "m128n64w8s2-tma-r128-hg16 (BF16/FP16) or m64n128w4s3-vk-tma-hg16 (FP8)")


def boxes(config: GluonConfig, head_dim: int, fp8: bool) -> dict:
    """Each operand's TMA box, as prepare_operands' descriptors and the cross-compiler (triton_compile) take them:
    (1, rows, d) tiles of the (b, s, heads * d) views; at FP8 V's (1, d, keys) tiles of its key-major copy; the
    ones tile whole (row_sum "mma"; every configuration passes it, the others never read it)."""
    d, n = head_dim, config.block_n
    return {"q": [1, WG_ROWS, d], "k": [1, n, d], "v": [1, d, n] if fp8 else [1, n, d], "o": [1, WG_ROWS, d],
            "ones": [ONES_COLS, n]}


def shared_layout(box: list, torch_dtype: torch.dtype):
    """The swizzled shared-memory layout a box of this dtype lands in (the descriptor's and the kernel's)."""
    return gl.NVMMASharedLayout.get_default_for(box, _DTYPES[torch_dtype])


def _descriptor(t: torch.Tensor, box: list, shape: list, strides: list):
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    return TensorDescriptor(t, shape, strides, box, shared_layout(box, t.dtype))


def _rows(t: torch.Tensor, box: list):
    """A TMA descriptor over the (b, s, heads * d) view of a contiguous (b, s, heads, d) tensor, one (1, rows, d)
    box per tile (the batch axis apart, so boxes past a sequence's end read zeros and an output box drops the rows
    past seq)."""
    b, s, h, d = t.shape
    return _descriptor(t, box, [b, s, h * d], [t.stride(0), t.stride(1), 1])


def prepare_operands(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: GluonConfig) -> GluonOperands:
    check_inputs(q, k, v)
    check_head_dim(q.shape[3])  # check_inputs takes the Triton kernel's head dims, 256 among them
    if config.sync == "mbarrier":  # once, before the first launch compiles: not on every timed call
        _ready_ptx_trim()
    q, k = q.contiguous(), k.contiguous()
    b, s, hk, d = k.shape
    fp8 = q.dtype in _FP8
    box = boxes(config, d, fp8)
    if fp8:
        # (b, hk, d, s), keys contiguous, as FP8 wgmma reads its B operand, in the key order the kernel gives P
        # (fp8_key_order, in blocks of 32); the key axis padded with zeros to a multiple of 32, which the
        # descriptor covers, so that a renumbered key never falls outside it
        s_pad = -(-s // 32) * 32
        v_use = key_major_copy(v, s_pad)[..., fp8_key_order(s_pad).to(v.device)].contiguous()
        v_desc = _descriptor(v_use, box["v"], [b, hk * d, s_pad], [v_use.stride(0), v_use.stride(2), 1])
    else:
        v_use = v.contiguous()
        v_desc = _rows(v_use, box["v"])
    out = torch.empty(q.shape, dtype=torch.bfloat16 if fp8 else q.dtype, device=q.device)
    descs = (_rows(q, box["q"]), _rows(k, box["k"]), v_desc, _rows(out, box["o"]))
    kn = torch.empty(b * hk * key_norm_blocks(s), dtype=torch.float32, device=q.device)  # a few KB
    ones = torch.ones(box["ones"], dtype=torch.float32, device=q.device).to(q.dtype)
    ones_desc = _descriptor(ones, box["ones"], list(box["ones"]), [box["ones"][1], 1])
    # zeroed once here: every launch of the dynamic schedule leaves it at 0 again (_loader_persistent)
    counter = torch.zeros(1, dtype=torch.int32, device=q.device)
    return GluonOperands(q, k, v_use, out, descs, ones, ones_desc, kn, counter)


def fp8_key_order(n: int) -> torch.Tensor:
    """The key at each position of P's FP8 operand (_p_carry): position 32 blk + 16 gh + 4 t + 2 gl + j holds key
    32 blk + 16 gh + 8 gl + 2 t + j. n: a multiple of 32."""
    blk, gh, t, gl_, j = torch.meshgrid(torch.arange(n // 32), torch.arange(2), torch.arange(4), torch.arange(2),
                                        torch.arange(2), indexing="ij")
    return (32 * blk + 16 * gh + 8 * gl_ + 2 * t + j).reshape(-1)


def lazy_threshold(config: GluonConfig, fp8: bool, variant: str) -> float:
    """How far a tile's maximum may exceed the running maximum before it moves (0: always): A0's under rescale
    "lazy", A0's and h15-folded's (its lattice's anchor) under "lazy-anchor", and under "lazy-anchor-near" A0's
    as there and h15-folded's at ANCHOR_NEAR_THRESHOLD."""
    if variant not in LAZY_VARIANTS.get(config.rescale, ()):
        return 0.0
    if config.rescale == "lazy-anchor-near" and variant in FOLDED_VARIANTS:
        return ANCHOR_NEAR_THRESHOLD
    return LAZY_THRESHOLD[8 if fp8 else 16]


def max_offset(config: GluonConfig, fp8: bool, variant: str) -> float:
    """The weights' offset in octaves: at FP8 8, so the largest weight of a row is 2^8 (FA4's and FA3's
    max_offset), and with a lazy maximum 8 - threshold, so it is 2^(8 - threshold) to 2^8 (h15-folded's up to
    1.5 x 2^8, its anchor's rounding and phase included, inside E4M3's 448); at 16 bits 0 (the largest weight 1,
    or 2^threshold with the lazy maximum)."""
    if not fp8:
        return 0.0
    return LAZY_FP8_MAX_OFFSET if lazy_threshold(config, fp8, variant) else FP8_MAX_OFFSET


def kernel_constants(config: GluonConfig, seq: int, head_dim: int, causal: bool, fp8: bool, variant: str) -> dict:
    """_attn_fwd_ws's compile-time arguments (shared with the cross-compilation)."""
    if config.split_qk and fp8:  # FP8's V is key-major: half its keys are half of each 128-byte swizzled row
        raise UnsupportedError("the split Q.K^T (-sq) is written for 16-bit inputs, not FP8",
                               hint="leave -sq out of the label at FP8")
    if config.rescale == "lazy-anchor-near" and fp8:  # the same thresholds as -rla there: a second name for it
        raise UnsupportedError("h15-folded's near anchor (-rlan) is an option for 16-bit inputs: at FP8 -rla moves "
                               "its anchor past the same 2 octaves", hint="use -rla at FP8")
    if config.p_round != "tail" and fp8:  # the label would name a second kernel that is the first
        raise UnsupportedError("P rounded at the wgmma (-pm) is an option for 16-bit inputs: at FP8 P is always "
                               "rounded there", hint="leave -pm out of the label at FP8")
    if config.split_qk and variant not in SPLIT_VARIANTS:
        # the first half's weights are multiplied by the second half's exact alpha, which takes Rowmax-H15's weights
        # off their lattice: on the H200 h15-sat under -sq missed the simulation by 3% (A0 by 0.14%, a rounding at
        # another scale; sessions/gluon-probe-h200-20261203-1743-split-bf16)
        raise UnsupportedError(f"the split Q.K^T (-sq) is written for {' and '.join(SPLIT_VARIANTS)}, not {variant}",
                               hint="leave -sq out of the label for Rowmax-H15's forms")
    return dict(HEAD_DIM=head_dim, BLOCK_N=config.block_n, STAGES=config.stages, CAUSAL=bool(causal),
                WEIGHT=variant, MAX_OFFSET=max_offset(config, fp8, variant), LAZY=lazy_threshold(config, fp8, variant),
                V_KMAJOR=fp8,
                CONSUMER_REGS=config.consumer_registers, LOADER_REGS=config.loader_registers,
                PINGPONG=PINGPONG_MODE[config.handover] if config.pingpong else 0,
                CONSUMERS=config.consumers, BAR_0=TURN_BARRIERS[0], BAR_1=TURN_BARRIERS[1],
                RESCALE_SKIP=config.rescale != "always", PTX_TRIM=config.sync == "mbarrier",
                ROW_SUM_PARTS=ROW_SUM_MODE[config.row_sum], RESCALE_AT_PV=config.rescale_at == "pv",
                PERSISTENT=SCHEDULE_MODE[config.schedule],
                EMULATE=emulated_key_bits(config.emulate) if variant == "A0" else 0, SPLIT=config.split_qk,
                MASKED_LOOP=TILE_LOOPS_MODE[config.tile_loops], P_AT_MMA=config.p_round == "wgmma",
                K_AHEAD=config.loads == "k-ahead", V_STAGES=config.value_stages,
                KN_WIDTH=triton.next_power_of_2(key_norm_blocks(seq)) if variant in NORM_BOUND_VARIANTS else 1,
                GDC_WAIT=grid_dependent(config, variant))


def grid_dependent(config: GluonConfig, variant: str) -> bool:
    """Whether this forward is launched to overlap the key norms' kernel before it (-gdc): only where there is one."""
    return config.grid_dependency and variant in NORM_BOUND_VARIANTS


def launch_options(config: GluonConfig, variant: str = "A0") -> dict:
    """num_warps (the default partition: one consumer warpgroup) and, with one consumer, a 128-register launch:
    Triton pads the producer warp's partition to a warpgroup, so a program is 256 threads x 128 = 32768
    registers, half an SM's, and setmaxnreg gives the consumer 232 of them (the producer 24); under -gdc, for the
    variants with the key norms' kernel, programmatic dependent launch (grid_dependent). Shared with the
    cross-compilation."""
    return {"num_warps": CONSUMER_WARPS, **({"maxnreg": 128} if config.consumers == 1 else {}),
            **({"launch_pdl": True} if grid_dependent(config, variant) else {})}


def query_blocks(config: GluonConfig, batch: int, heads: int, seq: int) -> int:
    """The launch's query blocks (_attn_fwd_ws's n_items): one program each without -pt, rows of 64 per consumer."""
    return triton.cdiv(seq, WG_ROWS * config.consumers) * batch * heads


def programs_at_once(config: GluonConfig, device) -> int:
    """How many programs the GPU runs at once, the persistent schedule's grid: one per SM with two consumer
    warpgroups (240 registers a thread take the register file), two with one (launch_options)."""
    return torch.cuda.get_device_properties(device).multi_processor_count * (2 if config.consumers == 1 else 1)


def _ready_ptx_trim() -> None:
    """-tb's PTX rewrite in this process's Triton compiles (from prepare_operands, before the first launch that
    compiles, and from the cross-compile)."""
    ptx_trim.check_triton(triton.__version__)
    ptx_trim.install()


def launch(ops: GluonOperands, causal: bool, variant: str, config: GluonConfig, softmax_scale: float | None = None,
           descale: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> torch.Tensor:
    """One forward into ops.out (overwritten and returned)."""
    check_variant(variant)
    b, s, h, d = ops.q.shape
    hk = ops.k.shape[2]
    qk_scale = log2_scale(d, softmax_scale, descale)
    n_items = query_blocks(config, b, h, s)
    grid = (min(n_items, programs_at_once(config, ops.q.device)) if config.schedule != "blocks" else n_items,)
    if variant in NORM_BOUND_VARIANTS:  # the key norms are part of the call: their cost is in every timing
        launch_key_norms(ops.k, ops.kn, launch_dependents=grid_dependent(config, variant))
    _attn_fwd_ws[grid](*ops.descs, ops.kn, key_norm_blocks(s), qk_scale, float(descale[2]), s, h, h // hk,
                       effective_head_group(config, b * h), n_items, ops.ones_desc, ops.counter,
                       **kernel_constants(config, s, d, causal, ops.q.dtype in _FP8, variant),
                       **launch_options(config, variant))
    return ops.out


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, variant: str = "A0",
              config: GluonConfig | None = None, softmax_scale: float | None = None,
              descale: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> torch.Tensor:
    """One-off call (tests): operands and launch together."""
    config = config or DEFAULT
    ops = prepare_operands(q, k, v, config)
    return launch(ops, causal, variant, config, softmax_scale, descale)
