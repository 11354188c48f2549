"""Reports of recorded sessions: tables (for the terminal and report.md) and matplotlib figures (PNG, Agg).

Reads sessions and never measures. Every session given is listed; partial ones are drawn too and marked
(hollow markers, "(partial)" in labels and tables); sessions of a kind this module does not draw are listed
as such. Figures:
- latency: a table with each session's speed-up, its quantity and 95% interval, its A/A null and the variant
  against FA3 where timed; speed-up against sequence length, one line per (backend, dtype, mask,
  baseline-vs-variant, quantity) with each round's speed-up as small points; speed-up bars per dtype x mask with
  the per-round sd as whiskers; per session, window latency over time per kernel with the SM clock on a twin axis.
- A/A nulls: every latency session's null beside its protocol, kernel count and process start order ("not
  measured" where it has none), with misses and signs counted per group (softbench.report.nulls).
- against the reference across sessions: each kernel's speed-up over FA3 (or another reference timed in the same
  run) in every session that timed both, per shape, quantity and configuration, with a t interval across sessions
  (softbench.report.replication). A table, no figure.
- energy: per session, power over time per loop (samples.jsonl: time_s, power_w, sm_clock_mhz) with the
  SM clock on a twin axis; the per-loop numbers of summary.json as a table.
- fidelity: per session, dNLL with its interval per condition (summary.json `conditions`).
- speed against fidelity: where both kinds are given, one shape's speed-ups (against A0 and against FA3 where the
  session timed it) against the dNLL of each variant's operator at the shape's dtype, all from one evaluation (one
  reference, model, text, block length and FP8 rounding; softbench.report.speed_fidelity, .fidelity_match)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

from softbench.core.errors import UsageError
from softbench.core.session import atomic_write_text
from softbench.core.tables import md_table
from softbench.predictions.sessions import SessionRecord, load_sessions
from softbench.report.drawing import PlannedFigure, draw_all
from softbench.report.figures import (file_mode, plot_energy, plot_fidelity, plot_protocol_timeline,
                                      plot_speedup_bars, plot_speedup_vs_seq, plot_trace, plot_windows)
from softbench.report.nulls import NULL_COLUMNS, NULL_NARROW, null_rows, null_summary, null_table_rows
from softbench.report.readable import split_readable
from softbench.report.records import marked_name, safe_name
from softbench.report.reestimate import ReferenceEstimates
from softbench.report.replication import (REPLICATION_COLUMNS, REPLICATION_NARROW, replication_rows,
                                          replication_summary, replications)
from softbench.report.speed_fidelity import choose_shape, describe, join_speed_fidelity, latency_shapes
from softbench.report.speed_figure import plot_speed_fidelity
from softbench.report.tables import (TableData, energy_table, fidelity_table, latency_table, speed_fidelity_table,
                                     trace_table)


DRAWN_KINDS = ("latency", "energy", "fidelity", "trace")


@dataclass
class Report:
    out_dir: Path
    tables: list[TableData] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    unknown: list[tuple[str, str]] = field(default_factory=list)  # (session, why it is not drawn)
    markdown_path: Path | None = None
    sections: list[tuple[str, list[str]]] = field(default_factory=list)  # (heading, Markdown lines) of report.md
    notes: list[str] = field(default_factory=list)  # one sentence each, for the terminal: what was left out


def _markdown(report: Report, by_kind: dict[str, list[SessionRecord]]) -> str:
    lines = ["# softbench report", "", f"Sessions: {sum(len(v) for v in by_kind.values())}; "
             "partial sessions are marked (partial) and drawn with hollow markers or hatching.", ""]
    for t in report.tables:
        lines += [f"## {t.title}", ""] + md_table(t.columns, t.rows, bar="\\|")
        lines += ["", t.caption] if t.caption else []
        lines.append("")
    for title, body in report.sections:
        lines += [f"## {title}", ""] + body + [""]
    if report.figures:
        lines += ["## figures", ""]
        lines += [f"![{p.stem}]({p.name})" for p in report.figures]
        lines.append("")
    if report.unknown:
        lines += ["## sessions not drawn", ""]
        lines += [f"- `{name}`: {why}" for name, why in report.unknown]
        lines.append("")
    return "\n".join(lines)


def build_report(paths, out_dir: Path | str, speed_shape: str | None = None, session_figures: bool = True,
                 on_figures: FigureProgress | None = None, jobs: int = 1) -> Report:
    """Read the sessions at `paths`, write figures and report.md under `out_dir`, return what was written.
    speed_shape: the shape tag of the speed-against-fidelity figure (default: the most common).
    session_figures: False leaves out the figures drawn one per session (windows, timelines, power, dNLL
    intervals, trace speed-ups): at about 0.4 s each they are nearly all of a report's time over hundreds of
    sessions, and the tables and the across-session figures do not need them.
    on_figures: told how many figures will be drawn, then after each one (a progress bar).
    jobs: processes drawing the figures (softbench.report.drawing); the report is the same for any number."""
    out_dir = Path(out_dir)
    records = load_sessions(paths)  # first: a path that holds no session leaves no empty report folder
    if not records:
        raise UsageError(f"no sessions at {', '.join(map(str, paths))}",
                         hint="give session folders or folders that hold them (each has a status.json)")
    estimate = ReferenceEstimates()  # each session's estimates against FA3, read once for every part that shows them
    estimate.prefetch(records, jobs)
    records, unreadable = split_readable(records, estimate)
    # before the folder too: a shape no session measured is refused with nothing written
    shape = choose_shape([r for r in records if r.command == "latency"], speed_shape)
    # drawn in a folder of its own beside out_dir and moved in once complete: a report that fails half way (a
    # session damaged in a way no check foresaw) leaves no figures without their report.md
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.drawing-", dir=out_dir.parent))
    try:
        report = _write_report(records, unreadable, estimate, shape, speed_shape, staging, session_figures,
                               on_figures or FigureProgress(), jobs)
        return _move_into(report, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _move_into(report: Report, out_dir: Path) -> Report:
    """The staged files into out_dir, report.md last, each by an atomic rename; the report's paths follow them."""
    out_dir.mkdir(parents=True, exist_ok=True)
    moved = [*report.figures, report.markdown_path] if report.markdown_path else list(report.figures)
    for f in moved:
        os.replace(f, out_dir / f.name)
    return replace(report, out_dir=out_dir, figures=[out_dir / f.name for f in report.figures],
                   markdown_path=out_dir / report.markdown_path.name if report.markdown_path else None)


class FigureProgress:
    """What build_report tells of its drawing; this one tells nobody."""

    def planned(self, total: int) -> None:
        pass

    def drawn(self) -> None:
        pass


def _write_report(records: list[SessionRecord], unreadable: list[tuple[SessionRecord, str]],
                  estimate: ReferenceEstimates, shape: str | None, speed_shape: str | None, out_dir: Path,
                  session_figures: bool, progress: FigureProgress, jobs: int) -> Report:
    report = Report(out_dir=out_dir)
    planned: list[PlannedFigure] = []  # drawn after the tables, in this order, so that the progress bar has its total
    not_drawn: list[Path] = []  # the per-session figures that --no-session-figures leaves out
    report.unknown += [(marked_name(r), why) for r, why in unreadable]
    by_kind: dict[str, list[SessionRecord]] = defaultdict(list)
    for r in records:
        by_kind[r.command].append(r)
        if r.problems:
            report.unknown.append((marked_name(r), "; ".join(r.problems)))
        if r.command not in DRAWN_KINDS:
            report.unknown.append((marked_name(r), f"command {r.command!r}: no figures for this kind"))

    def add(plot, args: tuple, fig_path: Path, rec: SessionRecord | None = None, what: str = "") -> None:
        if rec is None or session_figures:
            planned.append(PlannedFigure(plot, args, fig_path, rec, what))
        else:
            not_drawn.append(fig_path)

    lat = by_kind.get("latency", [])
    if lat:
        report.tables.append(latency_table(lat, estimate))
        nulls = null_rows(lat)
        if nulls:
            report.tables.append(TableData("A/A nulls", NULL_COLUMNS, null_table_rows(nulls), narrow=NULL_NARROW))
            report.sections.append(("A/A nulls across sessions", null_summary(nulls)))
        if any((r.summary or {}).get("references") for r in lat):
            groups, left_out = replications(lat, estimate=estimate)
            if groups:
                report.tables.append(TableData("against the reference across sessions", REPLICATION_COLUMNS,
                                               replication_rows(groups), narrow=REPLICATION_NARROW))
            report.sections.append(("against the reference across sessions: how it is made",
                                    replication_summary(groups, left_out)))
        add(plot_speedup_vs_seq, (lat,), out_dir / "latency-speedup-vs-seq.png")
        add(plot_speedup_bars, (lat,), out_dir / "latency-speedup-bars.png")
        for r in lat:
            add(plot_windows, (r,), out_dir / f"latency-windows-{safe_name(r.name)}.png", r, "windows.jsonl")
            if (r.summary or {}).get("protocol_kind") in ("interleaved", "sustained"):
                add(plot_protocol_timeline, (r,), out_dir / f"latency-timeline-{safe_name(r.name)}.png", r,
                    "windows.jsonl")
    # kinds drawn one figure per session: (kind, table, figure, file prefix, what the figure reads)
    per_session = (
        ("energy", energy_table, plot_energy, "energy-power", "samples.jsonl"),
        ("fidelity", fidelity_table, plot_fidelity, "fidelity-intervals", "summary.json conditions"),
        ("trace", trace_table, plot_trace, "trace-speedup", "summary.json table"),
    )
    for kind, make_table, plot, prefix, what in per_session:
        recs = by_kind.get(kind, [])
        if recs:
            report.tables.append(make_table(recs))
            for r in recs:
                add(plot, (r,), out_dir / f"{prefix}-{safe_name(r.name)}.png", r, what)
    fid = by_kind.get("fidelity", [])
    if shape and fid:
        sf = join_speed_fidelity(lat, fid, shape, estimate)
        report.tables.append(speed_fidelity_table(sf))
        report.sections.append((f"speed against fidelity at {shape}: how it is drawn",
                                describe(sf, latency_shapes(lat), speed_shape)))
        add(plot_speed_fidelity, (sf,), out_dir / f"speed-vs-fidelity-{safe_name(shape)}.png")
        report.notes += [f"speed against fidelity: not joined: {s}" for s in sf.skipped]
        report.notes += [f"speed against fidelity: not read: {n}" for n in sf.notes]
    elif shape or fid:
        missing = "fidelity session" if shape else "latency session with a speed-up"
        why = f"speed against fidelity: not drawn: no {missing} among the paths to join with"
        report.sections.append(("speed against fidelity", [why]))
        report.notes.append(why)
    progress.planned(len(planned))
    for outcome in draw_all(planned, jobs):
        if outcome.drawn:
            report.figures.append(outcome.path)
        elif outcome.why:
            report.unknown.append((outcome.who, outcome.why))
        progress.drawn()
    if not_drawn:
        n = len(not_drawn)
        why = (f"{n} {'figure' if n == 1 else 'figures'} drawn one per session {'was' if n == 1 else 'were'} left "
               "out (--no-session-figures): window latencies, timelines, power traces, dNLL intervals and trace "
               "speed-ups")
        report.sections.append(("figures left out", [why]))
        report.notes.append(why)
    report.markdown_path = out_dir / "report.md"
    atomic_write_text(report.markdown_path, _markdown(report, by_kind))
    os.chmod(report.markdown_path, file_mode())
    return report

