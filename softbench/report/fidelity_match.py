"""dNLL per operator from fidelity sessions, and the one condition that stands for a kernel variant's operator.

A variant is joined to fidelity through its operator (softbench.kernels.catalog: Variant.operator). Of the
conditions that evaluated that operator, the one drawn is, in this order: the kernel path on the latency
session's backend (the very kernel whose speed is drawn), the simulation (the operator through the kernel's
tiling), the kernel path on another backend, any other path (the offline whole-row one); then a complete
session before a partial one, then the newest. Conditions of an operator with parameters (rowmax-pot:kmax=20)
are not a variant's operator and are left out.

A dNLL is measured against its session's baseline: exact attention (FP32 softmax) on the simulation's and the
row paths, the stock kernel (A0, at the session's dtype) on the kernel path. Two dNLLs drawn side by side must
share that reference and the dtype, or the one would hold the quantization that the other subtracts, and the
evaluation that gave them: the same model, the same text cut into blocks of the same length, the simulation's
FP8 handling (its FP8 operands move exp2's own dNLL about tenfold) and, against a stock kernel, that kernel. The
join picks one Evaluation for its figure (choose_evaluation)."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field

from softbench.fidelity.report import fp8_rounding
from softbench.predictions.sessions import SessionRecord
from softbench.report.records import EXACT, KERNEL_STOCK, fidelity_conditions, fidelity_reference


STOCK_VARIANT = "A0"  # the stock kernel's variant, for kernel-path sessions that do not record it


@dataclass(frozen=True)
class Evaluation:
    """What two dNLLs must share to be drawn side by side (one figure draws one)."""
    reference: str  # the session's baseline: 'exact', 'kernel:stock'
    model: str  # the model's file (a GGUF) or its label: an alias and a path to one file name the same model
    text: str  # the corpus text's sha256 where recorded (a corpus named two ways is one text), else its name
    # the corpus as a reader knows it: words only, so that one text under two names is one evaluation
    corpus: str = field(compare=False)
    block_len: int | None
    fp8: str  # at FP8, what went through E4M3 (fidelity.report.fp8_rounding); '' elsewhere
    stock: str | None  # against a stock kernel: its backend; None against exact attention
    stock_variant: str | None = None  # against a stock kernel: the variant it ran (A0)

    def words(self) -> str:
        stock = " ".join(x for x in (self.stock, self.stock_variant) if x)
        parts = [f"against {self.reference}" + (f" ({stock})" if stock else ""),
                 f"{self.model} on {self.corpus}", f"blocks of {self.block_len}" if self.block_len else "",
                 self.fp8]
        return ", ".join(x for x in parts if x)


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
    dtype: str
    variant: str | None  # the kernel path's variant that ran the operator (A1 for rowmax-h15); None elsewhere
    evaluation: Evaluation

    @property
    def reference(self) -> str:
        """What the dNLL is measured against: the session's baseline ('exact', 'kernel:stock')."""
        return self.evaluation.reference

    @property
    def corpus(self) -> str:
        return self.evaluation.corpus


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


def _model_name(model) -> str:
    if isinstance(model, dict):
        return str(model.get("gguf_file") or model.get("label") or model.get("alias") or "?")
    return "?" if model is None else str(model)


def evaluation(summary: dict, path: str, backend: str | None) -> Evaluation:
    corpus = summary.get("corpus")
    name = _label(corpus, "name", "source")
    text = corpus.get("text_sha256") if isinstance(corpus, dict) else None
    block_len = summary.get("block_len")
    reference = fidelity_reference(summary)
    baseline = summary.get("baseline")
    # the kernel path's baseline is softbench's stock kernel; sessions older than its `variant` field ran A0 there
    stock_variant = (baseline.get("variant") if isinstance(baseline, dict) else None) or STOCK_VARIANT
    return Evaluation(reference, _model_name(summary.get("model")), str(text or name), name,
                      block_len if isinstance(block_len, int) else None, fp8_rounding(summary),
                      backend if reference != EXACT else None, stock_variant if reference == KERNEL_STOCK else None)


def fidelity_points(recs: list[SessionRecord]) -> list[FidelityPoint]:
    points = []
    for r in recs:
        s = r.summary
        for name, c in fidelity_conditions(s):
            op = _operator(c)
            if op is None:
                continue
            path = str(c.get("path") or s.get("path") or "?")
            backend = _backend(s, path)
            points.append(FidelityPoint(
                r.name, r.complete, r.started, name, op, path, backend,
                float(c["dnll"]), float(c["ci_low"]), float(c["ci_high"]), _label(s.get("model"), "label", "alias"),
                str(s.get("dtype", "?")), c.get("variant"), evaluation(s, path, backend)))
    return points


def _rank(p: FidelityPoint, backend: str) -> tuple:
    path_rank = {("kernel", True): 0, ("sim", False): 1, ("sim", True): 1, ("kernel", False): 2}
    newest = -(p.started.timestamp() if p.started else 0.0)
    return path_rank.get((p.path, p.backend == backend), 3), not p.complete, newest, p.session


def choose_evaluation(points: list[FidelityPoint], operators: set[str]) -> Evaluation | None:
    """The one evaluation a figure's dNLLs all come from: the one under which most of `operators` were evaluated;
    on a tie exact attention, then the one with a complete session, then the newest; None where none was."""
    covered: dict[Evaluation, set[str]] = {}
    complete: dict[Evaluation, bool] = {}
    newest: dict[Evaluation, float] = {}
    for p in points:
        if p.operator in operators:
            e = p.evaluation
            covered.setdefault(e, set()).add(p.operator)
            complete[e] = complete.get(e, False) or p.complete
            newest[e] = max(newest.get(e, 0.0), p.started.timestamp() if p.started else 0.0)
    if not covered:
        return None
    return max(covered, key=lambda e: (len(covered[e]), e.reference == EXACT, complete[e], newest[e], e.words()))


def best_fidelity(points: list[FidelityPoint], operator: str, backend: str) -> FidelityPoint | None:
    """The condition drawn for `operator` beside a speed-up measured on `backend`; None when no session has one."""
    matching = [p for p in points if p.operator == operator]
    return min(matching, key=lambda p: _rank(p, backend)) if matching else None
