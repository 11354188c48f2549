"""The per-tile step the Triton and Gluon kernels share (triton_attn._tile_weights), run alone on given score
tiles through Triton's interpreter. Import it after setting TRITON_INTERPRET=1, as the kernel tests do."""

import torch
import triton
import triton.language as tl

from softbench.kernels import triton_attn as ta

ROWS, COLS, TILES = 16, 32, 4


@triton.jit
def _tiles(S, P, M, A, qk_scale, TILES: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr,
           MASK: tl.constexpr, WEIGHT: tl.constexpr, MAX_OFFSET: tl.constexpr, LAZY: tl.constexpr,
           EMULATE: tl.constexpr):
    """TILES score tiles (-inf: masked) through the step, keys 0..COLS-1 in each; its outputs stored per tile."""
    rows = tl.arange(0, ROWS)
    keys = tl.arange(0, COLS)
    at = rows[:, None] * COLS + keys[None, :]
    m_i = tl.full([ROWS], float("-inf"), tl.float32)
    for j in tl.static_range(TILES):
        s = tl.load(S + j * ROWS * COLS + at)
        p, m_i, alpha = ta._tile_weights(s, m_i, s > float("-inf"), keys, qk_scale, MASK, WEIGHT, MAX_OFFSET,
                                            LAZY, EMULATE)
        tl.store(P + j * ROWS * COLS + at, p)
        tl.store(M + j * ROWS + rows, m_i)
        tl.store(A + j * ROWS + rows, alpha)


def run_tiles(s: torch.Tensor, scale: float, mask: bool, weight: str, offset: float, lazy: float = 0.0,
              emulate: int = 0):
    """(weights, running maximum after each tile, rescale factor of each tile) for s of shape (TILES, ROWS, COLS);
    lazy: the step's LAZY threshold (log2 units; 0: the exact running maximum); emulate: one exp2 in this many on
    the FMA pipe (A0 only; 0: none)."""
    p, m, a = torch.empty_like(s), torch.empty(TILES, ROWS), torch.empty(TILES, ROWS)
    _tiles[(1,)](s, p, m, a, scale, TILES=TILES, ROWS=ROWS, COLS=COLS, MASK=mask, WEIGHT=weight, MAX_OFFSET=offset,
                      LAZY=lazy, EMULATE=ta.emulated_key_bits(emulate))
    return p, m, a
