"""Printers: functions from recorded results to text. They read results and never measure."""

from __future__ import annotations

from softbench.core.tables import fmt, fmt_estimate, fmt_rate, md_heading, md_table
from softbench.latency.exactness import exactness_line

LATENCY_COLUMNS = ["kernel", "median ms/call", "TFLOP/s", "windows", "SM clock MHz (median)", "throttled windows"]
SMOKE_COLUMNS = ["kernel", "rel. error vs FP32 (checked rows)", "activation mean", "compile s"]


def latency_rows(summary: dict) -> list[list[str]]:
    """Rows per kernel label: median ms, TFLOP/s, windows, SM clock median, throttled windows."""
    rows = []
    for label, ms in summary.get("median_ms", {}).items():
        rows.append([
            label, fmt(ms, ".4f"), fmt_rate(summary["tflops"].get(label)),
            str(summary["n_windows"].get(label, 0)), fmt(summary["sm_clock_mhz_median"].get(label), ".0f"),
            str(summary["throttled_windows"].get(label, 0)),
        ])
    return rows


def latency_headline(summary: dict) -> str:
    if summary.get("protocol_kind") in ("interleaved", "sustained"):
        return "\n".join(paired_headline(summary))
    s = summary.get("speedup_pct")
    if s is None:
        return "speed-up: not available (one of the kernels has no windows)"
    per_round = ", ".join(f"{x:+.2f}%" for x in summary["per_round_speedup_pct"])
    lo, hi = summary.get("bootstrap_ci95_pct", [None, None])
    exact = exactness_line(summary.get("exactness"))
    return (f"speed-up of {summary['variant']} over {summary['baseline']} (paper rounds: equal-clock and sustained "
            f"effects mixed): {s:+.2f}% (pooled medians); "
            f"per round {per_round}; per-round sd {fmt(summary['per_round_sd_pp'], '.2f')} pp; "
            f"window bootstrap 95% [{fmt(lo, '+.2f')}, {fmt(hi, '+.2f')}]%"
            + ("" if summary["variant"] == summary["baseline"] else
               f"\nA/A null: not in this run; the paper's rounds pair two kernels (--variant {summary['baseline']} "
               "gives one)")
            + (f"\n{exact}" if exact else ""))


def _estimate(paired: dict | None) -> str:
    if not paired:
        return "not measured"
    estimate = fmt_estimate(paired.get("estimate_pct"), paired.get("ci95_pct"), unit="%",
                            no_interval="(no interval: too few pairs)")
    return f"{estimate} over {paired.get('n_pairs', '?')} pairs"


def process_pair_lines(summary: dict) -> list[str]:
    """With several processes per kernel: each comparison across its pairs of processes (the interval that holds
    the offset between processes, which the bootstrap over window pairs does not)."""
    pp = summary.get("process_pairs")
    if not pp:
        return []
    parts = []
    order = [*summary.get("variants", []), *([summary["null"]] if summary.get("null") else [])]
    for label in [lbl for lbl in order if lbl in pp["comparisons"]]:
        c = pp["comparisons"][label]
        a = c.get("across") or {}
        lo, hi = a.get("ci95_pct") or (float("nan"), float("nan"))
        interval = f"[{lo:+.2f}, {hi:+.2f}]" if lo == lo and hi == hi else "(no interval: one pair of processes)"
        sd = c.get("sd_between_pp")
        parts.append(f"{label} {fmt(a.get('estimate_pct'), '+.2f')}% {interval}"
                     + (f", sd between pairs {sd:.2f} pp" if sd is not None else ""))
    n = len(next(iter(pp["comparisons"].values()))["pairs_of_processes"]) if pp["comparisons"] else 0
    return [f"across {n} pairs of processes ({pp['processes_per_kernel']} per kernel; mean of their medians, t "
            f"interval): " + "; ".join(parts)]


def kernel_configs(summary: dict) -> dict[str, str]:
    """label -> the configuration its worker built (smoke.json's build info), for the kernels that report one
    (softbench's Triton and Gluon kernels; not FA4, the references or the simulation)."""
    configs = {}
    for label, smoke in (summary.get("smoke") or {}).items():
        config = ((smoke or {}).get("build_info") or {}).get("config") or {}
        if isinstance(config.get("label"), str):
            configs[label] = config["label"]
    return configs


def configuration_lines(summary: dict) -> list[str]:
    """Where the variants ran in another configuration than the baseline (--variant-config), which ran where: the
    speed-up is then between two configurations as well as two variants. Nothing when they share one."""
    configs = kernel_configs(summary)
    if len(set(configs.values())) < 2:
        return []
    by_config: dict[str, list[str]] = {}
    for label, config in configs.items():
        by_config.setdefault(config, []).append(label)
    return ["configurations (each kernel in its own): "
            + "; ".join(f"{', '.join(labels)} {config}" for config, labels in by_config.items())]


def paired_headline(summary: dict) -> list[str]:
    """The lines that say what was measured: each variant's speed-up with its quantity and protocol, the A/A
    null of the same run, the fastest exact kernel beside them, and why the measurement stopped."""
    kind, quantity, base = summary["protocol_kind"], summary["quantity"], summary["baseline"]
    comps = summary.get("comparisons", {})
    lines = []
    clock = summary.get("clock_during_pairs") or {}
    # an equal clock is not one fixed clock: the speed-up grows as the power cap lowers the clock, so say which
    at = (f", SM clock {clock['sm_clock_mhz_median']:.0f} MHz median, {clock['power_w_median']:.0f} W"
          if clock.get("sm_clock_mhz_median") and clock.get("power_w_median") else "")
    for v in summary.get("variants", []):
        pooled = comps.get(v, {}).get("pooled_speedup_pct")
        lines.append(f"{v} vs {base}, speed-up {quantity} ({kind} protocol{at}): "
                     f"{_estimate(comps.get(v, {}).get('paired'))}"
                     # a run stopped before its first pair has no pooled medians either: no "-%" for them
                     + (f"; pooled medians {pooled:+.2f}%" if pooled is not None else ""))
    lines += configuration_lines(summary)
    null = summary.get("null")
    if null:
        lines.append(f"A/A null ({null} vs {base}, same run): {_estimate(comps.get(null, {}).get('paired'))}")
    else:
        lines.append("A/A null: not measured in this run (--no-null)")
    twin = summary.get("null_in_process")
    if twin:
        lines.append(f"A/A null inside the baseline's process ({twin} vs {base}: a second allocation of the same "
                     f"inputs): {_estimate(comps.get(twin, {}).get('paired'))}")
    lines += process_pair_lines(summary)
    best = summary.get("best_exact")
    refs = summary.get("references") or []
    if best:
        vs = summary.get("vs_best_exact", {})
        ratios = "; ".join(f"{lbl} / {best['label']} {vs[lbl]:.3f}" for lbl in [base, *summary.get("variants", [])]
                           if lbl in vs)
        lines.append(f"fastest exact kernel timed: {best['label']} ({fmt_rate(best.get('tflops'), '.0f')} TFLOP/s); "
                     f"{ratios}" + ("" if refs else " (no reference kernel timed: add --reference)"))
    exact = exactness_line(summary.get("exactness"))
    if exact:
        lines.append(exact)
    for r in (summary.get("run") or {}).get("rounds", []):
        lines.append(f"round {r['round'] + 1}: {r['pairs']} pairs in {r['measure_s']:.1f} s, stopped: {r['stop_reason']}")
    window = (summary.get("run") or {}).get("window")
    if window and window.get("window_ms_target"):
        lines.append(f"windows: {window['calls']} calls each ({window['window_ms_target']:g} ms of the baseline's "
                     f"{window['sized_from_ms_per_call']:.4f} ms calls)")
    carry = (summary.get("carryover") or {}).get("after_pct")
    if carry:
        lines.append("carry-over (a window after each kernel, against its own kernel's median): "
                     + ", ".join(f"after {p} {c:+.2f}%" for p, c in carry.items()))
    warm = (summary.get("run") or {}).get("warmup")
    if warm:
        lines.append(f"warm-up: {warm['elapsed_s']:.1f} s, {warm['reason']}"
                     + (f" at {warm['power_w']:.0f} W, {warm['sm_clock_mhz']:.0f} MHz" if warm.get("power_w") else ""))
    if summary.get("timings_are", "").startswith("CPU"):
        lines.append(f"note: {summary['timings_are']}")
    return lines


PAIRED_COLUMNS = ["kernel", "role", "median ms/call", "TFLOP/s", "vs fastest exact", "units", "SM MHz (median)",
                  "power W (median)", "power-capped windows"]


def paired_rows(summary: dict) -> list[list[str]]:
    vs = summary.get("vs_best_exact", {})
    rows = []
    for label, k in summary.get("kernels", {}).items():
        row = [label, k["role"], fmt(k["median_ms"], ".4f"), fmt_rate(k["tflops"]), fmt(vs.get(label), ".3f"),
               str(k["units"]), fmt(k["sm_clock_mhz_median"], ".0f"), fmt(k["power_w_median"], ".0f"),
               f"{k['power_capped_windows']}/{k['windows']}"]
        if summary.get("protocol_kind") == "sustained":
            row.append(fmt(k.get("energy_per_forward_mj"), ".2f"))
        rows.append(row)
    return rows


def paired_columns(summary: dict) -> list[str]:
    extra = ["energy/forward mJ"] if summary.get("protocol_kind") == "sustained" else []
    return PAIRED_COLUMNS + extra


def latency_markdown(summary: dict, title: str) -> str:
    lines = md_heading(title, summary)
    shape = summary.get("shape", {})
    paired = summary.get("protocol_kind") in ("interleaved", "sustained")
    lines += [
        f"- backend: `{summary.get('backend')}`; shape: `{summary.get('shape_tag')}` "
        f"(batch {shape.get('batch')}, heads {shape.get('heads')}/{shape.get('kv_heads')}, head dim {shape.get('head_dim')})",
        f"- protocol: {summary.get('protocol')}",
    ]
    if not paired:
        lines.append(f"- order per round: {', '.join(''.join(o) for o in summary.get('order', []))}")
    lines += ["", *latency_headline(summary).splitlines(), ""]
    if paired:
        lines += md_table(paired_columns(summary), paired_rows(summary))
    else:
        lines += md_table(LATENCY_COLUMNS, latency_rows(summary))
    smoke = summary.get("smoke") or {}
    if smoke:
        lines += [""] + md_table(SMOKE_COLUMNS, [
            [label, fmt(s.get("rel_error_vs_fp32"), ".3e"), fmt(s.get("activation_mean"), ".6f"),
             fmt(s.get("compile_s"), ".2f")] for label, s in smoke.items()])
    if paired:
        lines += ["", "Speed-up = 100 (baseline / variant - 1) per pair of units measured next to each other "
                  "(interleaved: one window each, so both at the same SM clock; sustained: one settled block each); "
                  "the estimate and its 95% interval are over pairs (method in summary.json).", ""]
    else:
        lines += ["", "Speed-up = 100 (median A0 / median A1 - 1) over pooled windows; the per-round sd is a spread, "
                  "not a confidence interval.", ""]
    return "\n".join(lines)


# --- a matrix across GPUs (softbench.latency.matrix_index) ---------------------------------------------------

MATRIX_COLUMNS = ["cell", "shape", "phase", "rank", "GPU", "UUID", "state", "speed-up %", "A/A null %",
                  "SM MHz", "W", "session"]
CONTROL_COLUMNS = ["rank", "GPU", "A/A together %", "A/A alone %", "baseline ms together", "baseline ms alone",
                   "together vs alone %", "SM MHz together / alone"]


def matrix_rows(index: dict) -> list[list[str]]:
    rows = [[str(e["cell"]), e.get("shape_tag") or "?", e.get("phase") or "", fmt(e.get("rank"), "d"),
             fmt(e.get("gpu"), "d"),
             (e.get("gpu_uuid") or "-")[:12], e.get("state") or "?",
             fmt_estimate(e.get("speedup_pct"), e.get("speedup_ci95_pct")),
             fmt_estimate(e.get("null_pct"), e.get("null_ci95_pct")),
             fmt(e.get("sm_clock_mhz_median"), ".0f"), fmt(e.get("power_w_median"), ".0f"), e["session"]]
            for e in index["sessions"]]
    rows += [[str(m["cell"]), "", m.get("phase") or "", str(m["rank"]), "", "", "no session", "", "", "", "", ""]
             for m in index["missing"]]
    return rows


def control_rows(index: dict) -> list[list[str]]:
    return [[str(g["rank"]), fmt(g.get("gpu"), "d"), fmt_estimate(g["together_aa"], g["together_aa_ci95"]),
             fmt_estimate(g["alone_aa"], g["alone_aa_ci95"]), fmt(g["together_baseline_ms"], ".4f"),
             fmt(g["alone_baseline_ms"], ".4f"), fmt(g["together_vs_alone_pct"], "+.2f"),
             f"{fmt(g['together_sm_clock_mhz'], '.0f')} / {fmt(g['alone_sm_clock_mhz'], '.0f')}"]
            for g in index["control"]["gpus"]]


def control_overlap(index: dict) -> str:
    c = index["control"]
    return (f"the 'together' sessions measured at the same time for {fmt(c['together_overlap_s'], '.1f')} s "
            f"(each measured for {', '.join(fmt(s, '.1f') for s in c['together_spans_s'])} s)")


def matrix_markdown(index: dict, title: str) -> str:
    lines = md_heading(title, index)
    lines += [f"- {index['kind']} on {index['world_size']} GPU(s), backend `{index['backend']}`, "
              f"{index['baseline']} vs {index['variant']}, protocol {index['protocol_source']} "
              f"({index['protocol']['kind']})", f"- command: `{index['command_line']}`", ""]
    lines += md_table(MATRIX_COLUMNS, matrix_rows(index))
    if index.get("control"):
        lines += ["", "Control: one A/A cell on every GPU at once, then on each GPU alone. 'together vs alone' is "
                  "100 (baseline ms together / alone - 1): above 0, the neighbours slowed this GPU's kernel.", ""]
        lines += md_table(CONTROL_COLUMNS, control_rows(index)) + ["", control_overlap(index) + "."]
    errors = [f"- rank {r['rank']}: {r['error']}" for r in index["ranks"] if r.get("error")]
    if errors:
        lines += ["", "Ranks that stopped:", *errors]
    return "\n".join(lines) + "\n"
