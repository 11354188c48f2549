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
