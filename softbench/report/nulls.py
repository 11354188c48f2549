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


@dataclass(frozen=True)
class NullRow:
    session: str
    protocol: str
    dtype: str
    kernels: int
    start_order: str  # "listed", "shuffled: A0', ref-fa3, A0, h15-sat", "listed (not recorded)"
    null_first: bool | None  # whether the null's process started before the baseline's; None: unknown
    estimate_pct: float
    ci: tuple[float, float] | None

    @property
    def covers_zero(self) -> bool | None:
        return None if self.ci is None else self.ci[0] <= 0.0 <= self.ci[1]


def null_rows(recs: list[SessionRecord]) -> list[NullRow]:
    """One row per latency session whose summary names a null (interleaved or sustained)."""
    rows = []
    for r in recs:
        s = r.summary or {}
        rows += [row for row in (_null_row(r, s, s.get("null"), ""),
                                 _null_row(r, s, s.get("null_in_process"), ", in the baseline's process"))
                 if row is not None]
    return rows


def _null_row(r: SessionRecord, s: dict, null, where: str) -> NullRow | None:
    """The row of one null of a session; `where` names a null inside the baseline's process (--null-in-process),
    whose rows form groups of their own."""
    comp = (s.get("comparisons") or {}).get(null) if isinstance(null, str) else None
    paired = (comp or {}).get("paired") or {}
    if paired.get("estimate_pct") is None:
        return None
    kernels = list(s.get("kernels") or {})
    baseline = s.get("baseline") or (kernels[0] if kernels else None)
    order = r.env.get("start_order") if isinstance(r.env.get("start_order"), dict) else None
    if order is None or order.get("rule") == "listed":
        # listed: the baseline's process starts first, by construction (LatencyOptions.kernel_specs)
        text = "listed" if order else "listed (not recorded)"
        null_first: bool | None = False
    else:
        listed = order.get("labels") or []
        text = f"{order.get('rule', '?')}: {', '.join(listed)}"
        null_first = listed.index(null) < listed.index(baseline) if null in listed and baseline in listed else None
    if where:  # the twin has no process of its own to start before or after the baseline's
        null_first = None
    ci = paired.get("ci95_pct")
    return NullRow(marked_name(r), str(s.get("protocol_kind") or r.facts.get("protocol") or "-") + where,
                   str(r.facts.get("dtype", "-")), len(kernels), text, null_first,
                   float(paired["estimate_pct"]), (float(ci[0]), float(ci[1])) if ci else None)


NULL_COLUMNS = ["session", "protocol", "dtype", "kernels", "start order", "null first", "A/A null %", "95% CI",
                "covers 0"]


def null_table_rows(rows: list[NullRow]) -> list[list[str]]:
    def yn(v):
        return "-" if v is None else ("yes" if v else "no")

    return [[r.session, r.protocol, r.dtype, str(r.kernels), r.start_order, yn(r.null_first),
             fmt(r.estimate_pct, "+.2f"), f"[{r.ci[0]:+.2f}, {r.ci[1]:+.2f}]" if r.ci else "-", yn(r.covers_zero)]
            for r in rows]


def null_summary(rows: list[NullRow]) -> list[str]:
    """Per group of runs (two kernels, four or more; null started first or not), how many nulls miss 0, with
    which sign, and their mean: sentences for report.md."""
    groups: dict[str, list[NullRow]] = {}
    for r in rows:
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
    return out + null_spread(rows)


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
