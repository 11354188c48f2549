"""The producer side of softbench's Gluon forward (softbench.kernels.gluon_attn): the warp that moves Q, K and V
tiles by TMA into shared memory, and the bookkeeping that it and the consumer warpgroups must agree on: ring
positions (slot and phase of each K and V buffer), which query block a program takes next under each schedule
(one block per program, rounds, or a global counter), a block's coordinates and key tiles, and the two-slot ring
through which the dynamic schedule posts block numbers to the consumers.

Kept apart from the consumers' math so that the order in which tiles are loaded, and the hand-overs around it,
can be read in one place; gluon_attn's kernel calls these functions as they are (Gluon inlines them, so the
compiled kernel does not change with the module a function lives in: tools/analysis/kernel_ptx_hashes.py)."""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

from softbench.kernels.triton_attn import _program_tile


@gluon.jit
def _loader(desc_k, desc_v, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, b32, hk32, n_tiles,
            HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, V_STAGES: gl.constexpr,
            V_KMAJOR: gl.constexpr, K_AHEAD: gl.constexpr = False):
    """The producer warp of one program's query block: its key tiles from ring position 0."""
    _load_tiles(desc_k, desc_v, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, b32, hk32, n_tiles, 0,
                HEAD_DIM, BLOCK_N, STAGES, V_STAGES, V_KMAJOR, K_AHEAD)


@gluon.jit
def _load_tiles(desc_k, desc_v, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, b32, hk32, n_tiles, base,
                HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, V_STAGES: gl.constexpr,
                V_KMAJOR: gl.constexpr, K_AHEAD: gl.constexpr = False):
    """K and V tiles into the ring, each slot reused once both consumers released it; base: how many tiles went
    through the ring before these (the persistent schedule's earlier query blocks), which sets each tile's slot
    and phase. A fresh mbarrier counts as having completed the phase before its first, so the first pass's waits
    (parity 1) return at once. In pairs, tile i's K then its V; K_AHEAD (GluonConfig.loads "k-ahead"): tile i + 1's
    K before tile i's V (LOADS says why). K's ring has STAGES slots, V's V_STAGES (_attn_fwd_ws's V_RING)."""
    if K_AHEAD:
        _load_k(desc_k, k_bufs, k_ready, k_empty, b32, hk32, 0, _ring(base, STAGES), HEAD_DIM, BLOCK_N)
        for i in range(1, n_tiles):
            _load_k(desc_k, k_bufs, k_ready, k_empty, b32, hk32, i, _ring(base + i, STAGES), HEAD_DIM, BLOCK_N)
            _load_v(desc_v, v_bufs, v_ready, v_empty, b32, hk32, i - 1, _ring(base + i - 1, V_STAGES), HEAD_DIM,
                    BLOCK_N, V_KMAJOR)
        _load_v(desc_v, v_bufs, v_ready, v_empty, b32, hk32, n_tiles - 1, _ring(base + n_tiles - 1, V_STAGES),
                HEAD_DIM, BLOCK_N, V_KMAJOR)
    else:
        for i in range(n_tiles):
            at = _ring(base + i, STAGES)
            _load_k(desc_k, k_bufs, k_ready, k_empty, b32, hk32, i, at, HEAD_DIM, BLOCK_N)
            if V_STAGES == STAGES:  # one position for both (the paired order's PTX as before V had a ring of its own)
                v_at = at
            else:
                v_at = _ring(base + i, V_STAGES)
            _load_v(desc_v, v_bufs, v_ready, v_empty, b32, hk32, i, v_at, HEAD_DIM, BLOCK_N, V_KMAJOR)


@gluon.jit
def _load_k(desc_k, k_bufs, k_ready, k_empty, b32, hk32, i, at, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr):
    """Key tile i of a block at ring position at = (slot, phase) (_ring), once the slot is free."""
    slot, phase = at
    parity = phase ^ 1
    mbarrier.wait(k_empty.index(slot), parity)
    mbarrier.expect(k_ready.index(slot), desc_k.block_type.nbytes)
    tma.async_copy_global_to_shared(desc_k, [b32, i * BLOCK_N, hk32 * HEAD_DIM], k_ready.index(slot),
                                    k_bufs.index(slot))


@gluon.jit
def _load_v(desc_v, v_bufs, v_ready, v_empty, b32, hk32, i, at, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr,
            V_KMAJOR: gl.constexpr):
    """Value tile i, as _load_k; V_KMAJOR: from the (b, kv_heads * d, s) copy, one (d, keys) box."""
    slot, phase = at
    parity = phase ^ 1
    mbarrier.wait(v_empty.index(slot), parity)
    mbarrier.expect(v_ready.index(slot), desc_v.block_type.nbytes)
    if V_KMAJOR:
        tma.async_copy_global_to_shared(desc_v, [b32, hk32 * HEAD_DIM, i * BLOCK_N], v_ready.index(slot),
                                        v_bufs.index(slot))
    else:
        tma.async_copy_global_to_shared(desc_v, [b32, i * BLOCK_N, hk32 * HEAD_DIM], v_ready.index(slot),
                                        v_bufs.index(slot))


@gluon.jit
def _ring(c, STAGES: gl.constexpr):
    """Ring position c (tiles through the ring before this one, never negative) as (slot, phase parity). Taken
    unsigned: the compiler cannot tell that a position counted from a runtime base is not negative, and a signed
    % and // by STAGES cost a sign fix-up each in every iteration of the key loop."""
    u = gl.to_tensor(c).to(gl.uint32)  # c may be the one-block kernel's constant 0
    return (u % STAGES).to(gl.int32), ((u // STAGES) & 1).to(gl.int32)


@gluon.jit
def _round_item(r, pid, nprog):
    """The persistent schedule's query block for program pid in round r: the blocks are numbered longest first
    (_program_tile's order), round r takes numbers r * nprog .. r * nprog + nprog - 1, handed out in program order
    in even rounds and in reverse in odd ones, so that a program that took a long block in one round takes a short
    one in the next (tools/analysis/program_order_balance.py models it: at causal 8K, b1 h16, 132 programs and
    hg16 it ends 4% before the hardware's dispatch of one program per block, and 18% after it at hg8)."""
    odd = r & 1
    return r * nprog + pid + odd * (nprog - 1 - 2 * pid)


@gluon.jit
def _item_coords(t, seq, heads, group, head_group, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr,
                 BLOCK_N: gl.constexpr):
    """Query block t's (batch, head, kv head, block index), its key tiles (n_tiles in all, the first n_full of
    which need no mask) and its kv head's row of key-norm partials in KN (h15-proved, h15-folded)."""
    bh, start_m = _program_tile(t, gl.cdiv(seq, BLOCK_M), head_group, CAUSAL)
    b32 = bh // heads
    h32 = bh % heads
    hk32 = h32 // group
    if CAUSAL:
        end = gl.minimum((start_m + 1) * BLOCK_M, seq)
        n_full = gl.minimum(start_m * BLOCK_M, seq) // BLOCK_N
    else:
        end = seq
        n_full = seq // BLOCK_N
    n_tiles = gl.cdiv(end, BLOCK_N)
    kn_row = b32 * (heads // group) + hk32
    return b32, h32, hk32, start_m, n_full, n_tiles, kn_row


@gluon.jit
def _loader_persistent(desc_q, desc_k, desc_v, desc_ones, q0, q1, ones0, ones1, q_bars, q_free, items, item_ready,
                       item_empty, counter, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, seq, heads, group,
                       head_group, n_items, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                       V_STAGES: gl.constexpr, V_KMAJOR: gl.constexpr, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr,
                       CONSUMERS: gl.constexpr, DYNAMIC: gl.constexpr, WITH_ONES: gl.constexpr,
                       DOUBLE_Q: gl.constexpr = False, K_AHEAD: gl.constexpr = False):
    """The producer warp under a persistent schedule: every query block the program takes, one ring counter across
    them, so that the next block's first tiles load while the consumers finish this one. Rounds: the blocks of
    _round_item. DYNAMIC: the program's first block is its id, each further one the counter's next number plus the
    programs (the first numbers were taken by id), fetched once this block's tiles are all issued; each block's
    number is posted to the consumers (_post_item), then a number past the last block that stops them. The
    producer also loads the consumers' Q (with the ones tile of WITH_ONES the first time), each as soon as its
    consumer has released the previous block's (q_free); DOUBLE_Q (-pdo), into buffer k % 2 for block k, released by
    block k - 2 (_issue_block_q). K_AHEAD, V_STAGES: each block's key tiles as _load_tiles orders and places them."""
    pid = gl.program_id(0)
    nprog = gl.num_programs(0)
    base = 0
    if DYNAMIC:
        t = pid
        _issue_block_q(desc_q, desc_ones, q0, q1, ones0, ones1, q_bars, q_free, 0, t, seq, heads, group, head_group,
                       HEAD_DIM, CAUSAL, BLOCK_M, BLOCK_N, CONSUMERS, WITH_ONES, True, DOUBLE_Q)
        k = 0
        while t < n_items:
            _post_item(items, item_ready, item_empty, k, t)
            b32, h32, hk32, start_m, n_full, n_tiles, kn_row = _item_coords(t, seq, heads, group, head_group,
                                                                            CAUSAL, BLOCK_M, BLOCK_N)
            _load_tiles(desc_k, desc_v, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, b32, hk32, n_tiles,
                        base, HEAD_DIM, BLOCK_N, STAGES, V_STAGES, V_KMAJOR, K_AHEAD)
            base += n_tiles
            taken = gl.atomic_add(counter, 1)
            # every program takes numbers until one is past the blocks: n_items takes in all, numbered 0 to
            # n_items - 1, so the one that takes the last is the counter's last user in this launch, and leaves it
            # at 0 for the next (no reset kernel before each launch)
            if taken == n_items - 1:
                gl.atomic_xchg(counter, 0)
            t = taken + nprog
            if t < n_items:
                _issue_block_q(desc_q, desc_ones, q0, q1, ones0, ones1, q_bars, q_free, k, t, seq, heads, group,
                               head_group, HEAD_DIM, CAUSAL, BLOCK_M, BLOCK_N, CONSUMERS, False, False, DOUBLE_Q)
            k += 1
        _post_item(items, item_ready, item_empty, k, t)
    else:
        for r in range(gl.cdiv(n_items, nprog)):
            t = _round_item(r, pid, nprog)
            if t < n_items:
                b32, h32, hk32, start_m, n_full, n_tiles, kn_row = _item_coords(t, seq, heads, group, head_group,
                                                                                CAUSAL, BLOCK_M, BLOCK_N)
                _load_tiles(desc_k, desc_v, k_bufs, v_bufs, k_ready, v_ready, k_empty, v_empty, b32, hk32, n_tiles,
                            base, HEAD_DIM, BLOCK_N, STAGES, V_STAGES, V_KMAJOR, K_AHEAD)
                base += n_tiles


@gluon.jit
def _issue_block_q(desc_q, desc_ones, q0, q1, ones0, ones1, q_bars, q_free, k, t, seq, heads, group, head_group,
                   HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                   CONSUMERS: gl.constexpr, WITH_ONES: gl.constexpr, FIRST: gl.constexpr,
                   DOUBLE_Q: gl.constexpr = False):
    """The dynamic schedule's producer: block t's Q tiles, each consumer's 64 rows into its buffer once the
    consumer has released it (q_free, its k-th release; not waited for on the program's FIRST block). DOUBLE_Q
    (-pdo): t is the program's block k + 1 (FIRST: block 0), whose Q goes into buffer (k + 1) % 2 of each consumer
    (q0, q1 hold two; consumer c's barriers are q_bars and q_free at 2 c + buffer) once block k - 1 has released
    it, so that it loads while block k runs."""
    b32, h32, hk32, start_m, n_full, n_tiles, kn_row = _item_coords(t, seq, heads, group, head_group, CAUSAL,
                                                                    BLOCK_M, BLOCK_N)
    if DOUBLE_Q:
        if FIRST:
            n = 0
        else:
            n = k + 1
        buf = n & 1
        for c in gl.static_range(CONSUMERS):
            if n >= 2:  # the buffer's (n - 2) / 2-th release, by block n - 2
                mbarrier.wait(q_free.index(2 * c + buf), ((n >> 1) & 1) ^ 1)
            if c == 0:
                _issue_q(desc_q, desc_ones, q_bars.index(2 * c + buf), q0.index(buf), ones0, b32, h32,
                         start_m * BLOCK_M, HEAD_DIM, False)
            else:
                _issue_q(desc_q, desc_ones, q_bars.index(2 * c + buf), q1.index(buf), ones1, b32, h32,
                         start_m * BLOCK_M + 64, HEAD_DIM, False)
        return
    if not FIRST:
        mbarrier.wait(q_free.index(0), k & 1)
    _issue_q(desc_q, desc_ones, q_bars.index(0), q0, ones0, b32, h32, start_m * BLOCK_M, HEAD_DIM, WITH_ONES)
    if CONSUMERS == 2:
        if not FIRST:
            mbarrier.wait(q_free.index(1), k & 1)
        _issue_q(desc_q, desc_ones, q_bars.index(1), q1, ones1, b32, h32, start_m * BLOCK_M + 64, HEAD_DIM,
                 WITH_ONES)


@gluon.jit
def _post_item(items, item_ready, item_empty, k, t):
    """The dynamic schedule's producer tells the consumers the number of its k-th block: a ring of two slots,
    slot k % 2 reused once both consumers have read block k - 2's."""
    slot = k & 1
    mbarrier.wait(item_empty.index(slot), ((k >> 1) & 1) ^ 1)
    one: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    items.index(slot).store(gl.full([1], t, gl.int32, one))
    mbarrier.arrive(item_ready.index(slot), count=1)


@gluon.jit
def _take_item(items, item_ready, item_empty, k):
    """A consumer's k-th block number under the dynamic schedule (_post_item), its slot released once read."""
    slot = k & 1
    mbarrier.wait(item_ready.index(slot), (k >> 1) & 1)
    one: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    t = gl.max(items.index(slot).load(one), 0)
    mbarrier.arrive(item_empty.index(slot), count=1)
    return t


@gluon.jit
def _issue_q(desc_q, desc_ones, q_bar, q_smem, ones_smem, b32, h32, row0, HEAD_DIM: gl.constexpr,
             WITH_ONES: gl.constexpr):
    """One warpgroup's Q tile into q_smem on q_bar (with the ones tile of row_sum "mma" where WITH_ONES)."""
    if WITH_ONES:
        mbarrier.expect(q_bar, desc_q.block_type.nbytes + desc_ones.block_type.nbytes)
    else:
        mbarrier.expect(q_bar, desc_q.block_type.nbytes)
    tma.async_copy_global_to_shared(desc_q, [b32, row0, h32 * HEAD_DIM], q_bar, q_smem)
    if WITH_ONES:
        tma.async_copy_global_to_shared(desc_ones, [0, 0], q_bar, ones_smem)
