"""dNLL per operator from fidelity sessions, and the one condition that stands for a kernel variant's operator.

A variant is joined to fidelity through its operator (softbench.kernels.catalog: Variant.operator). Of the
conditions that evaluated that operator, the one drawn is, in this order: the kernel path on the latency
session's backend (the very kernel whose speed is drawn), the simulation (the operator through the kernel's
tiling), the kernel path on another backend, any other path (the offline whole-row one); then a complete
session before a partial one, then the newest. Conditions of an operator with parameters (rowmax-pot:kmax=20)
are not a variant's operator and are left out.

A dNLL is measured against its session's baseline: exact attention (FP32 softmax) on the simulation's and the
row paths, the stock kernel (A0, at the session's dtype) on the kernel path. Two dNLLs drawn side by side must
share that reference and the dtype, or the one would hold the quantization that the other subtracts; the join
picks one reference for its figure (choose_reference)."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from softbench.predictions.sessions import SessionRecord
from softbench.report.records import fidelity_conditions, fidelity_reference


@dataclass(frozen=True)
class FidelityPoint:
    session: str
    complete: bool
    started: _dt.datetime | None
    condition: str
    operator: str
    path: str
    backend: str | None  # the kernel path's backend; None on the other paths
    dnll: float
    ci_low: float
    ci_high: float
    model: str
    corpus: str
    dtype: str
    variant: str | None  # the kernel path's variant that ran the operator (A1 for rowmax-h15); None elsewhere
    reference: str = "?"  # what the dNLL is measured against: the session's baseline ('exact', 'kernel:stock')


def _operator(cond: dict) -> str | None:
    op = cond.get("operator")
    if isinstance(op, dict):
        return None if op.get("params") else (op.get("operator") or op.get("name"))
    return op if isinstance(op, str) else None


def _label(value, *keys) -> str:
    if isinstance(value, dict):
        return str(next((value[k] for k in keys if value.get(k)), "?"))
    return "?" if value is None else str(value)


def _backend(summary: dict, path: str) -> str | None:
    # kernel-path sessions older than `fidelity --backend` ran FA4, then the only kernel path (its baseline
    # condition says "stock FA4 (A0)"), and wrote no backend
    return summary.get("backend") or ("fa4" if path == "kernel" else None)


def fidelity_points(recs: list[SessionRecord]) -> list[FidelityPoint]:
    points = []
    for r in recs:
        s = r.summary
        for name, c in fidelity_conditions(s):
            op = _operator(c)
            if op is None:
                continue
            path = str(c.get("path") or s.get("path") or "?")
            points.append(FidelityPoint(
                r.name, r.complete, r.started, name, op, path, _backend(s, path),
                float(c["dnll"]), float(c["ci_low"]), float(c["ci_high"]), _label(s.get("model"), "label", "alias"),
                _label(s.get("corpus"), "name", "source"), str(s.get("dtype", "?")), c.get("variant"),
                fidelity_reference(s)))
    return points


def _rank(p: FidelityPoint, backend: str) -> tuple:
    path_rank = {("kernel", True): 0, ("sim", False): 1, ("sim", True): 1, ("kernel", False): 2}
    newest = -(p.started.timestamp() if p.started else 0.0)
    return path_rank.get((p.path, p.backend == backend), 3), not p.complete, newest, p.session


EXACT = "exact"  # the simulation's and the row path's baseline: attention with FP32 softmax


def choose_reference(points: list[FidelityPoint], operators: set[str]) -> str | None:
    """The one reference a figure's dNLLs are all measured against: the one under which most of `operators` were
    evaluated, exact attention where that ties; None where none was."""
    covered: dict[str, set[str]] = {}
    for p in points:
        if p.operator in operators:
            covered.setdefault(p.reference, set()).add(p.operator)
    if not covered:
        return None
    return max(covered, key=lambda ref: (len(covered[ref]), ref == EXACT, ref))


def best_fidelity(points: list[FidelityPoint], operator: str, backend: str) -> FidelityPoint | None:
    """The condition drawn for `operator` beside a speed-up measured on `backend`; None when no session has one."""
    matching = [p for p in points if p.operator == operator]
    return min(matching, key=lambda p: _rank(p, backend)) if matching else None
