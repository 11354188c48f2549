"""Speed against fidelity: the speed-ups of one shape's latency sessions joined, through each variant's operator
(softbench.kernels.catalog), to that operator's dNLL in the fidelity sessions (softbench.report.fidelity_match).

One shape at a time, because a speed-up belongs to its shape: the one most latency sessions measured unless
another is asked for. Of that shape's sessions, one point per backend, variant, role, quantity and kernel
measured against: from the newest complete session (newer sessions run the current kernels and protocols; a
partial one only where no complete one has the point). What cannot be joined is said in one sentence per
variant, with the points it leaves out."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from softbench.core.errors import UsageError
from softbench.kernels.catalog import get_variant
from softbench.predictions.sessions import SessionRecord
from softbench.report.fidelity_match import (Evaluation, FidelityPoint, best_fidelity, choose_evaluation,
                                             fidelity_points)
from softbench.report.reestimate import EstimateAgainst, against_reference
from softbench.report.speedups import PAPER, Speedup, session_speedups

QUANTITY_ORDER = ("at equal clock", "sustained", PAPER)


@dataclass(frozen=True)
class JoinedPoint:
    speed: Speedup
    operator: str
    fidelity: FidelityPoint
    sessions: int  # how many sessions at the shape had this point (the newest is drawn)


@dataclass
class SpeedFidelity:
    shape_tag: str
    points: list[JoinedPoint] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # what could not be joined, one sentence per variant
    notes: list[str] = field(default_factory=list)  # what could not be read from a session
    dtype: str = "?"  # the shape's, and so every drawn dNLL's
    evaluation: Evaluation | None = None  # what every drawn dNLL comes from (fidelity_match.choose_evaluation)

    @property
    def reference(self) -> str | None:
        """What every drawn dNLL is measured against ('exact', 'kernel:stock')."""
        return self.evaluation.reference if self.evaluation else None

    @property
    def against(self) -> list[str]:
        """The kernels the points are measured against: the baseline first, then the references (the order the
        points are sorted in)."""
        return list(dict.fromkeys(p.speed.against for p in self.points))


def _has_speedup(rec: SessionRecord) -> bool:
    s = rec.summary
    return bool(s.get("shape_tag")) and (s.get("protocol_kind") in ("interleaved", "sustained")
                                         or s.get("speedup_pct") is not None)


def latency_shapes(recs: list[SessionRecord]) -> Counter:
    return Counter(str(r.summary["shape_tag"]) for r in recs if _has_speedup(r))


def choose_shape(recs: list[SessionRecord], asked: str | None) -> str | None:
    """The shape tag to draw: `asked` when a latency session measured it (else a UsageError that lists the
    recorded ones), by default the most common; None without any latency speed-up."""
    counts = latency_shapes(recs)
    if asked is not None and asked not in counts:
        known = ", ".join(f"{t} ({n})" for t, n in sorted(counts.items())) or "none"
        raise UsageError(f"no latency session among the paths measured shape {asked!r} (shapes recorded, with "
                         f"their sessions: {known})", hint="give a shape tag as the session folders spell it, "
                                                           "e.g. fp8-8K-causal-b1h16d128")
    if asked is not None:
        return asked
    return min(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0] if counts else None


def _key(p: Speedup) -> tuple:
    return (p.board, p.backend, p.variant, p.role, p.quantity, p.against)


def _newest(points: list[Speedup]) -> Speedup:
    return max(points, key=lambda p: (p.complete, p.started.timestamp() if p.started else 0.0, p.session))


def _order(p: JoinedPoint) -> tuple:
    s = p.speed
    return (s.against.startswith("ref-"), s.against, s.backend, s.role != "null", s.variant,
            QUANTITY_ORDER.index(s.quantity) if s.quantity in QUANTITY_ORDER else len(QUANTITY_ORDER))


def _describe(p: Speedup) -> str:
    name = f"{p.label} (A/A null)" if p.role == "null" else p.variant
    return f"{name} {p.quantity} against {p.against} ({p.session})"


def join_speed_fidelity(latency: list[SessionRecord], fidelity: list[SessionRecord], shape: str,
                        estimate: EstimateAgainst = against_reference) -> SpeedFidelity:
    at_shape = [r for r in latency if _has_speedup(r) and r.summary["shape_tag"] == shape]
    out = SpeedFidelity(shape_tag=shape, dtype=str(at_shape[0].facts.get("dtype", "?")) if at_shape else "?")
    by_key: dict[tuple, list[Speedup]] = defaultdict(list)
    for r in at_shape:
        points, notes = session_speedups(r, estimate)
        out.notes += notes
        for p in points:
            by_key[_key(p)].append(p)
    newest = [_newest(members) for members in by_key.values()]
    operators: dict[str, str] = {}
    left_out: dict[str, list[Speedup]] = defaultdict(list)
    why: dict[str, str] = {}
    for p in newest:
        try:
            operators[p.variant] = get_variant(p.variant).operator
        except UsageError:
            why[p.variant] = f"variant {p.variant} is not in softbench's catalog, so its operator is unknown"
    # a dNLL at another dtype, against another reference or from another evaluation (model, text, blocks, FP8
    # handling) is another quantity: one of each for the figure
    every = fidelity_points(fidelity)
    at_dtype = [f for f in every if f.dtype == out.dtype]
    # the baseline's operator does not vote: against its own stock kernel its dNLL is 0 by definition, so a
    # kernel-path reference can never cover it
    approximations = {operators[p.variant] for p in newest if p.variant in operators and p.role == "variant"}
    out.evaluation = (choose_evaluation(at_dtype, approximations)
                      or choose_evaluation(at_dtype, set(operators.values())))
    fid = [f for f in at_dtype if f.evaluation == out.evaluation]
    chosen = out.evaluation.words() if out.evaluation else "any evaluation"
    for p, members in zip(newest, by_key.values()):
        operator = operators.get(p.variant)
        match = best_fidelity(fid, operator, p.backend) if operator else None
        if match is None:
            if operator and out.evaluation and p.variant == out.evaluation.stock_variant:
                why[p.variant] = (f"variant {p.variant} (operator {operator}): {p.variant} is the stock kernel the "
                                  f"dNLLs against {out.reference} are measured from (its dNLL is 0 by definition, "
                                  "not a measurement)")
            elif operator:
                elsewhere = sorted({f"{f.dtype} ({f.evaluation.words()})" for f in every
                                    if f.operator == operator} - {f"{out.dtype} ({chosen})"})
                why[p.variant] = (f"variant {p.variant} (operator {operator}): no fidelity session among the paths "
                                  f"evaluated operator {operator} at {out.dtype} in the figure's evaluation "
                                  f"({chosen})" + (f"; it was evaluated only at {'; '.join(elsewhere)}"
                                                   if elsewhere else ""))
            left_out[p.variant].append(p)
            continue
        out.points.append(JoinedPoint(p, operator, match, len(members)))
    out.points.sort(key=_order)
    for variant, points in sorted(left_out.items()):
        out.skipped.append(f"{why[variant]}; not drawn: " + "; ".join(_describe(p) for p in points))
    return out


def describe(sf: SpeedFidelity, shapes: Counter, asked: str | None) -> list[str]:
    """report.md's words on the figure: which shape and why, how points and conditions were chosen, what is
    missing."""
    others = ", ".join(f"{t} ({n})" for t, n in sorted(shapes.items()) if t != sf.shape_tag)
    how = ("asked for with --speed-fidelity-shape" if asked else
           f"the shape most latency sessions measured: {shapes[sf.shape_tag]} of {sum(shapes.values())}")
    lines = [f"Each variant's speed-up at {sf.shape_tag} ({how}) against the dNLL of its operator "
             "(softbench.kernels.catalog), numbered as in the table above. Other shapes recorded: "
             f"{others or 'none'}; `softbench report --speed-fidelity-shape TAG` draws one of them.", "",
             "- One point per backend, kernel, quantity and comparison (against A0, against FA3), from the newest "
             "complete session that has it; against A0 as the session wrote it (paper rounds: with their window "
             "bootstrap), against a reference kernel (FA3) re-estimated from the session's own units by its own "
             "estimator, once those units give back every estimate the session wrote. A point's configuration is the "
             "one its kernel ran in; where the variant ran in another than A0 (latency --variant-config), its row "
             "names both.",
             f"- dNLL: at the shape's dtype ({sf.dtype}) and from one evaluation for every point "
             f"({sf.evaluation.words() if sf.evaluation else 'none found'}): one reference (the kernel path measures "
             "against its own stock kernel A0, the simulation against FP32 softmax), one model, one text in blocks "
             "of one length, one FP8 handling; the evaluation under which most of the variants' operators were "
             "evaluated, on a tie exact attention, then one with a complete session, then the newest. Of its "
             "conditions, the kernel path on the same backend first, then the simulation, then the kernel path on "
             "another backend, then the offline whole-row path; a complete session first, then the newest.",
             "- Each point names the GPU its latency session ran on: sessions of two boards are kept as separate "
             "points, in a colour of their own (the legend names variant, backend and GPU) and in the numbered source "
             "lines under the figure."]
    lines += [f"- not joined: {s}" for s in sf.skipped]
    lines += [f"- not read: {n}" for n in sf.notes]
    if not sf.points:
        lines.append("- nothing joined, so no figure was drawn")
    return lines
