"""The references the gates compare a kernel with, built in the parent from the inputs: exact exponents from FP64 scores
and the probabilities the gated map (softbench.gates.maps) gives them."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from softbench import operators
from softbench.gates.maps import H15, GateMap
from softbench.gates.tolerances import ACCUM_U, FP32_U, Storage


def causal_valid(sq: int, sk: int) -> torch.Tensor:
    """(sq, sk) True where key j is visible to query i (bottom-right aligned, as FA4)."""
    q_idx = torch.arange(sq).view(-1, 1) + (sk - sq)
    return torch.arange(sk).view(1, -1) <= q_idx


class ExactScores(NamedTuple):
    x: torch.Tensor  # (b, h, sq, sk) base-2 exponent relative to the row maximum, -inf where masked
    valid: torch.Tensor  # (b, h, sq, sk) bool: not masked
    eta: torch.Tensor  # (b, h, sq, sk) bound on |x_kernel - x|
    # (b, h, sq, 1) c m: the row maximum times scale_log2 (h15-folded's anchor needs it)
    scaled_max: torch.Tensor | None


def exact_exponents(q: torch.Tensor, k: torch.Tensor, causal: bool, softmax_scale: float,
                    descale=(1.0, 1.0, 1.0), accum_u: float = ACCUM_U, accum_chunk: int = 1) -> ExactScores:
    """x = (S - rowmax S) * scale_log2 in FP64 from the stored inputs (products of BF16/FP16/FP8 values are exact
    in FP64 and their sums far more precise than the kernel's FP32), the validity mask, eta: a worst-case
    bound on how far the kernel's FP32 x can be from it, and the scaled row maximum.

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
    return ExactScores(x, valid, eta, m * scale_log2)


def row_eta(eta: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """(b, h, sq, 1): the row's largest eta over its valid keys, which bounds the error of its kernel maximum."""
    return eta.masked_fill(~valid, 0.0).amax(dim=-1, keepdim=True)


def row_phases(scaled_max: torch.Tensor, eta: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """h15-folded's legal row phases phi = 2cm - r, r = rne(2cm) of the kernel's maximum: that maximum is within
    the row's largest eta of the exact one, so r is rne(2cm -+ 2 eta_row) and the two differ only on rows whose 2cm
    lies that close to a rounding boundary. Returns (phi_low_r, phi_high_r), (b, h, sq, 1) each, equal elsewhere
    (0 on rows with no valid key)."""
    step = 2.0 * row_eta(eta, valid)
    c2m = 2.0 * scaled_max
    finite = torch.isfinite(c2m)
    c2m = torch.where(finite, c2m, torch.zeros_like(c2m))
    phases = []
    for r in (operators.rne_float64(c2m - step), operators.rne_float64(c2m + step)):
        phases.append(torch.where(finite, c2m - r, torch.zeros_like(c2m)))
    return phases[0], phases[1]


def step_below_open(scaled_max: torch.Tensor, eta: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """h15-folded: (b, h, sq, 1), the rows on which the exact maximum may sit one lattice step below the kernel's.
    The step below the maximum lies at 2x = -1/2 - phi, arbitrarily close to it when the kernel's phase is near
    -1/2. From the exact maximum's phase phi that happens two ways: phi itself within the scores' error, 6
    eta_row, of -1/2, or phi within 2 eta_row below +1/2, where the kernel's maximum, off by up to eta_row, rounds
    to the next anchor and its phase becomes phi - 1, near -1/2 again. Rows with no valid key: never."""
    eta_row = row_eta(eta, valid)
    finite = torch.isfinite(scaled_max)
    c2m = torch.where(finite, 2.0 * scaled_max, torch.zeros_like(scaled_max))
    phi = c2m - operators.rne_float64(c2m)
    return finite & ((phi < -0.5 + 6.0 * eta_row) | (phi > 0.5 - 2.0 * eta_row))


class Reference(NamedTuple):
    probabilities: torch.Tensor
    ambiguous: torch.Tensor  # elements whose lattice point the scores' error bound leaves open
    phase: torch.Tensor | None  # h15-folded: the row phase phi the reference used (b, h, sq, 1)
    open_anchor_rows: int  # h15-folded: rows whose anchor r the error bound leaves open


def _lattice_weights(gmap: GateMap, x: torch.Tensor, phase: torch.Tensor | None, max_offset: float
                     ) -> torch.Tensor:
    """The map's lattice weight of exponents x (float64 in, float64 out)."""
    if gmap.row_phase:
        n = operators.rne_float64(2.0 * x + phase) + 2.0 * max_offset
        w = operators.rowmax_h15_folded_of_steps(n).double() / 2.0 ** max_offset
        return torch.where(torch.isneginf(x), torch.zeros_like(w), w)
    return operators.rowmax_h15_reference(x).double()


def _weights(gmap: GateMap, ex: ExactScores, kernel_weights, phase, max_offset):
    """Unnormalized reference weights and the ambiguous mask for one phase (None but for h15-folded)."""
    x, valid, eta = ex.x, ex.valid, ex.eta
    lattice = valid & gmap.lattice_keys(x.shape[-1], x.device)
    lo = _lattice_weights(gmap, x - eta, phase, max_offset)
    hi = _lattice_weights(gmap, x + eta, phase, max_offset)
    ambiguous = lattice & (lo != hi)
    w = lo
    if kernel_weights is not None and bool(ambiguous.any()):
        with torch.no_grad():
            pick_hi = (torch.log2(kernel_weights / hi).abs() < torch.log2(kernel_weights / lo).abs())
        w = torch.where(ambiguous & pick_hi, hi, lo)
    w = torch.where(lattice, w, torch.exp2(x))  # the hybrids' and A0's exact exponentials
    return torch.where(valid, w, torch.zeros_like(w)), ambiguous


def reference_probabilities(ex: ExactScores, gmap: GateMap = H15, kernel_weights: torch.Tensor | None = None,
                            storage: Storage | None = None) -> Reference:
    """Whole-row probabilities of `gmap` from exact exponents. The lattice comes from
    softbench.operators.rowmax_h15_reference and rowmax_h15_folded_of_steps, the arithmetic definition in FP64, not
    the bit construction the kernel and the simulation share, so that the gate does not inherit a fault of the thing
    it checks.

    Where the kernel's x may lie on the other side of a rounding boundary of 2x (within eta of it) both lattice
    points are legal; `kernel_weights` (the kernel's unnormalized weights, P / P[row max]) then picks the one the
    kernel chose, and for h15-folded the row's anchor likewise where its phase is open (row_phases). With `storage`,
    the numerators are the weights as P stores them (E4M3 rounds the smallest) while the row sum keeps the
    unrounded ones, as the kernel sums before it rounds P."""
    max_offset = storage.max_offset if storage is not None else 0.0

    def normalized(w):
        numerator = storage.stored(w) if storage is not None else w
        return numerator / w.sum(dim=-1, keepdim=True)

    if not gmap.row_phase:
        w, ambiguous = _weights(gmap, ex, kernel_weights, None, max_offset)
        return Reference(normalized(w), ambiguous, None, 0)
    if ex.scaled_max is None:
        raise ValueError("h15-folded's reference needs the scaled row maximum (exact_exponents gives it)")
    phi_lo, phi_hi = row_phases(ex.scaled_max, ex.eta, ex.valid)
    w, ambiguous = _weights(gmap, ex, kernel_weights, phi_lo, max_offset)
    open_rows = phi_lo != phi_hi
    phase = phi_lo
    p = normalized(w)
    if bool(open_rows.any()):
        w_hi, amb_hi = _weights(gmap, ex, kernel_weights, phi_hi, max_offset)
        p_hi = normalized(w_hi)
        if kernel_weights is not None:  # the anchor the kernel's weights are closer to, per row
            kp = torch.where(ex.valid, kernel_weights, torch.zeros_like(kernel_weights))
            kp = kp / kp.sum(dim=-1, keepdim=True)
            take_hi = open_rows & ((p_hi - kp).abs().sum(-1, keepdim=True) < (p - kp).abs().sum(-1, keepdim=True))
        else:
            take_hi = torch.zeros_like(open_rows)
        p = torch.where(take_hi, p_hi, p)
        ambiguous = torch.where(take_hi, amb_hi, ambiguous)
        phase = torch.where(take_hi, phi_hi, phi_lo)
    return Reference(p, ambiguous, phase, int(open_rows.sum()))
