"""The references the gates compare a kernel with, built in the parent from the inputs: exact exponents from FP64 scores
and the Rowmax-H15 probabilities they give."""

from __future__ import annotations

import math

import torch

from softbench import operators
from softbench.gates.tolerances import ACCUM_U, FP32_U, Storage


def causal_valid(sq: int, sk: int) -> torch.Tensor:
    """(sq, sk) True where key j is visible to query i (bottom-right aligned, as FA4)."""
    q_idx = torch.arange(sq).view(-1, 1) + (sk - sq)
    return torch.arange(sk).view(1, -1) <= q_idx


def exact_exponents(q: torch.Tensor, k: torch.Tensor, causal: bool, softmax_scale: float,
                    descale=(1.0, 1.0, 1.0), accum_u: float = ACCUM_U, accum_chunk: int = 1
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x = (S - rowmax S) * scale_log2 in FP64 from the stored inputs (products of BF16/FP16/FP8 values are exact
    in FP64 and their sums far more precise than the kernel's FP32), the validity mask, and eta: a worst-case
    bound on how far the kernel's FP32 x can be from it.

    eta: the kernel's scores carry <= ceil(d / accum_chunk) * accum_u * sum_i |q_i k_i| (one rounding per
    accumulation step: every product in FP32, accum_chunk = 1; every FP8 wgmma, accum_chunk = 32), its row
    maximum carries the largest such error of the row, and forming x = S*scale_log2 - m*scale_log2 in FP32 rounds
    the product, the scaled maximum and the difference (each <= 2 FP32_U relative, counted on |S| and |m|)."""
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    qf = q.double().transpose(1, 2) * descale[0]
    kf = k.double().transpose(1, 2).repeat_interleave(h // hk, dim=1) * descale[1]
    s = qf @ kf.transpose(-1, -2)
    abs_dot = qf.abs() @ kf.abs().transpose(-1, -2)
    valid = causal_valid(sq, sk).expand(b, h, sq, sk) if causal else torch.ones(b, h, sq, sk, dtype=torch.bool)
    s = s.masked_fill(~valid, -math.inf)
    m = s.amax(dim=-1, keepdim=True)
    scale_log2 = softmax_scale * math.log2(math.e)
    x = (s - m) * scale_log2
    err_s = (math.ceil(d / accum_chunk) * accum_u) * abs_dot.masked_fill(~valid, 0.0)
    err_m = err_s.amax(dim=-1, keepdim=True)
    eta = scale_log2 * (err_s + err_m + 2 * FP32_U * (s.abs().masked_fill(~valid, 0.0) + m.abs()))
    return x, valid, eta


def rowmax_h15_probabilities(x: torch.Tensor, valid: torch.Tensor, eta: torch.Tensor,
                             kernel_weights: torch.Tensor | None = None,
                             storage: Storage | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Whole-row Rowmax-H15 probabilities from exact exponents. Uses softbench.operators.rowmax_h15_reference,
    the arithmetic definition (paper Eq. 28) in FP64, not the bit construction the kernel and the simulation
    share, so that the gate does not inherit a fault of the thing it checks.

    Where the kernel's x may lie on the other side of a rounding boundary of 2x (within eta of it) both lattice
    points are legal; `kernel_weights` (the kernel's unnormalized weights, P / P[row max]) then picks the one the
    kernel chose. With `storage`, the numerators are the weights as P stores them (E4M3 rounds the smallest) while
    the row sum keeps the unrounded ones, as the kernel sums before it rounds P. Returns (probabilities, ambiguous
    mask)."""
    lo = operators.rowmax_h15_reference(x - eta).double()
    hi = operators.rowmax_h15_reference(x + eta).double()
    ambiguous = valid & (lo != hi)
    w = lo
    if kernel_weights is not None and bool(ambiguous.any()):
        with torch.no_grad():
            pick_hi = (torch.log2(kernel_weights / hi).abs() < torch.log2(kernel_weights / lo).abs())
        w = torch.where(ambiguous & pick_hi, hi, lo)
    w = torch.where(valid, w, torch.zeros_like(w))
    numerator = storage.stored(w) if storage is not None else w
    return numerator / w.sum(dim=-1, keepdim=True), ambiguous
