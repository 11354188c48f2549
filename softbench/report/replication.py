"""Each kernel against an exact reference kernel (FA3) across sessions: does what one run reads hold across runs?

A session's interval holds the scatter of its own pairs of windows. An offset between the processes of one run
lasts the run and shows only across runs (the nulls' spread, softbench.report.nulls); on the H200 the nulls of
shuffled-start interleavings scattered more widely than their intervals allowed. So a claim such as "A0 at FA3's
speed at BF16 causal 16K" rests on every complete session that timed both: grouped by the board, shape, quantity,
kernel and the kernel's configuration (an H100 and an H200 share a capability but not their memory or clocks, so
their sessions are no replicates of each other), their mean with a Student-t interval across sessions, the
standard deviation between sessions beside the median half-width of the sessions' own intervals, and the range of
their A/A nulls.

The estimates are the report's own (softbench.report.speedups: re-estimated from each session's units, and only
where those units give back what the session wrote); this module only groups them."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from softbench.core.numbers import finite_interval
from softbench.core.stats import paired_mean_t_estimate
from softbench.core.tables import fmt
from softbench.predictions.sessions import SessionRecord
from softbench.report.nulls import implied_sd, scatters_wider
from softbench.report.reestimate import EstimateAgainst, against_reference
from softbench.report.speed_figure import stamp
from softbench.report.speedups import Speedup, session_speedups

MIN_SESSIONS = 2  # a kernel timed against the reference once has nothing to replicate


@dataclass(frozen=True)
class Replication:
    """One kernel, in one configuration, against one reference at one shape and quantity on one board, in several
    sessions."""
    gpu: str  # the board's name as the sessions' env.json records it ('NVIDIA H200'); '' where none is recorded
    shape_tag: str
    quantity: str
    kernel: str  # the catalog's variant name (A0, h15-folded)
    config: str  # its configuration label; '' where the kernel reports none (FA4)
    against: str  # the reference's label (ref-fa3)
    sessions: tuple[str, ...]
    estimates_pct: tuple[float, ...]  # speed-up of the kernel over the reference, per session
    intervals_pct: tuple[tuple[float, float] | None, ...]  # each session's own 95% interval; None where it has none
    nulls_pct: tuple[float, ...]  # each session's A/A null (against its baseline), where it timed one

    @property
    def half_widths_pp(self) -> tuple[float, ...]:
        """The sessions' own 95% half-widths, where they have an interval."""
        return tuple((hi - lo) / 2 for lo, hi in (i for i in self.intervals_pct if i is not None))

    @property
    def mean_pct(self) -> float:
        return statistics.fmean(self.estimates_pct)

    @property
    def sd_between_pp(self) -> float:
        return statistics.stdev(self.estimates_pct)

    def t_interval(self, level: float = 0.95) -> tuple[float, float]:
        """Student-t interval of the mean across sessions (each session one observation), as latency's interval
        across pairs of processes takes its mean of their medians."""
        est = paired_mean_t_estimate(self.estimates_pct, level)
        return est.ci_low, est.ci_high


def _null_of(points: list[Speedup], references: list[str]) -> float | None:
    """The session's A/A null against its baseline (not the null's speed-up over a reference)."""
    return next((p.estimate_pct for p in points if p.role == "null" and p.against not in references), None)


def _interval(p: Speedup) -> tuple[float, float] | None:
    """The session's own 95% interval; None where it has none (too few pairs: NaN bounds)."""
    return finite_interval((p.ci_low, p.ci_high))


def replications(recs: list[SessionRecord], min_sessions: int = MIN_SESSIONS,
                 estimate: EstimateAgainst = against_reference) -> tuple[list[Replication], list[str]]:
    """The groups timed in `min_sessions` sessions or more (a goal's status may rest on one session, named as such),
    and one sentence each on what was left out."""
    groups: dict[tuple, list[tuple[str, Speedup, float | None]]] = {}
    partial = 0
    unread: list[str] = []
    for rec in recs:
        references = (rec.summary or {}).get("references") or []
        if not references:
            continue
        if not rec.complete:  # a run cut short is drawn elsewhere, marked; it is no replicate of a full one
            partial += 1
            continue
        points, why = session_speedups(rec, estimate)
        if why:  # a baseline that is not exact attention, or units that do not give back the session's estimates
            unread.append(rec.name)
        null = _null_of(points, references)
        for p in points:
            if p.against in references and p.role in ("baseline", "variant"):
                key = (rec.board, p.shape_tag, p.quantity, p.variant, p.config, p.against)
                groups.setdefault(key, []).append((rec.name, p, null))
    out, single = [], 0
    for key, members in sorted(groups.items()):
        if len(members) < min_sessions:
            single += 1
            continue
        out.append(Replication(*key, sessions=tuple(m[0] for m in members),
                               estimates_pct=tuple(m[1].estimate_pct for m in members),
                               intervals_pct=tuple(_interval(m[1]) for m in members),
                               nulls_pct=tuple(m[2] for m in members if m[2] is not None)))
    notes = []
    if single:
        notes.append(f"{single} kernel(s) timed against a reference in one session only (per board, shape, quantity "
                     "and configuration) are left out")
    if partial:
        notes.append(f"{partial} partial session(s) that timed a reference are left out")
    if unread:
        notes.append(f"{len(unread)} session(s) that timed a reference are left out in whole or in part, their "
                     "baseline not exact attention or their units not giving back their own estimates (the report's "
                     "notes say which): " + ", ".join(stamp(n) for n in unread))
    return out, notes


REPLICATION_COLUMNS = ["GPU", "shape", "quantity", "kernel", "configuration", "against", "sessions",
                       "mean % [95% t, across sessions]", "sd between sessions pp", "own half-width pp (median)",
                       "range %", "A/A nulls %", "sessions (start stamps)"]
# a narrow console's columns (softbench.report.console_view)
REPLICATION_NARROW = ("GPU", "shape", "quantity", "kernel", "against", "sessions", "mean % [95% t, across sessions]",
                      "A/A nulls %")


def _span(values, spec: str = "+.2f") -> str:
    return f"{min(values):{spec}} to {max(values):{spec}}" if values else "-"


def replication_rows(groups: list[Replication]) -> list[list[str]]:
    rows = []
    for g in groups:
        lo, hi = g.t_interval()
        rows.append([g.gpu or "-", g.shape_tag, g.quantity, g.kernel, g.config or "-", g.against,
                     str(len(g.sessions)),
                     f"{g.mean_pct:+.2f} [{lo:+.2f}, {hi:+.2f}]", f"{g.sd_between_pp:.2f}",
                     fmt(statistics.median(g.half_widths_pp) if g.half_widths_pp else None, ".2f"),
                     _span(g.estimates_pct), _span(g.nulls_pct), ", ".join(stamp(n) for n in g.sessions)])
    return rows


def replication_summary(groups: list[Replication], notes: list[str]) -> list[str]:
    """How the table is made, what it left out, and where sessions scatter more than their own intervals say."""
    out = [f"- Every complete latency session that timed a reference kernel: each kernel's speed-up over the "
           f"reference, one value per session, grouped by board, shape, quantity and configuration; groups of "
           f"{MIN_SESSIONS} sessions or more. The interval is Student-t over sessions, so it holds the offsets "
           "between runs that a session's own interval cannot."]
    out += [f"- {n}" for n in notes]
    for g in groups:
        if len(g.half_widths_pp) < 2:
            continue
        implied = implied_sd(g.half_widths_pp)
        if scatters_wider(g.sd_between_pp, g.half_widths_pp):
            out.append(f"- {g.kernel} ({g.config or 'no configuration'}) at {g.shape_tag}, {g.quantity}"
                       f"{' on ' + g.gpu if g.gpu else ''}: "
                       f"{len(g.sessions)} sessions scatter with {g.sd_between_pp:.2f} pp, "
                       f"{g.sd_between_pp / implied:.1f} times what their own intervals imply ({implied:.2f} pp)")
    if not groups:
        out.append(f"- No kernel was timed against a reference in {MIN_SESSIONS} sessions or more of the same "
                   "shape, quantity and configuration.")
    return out
