"""Printers for trace sessions and ingested exports. Read-only."""

from __future__ import annotations

from softbench.core.shapes import mask_words, seq_label
from softbench.core.tables import fmt, md_heading, md_table

B4_COLUMNS = ["seq", "mask", "kernel us (base / var)", "call latency us (base / var)", "kernel-only", "call latency",
              "non-kernel % (base / var)"]
KERNEL_COLUMNS = ["instances", "median us", "total ms", "GPU time %", "kernel"]


def _pct(x) -> str:
    return "-" if x is None else f"{x:+.1f}%"


def b4_table_rows(summary: dict) -> list[list[str]]:
    rows = []
    for r in summary.get("table", []):
        b, v = r["baseline"], r["variant"]
        k, c, nk = r["kernel_us"], r["call_latency_us"], r["non_kernel_pct"]
        rows.append([seq_label(r["seq"]), mask_words(r["causal"]),
                     f"{fmt(k.get(b), '.3f')} / {fmt(k.get(v), '.3f')}", f"{fmt(c.get(b), '.3f')} / {fmt(c.get(v), '.3f')}",
                     _pct(r.get("kernel_only_speedup_pct")), _pct(r.get("call_latency_speedup_pct")),
                     f"{fmt(nk.get(b), '.1f')} / {fmt(nk.get(v), '.1f')}"])
    return rows


def point_rows(summary: dict) -> list[list[str]]:
    return [[seq_label(p["seq"]), p["variant"], p["source"], p["kernel_name"][:48], str(p["kernel_instances"]),
             fmt(p["kernel_median_us"], ".3f"), fmt(p.get("kernel_median_timed_us"), ".3f"),
             fmt(p["call_latency_us"], ".3f"), fmt(p["non_kernel_pct"], ".1f")] for p in summary.get("points", [])]


POINT_COLUMNS = ["seq", "variant", "source", "attention kernel", "instances", "median us (all)", "median us (timed)",
                 "call latency us", "non-kernel %"]


def kernel_rows(table) -> list[list[str]]:
    """table: a trace_ingest.KernelTable, largest total time first."""
    return [[str(r.instances), fmt(None if r.median_ns is None else r.median_ns / 1e3, ".3f"),
             fmt(r.total_ns / 1e6, ".3f"), fmt(r.time_pct, ".1f"), r.name[:160]] for r in table.by_total()]


def trace_markdown(summary: dict, title: str) -> str:
    lines = md_heading(title, summary)
    tool = summary.get("tool", {})
    lines += [
        f"- source: {summary.get('source')}" + (f" ({tool.get('nsys_version')})" if tool.get("nsys_version") else "")
        + (f"; {tool['note']}" if tool.get("note") else ""),
        f"- backend `{summary.get('backend')}`; variants {', '.join(summary.get('variants', []))} "
        f"(baseline {summary.get('baseline')}); each variant and length in its own process",
        f"- per process: {summary.get('warmup')} warm-up + {summary.get('calls')} timed calls; call latency = CUDA-event "
        "time over the timed calls / calls",
        "",
        "## Table B4 form",
        "",
    ]
    lines += md_table(B4_COLUMNS, b4_table_rows(summary))
    lines += ["", "## Points", ""] + md_table(POINT_COLUMNS, point_rows(summary), bar="/")
    notes = [f"- {p['shape_tag']} {p['variant']}: {n}" for p in summary.get("points", []) for n in p.get("notes", [])]
    if notes:
        lines += ["", "Notes:"] + notes
    lines += [
        "",
        "Kernel = the kernel with the largest total time in the trace, median duration over all traced calls "
        "(nsys: warm-up and timed calls inside the CUDA profiler range; torch.profiler: a separate pass after the "
        "timed window). Speed-up = 100 (base / variant - 1). Non-kernel % = 100 - 100 kernel / call latency; launch "
        "and host work overlap the kernel, so it is not an additive time budget.",
        "",
    ]
    return "\n".join(lines)
