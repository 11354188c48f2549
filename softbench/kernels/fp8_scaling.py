"""E4M3 operands from 16-bit tensors for the FP8 forward: one scale per tensor, from its largest magnitude.

The FP8 kernels (triton_attn, gluon_attn) take E4M3 Q, K and V with three descale factors (Q's and K's folded into
the log2 multiplier, V's into the output's normalisation); what they do not define is how a model's BF16 tensors
become E4M3. The rule here is the plainest one a user of FP8 attention applies: x / s rounded to E4M3 with
s = max|x| / 448 (E4M3's largest finite value), so the largest element lands on 448 and nothing saturates, and s is
the descale. One scale for the whole tensor (every batch row and head) because the kernels take one factor per
operand. A tensor of zeros takes s = 1."""

from __future__ import annotations

import math

import torch

E4M3 = torch.float8_e4m3fn
E4M3_MAX = float(torch.finfo(E4M3).max)  # 448


def to_e4m3(x: torch.Tensor) -> tuple[torch.Tensor, float]:
    """(x scaled into E4M3, its descale factor s): x is about s * result, elementwise."""
    amax = float(x.detach().abs().amax().float())
    if not math.isfinite(amax):  # no scale places a NaN or an infinity: say so rather than quantize garbage
        raise ValueError(f"cannot scale a tensor holding {amax} into E4M3")
    if amax == 0.0:
        return x.to(E4M3), 1.0
    s = amax / E4M3_MAX
    return (x.float() / s).to(E4M3), s


def operands(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """Q, K and V each to_e4m3, and the three descale factors in the kernels' order."""
    (q8, sq), (k8, sk), (v8, sv) = to_e4m3(q), to_e4m3(k), to_e4m3(v)
    return q8, k8, v8, (sq, sk, sv)
