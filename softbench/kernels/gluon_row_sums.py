"""The running row sums of softbench's Gluon forward (softbench.kernels.gluon_attn) in each of their forms
(GluonConfig.row_sum, softbench.kernels.gluon_config.ROW_SUMS): full row sums reduced across a quad every tile,
each thread's own partial sums added once at the end (in a chain or a tree), or sums from the tensor core (P times a
tile of ones, its accumulator over the row or fresh per tile), and how each form is rescaled, waited for and
finished at a block's end.

One home for the normalizer's arithmetic, apart from the key loop that calls it; Gluon inlines these functions, so
where they live does not change the compiled kernel (tools/analysis/kernel_ptx_hashes.py)."""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma_wait


@gluon.jit
def _halve_keys(x):
    """(rows, 2n, 4) -> (rows, n, 4): the upper half of axis 1 added to the lower, element by element, inside each
    thread (axis 1 is the thread's own registers)."""
    ROWS: gl.constexpr = x.shape[0]
    N: gl.constexpr = x.shape[1] // 2
    upper, lower = gl.split(x.reshape([ROWS, 2, N, 4]).permute((0, 2, 3, 1)))
    return upper + lower


@gluon.jit
def _thread_row_sums(p, BLOCK_N: gl.constexpr, TREE: gl.constexpr = False):
    """Each thread's own part of its rows' sums of p, without the shuffles a full row sum takes: in the wgmma
    accumulator's layout thread t of a quad holds keys 8c + 2t + j (j < 2) of its rows, so summing over c and j
    leaves a (rows, 4) tensor whose column t lives in thread t alone. TREE (GluonConfig.row_sum "tree"): the c
    terms added pairwise, level by level, a chain of log2(BLOCK_N / 8) adds instead of BLOCK_N / 8, which ptxas
    leaves at the tile's end (docs/hopper-notes.md)."""
    ROWS: gl.constexpr = p.shape[0]
    pairs = gl.sum(p.reshape([ROWS, BLOCK_N // 8, 4, 2]), 3)
    if TREE:
        C: gl.constexpr = BLOCK_N // 8
        if C >= 16:
            pairs = _halve_keys(pairs)
        if C >= 8:
            pairs = _halve_keys(pairs)
        pairs = _halve_keys(_halve_keys(pairs))
        return pairs.reshape([ROWS, 4])
    else:
        return gl.sum(pairs, 1)


@gluon.jit
def _row_sum_update(l_i, p, alpha, BLOCK_N: gl.constexpr, PARTS: gl.constexpr):
    """The running row sums after one tile: l * alpha + the tile's sums. PARTS (GluonConfig.row_sum "thread"):
    l holds every thread's partial sums (_thread_row_sums), added across the quad once after the last tile, as FA3
    does; otherwise full row sums, reduced across the quad (two shuffles per row) every tile."""
    if PARTS:
        parts = _thread_row_sums(p, BLOCK_N, PARTS == 2)
        a = gl.convert_layout(alpha, gl.SliceLayout(1, parts.type.layout))
        return l_i * a[:, None] + parts
    else:
        return l_i * alpha + gl.sum(p, 1)


@gluon.jit
def _ones_operand(ones_smem):
    """The ones tile as the row-sum wgmma's (keys, ONES_COLS) B operand: a transposed view of its (ONES_COLS,
    keys) box, key-major, as FP8 wgmma needs its B operand (and 16-bit wgmma takes)."""
    return ones_smem.permute((1, 0))


@gluon.jit
def _rescale_sums(l_acc, l_run, alpha, PER_TILE: gl.constexpr):
    """The tensor core's row sums multiplied by a tile's alpha wherever O is (the same rows in the same threads: the
    accumulators of m64 wgmmas share their row layout): row_sum "mma" the accumulator itself, "mma-tile"
    (PER_TILE) the FP32 running sums, the accumulator being a fresh one per tile."""
    if PER_TILE:
        l_run = l_run * gl.convert_layout(alpha, gl.SliceLayout(1, l_run.type.layout))[:, None]
    else:
        l_acc = l_acc * gl.convert_layout(alpha, gl.SliceLayout(1, l_acc.type.layout))[:, None]
    return l_acc, l_run


@gluon.jit
def _one_column_per_thread(l_acc):
    """The (rows, 8) sums' accumulator as (rows, 4): of each thread's two columns (2t, 2t + 1 for thread t of a
    quad; every column holds the same sums) the first, so that the running sums take 2 registers, not 4."""
    ROWS: gl.constexpr = l_acc.shape[0]
    first, second = gl.split(l_acc.reshape([ROWS, 4, 2]))
    return first


@gluon.jit
def _sums_done(l_tok, l_run, PER_TILE: gl.constexpr):
    """Wait for the row sums' wgmma (P.V's wait took every group before it, so this one costs nothing); "mma-tile"
    (PER_TILE): its tile's sums added to the FP32 running sums."""
    l_acc = warpgroup_mma_wait(num_outstanding=0, deps=(l_tok, ))
    if PER_TILE:
        l_run = l_run + _one_column_per_thread(l_acc)
    return l_acc, l_run


@gluon.jit
def _final_row_sums(l_i, l_acc, l_run, OPT: gl.constexpr):
    """A block's row sums at its end, from the form the key loop kept them in (GluonConfig.row_sum): the tensor
    core's accumulator (l_acc; per tile: l_run), each thread's partial sums (l_i, a column per thread of the quad),
    or l_i itself."""
    if OPT.ROW_SUM_PARTS >= 3:  # each of the ONES_N columns holds the rows' sums, the same value: max takes one exactly
        if OPT.ROW_SUM_PARTS == 4:
            l_acc = l_run
        l_i = gl.max(l_acc, 1)
    elif OPT.ROW_SUM_PARTS:  # the quad's four partial sums of each row, added once
        l_i = gl.sum(l_i, 1)
    if OPT.WEIGHT == "noexp":  # rows whose exponents sum to 0: keep the control finite
        l_i = gl.where(l_i == 0.0, 1.0, l_i)
    return l_i
