"""The storage and tolerance model of the gates: unit roundoffs, the envelope, the FP32 and tensor-core allowances.

Storage rounding. The readbacks pass through the kernel's storage dtypes: the stock P is rounded to the P dtype
before P.V (relative error <= u_p, the dtype's unit roundoff), and every output to the output dtype (<= u_out).
Rowmax-H15 weights {1, 1.5} x 2^k are exact in the P dtype, so the patched P carries only the output rounding
(E4M3 excepted below 2^-6, where its subnormals round the smallest weights: the reference rounds them the same
way). FP8 scores come from tensor cores that keep about 14 bits while summing (ACCUM_U_FP8 per wgmma), which widens eta.
Each tolerance below is the sum, in octaves, of the roundings the compared values went through, plus a small FP32
allowance for the kernel's own normalization; gates.json lists the parts."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from softbench import operators

ENVELOPE = operators.half_octave_error_bounds()  # (a, b) = (-1/4, log2(1.5) - 1/4), paper B.1
ENVELOPE_WIDTH = ENVELOPE[1] - ENVELOPE[0]  # log2(1.5): the normalized ratio's bound, [a - b, b - a]
FP32_U = 2.0 ** -24  # unit roundoff of FP32 (round to nearest)
# Tensor-core FP32 accumulation is not promised to round to nearest; allow truncation (one ulp per addition).
ACCUM_U = 2.0 ** -23
# FP8 products on Hopper's tensor cores are summed keeping only about 14 significant bits, not FP32's 24 (DeepSeek-V3
# technical report, section 3.3.2, measured on H800; the reason it promotes partial sums to FP32 every 128 terms).
# Model: each FP8 wgmma adds the sum of its K = 32 products to the accumulator with a truncation of 2^-13 relative,
# so a score over d products carries ceil(d / 32) such errors (FP32: d errors of ACCUM_U). On the H200 the Triton
# FP8 kernel's Rowmax-H15 lattice choices that differ from exact FP64 scores all lie within 1.2e-4 * sum|q_i k_i|
# of a rounding boundary (sessions 20261130T1458*), under this model's 4 * 2^-13 = 4.9e-4 and far above FP32's.
ACCUM_U_FP8 = 2.0 ** -13
FP8_MMA_K = 32  # products per Hopper FP8 wgmma instruction (k dimension)


def unit_roundoff(dtype: torch.dtype) -> float:
    """Largest relative error of rounding to nearest into `dtype` (normal range): half its machine epsilon."""
    return torch.finfo(dtype).eps / 2.0


def rounding_octaves(u: float) -> float:
    """Largest |log2(1 + delta)| over |delta| <= u; the lower side, -log2(1 - u), is the larger one."""
    return -math.log2(1.0 - u)


def fp32_slack(seq_k: int) -> float:
    """Worst-case relative error of the kernel's FP32 normalization of one row: the row sum adds seq_k terms
    (seq_k roundings), each weight is rescaled at most once per later tile (at most seq_k roundings), and the
    reciprocal, the final product and ex2.approx (within 2 ulp) add four more."""
    return (2 * seq_k + 4) * FP32_U


@dataclass(frozen=True)
class Storage:
    """The dtypes a readback passed through: P before P.V, and the output."""

    p_dtype: torch.dtype
    out_dtype: torch.dtype
    seq_k: int
    max_offset: float = 0.0  # the kernel stores P * 2^max_offset (FP8: FA4 spends the E4M3 range on the tail)
    accum_u: float = ACCUM_U  # relative error per accumulation step of the tensor cores' scores
    accum_chunk: int = 1  # products per accumulation step (FP8 wgmma: 32)

    def stored(self, w: torch.Tensor) -> torch.Tensor:
        """Unnormalized weights as P holds them: w * 2^max_offset rounded to the P dtype, scaled back. Rowmax-H15
        weights are exact there in the normal range; E4M3's subnormals (below 2^-6) round the smallest ones."""
        if self.p_dtype not in (torch.float8_e4m3fn, torch.float8_e5m2):
            return w
        scale = 2.0 ** self.max_offset
        return (w * scale).to(self.p_dtype).double() / scale

    @property
    def u_p(self) -> float:
        return unit_roundoff(self.p_dtype)

    @property
    def u_out(self) -> float:
        return unit_roundoff(self.out_dtype)

    @property
    def slack(self) -> float:
        return fp32_slack(self.seq_k)

    def to_dict(self) -> dict:
        name = lambda dt: str(dt).replace("torch.", "")  # noqa: E731
        return {"p_dtype": name(self.p_dtype), "out_dtype": name(self.out_dtype), "u_p": self.u_p,
                "u_out": self.u_out, "fp32_slack": self.slack, "max_offset": self.max_offset,
                "accum_u": self.accum_u, "accum_chunk": self.accum_chunk}


def p_dtype_for(dtype: torch.dtype) -> torch.dtype:
    """The P operand of P.V has V's dtype in FA4 and in the simulation; FP32 inputs keep P in FP32."""
    return dtype if dtype in (torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2) else torch.float32
