"""The speed-ups one latency session records, as points: every variant (and the A/A null) against the baseline
as summary.json wrote them, and the baseline and every variant against each reference kernel timed in the same
run (re-estimated from the session's own units: softbench.report.reestimate).

Three quantities: 'at equal clock' (interleaved protocol), 'sustained' (sustained protocol, at the power cap),
and 'paper rounds' (the older rounds of windows, in which clock and power effects are mixed; their interval is
the window bootstrap the session wrote)."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from softbench.latency.exactness import exactness_line, recorded_exactness
from softbench.predictions.sessions import SessionRecord
from softbench.report.records import kernel_config
from softbench.report.reestimate import EstimateAgainst, against_reference

PAPER = "paper rounds"
# each quantity as a label that stands alone (a legend, a series, a table cell) says it
QUANTITY_NAMES = {"at equal clock": "at equal clock (interleaved)", "sustained": "sustained (at the power cap)",
                  PAPER: "paper rounds (clock effects mixed)"}


def session_quantity(rec: SessionRecord) -> str:
    """The quantity a latency session's speed-up is: its summary's for the paired protocols ('at equal clock',
    'sustained'); PAPER for the older rounds, which name none because they mix both."""
    s = rec.summary or {}
    return str(s.get("quantity")) if s.get("protocol_kind") in ("interleaved", "sustained") else PAPER


@dataclass(frozen=True)
class Speedup:
    session: str
    complete: bool
    started: _dt.datetime | None
    backend: str
    shape_tag: str
    quantity: str  # 'at equal clock', 'sustained' or PAPER
    against: str  # the label it is measured against: the baseline (A0) or a reference kernel (ref-fa3)
    label: str  # the kernel's label in the session (A0' for the null)
    variant: str  # the catalog's variant name the label runs
    role: str  # 'baseline', 'variant' or 'null'
    estimate_pct: float
    ci_low: float | None
    ci_high: float | None
    n: int | None  # pairs (paired protocols) or windows per kernel (paper rounds)
    method: str
    # the configuration the kernel's worker built, and that of the kernel it is measured against: they differ
    # where latency --variant-config ran the variant in its own; '' where a kernel reports none (FA4, FA3, sim)
    config: str = ""
    against_config: str = ""
    board: str = ""  # the GPU the session ran on (env.json's name); sessions of two boards are no replicates


def _point(rec: SessionRecord, quantity: str, against: str, label: str, variant: str, role: str, est: dict,
           method_key: str = "method") -> Speedup:
    lo, hi = (est.get("ci95_pct") or [None, None])[:2]
    return Speedup(rec.name, rec.complete, rec.started, str(rec.summary.get("backend", "?")),
                   str(rec.summary.get("shape_tag", "?")), quantity, against, label, variant, role,
                   float(est["estimate_pct"]), lo, hi, est.get("n_pairs"), str(est.get(method_key, "")),
                   kernel_config(rec, label), kernel_config(rec, against), rec.board)


def _paired(rec: SessionRecord, estimate: EstimateAgainst) -> tuple[list[Speedup], list[str]]:
    s = rec.summary
    # a baseline that is not exact attention (its error against FP32 well above the reference's) gives no
    # speed-up worth drawing: decided before any is read or re-estimated
    check = recorded_exactness(s)
    if check and not check["ok"]:
        return [], [f"{rec.name}: left out: {exactness_line(check)}"]
    base, quantity = s.get("baseline"), str(s.get("quantity"))
    kernels = s.get("kernels") or {}
    points, notes = [], []
    for label, comp in (s.get("comparisons") or {}).items():
        # a reference against A0 is drawn the other way round, as A0 against the reference, below
        if comp.get("role") in ("variant", "null") and comp.get("paired"):
            points.append(_point(rec, quantity, base, label, str(kernels.get(label, {}).get("variant", label)),
                                 comp["role"], comp["paired"]))
    for ref in s.get("references") or []:
        against, why = estimate(rec, ref)
        if why:
            notes.append(f"{rec.name}: no speed-up against {ref}: {why}")
        for label, est in against.items():
            k = kernels.get(label, {})
            points.append(_point(rec, quantity, ref, label, str(k.get("variant", label)), str(k.get("role")), est))
    return points, notes


def _paper(rec: SessionRecord) -> list[Speedup]:
    s = rec.summary
    if s.get("speedup_pct") is None:
        return []
    base = str(s.get("baseline", "A0"))
    label = str(s.get("variant"))
    variant = str(rec.protocol.get("variant", label))  # summary.json holds the label (A0'), protocol.yaml the name
    role = "null" if variant == base else "variant"
    n = (s.get("n_windows") or {}).get(label)
    est = {"estimate_pct": s["speedup_pct"], "ci95_pct": s.get("bootstrap_ci95_pct"), "n_pairs": n,
           "method": f"pooled medians; {s.get('bootstrap_method', 'window bootstrap')}"}
    return [_point(rec, PAPER, base, label, variant, role, est)]


def session_speedups(rec: SessionRecord, estimate: EstimateAgainst = against_reference
                     ) -> tuple[list[Speedup], list[str]]:
    """The points of one latency session and, in one sentence each, what could not be read from it. estimate:
    how a kernel against a reference is estimated (a report passes its ReferenceEstimates, read once)."""
    if rec.summary.get("protocol_kind") in ("interleaved", "sustained"):
        return _paired(rec, estimate)
    return _paper(rec), []
