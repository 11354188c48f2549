"""`softbench report`: tables and figures of recorded sessions (any kind; partial sessions included, marked)."""

from __future__ import annotations

import click

from softbench.core.options import ExistingPath, nonempty

MAX_JOBS = 256  # a bound on the worker processes one report may start, far above any one host's useful count


@click.command("report")
@click.argument("paths", nargs=-1, required=True, type=ExistingPath("sessions", file_okay=False))
@click.option("--out", "out_dir", default=None, type=click.Path(file_okay=False),
              help="folder for report.md and the PNGs [default: out/report-<utc-stamp>]")
@click.option("--speed-fidelity-shape", "speed_shape", default=None, metavar="TAG",
              callback=nonempty("fp8-8K-causal-b1h16d128"),
              help="the shape of the speed-against-fidelity figure, as session folders spell it "
                   "(e.g. fp8-8K-causal-b1h16d128) [default: the shape most latency sessions measured]")
@click.option("--session-figures/--no-session-figures", default=True, show_default=True,
              help="draw the figures made one per session (window latencies, timelines, power traces, dNLL "
                   "intervals); over hundreds of sessions they take nearly all of a report's time")
@click.option("--jobs", "-j", type=click.IntRange(1, MAX_JOBS), default=None,
              help="processes drawing the figures and re-estimating sessions against FA3; the report is the "
                   "same for any number "
                   "[default: the CPUs this process may use]")
def command(paths: tuple[str, ...], out_dir: str | None, speed_shape: str | None, session_figures: bool,
            jobs: int | None):
    """Write report.md and PNG figures for the sessions at PATHS (session folders or folders of sessions).

    Latency: speed-up against sequence length, dtype x mask bars, window latencies with the SM clock, and
    every A/A null beside its protocol, kernel count and start order.
    Energy: power traces per loop. Fidelity: dNLL intervals. Latency and fidelity together: one shape's
    speed-ups (against A0, and against FA3 where timed) against each variant's dNLL. Other kinds are listed,
    not drawn."""
    from softbench.core.checks import check_out_dir
    from softbench.core.console import err, out, table
    from softbench.core.workers import available_cpus
    from softbench.report.build import build_report
    from softbench.report.progress import FigureBar
    from softbench.report.console_view import console_view, left_out_note
    from softbench.core.utc import utc_stamp

    # an empty --out is refused by check_out_dir, not taken for the default
    target = check_out_dir(f"out/report-{utc_stamp()}" if out_dir is None else out_dir)
    with err.status("reading sessions") as status, FigureBar(status) as bar:
        rep = build_report(paths, target, speed_shape=speed_shape, session_figures=session_figures, on_figures=bar,
                           jobs=jobs or available_cpus())
    for t in rep.tables:
        view = console_view(t, out.width)
        out.print(table(t.title, view.columns, view.rows))
        note = left_out_note(t, view, str(rep.markdown_path))
        if note:
            out.print(note)
    for name, why in rep.unknown:
        out.print(f"not drawn: {name}: {why}")
    for note in rep.notes:
        out.print(note)
    out.print(f"{len(rep.figures)} figures and {rep.markdown_path} written under {rep.out_dir}")
