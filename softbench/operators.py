"""Rowmax-H15 and its reference definition, in torch.

`rowmax_h15(x)` maps base-2 exponents x (measured from the running row maximum, so usually x <= 0) to
weights with the kernel's own bit construction: t = max(2x, -252); y = t + (2^23 + 2^22 + 254) in FP32 with
round-to-nearest-even; the result's bits are bits(y) << 22. For n = rne(2x) this is (1 + (n mod 2)/2) * 2^floor(n/2)
(paper Eq. 5). The clamp at t = -252 keeps the exponent field >= 1 (-254 would wrap it), so the smallest weight is
2^-126 and masked -inf scores give 2^-126, as in the kernel. The construction is valid for 2x < 256 (n <= 255);
larger inputs overflow the exponent field, as they would in the kernel.

`rowmax_h15_reference(x)` computes Eq. 5 independently in float64 (explicit tie-to-even rounding), for tests and
the gates.

`rowmax_h15_folded(s, m, c)` is the two-instruction form (variant h15-folded): the magic add folded into the FFMA that
scales the raw scores s, so the weights depend on the running maximum m itself, not only on x = c (s - m); see its
docstring for the exact statement."""

from __future__ import annotations

import math

import torch

CLAMP_DOUBLED = -252.0  # clamp on t = 2x
MAGIC = 12582912.0  # 0x4B400000 = 2^23 + 2^22: its ulp is 1, so adding it rounds t to an integer (RNE)
MAGIC_FOLDED = MAGIC + 254.0  # + 254 = 2 * 127: the exponent bias of 1.0 folded into the shifted field
SHIFT = 22
MAX_X = 127.5  # largest x whose weight the construction represents (n = 255 -> 1.5 * 2^127)
# h15-sat: the clamp as a saturation. u = sat((2x + 252) / SAT_SPAN) lies in [0, 1], so 2x from -252 to 260 is
# represented; u * SAT_SPAN + MAGIC_SAT = (2x + 252) + MAGIC + 2 rounds (RNE) to rne(2x) + MAGIC_FOLDED
SAT_SPAN = 512.0
MAGIC_SAT = MAGIC_FOLDED + CLAMP_DOUBLED  # MAGIC + 2


def _shl_u32(bits: torch.Tensor, shift: int) -> torch.Tensor:
    """Left shift of 32-bit patterns modulo 2^32 (torch has no uint32 shift on every backend): in int64."""
    wide = (bits.to(torch.int64) & 0xFFFFFFFF) << shift
    wide = wide & 0xFFFFFFFF
    wide = torch.where(wide >= 2**31, wide - 2**32, wide)
    return wide.to(torch.int32)


def rowmax_h15(x: torch.Tensor) -> torch.Tensor:
    """Rowmax-H15 weights for base-2 exponents `x` (any float dtype; computed in FP32 like the kernel)."""
    t = x.to(torch.float32) * 2.0
    # fmax, not clamp: like PTX max.f32 it returns the non-NaN operand, as the kernel does
    t = torch.fmax(t, torch.tensor(CLAMP_DOUBLED, dtype=torch.float32, device=t.device))
    y = t + torch.tensor(MAGIC_FOLDED, dtype=torch.float32, device=t.device)
    return _shl_u32(y.view(torch.int32), SHIFT).view(torch.float32)


def rowmax_h15_sat(x: torch.Tensor) -> torch.Tensor:
    """Rowmax-H15 with the clamp as the saturation of an FMA (variant h15-sat): u = sat((2x + 252) / 512) in FP32
    (NaN -> 0, as FFMA.SAT gives), y = u * 512 + MAGIC_SAT (RNE), weight = bits(y) << 22. Three instructions in a
    kernel (FFMA.SAT, FFMA, shift) where rowmax_h15 takes four (FFMA, FMNMX, FADD, shift).
    Equal to rowmax_h15 wherever 2x + 252 is exact in FP32 at u's resolution; otherwise 2x is first rounded to
    a multiple of 2^-15 (2x >= 4), 2^-16 (2x >= -124), ... and n = rne(2x) can differ from rowmax_h15's by one
    where 2x lies within that step of a half-integer. Below -252 (and -inf, NaN) both give 2^-126."""
    t = x.to(torch.float32) * 2.0
    u = (t - CLAMP_DOUBLED) / SAT_SPAN  # (2x + 252) rounded once in FP32; the division by 2^9 is exact
    u = torch.clamp(torch.nan_to_num(u, nan=0.0, posinf=1.0, neginf=0.0), 0.0, 1.0)
    y = u * SAT_SPAN + torch.tensor(MAGIC_SAT, dtype=torch.float32, device=t.device)
    return _shl_u32(y.view(torch.int32), SHIFT).view(torch.float32)


def fma_fp32(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | float) -> torch.Tensor:
    """a * b + c on FP32 values rounded once to FP32 (nearest even), as FFMA and tl.fma compute it; broadcasts.
    In float64 the product is exact (24 + 24 bits) and the sum is rounded to odd (TwoSum gives its error), and a
    value rounded to odd with 53 bits rounds to 24 as the exact value would: torch has no fused FP32 FMA."""
    a64, b64 = a.to(torch.float32).double(), b.to(torch.float32).double()
    c64 = torch.as_tensor(c, dtype=torch.float32, device=a64.device).double()
    p = a64 * b64
    s = p + c64
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)  # the exact rounding error of s (NaN where an operand is not finite)
    inexact_even = (err != 0) & torch.isfinite(err) & ((s.view(torch.int64) & 1) == 0)
    odd = torch.nextafter(s, torch.where(err > 0, torch.full_like(s, math.inf), torch.full_like(s, -math.inf)))
    return torch.where(inexact_even, odd, s).to(torch.float32)


def folded_bias(m: torch.Tensor, scale_log2: float, max_offset: float = 0.0) -> torch.Tensor:
    """h15-folded's per-row constant B = fma(-m, 2c, MAGIC_FOLDED + 2 max_offset) in FP32, m the raw running maximum:
    an integer, MAGIC_FOLDED + 2 max_offset - rne(2cm), while B stays in [2^23, 2^24) (|2cm| < 2^22 - 300)."""
    c2 = torch.tensor(scale_log2, dtype=torch.float32, device=m.device) * 2.0
    return fma_fp32(-m.to(torch.float32), c2, MAGIC_FOLDED + 2.0 * max_offset)


def rowmax_h15_folded(s: torch.Tensor, m: torch.Tensor, scale_log2: float, max_offset: float = 0.0,
                      clamp: bool = True) -> torch.Tensor:
    """h15-folded weights of raw scores s against the raw running maximum m (broadcast), c = scale_log2 in FP32:
    t = fma(s, 2c, B) in FP32 (one rounding), t = max(t, MAGIC) (the clamp), weight = bits(t) << 22.
    With r = rne(2cm) and n = rne(2cs - r) + 2 max_offset, t = MAGIC_FOLDED + n: the weight is Rowmax-H15 of n for
    n >= -252, 2^-127 at n = -253 and 0 from n = -254 down (the clamp at t = MAGIC: the field's zero, as exact exp2
    underflows), -inf (masked) and NaN included. The maximum's weight is exactly 2^max_offset, every other weight
    sits on the H15 lattice shifted by the row's phase 2cm - r in [-1/2, 1/2]. clamp=False: the clamp-free tiles'
    arithmetic, equal wherever n >= -254 (and at -inf, whose bits shift to 0)."""
    c2 = torch.tensor(scale_log2, dtype=torch.float32, device=s.device) * 2.0
    t = fma_fp32(s, c2, folded_bias(m, scale_log2, max_offset))
    if clamp:
        t = torch.fmax(t, torch.tensor(MAGIC, dtype=torch.float32, device=t.device))
    return _shl_u32(t.view(torch.int32), SHIFT).view(torch.float32)


def rowmax_h15_folded_rescale(m_old: torch.Tensor, m_new: torch.Tensor, scale_log2: float,
                              max_offset: float = 0.0) -> torch.Tensor:
    """The factor for accumulators made under m_old once the maximum is m_new: 2^((r_old - r_new)/2), the ratio of
    the two lattices' anchors (not 2^(c (m_old - m_new)), which would leave each tile's phase in its weights), as
    exp2 of the exact difference of the two FP32 biases; 0 when m_old is -inf (the first tile)."""
    diff = folded_bias(m_new, scale_log2, max_offset) - folded_bias(m_old, scale_log2, max_offset)
    return torch.exp2(diff * 0.5)


def rowmax_h15_folded_reference(s: torch.Tensor, m: torch.Tensor, scale_log2: float,
                                max_offset: float = 0.0) -> torch.Tensor:
    """rowmax_h15_folded written out in float64, for tests: r = rne(2cm), n = rne(2cs - r) + 2 max_offset with
    explicit tie-to-even rounding, then rowmax_h15_folded_of_steps(n). Exact while 2cs - r fits float64's 53 bits
    (|2cs|, |2cm| < 2^11 with FP32 s, m)."""
    c2 = 2.0 * float(torch.tensor(scale_log2, dtype=torch.float32))
    sd, md = s.to(torch.float32).double(), m.to(torch.float32).double()
    n = rne_float64(sd * c2 - rne_float64(md * c2)) + 2.0 * max_offset
    w = rowmax_h15_folded_of_steps(n).double()
    return torch.where(torch.isneginf(sd), torch.zeros_like(w), w).to(torch.float32)


def rowmax_h15_folded_of_steps(n: torch.Tensor) -> torch.Tensor:
    """h15-folded's weight of the integer step n (the exponent field t = MAGIC_FOLDED + n, clamped at MAGIC):
    the lattice weight h15_lattice_weight(n) for n >= -252, 2^-127 at n = -253 (the field's 0: a subnormal), 0 from
    -254 down. float32 (every value is exact there)."""
    w = h15_lattice_weight(n)
    w = torch.where(n == -253.0, torch.full_like(w, 2.0 ** -127), w)
    return torch.where(n <= -254.0, torch.zeros_like(w), w).to(torch.float32)


def rowmax_h15_from_doubled(t: torch.Tensor) -> torch.Tensor:
    """Same as rowmax_h15 for t = 2x already computed (the kernel's doubled-constant path)."""
    return rowmax_h15(t.to(torch.float32) * 0.5)


def rne_float64(v: torch.Tensor) -> torch.Tensor:
    """Round-to-nearest-even of float64 values to integers, written out (floor, fraction, tie rule) so that the
    references do not share torch.round with anything they check."""
    f = torch.floor(v)
    frac = v - f
    up = (frac > 0.5) | ((frac == 0.5) & (torch.remainder(f, 2.0) == 1.0))
    return f + up.to(v.dtype)


def h15_lattice_weight(n: torch.Tensor) -> torch.Tensor:
    """The weight every Rowmax-H15 form gives the integer step n (n = rne(2x) for A1): (1 + (n mod 2)/2) 2^floor(n/2),
    in float64 (paper Eq. 5), for n of any sign."""
    nd = n.to(torch.float64)
    k = torch.floor(nd / 2.0)
    odd = nd - 2.0 * k  # non-negative residue, 0 or 1
    return (1.0 + 0.5 * odd) * torch.pow(torch.tensor(2.0, dtype=torch.float64, device=nd.device), k)


def rowmax_h15_reference(x: torch.Tensor) -> torch.Tensor:
    """Paper Eq. 5 computed arithmetically in float64: n = rne(2x), w = h15_lattice_weight(n), with the kernel's
    clamp x >= -126 (NaN treated as the clamp, as the kernel's max does).
    Defined for x <= 127.5; returns float32 (every result is exactly representable)."""
    xd = x.to(torch.float64)
    xd = torch.where(torch.isnan(xd), torch.full_like(xd, CLAMP_DOUBLED / 2), xd)
    xd = torch.clamp(xd, min=CLAMP_DOUBLED / 2)
    return h15_lattice_weight(rne_float64(2.0 * xd)).to(torch.float32)


def half_octave_error_bounds() -> tuple[float, float]:
    """Closed envelope of log2(w_hat / 2^x) for Rowmax-H15 (paper B.1): [-1/4, log2(1.5) - 1/4]."""
    return (-0.25, math.log2(1.5) - 0.25)


def exact_exp2(x: torch.Tensor) -> torch.Tensor:
    return torch.exp2(x.to(torch.float32))


# the key-index bits that must all be set for a score to take the other map, per `every` (one score in `every`):
# bit 0, then bits 3, 4, 5, 6, the bits the sm_80/sm_90 MMA accumulator fixes per register (hybrid_picks)
HYBRID_BITS = {2: 0b1, 4: 0b1001, 8: 0b11001, 16: 0b111001, 32: 0b1111001}


def hybrid_picks(keys: torch.Tensor, every: int) -> torch.Tensor:
    """The keys on which the hybrids h15-1of2 and h15-1of4 take Rowmax-H15 (the others the exact exp2): the odd
    keys, or keys 9, 11, 13, 15 of every 16. These are the last of each `every` columns a thread holds in the
    sm_80/sm_90 MMA accumulator (2 t + {0, 1} + 8 i for lane t of a quad), FA4's patch's choice; the bits are
    fixed per register there, so a kernel computes one map per score."""
    bits = HYBRID_BITS[every]
    return (keys & bits) == bits


def rowmax_h15_hybrid(x: torch.Tensor, keys: torch.Tensor, every: int) -> torch.Tensor:
    """Rowmax-H15 (rowmax_h15, with its clamp) where hybrid_picks(keys, every), exact exp2 elsewhere; keys
    broadcast against x along its last axis."""
    return torch.where(hybrid_picks(keys, every), rowmax_h15(x), exact_exp2(x))


# FA4's exponential emulated on the FMA pipe, which its sm_100 kernel takes for a share of the scores so that the
# MUFU is not the only unit computing them: 2^x = 2^n 2^f with n = rne(x) and f = x - n in [-1/2, 1/2], 2^f by a
# cubic. The coefficients are the minimax fit of the relative error on [-1/2, 1/2] (Remez, 7.5e-5; FP32
# evaluation included), far below the rounding of P to BF16 (2^-9) or E4M3 (2^-4)
EXP2_CUBIC = (0.9999280571937561, 0.6932609677314758, 0.2426111251115799, 0.0551716685295105)
EXP2_EMULATED_FLOOR = -126.0  # n >= -126 keeps 2^n's exponent field >= 1 (masked -inf scores give about 2^-126)
EXP2_EMULATED_SHIFT = 23  # n sits in the magic sum's low mantissa bits; shifted, it lands in the exponent field


def exp2_emulated(x: torch.Tensor) -> torch.Tensor:
    """2^x without the exponential unit, as the kernels compute it (variant A0 under GluonConfig.emulate): x
    clamped at EXP2_EMULATED_FLOOR (fmax: NaN and -inf give the floor), y = x + MAGIC rounds it to n (RNE) in
    FP32, f = x - (y - MAGIC) exactly, p = ((c3 f + c2) f + c1) f + c0 in three FMAs, and bits(p) + bits(y) << 23
    adds n to p's exponent. Within 7.5e-5 of 2^x (relative) for -125.5 <= x < 128 (1.5e-4 below, where p times
    2^-126 is read as a subnormal); larger x overflows the exponent field, where the MUFU would give infinity."""
    x = torch.fmax(x.to(torch.float32), torch.tensor(EXP2_EMULATED_FLOOR, dtype=torch.float32, device=x.device))
    magic = torch.tensor(MAGIC, dtype=torch.float32, device=x.device)
    y = x + magic
    f = x - (y - magic)
    c0, c1, c2, c3 = EXP2_CUBIC
    p = fma_fp32(fma_fp32(fma_fp32(torch.full_like(f, c3), f, c2), f, c1), f, c0)
    bits = p.view(torch.int32).to(torch.int64) + _shl_u32(y.view(torch.int32), EXP2_EMULATED_SHIFT).to(torch.int64)
    return _shl_u32(bits, 0).view(torch.float32)


def no_exp(x: torch.Tensor) -> torch.Tensor:
    """The timing control with the exponential removed: the exponent itself is used as the weight.
    Results are wrong on purpose; it bounds what any exp2 replacement can gain."""
    return x.to(torch.float32)
