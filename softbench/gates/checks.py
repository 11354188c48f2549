"""Correctness gates of a patched kernel (paper B.2): its probabilities read back through one-hot value matrices
and checked against the Rowmax-H15 envelope (paper B.1), the row sums and the row maximum.

Readback. With V = columns j0..j0+d of the identity (V[:, j0 + c, :, c] = 1) the output is O[..., c] = P[..., j0 + c],
so seq_k / head_dim forwards of the unchanged kernel expose its whole probability matrix. Each kernel runs in its own
worker process (`probabilities` op, `write_readback`), which saves P (float32, (b, s_q, h, s_k)) with the q and k it
came from; the parent computes every reference and gate from those files (pure functions below).

Gates (all in the parent):
  readback          stock kernel at one tile vs exact softmax from FP64 scores: checks the readback itself.
  single_tile       patched kernel at one tile vs a Rowmax-H15 reference built from FP64 scores (L1 per row).
  normalized_ratio  multi-tile log2(P1/P0) within +-(b - a), the envelope width.
  recovered_error   log2(P1/P0) minus the shift read at the row maximum, within the envelope [a, b].
  row_sums          sum_j P1 within storage rounding of 1.
  row_max_attained  the stock kernel's row-maximum entry holds the patched row maximum.
  masked            (causal) masked entries carry at most the operator's floor weight.

Why the recovered error is well defined (tile-wise running max). The kernel computes the weights of each key tile
against the running row maximum m_t that already includes that tile, so x <= 0 when the weight is made; weights of
earlier tiles are later multiplied by the exact rescale factor 2^((m_t - m_final) scale_log2). With y_j the exponent
relative to the final maximum, a key quantized against m_t ends with weight H(x_j) 2^(y_j - x_j) = 2^(y_j + eps(x_j)),
eps = log2 H(x) - x in [a, b] whatever m_t was: the rescale preserves each element's error. The final maximum's own
tile computes x = 0 for it, where H is exact, so its weight is exactly 2^0 and log2(P1/P0) at the row maximum is the
pure normalization shift -log2 sum_k p_k 2^eps_k; subtracting it recovers eps_j. This needs the rescale to happen
whenever the maximum grows (tau = 0: FA4 on sm_90 always rescales; sm_100 does at FP8). Under FA4's deferred rescale
(tau > 0, sm_100 at 16-bit) the running maximum may lag, x can be positive, the row maximum's own weight H(x) is no
longer exact, and the recovered error and the row-maximum gate have no fixed bound: they are reported as not
applicable. The normalized ratio holds for any tau, since every eps_j stays in [a, b].

Tolerances: softbench.gates.tolerances; references: softbench.gates.references."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import torch

from softbench import operators
from softbench.gates.readback import Readback
from softbench.gates.references import rowmax_h15_probabilities
from softbench.gates.tolerances import ENVELOPE, ENVELOPE_WIDTH, rounding_octaves


@dataclass(frozen=True)
class Gate:
    """One correctness gate: the observed range of a quantity and the closed interval it must lie in."""

    name: str
    what: str
    observed: tuple[float, float]  # smallest and largest value over the gated elements or rows
    bound: tuple[float, float]
    unit: str = ""
    applicable: bool = True
    details: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool | None:
        if not self.applicable:
            return None
        lo, hi = self.observed
        return bool(lo >= self.bound[0] and hi <= self.bound[1])  # NaN compares False: it fails

    def to_dict(self) -> dict:
        return json_safe({"name": self.name, "what": self.what, "value": list(self.observed),
                          "bound": list(self.bound), "unit": self.unit, "applicable": self.applicable,
                          "passed": self.passed, "details": self.details})


def json_safe(v):
    """NaN (a broken kernel's readback) becomes null: JSON has no NaN, and strict readers refuse it."""
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, dict):
        return {k: json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_safe(x) for x in v]
    return v


def _range(t: torch.Tensor) -> tuple[float, float]:
    if t.numel() == 0:
        return (math.nan, math.nan)
    return (float(t.min()), float(t.max()))


def _row_l1(p: torch.Tensor, ref: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    return torch.where(valid, (p - ref).abs(), torch.zeros_like(p)).sum(dim=-1).flatten()


def readback_gate(stock: Readback) -> Gate:
    """The stock kernel against exact softmax, both at one tile: if this fails, the readback itself is broken.
    Per element the stock P went through the P rounding, the output rounding and an exponent off by at most eta
    (the normalization can move it by eta of the other elements again): L1 <= (1+u_p)(1+u_out) 2^(2 eta_max) - 1."""
    st = stock.storage
    exact = torch.softmax(stock.x * math.log(2.0), dim=-1).masked_fill(~stock.valid, 0.0)
    l1 = _row_l1(stock.p, exact, stock.valid)
    eta_max = float(stock.eta.masked_fill(~stock.valid, 0.0).max())
    bound = (1 + st.u_p) * (1 + st.u_out) * 2.0 ** (2 * eta_max) * (1 + st.slack) - 1
    return Gate("readback", "stock kernel vs exact softmax, L1 per row (one tile)", _range(l1), (0.0, bound),
                details={"mean": float(l1.mean()), "rows": l1.numel(), "elements": int(stock.valid.sum()),
                         "eta_max_octaves": eta_max, "storage": st.to_dict()})


def single_tile_gate(patched: Readback) -> Gate:
    """The patched kernel against whole-row Rowmax-H15 from the exact scores, at one tile (its running maximum
    is the row maximum). Its weights are exact in the P dtype (the reference rounds E4M3's subnormal tail as the
    kernel does), so each element carries only the output rounding:
    L1 per row <= u_out * sum_j r_j + FP32 slack = u_out + slack (masked entries excluded)."""
    st = patched.storage
    at_max = patched.p.gather(-1, patched.argmax)
    ref, ambiguous = rowmax_h15_probabilities(patched.x, patched.valid, patched.eta, patched.p / at_max, st)
    l1 = _row_l1(patched.p, ref, patched.valid)
    bound = st.u_out + st.slack
    return Gate("single_tile", "patched kernel vs Rowmax-H15 reference from exact scores, L1 per row (one tile)",
                _range(l1), (0.0, bound),
                details={"mean": float(l1.mean()), "rows": l1.numel(), "elements": int(patched.valid.sum()),
                         "ambiguous_elements": int(ambiguous.sum()), "storage": st.to_dict()})


def multi_tile_gates(stock: Readback, patched: Readback, rescale_threshold: float = 0.0) -> list[Gate]:
    """The gates that compare the patched kernel with the stock one over several key tiles (paper B.2)."""
    a, b = ENVELOPE
    st = patched.storage
    # the storage's relative roundings as octaves: the output's, P's, and the FP32 normalization's slack
    r_out, r_p, r_slack = (rounding_octaves(u) for u in (st.u_out, st.u_p, st.slack))
    p0, p1, valid = stock.p, patched.p, patched.valid
    # Elements resolved in both storage formats: the stock value clear of the output dtype's subnormals and its
    # unnormalized weight clear of the P dtype's, each by the envelope width and one octave; smaller ones lose
    # their relative precision. Chosen from the stock readback only, so a patched value of 0 cannot hide.
    spare = 2.0 ** (ENVELOPE_WIDTH + 1)
    p0_max = p0.amax(dim=-1, keepdim=True)
    resolved = valid & (p0 >= torch.finfo(st.out_dtype).tiny * spare) & \
        (p0 / p0_max * 2.0 ** st.max_offset >= torch.finfo(st.p_dtype).tiny * spare)
    ratio = torch.log2(p1 / p0)
    r = ratio[resolved]
    gates: list[Gate] = []

    # normalized ratio: eps in [a, b] gives only log2(p1/p0) = eps_j - log2 sum_k p_k 2^eps_k in [a - b, b - a];
    # P1 went through one rounding, P0 through two
    tol_norm = 2 * r_out + r_p + r_slack
    gates.append(Gate(
        "normalized_ratio", "log2(P1/P0) over all resolved elements (multi-tile)", _range(r),
        (a - b - tol_norm, b - a + tol_norm), "octave",
        details={"envelope": [a - b, b - a], "tolerance": tol_norm, "elements": int(r.numel()),
                 "unresolved_elements": int((valid & ~resolved).sum()),
                 "fraction_outside_before_tolerance": float(((r < a - b) | (r > b - a)).double().mean())
                 if r.numel() else math.nan}))

    # recovered error: subtract the shift read at the exact row maximum; its two readings add two output
    # roundings. The kernel's maximum may be another element within 2 eta of the exact one: then the exact one
    # still has Rowmax-H15 weight 1, its stock weight is 2^(-2 eta) at worst and takes a P rounding.
    idx = stock.argmax
    shift = ratio.gather(-1, idx)
    eps = (ratio - shift)[resolved]
    eta_max = float(stock.eta.masked_fill(~valid, 0.0).max())
    tol_rec = tol_norm + 2 * r_out + r_p + 2 * eta_max
    deferred = rescale_threshold > 0
    why_not = (f"rescale threshold {rescale_threshold:g} > 0: the running maximum can lag, so the row maximum's "
               "weight is not exact and the shift cannot be read there" if deferred else "")
    gates.append(Gate(
        "recovered_error", "log2(P1/P0) minus the per-row shift at the row maximum (multi-tile)", _range(eps),
        (a - tol_rec, b + tol_rec), "octave", applicable=not deferred,
        details={"envelope": [a, b], "tolerance": tol_rec, "elements": int(eps.numel()),
                 "fraction_below_before_tolerance": float((eps < a).double().mean()) if eps.numel() else math.nan,
                 "fraction_above_before_tolerance": float((eps > b).double().mean()) if eps.numel() else math.nan,
                 "shift_min": float(shift.min()), "shift_max": float(shift.max()), "shift_mean": float(shift.mean()),
                 **({"not_applicable": why_not} if deferred else {})}))

    # row sums: each P1 carries the output rounding; masked entries add at most the operator's floor weight each
    floor = float(operators.rowmax_h15(torch.tensor(-math.inf)))
    n_masked = (~valid).sum(dim=-1)
    sums = p1.sum(dim=-1).flatten()
    tol_sum = st.u_out + st.slack + int(n_masked.max()) * floor
    gates.append(Gate("row_sums", "sum of P1 per row (multi-tile)", _range(sums), (1 - tol_sum, 1 + tol_sum),
                      details={"tolerance": tol_sum, "rows": sums.numel()}))

    # the stock kernel's row-maximum entry attains the patched row maximum. Two P1 readings compare (two output
    # roundings); the stock argmax is known only to within two stock readings (2 (r_p + r_out)), an element that
    # close to the maximum lies on the same lattice point
    p1_max = p1.amax(dim=-1, keepdim=True)
    at_stock_max = torch.log2(p1.gather(-1, p0.argmax(dim=-1, keepdim=True)) / p1_max).flatten()
    tol_att = 2 * r_out + 2 * (r_p + r_out) + r_slack
    ties = (valid & (p1 >= p1_max * 2.0 ** (-2 * r_out))).sum(dim=-1).flatten().tolist()
    gates.append(Gate(
        "row_max_attained", "log2(P1 at the stock row maximum / P1 row maximum) (multi-tile)", _range(at_stock_max),
        (-tol_att, 0.0), "octave", applicable=not deferred,
        details={"tolerance": tol_att, "rows": len(ties), "rows_attained": int((at_stock_max >= -tol_att).sum()),
                 "lattice_ties_median": statistics.median(ties) if ties else None,
                 "lattice_ties_max": max(ties) if ties else None,
                 **({"not_applicable": why_not} if deferred else {})}))

    # masked entries: Rowmax-H15 clamps -inf to its floor weight 2^-126. The row sum holds the row maximum's
    # weight, 1 (or, under a deferred rescale, H(x) with x >= 0, at least 2^a), so a masked probability is at most
    # floor * 2^-a, plus the output rounding
    if bool((~valid).any()):
        masked = p1[~valid]
        gates.append(Gate("masked", "P1 on masked entries (multi-tile, causal)", _range(masked),
                          (0.0, floor * 2.0 ** (-a) * (1 + st.u_out)),
                          details={"elements": masked.numel(), "floor_weight": floor,
                                   "stock_max": float(p0[~valid].max())}))
    return gates
