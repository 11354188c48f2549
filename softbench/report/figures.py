"""The report's matplotlib figures (PNG, Agg), one function per figure; each returns the path it wrote or None."""

from __future__ import annotations

import datetime as _dt
import os
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path

from softbench.core.numbers import finite, finite_interval
from softbench.core.shapes import seq_label
from softbench.core.stats import change_pct
from softbench.predictions.sessions import SessionRecord
from softbench.report.records import (REFERENCE_WORDS, bar_label, fidelity_conditions, fidelity_reference, lat_group,
                                      loop_name, marked_name, mask_label, raw_records, trace_points)
from softbench.report.speedups import PAPER, QUANTITY_NAMES, session_quantity


def new_figure(width: float = 8.0, height: float = 4.5):
    # a bare Figure on the Agg canvas: no pyplot state, no display needed
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig


def file_mode() -> int:
    """0666 less the process umask: what open() would have given (mkstemp gives 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def save_figure(fig, path: Path) -> Path:
    """Write a PNG atomically: render into a temporary file next to it, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png", bbox_inches="tight")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, file_mode())  # a report is meant to be read by others
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _seq_axis(ax, seqs) -> None:
    """A speed-up axis over sequence lengths: log2 x with the lengths as ticks, a zero line."""
    seqs = sorted(seqs)
    ax.set_xscale("log", base=2)
    ax.set_xticks(seqs)
    ax.set_xticklabels([seq_label(s) for s in seqs])
    ax.minorticks_off()
    ax.axhline(0.0, color="0.5", lw=0.8)
    ax.set_xlabel("sequence length")


# what a session's speedup_pct is, by quantity: the paired protocols write their paired estimate there, the
# older rounds the ratio of the two kernels' pooled medians
ESTIMATORS = {"at equal clock": "paired estimate", "sustained": "paired estimate", PAPER: "pooled medians"}


def plot_speedup_vs_seq(recs: list[SessionRecord], path: Path) -> Path | None:
    """One line per comparison and quantity: a sustained session and an interleaved one of the same comparison
    measure different things (at the power cap, at an equal clock), and a line through both would read as one."""
    groups: dict[tuple, list[SessionRecord]] = defaultdict(list)
    for r in recs:
        if isinstance(r.facts.get("seq"), int) and r.summary.get("speedup_pct") is not None:
            groups[(*lat_group(r), session_quantity(r))].append(r)
    if not groups:
        return None
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    for i, (key, members) in enumerate(sorted(groups.items())):
        color = f"C{i % 10}"
        members.sort(key=lambda r: r.facts["seq"])
        xs = [r.facts["seq"] for r in members]
        label = f"{' '.join(key[:-1])}, {QUANTITY_NAMES.get(key[-1], key[-1])}"
        ax.plot(xs, [r.summary["speedup_pct"] for r in members], "-", color=color, label=label)
        for r in members:
            face = color if r.complete else "none"
            ax.plot([r.facts["seq"]], [r.summary["speedup_pct"]], "o", color=color, markerfacecolor=face, ms=7)
            rounds = r.summary.get("per_round_speedup_pct") or []
            ax.plot([r.facts["seq"]] * len(rounds), rounds, ".", color=color, alpha=0.6, ms=5)
    _seq_axis(ax, {r.facts["seq"] for m in groups.values() for r in m})
    # the axis names the estimator of every line drawn, the paper rounds' apart where both kinds are drawn
    estimators = {ESTIMATORS.get(key[-1], "as recorded") for key in groups}
    if len(estimators) == 1:
        ax.set_ylabel(f"speed-up % ({estimators.pop()})")
    else:
        ax.set_ylabel("speed-up % (paired estimate; paper rounds: pooled medians)")
    ax.set_title("speed-up against sequence length (small points: rounds; hollow: partial session)")
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def _bar_error(summary: dict) -> tuple[list[float], list[float]] | None:
    """A bar's whisker: the paired 95% interval where the session has one (interleaved, sustained), else the
    per-round sd (the paper's rounds), else none."""
    ci, mid = finite_interval(summary.get("speedup_ci95_pct")), summary["speedup_pct"]
    if ci is not None:  # NaN bounds (too few pairs) draw no whisker, as in the speed/fidelity figure
        return [max(mid - ci[0], 0.0)], [max(ci[1] - mid, 0.0)]
    sd, rounds = finite(summary.get("per_round_sd_pp")), summary.get("per_round_speedup_pct") or []
    # one round's recorded 0.0 is no spread: no whisker rather than one of zero length
    return ([sd], [sd]) if sd is not None and len(rounds) > 1 else None


def plot_speedup_bars(recs: list[SessionRecord], path: Path) -> Path | None:
    """Bars per dtype x mask (one bar per session, grouped by seq), each named under it by its session's start,
    its kernel configuration and, unless at equal clock, its quantity (bar_label); whiskers: the paired 95% interval,
    or the per-round sd where a session has no interval. One panel per backend and comparison."""
    usable = [r for r in recs if r.summary.get("speedup_pct") is not None]
    if not usable:
        return None
    panels: dict[tuple, list[SessionRecord]] = defaultdict(list)
    for r in usable:
        b, _, _, comp = lat_group(r)
        panels[(b, comp)].append(r)
    most = max(len(m) for m in panels.values())
    fig = new_figure(max(8.0, 0.45 * most + 2.0), 5.2 * len(panels))
    fig.set_layout_engine("constrained")  # room below each panel for its rotated bar names
    for pi, (pkey, members) in enumerate(sorted(panels.items())):
        ax = fig.add_subplot(len(panels), 1, pi + 1)
        cats = sorted({(r.facts.get("dtype", "?"), mask_label(r.facts.get("causal"))) for r in members})
        seqs = sorted({r.facts.get("seq") for r in members if isinstance(r.facts.get("seq"), int)})
        colors = {s: f"C{i % 10}" for i, s in enumerate(seqs)}
        ticks, names = [], []
        for ci, cat in enumerate(cats):
            in_cat = sorted((r for r in members if (r.facts.get("dtype", "?"), mask_label(r.facts.get("causal"))) == cat),
                            key=lambda r: (r.facts.get("seq") or 0, r.name))
            width = 0.8 / len(in_cat)
            for j, r in enumerate(in_cat):
                x = ci - 0.4 + width * (j + 0.5)
                ax.bar(x, r.summary["speedup_pct"], width * 0.9, color=colors.get(r.facts.get("seq"), "0.6"),
                       hatch=None if r.complete else "//", edgecolor="black", lw=0.5, yerr=_bar_error(r.summary),
                       capsize=3)
                ticks.append(x)
                names.append(bar_label(r))
        ax.set_xticks(ticks)
        ax.set_xticklabels(names, rotation=90, fontsize=7)
        for ci, (d, m) in enumerate(cats):  # the category under its bars, above the plot
            ax.annotate(f"{d} {m}", (ci, 1.0), xycoords=("data", "axes fraction"), ha="center", va="bottom",
                        fontsize=9)
        ax.axhline(0.0, color="0.5", lw=0.8)
        ax.set_ylabel("speed-up %")
        ax.set_title(f"{pkey[0]}: {pkey[1]} (whiskers: paired 95% interval, or per-round sd; hatched: partial)",
                     fontsize=10, pad=16)
        from matplotlib.patches import Patch

        ax.legend(handles=[Patch(color=c, label=seq_label(s)) for s, c in colors.items()], fontsize=8, title="seq")
    return save_figure(fig, path)


def _window_times(windows: list[dict]) -> list[float]:
    """Seconds since the first window, from each record's UTC stamp; the window index where stamps are absent."""
    try:
        stamps = [_dt.datetime.fromisoformat(w["utc"]) for w in windows]
    except (KeyError, TypeError, ValueError):
        return [float(i) for i in range(len(windows))]
    if len({t.tzinfo is None for t in stamps}) > 1:  # some with a zone, some without: no common clock to read
        return [float(i) for i in range(len(windows))]
    t0 = min(stamps)
    return [(t - t0).total_seconds() for t in stamps]


def plot_windows(rec: SessionRecord, path: Path) -> Path | None:
    windows = raw_records(rec, "windows.jsonl")
    windows = [w for w in windows if finite(w.get("ms_per_call")) is not None]
    if not windows:
        return None
    times = _window_times(windows)
    by_label: dict[str, list[tuple[float, dict]]] = defaultdict(list)
    for t, w in zip(times, windows):
        by_label[str(w.get("label", "?"))].append((t, w))
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    clock_ax = ax.twinx()
    any_clock = False
    for i, (label, pts) in enumerate(sorted(by_label.items())):
        color = f"C{i % 10}"
        ax.plot([t for t, _ in pts], [w["ms_per_call"] for _, w in pts], "o", color=color, ms=4, label=label)
        clk = [(t, w["gpu_sm_clock_mhz"]) for t, w in pts if finite(w.get("gpu_sm_clock_mhz")) is not None]
        if clk:
            any_clock = True
            clock_ax.plot([t for t, _ in clk], [c for _, c in clk], "x", color=color, alpha=0.5, ms=4,
                          label=f"{label} SM clock")
    ax.set_xlabel("time since first window, s" if windows[0].get("utc") else "window")
    ax.set_ylabel("ms per call (window)")
    clock_ax.set_ylabel("SM clock, MHz (x)" if any_clock else "SM clock: not recorded")
    ax.set_title(f"{marked_name(rec)}: window latencies", fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    return save_figure(fig, path)


def plot_energy(rec: SessionRecord, path: Path) -> Path | None:
    # idle samples are taken before each loop, away from its time axis: the trace shows the loops only
    samples = [s for s in raw_records(rec, "samples.jsonl")
               if finite(s.get("time_s")) is not None and finite(s.get("power_w")) is not None
               and s.get("phase") != "idle"]
    if not samples:
        return None
    loops: dict[str, list[dict]] = defaultdict(list)
    for s in samples:
        loops[loop_name(s, "samples")].append(s)
    # one colour per variant, so repeated loops of one kernel read as one family
    kinds = list(dict.fromkeys(str(pts[0].get("variant", name)) for name, pts in loops.items()))
    styles = ["-", "--", "-.", ":"]
    seen: dict[str, int] = defaultdict(int)
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    clock_ax = ax.twinx()
    for name, pts in loops.items():
        kind = str(pts[0].get("variant", name))
        color = f"C{kinds.index(kind) % 10}"
        style = styles[seen[kind] % len(styles)]
        seen[kind] += 1
        pts.sort(key=lambda s: s["time_s"])
        ax.plot([s["time_s"] for s in pts], [s["power_w"] for s in pts], style, color=color, lw=1.2,
                label=f"loop {name}")
        clk = [s for s in pts if finite(s.get("sm_clock_mhz")) is not None]
        if clk:
            clock_ax.plot([s["time_s"] for s in clk], [s["sm_clock_mhz"] for s in clk], ".", color=color, ms=2,
                          alpha=0.5)
    ax.set_xlabel("time from the loop's start, s" if "loop" in samples[0] else "time, s")
    ax.set_ylabel("board power, W (lines)")
    clock_ax.set_ylabel("SM clock, MHz (dots)")
    ax.set_title(f"{marked_name(rec)}: power per loop", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    return save_figure(fig, path)


def plot_fidelity(rec: SessionRecord, path: Path) -> Path | None:
    conds = fidelity_conditions(rec.summary)
    if not conds:
        return None
    fig = new_figure(7.0, 1.2 + 0.45 * len(conds))
    ax = fig.add_subplot(1, 1, 1)
    for i, (name, c) in enumerate(conds):
        resolved = c["ci_low"] > 0 or c["ci_high"] < 0
        lo, hi = min(c["ci_low"], c["dnll"]), max(c["ci_high"], c["dnll"])
        ax.errorbar([c["dnll"]], [i], xerr=[[c["dnll"] - lo], [hi - c["dnll"]]], fmt="o", color="C0",
                    markerfacecolor="C0" if resolved else "white", capsize=3)
    ax.axvline(0.0, color="0.5", lw=0.8)
    ax.set_yticks(range(len(conds)))
    ax.set_yticklabels([n for n, _ in conds])
    ax.invert_yaxis()
    ref = fidelity_reference(rec.summary)
    ax.set_xlabel(f"dNLL against {REFERENCE_WORDS.get(ref, ref)} (nats/token); filled: interval excludes zero")
    ax.set_title(f"{marked_name(rec)}: paired block bootstrap 95% intervals", fontsize=9)
    return save_figure(fig, path)


def plot_trace(rec: SessionRecord, path: Path) -> Path | None:
    """Kernel-only and call-latency speed-up against sequence length from one traced session: where the two
    part, the timed interval is not the kernel."""
    points = [p for p in trace_points(rec) if p.get("kernel_only_speedup_pct") is not None]
    if not points:
        return None
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    for i, causal in enumerate((True, False)):
        pts = [p for p in points if bool(p.get("causal")) is causal]
        if not pts:
            continue
        xs = [p["seq"] for p in pts]
        mask = mask_label(causal)
        ax.plot(xs, [p["kernel_only_speedup_pct"] for p in pts], "o-", color=f"C{2 * i}", label=f"kernel only, {mask}")
        ax.plot(xs, [p.get("call_latency_speedup_pct") for p in pts], "s--", color=f"C{2 * i + 1}",
                label=f"call latency, {mask}")
    _seq_axis(ax, {p["seq"] for p in points})
    ax.set_ylabel("speed-up %")
    ax.set_title(f"{rec.name}{'' if rec.complete else ' (PARTIAL)'}: source {rec.summary.get('source', '?')}",
                 fontsize=9)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def protocol_timeline(rec: SessionRecord) -> dict | None:
    """What the timeline figure draws, from a session of the interleaved or sustained protocol: per comparison the
    per-pair speed-ups against time (interleaved: one pair per cycle; sustained: one pair per cycle of blocks), and
    every measured window's SM clock and power against time. None for other sessions."""
    s = rec.summary or {}
    kind = s.get("protocol_kind")
    if kind not in ("interleaved", "sustained"):
        return None
    windows = [w for w in raw_records(rec, "windows.jsonl") if w.get("phase") in ("measure", "warmup", "settle")
               and finite(w.get("t_s")) is not None]
    if not windows:
        return None
    t0 = min(w["t_s"] for w in windows)
    cells: dict[tuple, list[dict]] = defaultdict(list)
    for w in windows:
        if w.get("phase") == "measure":
            cells[(w.get("round", 0), w["cycle"], w["label"])].append(w)
    base = s.get("baseline")
    cycles = sorted({k[:2] for k in cells})
    pairs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for rc in cycles:
        b = cells.get((*rc, base))
        if not b:
            continue
        # the middle of an even count is the mean of the two middle windows, as the summaries' medians take it
        b_ms = statistics.median(w["ms_per_call"] for w in b)
        for label in s.get("comparisons", {}):
            o = cells.get((*rc, label))
            if o:
                o_ms = statistics.median(w["ms_per_call"] for w in o)
                t = (sum(w["t_s"] for w in b + o) / len(b + o)) - t0
                speedup = change_pct(b_ms, o_ms)  # the other kernel's speed-up over the baseline
                if speedup is not None:
                    pairs[label].append((t, speedup))
    return {"kind": kind, "quantity": s.get("quantity"), "baseline": base, "pairs": dict(pairs),
            "roles": {lbl: c.get("role") for lbl, c in s.get("comparisons", {}).items()},
            "windows": [(w["t_s"] - t0, w["label"], w.get("phase"), w.get("gpu_sm_clock_mhz"), w.get("gpu_power_w"))
                        for w in windows]}


def plot_protocol_timeline(rec: SessionRecord, path: Path) -> Path | None:
    """Two panels over the session's time: the per-pair speed-up of every comparison (the null's and the
    references' too), and the SM clock (and power) of every window, so that what a protocol measures can be seen:
    interleaved pairs share one clock, sustained blocks each settle at their own."""
    data = protocol_timeline(rec)
    if data is None:
        return None
    fig = new_figure(8.0, 6.5)
    top = fig.add_subplot(2, 1, 1)
    bottom = fig.add_subplot(2, 1, 2, sharex=top)
    labels = sorted({w[1] for w in data["windows"]})
    color = {label: f"C{i % 10}" for i, label in enumerate(labels)}  # one colour per kernel in both panels
    for label, pts in sorted(data["pairs"].items()):
        top.plot([t for t, _ in pts], [v for _, v in pts], "o-" if data["kind"] == "sustained" else ".",
                 color=color.get(label, "k"), ms=3, lw=0.8, label=f"{label} ({data['roles'].get(label)})")
    top.axhline(0.0, color="0.5", lw=0.6)
    top.set_ylabel(f"speed-up vs {data['baseline']}, % (per pair)")
    top.set_title(f"{marked_name(rec)}\n{data['kind']} protocol: speed-up {data['quantity']}", fontsize=9)
    if data["pairs"]:
        top.legend(fontsize=7, loc="best")
    else:  # a run stopped before its first pair (in its warm-up): say so, where an empty legend only warns
        top.text(0.5, 0.5, "no pairs measured", transform=top.transAxes, ha="center", va="center")
    power_ax = bottom.twinx()
    any_power = False
    for label in labels:
        ws = [w for w in data["windows"] if w[1] == label and w[3] is not None]
        bottom.plot([w[0] for w in ws], [w[3] for w in ws], ".", color=color[label], ms=2, label=label)
        pw = [w for w in ws if w[4] is not None]
        if pw:
            any_power = True
            power_ax.plot([w[0] for w in pw], [w[4] for w in pw], "-", color=color[label], lw=0.4, alpha=0.4)
    bottom.set_xlabel("time, s (warm-up and settling included)")
    bottom.set_ylabel("SM clock, MHz (dots)")
    power_ax.set_ylabel("power, W (lines)" if any_power else "power: not recorded")
    bottom.legend(fontsize=7, loc="lower left", markerscale=3)
    return save_figure(fig, path)
