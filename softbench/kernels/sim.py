"""A pure-torch reference of the fused kernel's semantics; runs on the CPU and on a GPU.

Online softmax over key tiles (default 128, like FA4's n-block): per tile, the running row maximum, the rescale
rule with threshold tau (0: always rescale, FA4 sm_90 and FP8 sm_100; 8.0: FA4 sm_100 at 16-bit), the exponential
map applied to x = s*scale_log2 - m*scale_log2 + max_offset (max_offset 8 for FP8, as FA4 spends the E4M3 range on
the probability tail), the row sum and the P.V product from the same weights, P rounded to the input dtype
before P.V. The rescale factor itself is always the exact exp2 of the max difference, as in the patched kernel,
except for maps that anchor a lattice on the maximum itself (TileMap: rowmax-h15-folded), whose factor is the
ratio of the two anchors' lattices.

Layout as FA4: q (batch, seq_q, heads, dim), k/v (batch, seq_k, kv_heads, dim)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from softbench import operators

LOG2_E = math.log2(math.e)


@dataclass(frozen=True)
class TileMap:
    """One key tile's weights and the rescale factor, from raw scores and the raw running maximum. Most maps are
    functions of x alone (element_map wraps them); a map whose lattice is anchored on the maximum's own value
    (rowmax-h15-folded: its phase) needs the maximum, and its rescale factor must follow the anchors it uses; the
    hybrids need each score's key, its position along s's last axis (the key index modulo the tile, which keeps
    the bits they choose by wherever the tile is a multiple of 16)."""

    weights: Callable  # (s, m, scale_log2, max_offset) -> weights; s raw scores (-inf masked), m (.., 1) raw
    rescale: Callable  # (m_old, m_new, scale_log2, max_offset) -> the factor for what was summed under m_old


def element_map(fn: Callable[[torch.Tensor], torch.Tensor]) -> TileMap:
    """A map of x = s * scale_log2 - m * scale_log2 + max_offset, rescaled by the exact exp2 of the max difference."""

    def weights(s, m, scale_log2, max_offset):
        return fn(s * scale_log2 - m * scale_log2 + max_offset)

    def rescale(m_old, m_new, scale_log2, max_offset):
        return torch.exp2((m_old - m_new) * scale_log2)

    return TileMap(weights, rescale)


# h15-folded: each tile's weights on the lattice of the current maximum's phase, the rescale between two anchors
H15_FOLDED = TileMap(operators.rowmax_h15_folded, operators.rowmax_h15_folded_rescale)


def hybrid_map(every: int) -> TileMap:
    """h15-1of2 / h15-1of4: Rowmax-H15 on the keys operators.hybrid_picks chooses, exp2 on the others."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        return operators.rowmax_h15_hybrid(x, torch.arange(x.shape[-1], device=x.device), every)

    return element_map(fn)


HYBRIDS = {every: hybrid_map(every) for every in operators.HYBRID_BITS}


def _p_dtype(dtype: torch.dtype) -> torch.dtype:
    return dtype if dtype in (torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2) else torch.float32


def sim_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    weight_fn: Callable[[torch.Tensor], torch.Tensor] | TileMap,
    *,
    softmax_scale: float | None = None,
    tile: int = 128,
    rescale_threshold: float = 0.0,
    max_offset: float | None = None,
    descale: tuple[float, float, float] = (1.0, 1.0, 1.0),
    out_dtype: torch.dtype | None = None,
    sum_rounded: bool = False,
) -> torch.Tensor:
    """sum_rounded: the row sums add P as P.V reads it (rounded to V's dtype), as the Gluon kernel's row sums on the
    tensor core do (GluonConfig.row_sum "mma" and "mma-tile"); otherwise the FP32 weights, as every other kernel
    does."""
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    if h % hk:
        raise ValueError(f"heads {h} not a multiple of kv heads {hk}")
    is_fp8 = q.dtype in (torch.float8_e4m3fn, torch.float8_e5m2)
    if max_offset is None:
        max_offset = 8.0 if is_fp8 else 0.0
    p_dtype = _p_dtype(v.dtype)
    tile_map = weight_fn if isinstance(weight_fn, TileMap) else element_map(weight_fn)
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
    scale_log2 = scale * LOG2_E * descale[0] * descale[1]
    # (b, h, s, d) in fp32; GQA: each kv head serves heads/kv_heads query heads
    qf = q.float().transpose(1, 2)
    kf = k.float().transpose(1, 2).repeat_interleave(h // hk, dim=1)
    vf = v.float().transpose(1, 2).repeat_interleave(h // hk, dim=1) * descale[2]
    row_max = torch.full((b, h, sq, 1), -math.inf, device=q.device)
    row_sum = torch.zeros((b, h, sq, 1), device=q.device)
    acc = torch.zeros((b, h, sq, vf.shape[-1]), device=q.device)
    q_idx = torch.arange(sq, device=q.device).view(sq, 1) + (sk - sq)  # bottom-right aligned, as FA4
    for j0 in range(0, sk, tile):
        j1 = min(j0 + tile, sk)
        s = qf @ kf[:, :, j0:j1].transpose(-1, -2)
        if causal:
            k_idx = torch.arange(j0, j1, device=q.device).view(1, -1)
            s = s.masked_fill(k_idx > q_idx, -math.inf)
        m_tile = s.amax(dim=-1, keepdim=True)
        m_new = torch.maximum(row_max, m_tile)
        m_safe = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
        if j0 == 0:
            alpha = torch.zeros_like(m_new)
            m_use = m_safe
            row_max = m_new
        else:
            scale_exp = (row_max - m_safe) * scale_log2
            alpha = tile_map.rescale(row_max, m_safe, scale_log2, max_offset)
            if rescale_threshold > 0.0:
                keep = scale_exp >= -rescale_threshold  # the row max grew by less than tau: skip the rescale
                m_use = torch.where(keep, row_max, m_safe)
                alpha = torch.where(keep, torch.ones_like(alpha), alpha)
                row_max = torch.where(keep, row_max, m_new)
            else:
                m_use = m_safe
                row_max = m_new
        w = tile_map.weights(s, m_use, scale_log2, max_offset)
        # fully masked rows (possible only before the first unmasked key) contribute nothing
        w = torch.where(torch.isneginf(s), torch.where(torch.isneginf(m_new), torch.zeros_like(w), w), w)
        p = w.to(p_dtype).float()
        row_sum = row_sum * alpha + (p if sum_rounded else w).sum(dim=-1, keepdim=True)
        acc = acc * alpha + p @ vf[:, :, j0:j1]
    out = acc / row_sum
    out = torch.nan_to_num(out, nan=0.0) if causal and sk < sq else out
    target = out_dtype or (torch.bfloat16 if is_fp8 else q.dtype)
    return out.transpose(1, 2).to(target)


def probabilities_via_one_hot(run: Callable[[torch.Tensor], torch.Tensor], seq_k: int,
                              v_like: torch.Tensor) -> torch.Tensor:
    """Read a kernel's probabilities back through one-hot value matrices: with V = columns j0..j0+dv of the
    identity, O[:, :, :, c] = P[:, :, :, j0 + c], so one call per dv keys. `run(v)` must return O for that V.
    Returns P as float32, shape (b, seq_q, h, seq_k)."""
    b, _, hk, dv = v_like.shape
    cols = []
    for j0 in range(0, seq_k, dv):  # a step past dv would skip the keys between j0 + dv and the next j0
        width = min(seq_k - j0, dv)
        v = torch.zeros_like(v_like)
        idx = torch.arange(width, device=v.device)
        v[:, j0 + idx, :, idx] = 1
        cols.append(run(v)[..., :width].float())
    return torch.cat(cols, dim=-1)
