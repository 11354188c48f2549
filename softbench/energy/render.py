"""Printers for energy sessions: tables and Markdown from summary.json. Read-only."""

from __future__ import annotations

from softbench.energy.summary import METHODS
from softbench.core.tables import fmt, md_heading, md_table

LOOP_COLUMNS = ["loop", "kernel", "forwards", "ms/forward", "mean W", "idle W", "mJ (sampled)", "mJ (counter)",
                "ramp samples", "SM MHz", "throttled"]
VARIANT_COLUMNS = ["kernel", "loops", "ms/forward", "mean W", "mJ sampled", "mJ in-loop", "mJ no ramp",
                   "mJ counter", "SM MHz"]


def loop_rows(summary: dict) -> list[list[str]]:
    rows = []
    for lp in summary.get("loops", []):
        e = lp["energy_per_forward_mj"]
        rows.append([str(lp["loop"]), lp["variant"], str(lp["forwards"]), fmt(lp["time_per_forward_ms"], ".4f"),
                     fmt(lp["mean_power_w"], ".1f"), fmt(lp.get("idle_power_w"), ".1f"), fmt(e["sampled"], ".2f"),
                     fmt(e.get("counter"), ".2f"), str(lp["ramp"]["samples"]), fmt(lp.get("median_sm_clock_mhz"), ".0f"),
                     f"{lp.get('throttled_samples', 0)}/{lp['kept_samples']}"])
    return rows


def variant_rows(summary: dict) -> list[list[str]]:
    rows = []
    for name, v in summary.get("variants", {}).items():
        e = v["energy_per_forward_mj"]
        rows.append([name, str(v["loops"]), fmt(v["time_per_forward_ms"], ".4f"), fmt(v["mean_power_w"], ".1f")]
                    + [fmt(e.get(m), ".2f") for m in METHODS] + [fmt(v.get("median_sm_clock_mhz"), ".0f")])
    return rows


def _pct(x) -> str:
    return "n/a" if x is None else f"{x:+.2f}%"


def ratio_lines(summary: dict) -> list[str]:
    base = summary.get("baseline")
    lines = []
    for name, r in summary.get("vs_baseline", {}).items():
        ch = r["change_pct"]
        parts = [f"{m} {_pct(ch.get(m))}" for m in METHODS]
        lines.append(f"{name} vs {base}: energy per forward {', '.join(parts)}; time per forward "
                     f"{_pct(ch['time_per_forward'])}; mean power {_pct(ch['mean_power'])}")
    for name, v in summary.get("variants", {}).items():
        d = v.get("drift_first_to_last_pct")
        if d:
            lines.append(f"drift of {name} from its first to its last loop: "
                         + ", ".join(f"{m} {_pct(x)}" for m, x in d.items()))
    return lines


def energy_markdown(summary: dict, title: str) -> str:
    p = summary.get("protocol", {})
    lines = md_heading(title, summary)
    lines += [
        f"- backend `{summary.get('backend')}`, shape `{summary.get('shape_tag')}`; dtype {summary.get('dtype')}"
        + (f" ({summary['dtype_note']})" if summary.get("dtype_note") else ""),
        f"- order: {', '.join(summary.get('order', []))}; {p.get('seconds')} s loops in chunks of {p.get('chunk')} "
        f"calls (synchronize after each), {p.get('warmup')} warm-up calls; NVML power every {p.get('interval_s')} s "
        f"from {p.get('pre_s')} s before to {p.get('post_s')} s after; idle {p.get('idle_s')} s before each loop",
        f"- trim: first {p.get('trim_start')} and last {p.get('trim_end')} samples; ramp = leading kept samples "
        f"below {p.get('ramp_fraction')} of the kept median",
        "",
        "## Per kernel (mean over its loops), energy per forward in mJ",
        "",
    ]
    lines += md_table(VARIANT_COLUMNS, variant_rows(summary))
    lines += [""] + [f"- {x}" for x in ratio_lines(summary)]
    lines += ["", "## Per loop", ""] + md_table(LOOP_COLUMNS, loop_rows(summary))
    lines += [
        "",
        "E = P T / N: P the mean NVML board power of the kept samples, T the host loop time, N completed forwards; "
        "no idle power subtracted (the idle level is listed). `counter` = NVML total-energy difference over the "
        "timed loop / N. NVML's power reading is the driver's own average on recent GPUs (about 1 s on Ampere and "
        "later, instantaneous on older ones), so single samples lag the load; the counter method does not depend "
        "on it. This is GPU board energy per fused attention forward.",
        "",
    ]
    return "\n".join(lines)
