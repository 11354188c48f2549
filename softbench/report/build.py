"""Reports of recorded sessions: tables (for the terminal and report.md) and matplotlib figures (PNG, Agg).

Reads sessions and never measures. Every session given is listed; partial ones are drawn too and marked
(hollow markers, "(partial)" in labels and tables); sessions of a kind this module does not draw are listed
as such. Figures:
- latency: speed-up against sequence length, one line per (backend, dtype, mask, baseline-vs-variant) with
  each round's speed-up as small points; speed-up bars per dtype x mask with the per-round sd as whiskers; per
  session, window latency over time per kernel with the SM clock on a twin axis.
- energy: per session, power over time per loop (samples.jsonl: time_s, power_w, sm_clock_mhz) with the
  SM clock on a twin axis; the per-loop numbers of summary.json as a table.
- fidelity: per session, dNLL with its interval per condition (summary.json `conditions`)."""

from __future__ import annotations

import datetime as _dt
import math
import os
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from softbench.core.errors import UsageError
from softbench.predictions.evaluate import SessionRecord, load_sessions
from softbench.latency.render import md_table
from softbench.core.session import atomic_write_text, read_jsonl
from softbench.core.shapes import seq_label

DRAWN_KINDS = ("latency", "energy", "fidelity", "trace")
LOOP_KEYS = ("loop", "label", "kernel", "variant")  # how energy samples name the loop they belong to


@dataclass
class TableData:
    title: str
    columns: list[str]
    rows: list[list[str]]


@dataclass
class Report:
    out_dir: Path
    tables: list[TableData] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    unknown: list[tuple[str, str]] = field(default_factory=list)  # (session, why it is not drawn)
    markdown_path: Path | None = None


# --- small helpers -----------------------------------------------------------------------------------------

def _fmt(v: Any, spec: str = ".2f") -> str:
    if v is None:
        return "-"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    return format(v, spec)


def _mark(rec: SessionRecord) -> str:
    return rec.name + ("" if rec.complete else " (partial)")


def _mask(causal: Any) -> str:
    return {True: "causal", False: "noncausal"}.get(causal, "?")


def _safe_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in text)


def _new_figure(width: float = 8.0, height: float = 4.5):
    # a bare Figure on the Agg canvas: no pyplot state, no display needed
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig


def _file_mode() -> int:
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
        os.chmod(tmp, _file_mode())  # a report is meant to be read by others
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _records(rec: SessionRecord, name: str) -> list[dict]:
    p = Path(rec.path) / name
    return read_jsonl(p) if p.exists() else []


# --- latency ---------------------------------------------------------------------------------------------

def _lat_group(rec: SessionRecord) -> tuple:
    f = rec.facts
    return (f.get("backend", "?"), f.get("dtype", "?"), _mask(f.get("causal")),
            f"{f.get('baseline', '?')} vs {f.get('variant', '?')}")


def latency_table(recs: list[SessionRecord]) -> TableData:
    rows = []
    for r in recs:
        s, f = r.summary, r.facts
        rows.append([_mark(r), str(f.get("backend", "-")), str(f.get("dtype", "-")),
                     seq_label(f["seq"]) if isinstance(f.get("seq"), int) else "-", _mask(f.get("causal")),
                     f"{f.get('baseline', '?')} vs {f.get('variant', '?')}", _fmt(s.get("speedup_pct"), "+.2f"),
                     _fmt(s.get("per_round_sd_pp"), ".2f"),
                     ", ".join(f"{x:+.2f}" for x in s.get("per_round_speedup_pct") or []) or "-",
                     ", ".join(f"{k} {v:.4f}" for k, v in (s.get("median_ms") or {}).items()) or "-"])
    return TableData("latency sessions", ["session", "backend", "dtype", "seq", "mask", "comparison",
                                          "speed-up %", "per-round sd pp", "per-round %", "median ms"], rows)


def _seq_axis(ax, seqs) -> None:
    """A speed-up axis over sequence lengths: log2 x with the lengths as ticks, a zero line."""
    seqs = sorted(seqs)
    ax.set_xscale("log", base=2)
    ax.set_xticks(seqs)
    ax.set_xticklabels([seq_label(s) for s in seqs])
    ax.minorticks_off()
    ax.axhline(0.0, color="0.5", lw=0.8)
    ax.set_xlabel("sequence length")


def plot_speedup_vs_seq(recs: list[SessionRecord], path: Path) -> Path | None:
    groups: dict[tuple, list[SessionRecord]] = defaultdict(list)
    for r in recs:
        if isinstance(r.facts.get("seq"), int) and r.summary.get("speedup_pct") is not None:
            groups[_lat_group(r)].append(r)
    if not groups:
        return None
    fig = _new_figure()
    ax = fig.add_subplot(1, 1, 1)
    for i, (key, members) in enumerate(sorted(groups.items())):
        color = f"C{i % 10}"
        members.sort(key=lambda r: r.facts["seq"])
        xs = [r.facts["seq"] for r in members]
        ax.plot(xs, [r.summary["speedup_pct"] for r in members], "-", color=color, label=" ".join(key))
        for r in members:
            face = color if r.complete else "none"
            ax.plot([r.facts["seq"]], [r.summary["speedup_pct"]], "o", color=color, markerfacecolor=face, ms=7)
            rounds = r.summary.get("per_round_speedup_pct") or []
            ax.plot([r.facts["seq"]] * len(rounds), rounds, ".", color=color, alpha=0.6, ms=5)
    _seq_axis(ax, {r.facts["seq"] for m in groups.values() for r in m})
    ax.set_ylabel("speed-up % (pooled medians)")
    ax.set_title("speed-up against sequence length (small points: rounds; hollow: partial session)")
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def plot_speedup_bars(recs: list[SessionRecord], path: Path) -> Path | None:
    """Bars per dtype x mask (one bar per session, grouped by seq) with per-round sd whiskers; one panel per
    backend and comparison."""
    usable = [r for r in recs if r.summary.get("speedup_pct") is not None]
    if not usable:
        return None
    panels: dict[tuple, list[SessionRecord]] = defaultdict(list)
    for r in usable:
        b, _, _, comp = _lat_group(r)
        panels[(b, comp)].append(r)
    fig = _new_figure(8.0, 3.8 * len(panels))
    for pi, (pkey, members) in enumerate(sorted(panels.items())):
        ax = fig.add_subplot(len(panels), 1, pi + 1)
        cats = sorted({(r.facts.get("dtype", "?"), _mask(r.facts.get("causal"))) for r in members})
        seqs = sorted({r.facts.get("seq") for r in members if isinstance(r.facts.get("seq"), int)})
        colors = {s: f"C{i % 10}" for i, s in enumerate(seqs)}
        for ci, cat in enumerate(cats):
            in_cat = sorted((r for r in members if (r.facts.get("dtype", "?"), _mask(r.facts.get("causal"))) == cat),
                            key=lambda r: (r.facts.get("seq") or 0, r.name))
            width = 0.8 / len(in_cat)
            for j, r in enumerate(in_cat):
                x = ci - 0.4 + width * (j + 0.5)
                seq = r.facts.get("seq")
                sd = r.summary.get("per_round_sd_pp")
                ax.bar(x, r.summary["speedup_pct"], width * 0.9, color=colors.get(seq, "0.6"),
                       hatch=None if r.complete else "//", edgecolor="black", lw=0.5,
                       yerr=sd if sd is not None else None, capsize=3)
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels([f"{d} {m}" for d, m in cats])
        ax.axhline(0.0, color="0.5", lw=0.8)
        ax.set_ylabel("speed-up %")
        ax.set_title(f"{pkey[0]}: {pkey[1]} (whiskers: per-round sd; hatched: partial)", fontsize=10)
        from matplotlib.patches import Patch

        ax.legend(handles=[Patch(color=c, label=seq_label(s)) for s, c in colors.items()], fontsize=8, title="seq")
    return save_figure(fig, path)


def _window_times(windows: list[dict]) -> list[float]:
    """Seconds since the first window, from each record's UTC stamp; the window index where stamps are absent."""
    try:
        stamps = [_dt.datetime.fromisoformat(w["utc"]) for w in windows]
    except (KeyError, TypeError, ValueError):
        return [float(i) for i in range(len(windows))]
    t0 = min(stamps)
    return [(t - t0).total_seconds() for t in stamps]


def plot_windows(rec: SessionRecord, path: Path) -> Path | None:
    windows = _records(rec, "windows.jsonl")
    windows = [w for w in windows if isinstance(w.get("ms_per_call"), (int, float))]
    if not windows:
        return None
    times = _window_times(windows)
    by_label: dict[str, list[tuple[float, dict]]] = defaultdict(list)
    for t, w in zip(times, windows):
        by_label[str(w.get("label", "?"))].append((t, w))
    fig = _new_figure()
    ax = fig.add_subplot(1, 1, 1)
    clock_ax = ax.twinx()
    any_clock = False
    for i, (label, pts) in enumerate(sorted(by_label.items())):
        color = f"C{i % 10}"
        ax.plot([t for t, _ in pts], [w["ms_per_call"] for _, w in pts], "o", color=color, ms=4, label=label)
        clk = [(t, w["gpu_sm_clock_mhz"]) for t, w in pts if isinstance(w.get("gpu_sm_clock_mhz"), (int, float))]
        if clk:
            any_clock = True
            clock_ax.plot([t for t, _ in clk], [c for _, c in clk], "x", color=color, alpha=0.5, ms=4,
                          label=f"{label} SM clock")
    ax.set_xlabel("time since first window, s" if windows[0].get("utc") else "window")
    ax.set_ylabel("ms per call (window)")
    clock_ax.set_ylabel("SM clock, MHz (x)" if any_clock else "SM clock: not recorded")
    ax.set_title(f"{_mark(rec)}: window latencies", fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    return save_figure(fig, path)


# --- energy ----------------------------------------------------------------------------------------------

def _loop_name(rec: dict, fallback: Any) -> str:
    """'0 A0' for a record with a loop index and a variant; else whichever naming key it has."""
    if "loop" in rec and "variant" in rec:
        return f"{rec['loop']} {rec['variant']}"
    return str(next((rec[k] for k in ("name",) + LOOP_KEYS if k in rec), fallback))


def plot_energy(rec: SessionRecord, path: Path) -> Path | None:
    # idle samples are taken before each loop, away from its time axis: the trace shows the loops only
    samples = [s for s in _records(rec, "samples.jsonl")
               if isinstance(s.get("time_s"), (int, float)) and isinstance(s.get("power_w"), (int, float))
               and s.get("phase") != "idle"]
    if not samples:
        return None
    loops: dict[str, list[dict]] = defaultdict(list)
    for s in samples:
        loops[_loop_name(s, "samples")].append(s)
    # one colour per variant, so repeated loops of one kernel read as one family
    kinds = list(dict.fromkeys(str(pts[0].get("variant", name)) for name, pts in loops.items()))
    styles = ["-", "--", "-.", ":"]
    seen: dict[str, int] = defaultdict(int)
    fig = _new_figure()
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
        clk = [s for s in pts if isinstance(s.get("sm_clock_mhz"), (int, float))]
        if clk:
            clock_ax.plot([s["time_s"] for s in clk], [s["sm_clock_mhz"] for s in clk], ".", color=color, ms=2,
                          alpha=0.5)
    ax.set_xlabel("time from the loop's start, s" if "loop" in samples[0] else "time, s")
    ax.set_ylabel("board power, W (lines)")
    clock_ax.set_ylabel("SM clock, MHz (dots)")
    ax.set_title(f"{_mark(rec)}: power per loop", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    return save_figure(fig, path)


def _numeric_leaves(d: dict, prefix: str = "", depth: int = 2) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in d.items():
        if isinstance(v, dict) and depth > 1:
            out.update(_numeric_leaves(v, f"{prefix}{k}.", depth - 1))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[f"{prefix}{k}"] = v
    return out


def _rank(key: str) -> tuple:
    # energy per forward first, then what explains it (time, power, clock), then the rest
    order = ("per_forward", "mean_power_w", "sm_clock", "forwards")
    return (next((i for i, o in enumerate(order) if o in key), len(order)), key)


def _loop_entries(summary: dict) -> list[tuple[str, dict]]:
    """Per-loop mappings of an energy summary, whether kept as a list or as a mapping by name."""
    for k in ("loops", "per_loop", "variants", "kernels"):
        v = summary.get(k)
        if isinstance(v, dict) and v and all(isinstance(x, dict) for x in v.values()):
            return [(str(n), x) for n, x in v.items()]
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            return [(_loop_name(x, i), x) for i, x in enumerate(v)]
    return []


def energy_table(recs: list[SessionRecord], max_fields: int = 8) -> TableData:
    rows = []
    for r in recs:
        entries = _loop_entries(r.summary)
        if not entries:
            rows.append([_mark(r), "-", "no per-loop entries in summary.json"])
        for name, x in entries:
            leaves = _numeric_leaves(x)
            keys = sorted(leaves, key=_rank)[:max_fields]
            rows.append([_mark(r), name, ", ".join(f"{k} {_fmt(leaves[k], '.4g')}" for k in keys) or "-"])
    return TableData("energy sessions", ["session", "loop", "numbers (summary.json)"], rows)


# --- fidelity --------------------------------------------------------------------------------------------

def fidelity_conditions(summary: dict) -> list[tuple[str, dict]]:
    conds = summary.get("conditions")
    if isinstance(conds, dict):
        items = [(str(k), v) for k, v in conds.items() if isinstance(v, dict)]
    elif isinstance(conds, list):
        items = [(str(next((c[k] for k in ("name", "condition", "label") if k in c), i)), c)
                 for i, c in enumerate(conds) if isinstance(c, dict)]
    else:
        items = []
    return [(n, c) for n, c in items if all(isinstance(c.get(k), (int, float)) for k in ("dnll", "ci_low", "ci_high"))]


def fidelity_table(recs: list[SessionRecord]) -> TableData:
    rows = []
    for r in recs:
        for name, c in fidelity_conditions(r.summary):
            resolved = c["ci_low"] > 0 or c["ci_high"] < 0
            rows.append([_mark(r), name, _fmt(c["dnll"], "+.5f"), f"[{c['ci_low']:+.5f}, {c['ci_high']:+.5f}]",
                         _fmt(100 * (math.exp(c["dnll"]) - 1), "+.3f"), "yes" if resolved else "no"])
    return TableData("fidelity sessions", ["session", "condition", "dNLL", "95% interval", "ppl change %",
                                           "resolved"], rows)


def plot_fidelity(rec: SessionRecord, path: Path) -> Path | None:
    conds = fidelity_conditions(rec.summary)
    if not conds:
        return None
    fig = _new_figure(7.0, 1.2 + 0.45 * len(conds))
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
    ax.set_xlabel("dNLL against exact attention (nats/token); filled: interval excludes zero")
    ax.set_title(f"{_mark(rec)}: paired block bootstrap 95% intervals", fontsize=9)
    return save_figure(fig, path)


# --- the report ------------------------------------------------------------------------------------------

# --- traces (paper Table B4 / Figure S2B) ----------------------------------------------------------------------

def _trace_points(rec: SessionRecord) -> list[dict]:
    return sorted((p for p in rec.summary.get("table") or [] if isinstance(p.get("seq"), int)),
                  key=lambda p: (bool(p.get("causal")) is False, p["seq"]))


def trace_table(recs: list[SessionRecord]) -> TableData:
    rows = []
    for r in recs:
        for p in _trace_points(r):
            base, var = p.get("baseline", "A0"), p.get("variant", "A1")
            k, c, nk = p.get("kernel_us") or {}, p.get("call_latency_us") or {}, p.get("non_kernel_pct") or {}
            rows.append([_mark(r), str(r.summary.get("source", "-")), seq_label(p["seq"]), _mask(p.get("causal")),
                         f"{_fmt(k.get(base), '.1f')} / {_fmt(k.get(var), '.1f')}",
                         f"{_fmt(c.get(base), '.1f')} / {_fmt(c.get(var), '.1f')}",
                         _fmt(p.get("kernel_only_speedup_pct"), "+.1f"), _fmt(p.get("call_latency_speedup_pct"), "+.1f"),
                         f"{_fmt(nk.get(base), '.1f')} / {_fmt(nk.get(var), '.1f')}"])
    return TableData("trace sessions (kernel duration against call latency)",
                     ["session", "source", "seq", "mask", "kernel us", "call us", "kernel-only %", "call %",
                      "non-kernel %"], rows)


def plot_trace(rec: SessionRecord, path: Path) -> Path | None:
    """Kernel-only and call-latency speed-up against sequence length from one traced session: where the two
    part, the timed interval is not the kernel."""
    points = [p for p in _trace_points(rec) if p.get("kernel_only_speedup_pct") is not None]
    if not points:
        return None
    fig = _new_figure()
    ax = fig.add_subplot(1, 1, 1)
    for i, causal in enumerate((True, False)):
        pts = [p for p in points if bool(p.get("causal")) is causal]
        if not pts:
            continue
        xs = [p["seq"] for p in pts]
        mask = _mask(causal)
        ax.plot(xs, [p["kernel_only_speedup_pct"] for p in pts], "o-", color=f"C{2 * i}", label=f"kernel only, {mask}")
        ax.plot(xs, [p.get("call_latency_speedup_pct") for p in pts], "s--", color=f"C{2 * i + 1}",
                label=f"call latency, {mask}")
    _seq_axis(ax, {p["seq"] for p in points})
    ax.set_ylabel("speed-up %")
    ax.set_title(f"{rec.name}{'' if rec.complete else ' (PARTIAL)'}: source {rec.summary.get('source', '?')}",
                 fontsize=9)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def _markdown(report: Report, by_kind: dict[str, list[SessionRecord]]) -> str:
    lines = ["# softbench report", "", f"Sessions: {sum(len(v) for v in by_kind.values())}; "
             "partial sessions are marked (partial) and drawn with hollow markers or hatching.", ""]
    for t in report.tables:
        lines += [f"## {t.title}", ""] + md_table(t.columns, t.rows, bar="\\|")
        lines.append("")
    if report.figures:
        lines += ["## figures", ""]
        lines += [f"![{p.stem}]({p.name})" for p in report.figures]
        lines.append("")
    if report.unknown:
        lines += ["## sessions not drawn", ""]
        lines += [f"- `{name}`: {why}" for name, why in report.unknown]
        lines.append("")
    return "\n".join(lines)


def build_report(paths, out_dir: Path | str) -> Report:
    """Read the sessions at `paths`, write figures and report.md under `out_dir`, return what was written."""
    out_dir = Path(out_dir)
    records = load_sessions(paths)  # first: a path that holds no session leaves no empty report folder
    if not records:
        raise UsageError(f"no sessions at {', '.join(map(str, paths))}",
                         hint="give session folders or folders that hold them (each has a status.json)")
    out_dir.mkdir(parents=True, exist_ok=True)
    report = Report(out_dir=out_dir)
    by_kind: dict[str, list[SessionRecord]] = defaultdict(list)
    for r in records:
        by_kind[r.command].append(r)
        if r.problems:
            report.unknown.append((_mark(r), "; ".join(r.problems)))
        if r.command not in DRAWN_KINDS:
            report.unknown.append((_mark(r), f"command {r.command!r}: no figures for this kind"))

    def add(draw, fig_path: Path, rec: SessionRecord | None = None, what: str = "") -> None:
        try:
            done = draw(fig_path)
        except UsageError as e:  # a damaged records file: say so and carry on with the other sessions
            report.unknown.append((_mark(rec) if rec else fig_path.name, f"{what}: {e}"))
            return
        if done is not None:
            report.figures.append(done)
        elif rec is not None:
            report.unknown.append((_mark(rec), f"{what}: nothing to draw"))

    lat = by_kind.get("latency", [])
    if lat:
        report.tables.append(latency_table(lat))
        add(lambda p: plot_speedup_vs_seq(lat, p), out_dir / "latency-speedup-vs-seq.png")
        add(lambda p: plot_speedup_bars(lat, p), out_dir / "latency-speedup-bars.png")
        for r in lat:
            add(lambda p, r=r: plot_windows(r, p), out_dir / f"latency-windows-{_safe_name(r.name)}.png", r,
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
                add(lambda p, r=r, plot=plot: plot(r, p), out_dir / f"{prefix}-{_safe_name(r.name)}.png", r, what)
    report.markdown_path = out_dir / "report.md"
    atomic_write_text(report.markdown_path, _markdown(report, by_kind))
    os.chmod(report.markdown_path, _file_mode())
    return report
