"""Printers: functions from recorded results to text. They read results and never measure."""

from __future__ import annotations

from softbench.core.tables import fmt, md_heading, md_table

LATENCY_COLUMNS = ["kernel", "median ms/call", "TFLOP/s", "windows", "SM clock MHz (median)", "throttled windows"]
SMOKE_COLUMNS = ["kernel", "rel. error vs FP32 (checked rows)", "activation mean", "compile s"]


def latency_rows(summary: dict) -> list[list[str]]:
    """Rows per kernel label: median ms, TFLOP/s, windows, SM clock median, throttled windows."""
    rows = []
    for label, ms in summary.get("median_ms", {}).items():
        rows.append([
            label, fmt(ms, ".4f"), fmt(summary["tflops"].get(label), ".1f"),
            str(summary["n_windows"].get(label, 0)), fmt(summary["sm_clock_mhz_median"].get(label), ".0f"),
            str(summary["throttled_windows"].get(label, 0)),
        ])
    return rows


def latency_headline(summary: dict) -> str:
    s = summary.get("speedup_pct")
    if s is None:
        return "speed-up: not available (one of the kernels has no windows)"
    per_round = ", ".join(f"{x:+.2f}%" for x in summary["per_round_speedup_pct"])
    lo, hi = summary.get("bootstrap_ci95_pct", [None, None])
    return (f"speed-up of {summary['variant']} over {summary['baseline']}: {s:+.2f}% (pooled medians); "
            f"per round {per_round}; per-round sd {fmt(summary['per_round_sd_pp'], '.2f')} pp; "
            f"window bootstrap 95% [{fmt(lo, '+.2f')}, {fmt(hi, '+.2f')}]%")


def latency_markdown(summary: dict, title: str) -> str:
    lines = md_heading(title, summary)
    shape = summary.get("shape", {})
    lines += [
        f"- backend: `{summary.get('backend')}`; shape: `{summary.get('shape_tag')}` "
        f"(batch {shape.get('batch')}, heads {shape.get('heads')}/{shape.get('kv_heads')}, head dim {shape.get('head_dim')})",
        f"- protocol: {summary.get('protocol')}",
        f"- order per round: {', '.join(''.join(o) for o in summary.get('order', []))}",
        "", latency_headline(summary), "",
    ]
    lines += md_table(LATENCY_COLUMNS, latency_rows(summary))
    smoke = summary.get("smoke") or {}
    if smoke:
        lines += [""] + md_table(SMOKE_COLUMNS, [
            [label, fmt(s.get("rel_error_vs_fp32"), ".3e"), fmt(s.get("activation_mean"), ".6f"),
             fmt(s.get("compile_s"), ".2f")] for label, s in smoke.items()])
    lines += ["", "Speed-up = 100 (median A0 / median A1 - 1) over pooled windows; the per-round sd is a spread, "
              "not a confidence interval.", ""]
    return "\n".join(lines)
