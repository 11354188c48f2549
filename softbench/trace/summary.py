"""The paper's Table B4 from traced points: pure arithmetic over point records.

A point is one variant at one length: the attention kernel's median duration (the kernel with the largest
total time in the trace) and the host call latency (CUDA-event window over the timed calls / calls).
- kernel-only speed-up = 100 (kernel_A0 / kernel_A1 - 1); call-latency speed-up likewise;
- non-kernel share = 100 - 100 kernel / call latency: the part of the timed interval not covered by the
  kernel's median duration. Launch and host work overlap the kernel, so this is not an additive time budget."""

from __future__ import annotations

import numpy as np

from softbench.core.stats import change_pct, speedup_pct

# A traced process runs for a fraction of a second from an idle board, about the time a board takes to reach its
# power cap, so its clock may fall inside the window (on an H100, FA4's BF16 forward at 8K ran 13% slower in the
# second half of its calls than in its first). Beyond this change between the halves a point's medians mix clocks.
CLOCK_DRIFT_PCT = 2.0


# a kernel beside the attention kernel at this share of a trace's GPU time or more is named: a form that launches a
# second kernel per call (the key norms of the proof-carrying Rowmax-H15 forms, 2-3% of GPU time at 8K on an H100)
# is faster by its attention kernel alone than per call
OTHER_KERNEL_NOTE_PCT = 0.5


def kernels_beside(kernels: list[tuple[str, float]], attention: str) -> list[tuple[str, float]]:
    """Of a trace's kernels as (name, total time), those other than `attention` whose share of the total is at least
    OTHER_KERNEL_NOTE_PCT, as (name, share %), largest first."""
    total = sum(t for _, t in kernels)
    if total <= 0:
        return []
    shares = sorted(((name, 100.0 * t / total) for name, t in kernels if name != attention), key=lambda x: -x[1])
    return [(name, pct) for name, pct in shares if pct >= OTHER_KERNEL_NOTE_PCT]


def non_kernel_pct(kernel_us: float, call_latency_us: float) -> float:
    if call_latency_us <= 0:
        raise ValueError("call latency must be positive")
    return 100.0 - 100.0 * kernel_us / call_latency_us


def halves_drift(durations: list[float]) -> dict | None:
    """The median duration of the first and the second half of `durations` (in call order) and the change between
    them in percent (positive: the later calls were slower). None below four durations."""
    if len(durations) < 4:
        return None
    half = len(durations) // 2
    first, second = float(np.median(durations[:half])), float(np.median(durations[-half:]))
    return {"first_half": first, "second_half": second, "change_pct": change_pct(second, first)}


def b4_rows(points: list[dict], baseline: str) -> list[dict]:
    """One row per (length, mask, variant other than the baseline). `points`: records with seq, causal,
    variant, kernel_median_us, call_latency_us and optionally kernel_median_timed_us."""
    by_key: dict[tuple, dict[str, dict]] = {}
    for p in points:
        by_key.setdefault((p["seq"], p["causal"]), {})[p["variant"]] = p
    rows = []
    for (seq, causal), pts in sorted(by_key.items()):
        base = pts.get(baseline)
        for name, v in pts.items():
            if name == baseline:
                continue
            row = {"seq": seq, "causal": causal, "baseline": baseline, "variant": name,
                   "kernel_us": {baseline: base and base["kernel_median_us"], name: v["kernel_median_us"]},
                   "call_latency_us": {baseline: base and base["call_latency_us"], name: v["call_latency_us"]},
                   "kernel_name": {baseline: base and base.get("kernel_name"), name: v.get("kernel_name")},
                   "non_kernel_pct": {name: non_kernel_pct(v["kernel_median_us"], v["call_latency_us"])}}
            if base is not None:
                row["non_kernel_pct"][baseline] = non_kernel_pct(base["kernel_median_us"], base["call_latency_us"])
                row["kernel_only_speedup_pct"] = speedup_pct(base["kernel_median_us"], v["kernel_median_us"])
                row["call_latency_speedup_pct"] = speedup_pct(base["call_latency_us"], v["call_latency_us"])
                bt, vt = base.get("kernel_median_timed_us"), v.get("kernel_median_timed_us")
                row["kernel_only_speedup_timed_pct"] = speedup_pct(bt, vt) if bt and vt else None
            else:
                row["kernel_only_speedup_pct"] = row["call_latency_speedup_pct"] = None
                row["kernel_only_speedup_timed_pct"] = None
            rows.append(row)
    return rows
