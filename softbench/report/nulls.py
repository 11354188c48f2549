"""The A/A nulls of many latency sessions side by side: does the baseline's process carry an offset?

A null is one run's check on itself; a bias shows only across runs. On the H200 (2026-12-01) 5 of 14
interleavings of four or more kernels read a null that excludes 0, all positive, while runs of two processes
did not. This table puts every recorded null beside what might explain it: the protocol, how many kernels shared
the run, and the order in which their processes started (env.json's `start_order`, recorded since then; older
sessions started them as listed: baseline, variants, null, references). The summary line counts misses and signs
over the sessions given, so a run of `--start-order shuffled` sessions answers whether the offset follows the
role or the place. The spread line puts the nulls' scatter across sessions beside what their own intervals
imply: in 13 shuffled-start interleavings (2026-12-02) the offsets took either sign and scattered more widely
than the runs' intervals allowed, an offset of each pair of processes that no single run can see."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from softbench.core.tables import fmt
from softbench.predictions.sessions import SessionRecord
from softbench.report.records import marked_name
from softbench.report.speedups import PAPER


NOT_MEASURED = "not measured"
AA_RUN = "the run itself is A/A: its speed-up is the null"


@dataclass(frozen=True)
class NullRow:
    session: str
    protocol: str
    dtype: str
    kernels: int
    start_order: str  # "listed", "shuffled: A0', ref-fa3, A0, h15-sat", "listed (not recorded)"; "-": no null
    null_first: bool | None  # whether the null's process started before the baseline's; None: unknown
    estimate_pct: float | None  # None: the session measured no null (NOT_MEASURED; `note` says why where known)
    ci: tuple[float, float] | None
    note: str = ""

    @property
    def covers_zero(self) -> bool | None:
        return None if self.ci is None else self.ci[0] <= 0.0 <= self.ci[1]


def session_null(rec: SessionRecord) -> str | None:
    """The label of the session's A/A null between two processes (A0'); None where it ran none (--no-null, the
    paper rounds)."""
    null = (rec.summary or {}).get("null")
    return null if isinstance(null, str) else None


def _absent_note(rec: SessionRecord, null: str | None) -> str:
    """Why a session has no null estimate, where it says: a null named but never paired (a run stopped before its
    pairs), or a run that is itself an A/A run (the paper rounds' --variant A0); '' otherwise."""
    if null is not None:
        return "no pairs recorded"
    f = rec.facts
    return AA_RUN if f.get("baseline") is not None and f.get("variant") == f.get("baseline") else ""


def null_absent(rec: SessionRecord) -> str:
    """What stands for the A/A null of a session that has no estimate of one: NOT_MEASURED, and why where known."""
    note = _absent_note(rec, session_null(rec))
    return NOT_MEASURED + (f" ({note})" if note else "")


def null_rows(recs: list[SessionRecord]) -> list[NullRow]:
    """One row per latency session, its null between processes (interleaved or sustained), or NOT_MEASURED where
    it has none or recorded no pairs for it: a session left out unseen would read as one whose null was fine. A
    second row for a null inside the baseline's process where the session names one."""
    rows = []
    for r in recs:
        s = r.summary or {}
        rows.append(_null_row(r, s, session_null(r), ""))
        if isinstance(s.get("null_in_process"), str):
            rows.append(_null_row(r, s, s["null_in_process"], ", in the baseline's process"))
    return rows


def _null_row(r: SessionRecord, s: dict, null: str | None, where: str) -> NullRow:
    """The row of one null of a session; `where` names a null inside the baseline's process (--null-in-process),
    whose rows form groups of their own. `null` None: the session ran none."""
    comp = (s.get("comparisons") or {}).get(null) if null is not None else None
    paired = (comp or {}).get("paired") or {}
    # the paper rounds list no kernels: their medians name the two they timed
    kernels = list(s.get("kernels") or s.get("median_ms") or {})
    baseline = s.get("baseline") or (kernels[0] if kernels else None)
    order = r.env.get("start_order") if isinstance(r.env.get("start_order"), dict) else None
    null_first: bool | None
    if null is None:  # no null: no process of it to start before or after the baseline's
        text, null_first = "-", None
    elif order is None or order.get("rule") == "listed":
        # listed: the baseline's process starts first, by construction (LatencyOptions.kernel_specs)
        text = "listed" if order else "listed (not recorded)"
        null_first = False
    else:
        listed = order.get("labels") or []
        text = f"{order.get('rule', '?')}: {', '.join(listed)}"
        null_first = listed.index(null) < listed.index(baseline) if null in listed and baseline in listed else None
    if where:  # the twin has no process of its own to start before or after the baseline's
        null_first = None
    protocol = str(s.get("protocol_kind") or r.facts.get("protocol") or PAPER) + where
    if paired.get("estimate_pct") is None:
        return NullRow(marked_name(r), protocol, str(r.facts.get("dtype", "-")), len(kernels), text, null_first,
                       None, None, _absent_note(r, null))
    ci = paired.get("ci95_pct")
    return NullRow(marked_name(r), protocol, str(r.facts.get("dtype", "-")), len(kernels), text, null_first,
                   float(paired["estimate_pct"]), (float(ci[0]), float(ci[1])) if ci else None)


NULL_COLUMNS = ["session", "protocol", "dtype", "kernels", "start order", "null first", "A/A null %", "95% CI",
                "covers 0"]
NULL_NARROW = ("session", "protocol", "A/A null %", "95% CI", "covers 0")  # a narrow console's columns


def null_table_rows(rows: list[NullRow]) -> list[list[str]]:
    def yn(v):
        return "-" if v is None else ("yes" if v else "no")

    def estimate(r: NullRow) -> str:
        if r.estimate_pct is None:
            return NOT_MEASURED + (f" ({r.note})" if r.note else "")
        return fmt(r.estimate_pct, "+.2f")

    return [[r.session, r.protocol, r.dtype, str(r.kernels), r.start_order, yn(r.null_first), estimate(r),
             f"[{r.ci[0]:+.2f}, {r.ci[1]:+.2f}]" if r.ci else "-", yn(r.covers_zero)]
            for r in rows]


def null_summary(rows: list[NullRow]) -> list[str]:
    """Per group of runs (two kernels, four or more; null started first or not), how many nulls miss 0, with
    which sign, and their mean: sentences for report.md. Sessions without a measured null are counted apart."""
    measured = [r for r in rows if r.estimate_pct is not None]
    groups: dict[str, list[NullRow]] = {}
    for r in measured:
        size = "two kernels" if r.kernels <= 2 else f"{'three' if r.kernels == 3 else 'four or more'} kernels"
        place = {True: ", null started first", False: ", baseline started first", None: ""}[r.null_first]
        groups.setdefault(f"{r.protocol}, {size}{place}", []).append(r)
    out = []
    for name, g in sorted(groups.items()):
        misses = [r for r in g if r.covers_zero is False]
        pos = sum(r.estimate_pct > 0 for r in g)
        mean = sum(r.estimate_pct for r in g) / len(g)
        out.append(f"- {name}: {len(g)} null(s), mean {mean:+.2f} pp, {pos} positive; misses of 0: {len(misses)}"
                   + (f" ({', '.join(f'{r.estimate_pct:+.2f}' for r in misses)})" if misses else ""))
    missing = len(rows) - len(measured)
    if missing:
        out.append(f"- {missing} session(s) without an A/A null estimate: listed as {NOT_MEASURED}")
    return out + null_spread(measured)


SPREAD_MIN_NULLS = 5  # fewer give a standard deviation too rough to set beside the intervals
WIDER_THAN_IMPLIED = 1.5  # a scatter across sessions this many times what their intervals imply is flagged


def implied_sd(half_widths) -> float:
    """The standard deviation across sessions that their own 95% intervals imply: median half-width / 1.96."""
    return statistics.median(half_widths) / 1.96


def scatters_wider(sd: float, half_widths) -> bool:
    """Whether values scattering with `sd` across sessions spread more widely than their intervals allow: an offset
    that lasts a run, which a run's own interval does not hold (null_spread; softbench.report.replication)."""
    return sd > WIDER_THAN_IMPLIED * implied_sd(half_widths)


def null_spread(rows: list[NullRow]) -> list[str]:
    """Per protocol with SPREAD_MIN_NULLS nulls or more: their standard deviation across sessions against the one
    their own 95% intervals imply (median half-width / 1.96). The nulls estimate 0 with independent errors only if
    the two agree; a wider scatter is an offset between processes that lasts a run and that its interval misses."""
    out = []
    by_protocol: dict[str, list[NullRow]] = {}
    for r in rows:
        if r.estimate_pct is not None:
            by_protocol.setdefault(r.protocol, []).append(r)
    for protocol, g in sorted(by_protocol.items()):
        widths = [(r.ci[1] - r.ci[0]) / 2 for r in g if r.ci]
        if len(g) < SPREAD_MIN_NULLS or len(widths) < SPREAD_MIN_NULLS:
            continue
        sd = statistics.stdev(r.estimate_pct for r in g)
        half = statistics.median(widths)
        implied = implied_sd(widths)
        wider = (f": {sd / implied:.1f} times wider, an offset between processes that a run's own interval does "
                 "not hold") if scatters_wider(sd, widths) else ""
        out.append(f"- spread, {protocol}: {len(g)} nulls scatter with a standard deviation of {sd:.2f} pp across "
                   f"sessions; their intervals (median half-width {half:.2f} pp) imply {implied:.2f} pp{wider}")
    return out
