"""Printers for trace sessions and ingested exports. Read-only."""

from __future__ import annotations

from softbench.core.shapes import mask_words, seq_label
from softbench.core.tables import fmt, md_heading, md_table
from softbench.trace.summary import CLOCK_DRIFT_PCT

B4_COLUMNS = ["seq", "mask", "kernel us (base / var)", "call latency us (base / var)", "kernel-only",
              "kernel-only (timed)", "call latency", "non-kernel % (base / var)"]
KERNEL_COLUMNS = ["instances", "median us", "total ms", "GPU time %", "kernel"]


def _pct(x) -> str:
    return "-" if x is None else f"{x:+.1f}%"


def quantity(summary: dict) -> str:
    """What a trace's speed-ups are, and are not: said under every Table B4. Only where every point settled (a
    session recorded before the settle step existed has no `settle` key) are they at each kernel's equilibrium."""
    unsettled = ("Each variant runs in its own process, one after the other, each starting on a board left idle "
                 "while it loaded: these speed-ups are neither at equal clock nor sustained at the power cap, and "
                 "carry no A/A null. `softbench latency` measures both quantities with their null.")
    points = summary.get("points", [])
    if not points:
        return "No point was traced, so there is no speed-up to name."
    if not summary.get("settle"):
        return unsettled
    missed = [p for p in points if (p.get("settle") or {}).get("reason") != "settled"]
    if missed:
        return (f"Settling was asked for, but {len(missed)} of {len(points)} points did not settle (no readings, or "
                f"the time limit). {unsettled}")
    settled = ("Each variant runs in its own process, one after the other, traced after the board's power and SM "
               "clock settled under that kernel's load: the speed-ups compare each kernel at its own equilibrium "
               "under the power cap, over one window each, and carry no A/A null. `softbench latency` "
               "measures both quantities with their null.")
    # a power controller can still swing the clock by several percent within a window of a tenth of a second
    moved = [p for p in points if abs(((p.get("kernel_timed_halves_us") or {}).get("change_pct") or 0.0))
             > CLOCK_DRIFT_PCT]
    if moved:
        return (f"{settled} Even so the clock moved inside {len(moved)} of {len(points)} timed windows (notes): "
                "their medians mix clocks.")
    return settled


def b4_table_rows(summary: dict) -> list[list[str]]:
    rows = []
    for r in summary.get("table", []):
        b, v = r["baseline"], r["variant"]
        k, c, nk = r["kernel_us"], r["call_latency_us"], r["non_kernel_pct"]
        rows.append([seq_label(r["seq"]), mask_words(r["causal"]),
                     f"{fmt(k.get(b), '.3f')} / {fmt(k.get(v), '.3f')}", f"{fmt(c.get(b), '.3f')} / {fmt(c.get(v), '.3f')}",
                     _pct(r.get("kernel_only_speedup_pct")), _pct(r.get("kernel_only_speedup_timed_pct")),
                     _pct(r.get("call_latency_speedup_pct")),
                     f"{fmt(nk.get(b), '.1f')} / {fmt(nk.get(v), '.1f')}"])
    return rows


def _settle_words(rule: dict | None) -> str:
    if not rule:
        return ""
    return (f"calls until power moved by at most {100 * rule['power_rel']:g}% and the SM clock by at most "
            f"{rule['clock_mhz']:g} MHz between two {rule['span_s']:g} s spans "
            f"({rule['min_s']:g}-{rule['max_s']:g} s), then ")


def _timed_words(summary: dict) -> str:
    if summary.get("calls") is not None:
        return f"{summary['calls']} timed calls"
    counts = sorted({p["calls"] for p in summary.get("points", []) if p.get("calls")})
    each = f" ({', '.join(str(c) for c in counts)})" if counts else ""
    return f"as many timed calls as fill {summary.get('window_s'):g} s{each}"


def _settled(verdict: dict | None) -> str:
    """A point's settle step in a few characters: how long, and whether it ended by the rule or by the limit."""
    if not verdict:
        return "-"
    if "elapsed_s" not in verdict:
        return "no readings"
    ended_by = "" if verdict.get("reason") == "settled" else f" ({verdict.get('reason')})"
    return f"{verdict['elapsed_s']:.1f} s{ended_by}"


def point_rows(summary: dict) -> list[list[str]]:
    return [[seq_label(p["seq"]), p["variant"], p["source"], p["kernel_name"][:48], str(p["kernel_instances"]),
             _settled(p.get("settle")), fmt(p["kernel_median_us"], ".3f"), fmt(p.get("kernel_median_timed_us"), ".3f"),
             fmt(p["call_latency_us"], ".3f"), fmt(p["non_kernel_pct"], ".1f")] for p in summary.get("points", [])]


POINT_COLUMNS = ["seq", "variant", "source", "attention kernel", "instances", "settled", "median us (all)",
                 "median us (timed)", "call latency us", "non-kernel %"]


def kernel_rows(table) -> list[list[str]]:
    """table: a trace_ingest.KernelTable, largest total time first."""
    return [[str(r.instances), fmt(None if r.median_ns is None else r.median_ns / 1e3, ".3f"),
             fmt(r.total_ns / 1e6, ".3f"), fmt(r.time_pct, ".1f"), r.name[:160]] for r in table.by_total()]


def point_notes(summary: dict) -> list[str]:
    """Every point's notes, each prefixed with its shape and variant."""
    return [f"{p['shape_tag']} {p['variant']}: {n}" for p in summary.get("points", []) for n in p.get("notes", [])]


def trace_markdown(summary: dict, title: str) -> str:
    lines = md_heading(title, summary)
    tool = summary.get("tool", {})
    lines += [
        f"- source: {summary.get('source')}" + (f" ({tool.get('nsys_version')})" if tool.get("nsys_version") else "")
        + (f"; {tool['note']}" if tool.get("note") else ""),
        f"- backend `{summary.get('backend')}`; variants {', '.join(summary.get('variants', []))} "
        f"(baseline {summary.get('baseline')}); each variant and length in its own process",
        f"- per process: {_settle_words(summary.get('settle'))}{summary.get('warmup')} warm-up + "
        f"{_timed_words(summary)}; call latency = CUDA-event time over the timed calls / calls",
        "",
        "## Table B4 form",
        "",
    ]
    lines += md_table(B4_COLUMNS, b4_table_rows(summary))
    lines += ["", quantity(summary)]
    lines += ["", "## Points", ""] + md_table(POINT_COLUMNS, point_rows(summary), bar="/")
    notes = point_notes(summary)
    if notes:
        lines += ["", "Notes:"] + [f"- {n}" for n in notes]
    lines += [
        "",
        "Kernel = the kernel with the largest total time in the trace, median duration over all traced calls "
        "(nsys: every call inside the CUDA profiler range, the settle step's where it ran, the warm-up and the timed "
        "calls; torch.profiler: a separate pass after the timed window); kernel-only (timed) takes the timed calls' "
        "medians alone (nsys). Speed-up = 100 (base / variant - 1). Non-kernel % = 100 - 100 kernel / call latency; "
        "launch and host work overlap the kernel, so it is not an additive time budget.",
        "",
    ]
    return "\n".join(lines)
