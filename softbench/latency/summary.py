"""Summaries of latency windows: pure functions from window records to the numbers a session reports."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from softbench.core import stats


def summarize_latency(windows: list[dict], baseline: str, variant: str, flops: float,
                      n_boot: int = 5000) -> dict:
    """windows: records with 'label', 'round', 'ms_per_call' and optionally 'gpu_sm_clock_mhz' and
    'gpu_throttled'. `baseline`/`variant` are labels (for the null both are A0 under two labels)."""
    by_label: dict[str, list[float]] = defaultdict(list)
    by_round: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    clocks: dict[str, list[float]] = defaultdict(list)
    throttled: dict[str, int] = defaultdict(int)
    for w in windows:
        by_label[w["label"]].append(w["ms_per_call"])
        by_round[w["round"]][w["label"]].append(w["ms_per_call"])
        if w.get("gpu_sm_clock_mhz") is not None:
            clocks[w["label"]].append(w["gpu_sm_clock_mhz"])
        throttled[w["label"]] += bool(w.get("gpu_throttled"))
    out: dict = {"baseline": baseline, "variant": variant, "n_windows": {k: len(v) for k, v in by_label.items()}}
    out["median_ms"] = {k: stats.median(v) for k, v in by_label.items()}
    out["tflops"] = {k: flops / (m * 1e-3) / 1e12 for k, m in out["median_ms"].items()}
    out["sm_clock_mhz_median"] = {k: float(np.median(v)) for k, v in clocks.items()}
    out["sm_clock_mhz_range"] = {k: [float(min(v)), float(max(v))] for k, v in clocks.items()}
    out["throttled_windows"] = dict(throttled)
    if by_label.get(baseline) and by_label.get(variant):
        out["speedup_pct"] = stats.pooled_speedup_pct(by_label[baseline], by_label[variant])
        rounds = sorted(r for r, d in by_round.items() if d.get(baseline) and d.get(variant))
        per_round = [stats.pooled_speedup_pct(by_round[r][baseline], by_round[r][variant]) for r in rounds]
        out["per_round_speedup_pct"] = per_round
        out["per_round_sd_pp"] = stats.population_sd(per_round) if per_round else None
        out["rounds_complete"] = len(rounds)
        lo, hi = stats.bootstrap_speedup_interval(by_label[baseline], by_label[variant], n_boot=n_boot)
        out["bootstrap_ci95_pct"] = [lo, hi]
        out["bootstrap_method"] = "percentile, windows resampled per kernel, 5000 replicates, seed 0"
        all_ms = np.array(by_label[baseline] + by_label[variant])
        out["outlier_windows"] = int(stats.mad_outliers(all_ms).sum())
    else:
        out["speedup_pct"] = None
        out["per_round_speedup_pct"] = []
        out["per_round_sd_pp"] = None
        out["rounds_complete"] = 0
    return out


# --- the interleaved and sustained protocols ---------------------------------------------------------------

QUANTITY = {"interleaved": "at equal clock", "sustained": "sustained"}


def median_or_none(values) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.median(vals)) if vals else None


def board_readings(windows: list[dict]) -> dict:
    """The board's state over `windows`: median SM clock and power, how many were power-capped, how many."""
    return {"windows": len(windows),
            "sm_clock_mhz_median": median_or_none(w.get("gpu_sm_clock_mhz") for w in windows),
            "power_w_median": median_or_none(w.get("gpu_power_w") for w in windows),
            "power_capped_windows": sum("sw_power_cap" in (w.get("gpu_throttle_reasons") or []) for w in windows)}


def paired_estimate(units: list[dict], baseline: str, other: str, kind: str, value_key: str,
                    slot: str | None = None, seed: int = 0) -> dict | None:
    """The paired estimate of `other` against `baseline` over `units` (PairedEstimate.to_dict), None without a
    pair: the median of per-pair speed-ups with a bootstrap over pairs for interleaved windows, the mean with a t
    interval over the few block pairs of sustained. The report re-estimates against a reference kernel with it,
    so that a speed-up against FA3 is computed exactly as the session computed its own."""
    from softbench.latency.schedule import pairs_by_cycle

    b, o = pairs_by_cycle(units, baseline, other, value_key, slot)
    if not b:
        return None
    pct = stats.pair_speedups_pct(b, o)
    if kind == "interleaved":  # `seed`: the bootstrap's (the t interval of sustained blocks draws nothing)
        return stats.paired_median_estimate(pct, seed=seed).to_dict()
    return stats.paired_mean_t_estimate(pct).to_dict()


def summarize_paired(units: list[dict], kernels: dict[str, dict], baseline: str, flops: float, kind: str,
                     value_key: str, windows: list[dict] | None = None, slot: str | None = None) -> dict:
    """The summary of an interleaved or sustained measurement.

    units: the paired units with 'label', 'round', 'cycle' and `value_key` (ms per call): measured windows for
    interleaved, block summaries for sustained. kernels: label -> {'role', 'variant', 'backend'}. windows: every
    measured window (for clocks, power and throttling); defaults to `units`.
    Every comparison is against `baseline`: the paired estimate (median of per-pair speed-ups with a bootstrap
    over pairs for interleaved windows; mean with a t interval over the few block pairs of sustained), and the
    pooled-median speed-up beside it."""
    windows = units if windows is None else windows
    by_label: dict[str, list[float]] = defaultdict(list)
    for u in units:
        by_label[u["label"]].append(u[value_key])
    out: dict = {"protocol_kind": kind, "quantity": QUANTITY[kind], "baseline": baseline,
                 "kernels": {}, "comparisons": {}}
    for label, k in kernels.items():
        ws = [w for w in windows if w["label"] == label]
        med = stats.median(by_label[label]) if by_label.get(label) else None
        entry = {**k, "median_ms": med, "tflops": (flops / (med * 1e-3) / 1e12) if med else None,
                 "units": len(by_label.get(label, [])), **board_readings(ws),
                 "throttled_windows": sum(bool(w.get("gpu_throttled")) for w in ws)}
        if kind == "sustained":
            entry["energy_per_forward_mj"] = median_or_none(u.get("energy_per_forward_mj") for u in units
                                                             if u["label"] == label)
        out["kernels"][label] = entry
    rounds = sorted({u.get("round", 0) for u in units})
    for label, k in kernels.items():
        if label == baseline:
            continue
        paired = paired_estimate(units, baseline, label, kind, value_key, slot)
        if paired is None:
            out["comparisons"][label] = {"role": k["role"], "paired": None, "pooled_speedup_pct": None}
            continue
        per_round = [e for e in (paired_estimate([u for u in units if u.get("round", 0) == r], baseline, label, kind,
                                                 value_key, slot) for r in rounds) if e is not None]
        out["comparisons"][label] = {
            "role": k["role"],
            "paired": paired,
            "pooled_speedup_pct": stats.pooled_speedup_pct(by_label[baseline], by_label[label]),
            "per_round": per_round,
        }
    # the fastest exact kernel measured: the baseline and every reference (the null is the baseline again)
    exact = [lbl for lbl, k in kernels.items() if k["role"] in ("baseline", "reference")
             and out["kernels"][lbl]["median_ms"]]
    if exact:
        best = min(exact, key=lambda lbl: out["kernels"][lbl]["median_ms"])
        best_ms = out["kernels"][best]["median_ms"]
        out["best_exact"] = {"label": best, "median_ms": best_ms, "tflops": out["kernels"][best]["tflops"]}
        # speed relative to the best exact kernel: above 1 is faster than it
        out["vs_best_exact"] = {lbl: best_ms / e["median_ms"] for lbl, e in out["kernels"].items() if e["median_ms"]}
    # compatibility with the paper-protocol summaries that tables and reports read
    out["median_ms"] = {lbl: e["median_ms"] for lbl, e in out["kernels"].items()}
    out["tflops"] = {lbl: e["tflops"] for lbl, e in out["kernels"].items()}
    out["n_windows"] = {lbl: e["windows"] for lbl, e in out["kernels"].items()}
    out["sm_clock_mhz_median"] = {lbl: e["sm_clock_mhz_median"] for lbl, e in out["kernels"].items()}
    out["throttled_windows"] = {lbl: e["throttled_windows"] for lbl, e in out["kernels"].items()}
    variants = [lbl for lbl, k in kernels.items() if k["role"] == "variant"]
    # the null between two processes is "the" null; one inside the baseline's process (--null-in-process) is
    # named apart, so that what reads nulls across sessions compares like with like
    nulls = [lbl for lbl, k in kernels.items() if k["role"] == "null" and not k.get("process_of")]
    twins = [lbl for lbl, k in kernels.items() if k["role"] == "null" and k.get("process_of")]
    out["variants"], out["null"] = variants, (nulls[0] if nulls else None)
    out["null_in_process"] = twins[0] if twins else None
    out["references"] = [lbl for lbl, k in kernels.items() if k["role"] == "reference"]
    head = out["comparisons"].get(variants[0]) if variants else None
    out["variant"] = variants[0] if variants else None
    out["speedup_pct"] = head["paired"]["estimate_pct"] if head and head["paired"] else None
    out["speedup_ci95_pct"] = head["paired"]["ci95_pct"] if head and head["paired"] else None
    nul = out["comparisons"].get(out["null"]) if out["null"] else None
    out["null_pct"] = nul["paired"]["estimate_pct"] if nul and nul["paired"] else None
    out["null_ci95_pct"] = nul["paired"]["ci95_pct"] if nul and nul["paired"] else None
    if kind == "interleaved":
        out["carryover"] = carryover_pct(units, out["median_ms"], value_key)
        out["clock_during_pairs"] = board_readings(windows)
    return out


def carryover_pct(windows: list[dict], median_ms: dict[str, float], value_key: str = "ms_per_call") -> dict:
    """How much the kernel before a window slows it: per predecessor, the median over the windows that follow it
    of 100 (time / that window's kernel's median time - 1). A random order gives every kernel every predecessor
    alike except itself (no kernel follows itself inside a cycle), so a predecessor that slows its successor by
    c% biases that kernel's comparisons by up to about c/n points for n kernels; the A/A null cannot show this,
    since its two processes are the same kernel. A diagnostic, not a correction. `median_ms`: each kernel's
    median over the same windows (the summary's)."""
    after: dict[str, list[float]] = defaultdict(list)
    for w in windows:
        if w.get("predecessor") is not None:
            after[w["predecessor"]].append(stats.change_pct(w[value_key], median_ms[w["label"]]))
    return {"method": "median of 100 (window / its kernel's median - 1) over the windows after each kernel",
            "after_pct": {p: float(np.median(v)) for p, v in sorted(after.items())},
            "windows": {p: len(v) for p, v in sorted(after.items())}}


def process_pairs(windows: list[dict], baseline: str, gated: list[str], processes: int,
                  slot: str | None = None) -> dict:
    """With several processes per kernel (softbench.runtime.replicas): per gated comparison, the median of
    per-pair speed-ups within each pair of processes (the baseline's replica, the other's, as the rotation paired
    them), and across those pairs their mean with a Student-t interval. Two processes of one kernel settle a few
    tenths of a percent apart for a whole run; a bootstrap over window pairs cannot see that offset, the spread
    between process pairs can. `windows`: measured interleaved windows carrying 'replica'; pairs are the
    summary's own (schedule.pairs_by_cycle, `slot` as there)."""
    from softbench.latency.schedule import pairs_by_cycle

    out: dict = {"processes_per_kernel": processes,
                 "method": "median of per-pair speed-ups within each pair of processes; across the pairs of "
                           "processes, their mean with a Student-t 95% interval", "comparisons": {}}
    # each window's time with the replica that ran it, so that the pairing carries both
    tagged = [{**w, "ms_and_replica": (w["ms_per_call"], w.get("replica", 0))} for w in windows]
    for label in gated:
        groups: dict[tuple[int, int], tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
        for (b_ms, b_rep), (o_ms, o_rep) in zip(*pairs_by_cycle(tagged, baseline, label, "ms_and_replica", slot)):
            groups[(b_rep, o_rep)][0].append(b_ms)
            groups[(b_rep, o_rep)][1].append(o_ms)
        pairs = [{"baseline_replica": b, "replica": o, "n_pairs": len(b_ms),
                  "median_pct": float(np.median(stats.pair_speedups_pct(b_ms, o_ms)))}
                 for (b, o), (b_ms, o_ms) in sorted(groups.items())]
        across = stats.paired_mean_t_estimate([p["median_pct"] for p in pairs]).to_dict() if pairs else None
        spread = float(np.std([p["median_pct"] for p in pairs], ddof=1)) if len(pairs) > 1 else None
        out["comparisons"][label] = {"pairs_of_processes": pairs, "across": across, "sd_between_pp": spread}
    return out
