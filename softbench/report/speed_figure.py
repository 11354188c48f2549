"""The speed-against-fidelity figure: one panel per kernel measured against (the baseline A0, then each reference
such as FA3), x the dNLL of the variant's operator with its paired block bootstrap interval, y the speed-up with
its interval; one marker per variant and quantity, numbered, and under the panels one line per number saying
which latency and fidelity sessions (shape, model, corpus, dtype) the point comes from, then what was not joined."""

from __future__ import annotations

import textwrap
from pathlib import Path

from softbench.core.numbers import finite_interval
from softbench.core.utc import STAMP_PATTERN
from softbench.report.figures import new_figure, save_figure
from softbench.report.records import REFERENCE_WORDS
from softbench.report.speed_fidelity import JoinedPoint, SpeedFidelity
from softbench.report.speedups import PAPER, QUANTITY_NAMES as QUANTITY_LEGEND, Speedup

MARKERS = {"at equal clock": "o", "sustained": "s", PAPER: "^"}
MILLI = 1e3  # dNLL drawn in 10^-3 nats/token: the operators' effects are of that size
XLABEL_CHARS = 75  # a line of the x label at 8 pt within a panel 6 inches wide


def against_name(label: str) -> str:
    """ref-fa3 -> FA3: reference kernels are named by what they are; the baseline by its label."""
    return label[4:].upper() if label.startswith("ref-") else label


def stamp(session: str) -> str:
    """A session by its folder's time stamp (the rest of the name repeats the shape and variants)."""
    m = STAMP_PATTERN.match(session)
    return m.group(0) if m else session


def point_name(p: JoinedPoint) -> str:
    s = p.speed
    return f"{s.label} (A/A null)" if s.role == "null" else s.variant


def configuration(s: Speedup) -> str:
    """The configuration a point's kernel ran in, and the one of the kernel it is measured against where that is
    another (latency --variant-config): a speed-up between two configurations says so."""
    if configs_differ(s):
        return f"{s.config} against {against_name(s.against)} in {s.against_config}"
    return s.config


def configs_differ(s: Speedup) -> bool:
    return bool(s.config and s.against_config and s.config != s.against_config)


def _err(value: float, lo, hi) -> list[list[float]] | None:
    # an interval the session left undefined (too few pairs: NaN) is not drawn rather than drawn as zero
    bounds = finite_interval((lo, hi))
    return None if bounds is None else [[max(value - bounds[0], 0.0)], [max(bounds[1] - value, 0.0)]]


def source_line(i: int, p: JoinedPoint) -> str:
    s, f = p.speed, p.fidelity
    ran = f", ran {f.variant}" if f.variant and f.variant != s.variant else ""
    own = (f" ({s.config.removeprefix('gluon-')} against {s.against_config.removeprefix('gluon-')})"
           if configs_differ(s) else "")
    return (f"[{i}] {point_name(p)}{own}, {s.quantity}, vs {against_name(s.against)}: latency {stamp(s.session)} "
            f"({s.board or 'GPU not recorded'}, {s.backend}{', partial' if not s.complete else ''}); dNLL {f.condition}{ran} from {stamp(f.session)} "
            f"({f.model}, {f.corpus}, {f.dtype}, {f.path} path{', partial' if not f.complete else ''})")


def series_key(p: JoinedPoint) -> tuple[str, str, str]:
    """A colour per variant, backend and board: one variant's speed-ups on an H100 and on an H200 are no
    replicates of each other, so they are not drawn alike."""
    return (p.speed.variant, p.speed.backend, p.speed.board)


def series_label(key: tuple[str, str, str]) -> str:
    variant, backend, board = key
    return f"{variant} ({backend}, {board.removeprefix('NVIDIA ') or 'GPU not recorded'})"


def series_colours(points: list[JoinedPoint]) -> dict[tuple[str, str, str], str]:
    """Each series' colour, in the order the points first name them. A0 in greys, so that the exact kernel reads
    apart from every approximation's colour."""
    series = list(dict.fromkeys(series_key(p) for p in points))
    a0 = [k for k in series if k[0] == "A0"]
    others = [k for k in series if k[0] != "A0"]
    # greys from black to a mid grey, spread evenly: as many as there are A0 series, none repeated
    return {k: (f"{0.6 * a0.index(k) / max(len(a0) - 1, 1):.3f}" if k in a0 else f"C{others.index(k) % 10}")
            for k in series}


def plot_speed_fidelity(sf: SpeedFidelity, path: Path) -> Path | None:
    if not sf.points:
        return None
    from matplotlib.lines import Line2D

    panels = sf.against
    notes = [source_line(i + 1, p) for i, p in enumerate(sf.points)]
    notes += [w for s in sf.skipped for w in textwrap.wrap("not joined: " + s, 190, subsequent_indent="    ")]
    fig = new_figure(6.0 * len(panels), 4.8 + 0.12 * len(notes))
    grid = fig.add_gridspec(2, len(panels), height_ratios=[4.5, 0.8 + 0.12 * len(notes)], hspace=0.5)  # 3-line x labels
    color = series_colours(sf.points)
    for pi, against in enumerate(panels):
        ax = fig.add_subplot(grid[0, pi])
        for i, p in enumerate(sf.points):
            s, f = p.speed, p.fidelity
            if s.against != against:
                continue
            c = color[series_key(p)]
            x = MILLI * f.dnll
            ax.errorbar([x], [s.estimate_pct], xerr=_err(x, MILLI * f.ci_low, MILLI * f.ci_high),
                        yerr=_err(s.estimate_pct, s.ci_low, s.ci_high), fmt=MARKERS.get(s.quantity, "D"), color=c,
                        markerfacecolor=c if s.complete and f.complete else "white", ms=6, capsize=2, lw=0.8,
                        alpha=0.6 if s.role == "null" else 1.0)
            # numbers alternate sides: variants of one operator share their dNLL, so their markers stack
            ax.annotate(str(i + 1), (x, s.estimate_pct), xytext=(4 if i % 2 else -11, 3), textcoords="offset points",
                        fontsize=7)
        ax.axhline(0.0, color="0.5", lw=0.6)
        ax.axvline(0.0, color="0.5", lw=0.6)
        # wrapped to the panel's width: the kernel path's reference is named in a long phrase, and two panels'
        # labels side by side otherwise run into each other
        ax.set_xlabel(textwrap.fill(f"dNLL of the variant's operator at {sf.dtype}, $10^{{-3}}$ nats/token, against "
                                    f"{REFERENCE_WORDS.get(sf.reference, sf.reference)} (paired block bootstrap 95% "
                                    "interval)", XLABEL_CHARS), fontsize=8)
        ax.set_ylabel(f"speed-up against {against_name(against)}, % (95% interval)")
        ax.set_title(f"against {against_name(against)}" + (" (timed in the same session)"
                                                           if against.startswith("ref-") else ""), fontsize=9)
    handles = [Line2D([], [], color=c, marker="o", ls="", label=series_label(k)) for k, c in color.items()]
    handles += [Line2D([], [], color="0.3", marker=MARKERS[q], ls="", label=QUANTITY_LEGEND[q]) for q in MARKERS
                if any(p.speed.quantity == q for p in sf.points)]
    fig.axes[-1].legend(handles=handles, fontsize=7, loc="best", title="hollow: partial session", title_fontsize=7)
    fig.suptitle(f"speed against fidelity at {sf.shape_tag} (latency: shape of the speed-ups; fidelity: model, "
                 f"corpus and dtype per point below)", fontsize=10)
    text_ax = fig.add_subplot(grid[1, :])
    text_ax.axis("off")
    text_ax.text(0.0, 1.0, "\n".join(notes), va="top", ha="left", fontsize=6.5, family="monospace",
                 transform=text_ax.transAxes)
    return save_figure(fig, path)
