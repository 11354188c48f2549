"""Exact references: FP32 attention for a chosen set of query rows (cheap even at 16K), and SDPA."""

from __future__ import annotations

import math

import torch


def reference_rows(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, rows: torch.Tensor,
                   softmax_scale: float | None = None, descale=(1.0, 1.0, 1.0)) -> torch.Tensor:
    """Exact softmax attention in float32 for query rows `rows` only: (b, len(rows), h, dv)."""
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
    qf = q[:, rows].float().transpose(1, 2) * descale[0]
    kf = k.float().transpose(1, 2).repeat_interleave(h // hk, dim=1) * descale[1]
    vf = v.float().transpose(1, 2).repeat_interleave(h // hk, dim=1) * descale[2]
    s = (qf @ kf.transpose(-1, -2)) * scale
    if causal:
        q_idx = rows.view(-1, 1).to(q.device) + (sk - sq)
        k_idx = torch.arange(sk, device=q.device).view(1, -1)
        s = s.masked_fill(k_idx > q_idx, -math.inf)
    return (torch.softmax(s, dim=-1) @ vf).transpose(1, 2)


def check_rows(seq: int, n: int = 64) -> torch.Tensor:
    """Evenly spread query rows, first and last included."""
    n = min(n, seq)
    return torch.unique(torch.linspace(0, seq - 1, n).round().long())


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    out = out.float()
    ref = ref.float()
    denom = torch.linalg.vector_norm(ref)
    return float(torch.linalg.vector_norm(out - ref) / denom) if denom > 0 else float("nan")
