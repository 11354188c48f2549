"""Correctness gates of a patched kernel (paper B.2): its probabilities read back through one-hot value matrices
and checked against the Rowmax-H15 envelope (paper B.1), the row sums and the row maximum.

Readback. With V = columns j0..j0+d of the identity (V[:, j0 + c, :, c] = 1) the output is O[..., c] = P[..., j0 + c],
so seq_k / head_dim forwards of the unchanged kernel expose its whole probability matrix. Each kernel runs in its own
worker process (`probabilities` op, `write_readback`), which saves P (float32, (b, s_q, h, s_k)) with the q and k it
came from; the parent computes every reference and gate from those files (pure functions below).

Gates (all in the parent):
  readback          stock kernel at one tile vs exact softmax from FP64 scores: checks the readback itself.
  single_tile       patched kernel at one tile vs a reference of its weight map built from FP64 scores (L1 per
                    row): Rowmax-H15's for A1, its own for h15-folded and the hybrids (softbench.gates.maps).
  normalized_ratio  multi-tile log2(P1/P0) within +-(b - a), the envelope width.
  recovered_error   log2(P1/P0) minus the shift read at the row maximum, within the envelope [a, b].
  row_sums          sum_j P1 within storage rounding of 1.
  row_max_attained  the stock kernel's row-maximum entry holds the patched row maximum (h15-folded: the exact
                    maximum's entry; its lattice's step below the maximum can lie arbitrarily close to it).
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
from softbench.gates.maps import H15, GateMap
from softbench.gates.readback import Readback
from softbench.gates.references import reference_probabilities, row_phases, step_below_open
from softbench.gates.tolerances import ENVELOPE, ENVELOPE_WIDTH, Storage, rounding_octaves


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


def _eta_max(rb: Readback) -> float:
    return float(rb.eta.masked_fill(~rb.valid, 0.0).max())


def _exp_l1_bound(st: Storage, eta_max: float) -> float:
    """L1 per row of exponential weights against exact softmax: per element P's rounding, the output's and an
    exponent off by at most eta (the normalization can move it by eta of the other elements again):
    (1+u_p)(1+u_out) 2^(2 eta_max) (1 + FP32 slack) - 1."""
    return (1 + st.u_p) * (1 + st.u_out) * 2.0 ** (2 * eta_max) * (1 + st.slack) - 1


def readback_gate(stock: Readback) -> Gate:
    """The stock kernel against exact softmax, both at one tile: if this fails, the readback itself is broken."""
    st = stock.storage
    exact = torch.softmax(stock.x * math.log(2.0), dim=-1).masked_fill(~stock.valid, 0.0)
    l1 = _row_l1(stock.p, exact, stock.valid)
    eta_max = _eta_max(stock)
    bound = _exp_l1_bound(st, eta_max)
    return Gate("readback", "stock kernel vs exact softmax, L1 per row (one tile)", _range(l1), (0.0, bound),
                details={"mean": float(l1.mean()), "rows": l1.numel(), "elements": int(stock.valid.sum()),
                         "eta_max_octaves": eta_max, "storage": st.to_dict()})


def single_tile_gate(patched: Readback, gmap: GateMap = H15) -> Gate:
    """The patched kernel against whole-row `gmap` probabilities from the exact scores, at one tile (its running
    maximum is the row maximum). Lattice weights are exact in the P dtype (the reference rounds E4M3's subnormal
    tail as the kernel does), so each element carries only the output rounding: L1 per row <= u_out + FP32 slack
    (masked entries excluded). Where some weights are exponentials (the hybrids, exp2) they carry the stock
    kernel's allowance instead (_exp_l1_bound).

    The kernel's weights are read against its own row maximum: the kernel gives that key weight exactly 1
    (h15-folded: step 0 of its anchor), the scale the reference's lattice points are on. Not against the exact
    maximum's entry: h15-folded can put that key one lattice step lower, at 3/4, where the kernel's maximum is
    another key within eta of it (the rows step_below_open names); read against it, every weight is 4/3 too large,
    and the reference picks the other anchor and the wrong lattice points of the ambiguous keys."""
    st = patched.storage
    at_max = patched.p.amax(-1, keepdim=True)
    ref = reference_probabilities(patched.exact, gmap, patched.p / at_max, st)
    l1 = _row_l1(patched.p, ref.probabilities, patched.valid)
    bound = _exp_l1_bound(st, _eta_max(patched)) if gmap.rounds_p else st.u_out + st.slack
    details = {"mean": float(l1.mean()), "rows": l1.numel(), "elements": int(patched.valid.sum()),
               "ambiguous_elements": int(ref.ambiguous.sum()), "reference": gmap.name, "storage": st.to_dict()}
    if gmap.row_phase:
        details["open_anchor_rows"] = ref.open_anchor_rows
    return Gate("single_tile", f"patched kernel vs {gmap.name} reference from exact scores, L1 per row (one tile)",
                _range(l1), (0.0, bound), details=details)


def _phase_offsets(stock: Readback, eps: torch.Tensor, resolved: torch.Tensor) -> tuple[torch.Tensor, int]:
    """h15-folded: the per-row phi/2 to take off the recovered error (its weights' error is eps + phi/2). Where the
    row's anchor is open (row_phases), the one that leaves the row's errors closer to the envelope, since either is
    the kernel's to choose. Returns the offsets (b, h, sq, 1) and the number of open rows."""
    a, b = ENVELOPE
    phi_lo, phi_hi = row_phases(stock.scaled_max, stock.eta, stock.valid)

    def excess(phi):
        e = eps - phi / 2
        over = torch.clamp(e - b, min=0.0) + torch.clamp(a - e, min=0.0)
        return torch.where(resolved, over, torch.zeros_like(over)).amax(dim=-1, keepdim=True)

    open_rows = phi_lo != phi_hi
    phi = torch.where(open_rows & (excess(phi_hi) < excess(phi_lo)), phi_hi, phi_lo)
    return phi / 2, int(open_rows.sum())


def multi_tile_gates(stock: Readback, patched: Readback, rescale_threshold: float = 0.0,
                     gmap: GateMap = H15) -> list[Gate]:
    """The gates that compare the patched kernel with the stock one over several key tiles (paper B.2), for the
    weight map `gmap` (softbench.gates.maps: h15-folded's recovered error is taken after its row phase)."""
    a, b = ENVELOPE
    st = patched.storage
    # the storage's relative roundings as octaves: the output's, P's, and the FP32 normalization's slack
    r_out, r_p, r_slack = (rounding_octaves(u) for u in (st.u_out, st.u_p, st.slack))
    # the normalized ratio's: P1 went through the output rounding (and P's where some weights are exponentials),
    # P0 through P's and the output's
    tol_norm = 2 * r_out + r_p + r_slack + (r_p if gmap.rounds_p else 0.0)
    p0, p1, valid = stock.p, patched.p, patched.valid
    # Elements resolved in both storage formats: the stock value clear of the output dtype's subnormals and its
    # unnormalized weight clear of the P dtype's. The envelope width keeps a correct kernel's patched value out of
    # them too (smaller values lose their relative precision); the one octave more is a margin for the stock
    # weight's own roundings and h15-folded's phase (1/2 + 2 r_out + r_p, about 0.6 octave at E4M3 and BF16, just
    # over the width). Chosen from the stock readback only, so a patched value of 0 cannot hide.
    spare = 2.0 ** (ENVELOPE_WIDTH + 1)
    p0_max = p0.amax(dim=-1, keepdim=True)
    resolved = valid & (p0 >= torch.finfo(st.out_dtype).tiny * spare) & \
        (p0 / p0_max * 2.0 ** st.max_offset >= torch.finfo(st.p_dtype).tiny * spare)
    ratio = torch.log2(p1 / p0)
    r = ratio[resolved]
    gates: list[Gate] = []

    # normalized ratio: eps in [a, b] gives only log2(p1/p0) = eps_j - log2 sum_k p_k 2^eps_k in [a - b, b - a]
    # (h15-folded's row phase is a constant of the row: it cancels)
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
    eps_all = ratio - shift
    eta_max = _eta_max(stock)
    tol_rec = tol_norm + 2 * r_out + r_p + 2 * eta_max
    phase_details = {}
    if gmap.row_phase:
        # h15-folded: each weight's error is eps + phi/2; the exact maximum's phi is the kernel's within eta_max
        offsets, open_rows = _phase_offsets(stock, eps_all, resolved)
        eps_all = eps_all - offsets
        tol_rec += eta_max
        phase_details = {"open_anchor_rows": open_rows, "phase_half_min": float(offsets.min()),
                         "phase_half_max": float(offsets.max())}
    eps = eps_all[resolved]
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
                 **phase_details, **({"not_applicable": why_not} if deferred else {})}))

    # row sums: each P1 carries the output rounding (and P's, on exponential weights); masked entries add at most
    # the operator's floor weight each
    floor = float(operators.rowmax_h15(torch.tensor(-math.inf)))
    n_masked = (~valid).sum(dim=-1)
    sums = p1.sum(dim=-1).flatten()
    tol_sum = st.u_out + st.slack + int(n_masked.max()) * floor + (st.u_p if gmap.rounds_p else 0.0)
    gates.append(Gate("row_sums", "sum of P1 per row (multi-tile)", _range(sums), (1 - tol_sum, 1 + tol_sum),
                      details={"tolerance": tol_sum, "rows": sums.numel()}))

    # the stock kernel's row-maximum entry attains the patched row maximum. Two P1 readings compare (two output
    # roundings); the stock argmax is known only to within two stock readings (2 (r_p + r_out)), an element that
    # close to the maximum lies on the same lattice point
    p1_max = p1.amax(dim=-1, keepdim=True)
    ties = (valid & (p1 >= p1_max * 2.0 ** (-2 * r_out))).sum(dim=-1).flatten().tolist()
    if not gmap.row_phase:
        which = "stock"
        at_max = torch.log2(p1.gather(-1, p0.argmax(dim=-1, keepdim=True)) / p1_max).flatten()
        tol_att = 2 * r_out + 2 * (r_p + r_out) + r_slack
        phase_rows = {}
    else:
        # h15-folded: the lattice's step below the maximum can lie arbitrarily close to it, so an element the
        # stock readings cannot tell from the maximum may sit one step lower. The gate reads the exact maximum
        # instead, whose step is 0 except on the rows step_below_open names: there one step, log2(3/4), is allowed
        which = "exact"
        at_max = torch.log2(p1.gather(-1, stock.argmax) / p1_max)
        near = step_below_open(stock.scaled_max, stock.eta, valid)
        at_max = torch.where(near, torch.clamp(at_max - math.log2(0.75), max=0.0), at_max).flatten()
        tol_att = 2 * r_out + r_slack
        phase_rows = {"rows_one_step_allowed": int(near.sum())}
    gates.append(Gate(
        "row_max_attained", f"log2(P1 at the {which} row maximum / P1 row maximum) (multi-tile)", _range(at_max),
        (-tol_att, 0.0), "octave", applicable=not deferred,
        details={"tolerance": tol_att, "rows": len(ties), "rows_attained": int((at_max >= -tol_att).sum()),
                 "lattice_ties_median": statistics.median(ties) if ties else None,
                 "lattice_ties_max": max(ties) if ties else None, **phase_rows,
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
