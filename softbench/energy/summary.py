"""Energy arithmetic: pure functions from power samples and loop records to energy per forward (paper B.3).

A loop record holds the worker's host loop time T (s), its completed forwards N, the loop's start/end on the
monotonic clock, and optionally the NVML total-energy counter (J) read right before and after the loop.

Methods, each reported per loop and per variant:
- `sampled` (the paper's): P = mean power of the sample stream (2 s before to 1 s after the loop) without its
  first `trim_start` and last `trim_end` samples; E = P * T / N. At the default 100 ms interval the trim removes
  about the 2 s before and the 1 s after, so the kept samples are those taken while the loop ran.
- `sampled_in_loop`: the same with the samples chosen by their time stamps inside [t_start, t_end].
- `sampled_no_ramp`: `sampled` without the start-up ramp, the leading kept samples below `ramp_fraction` of the
  kept median (the paper's "first ten retained samples ... below 900 W").
- `counter`: (energy counter at the end - at the start) / N.
No idle power is subtracted in any of them; the idle level is reported beside them."""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np

from softbench.core.errors import MeasurementError
from softbench.core.stats import change_pct

METHODS = ("sampled", "sampled_in_loop", "sampled_no_ramp", "counter")


def trim(values: Sequence, start: int, end: int) -> list:
    """`values` without the first `start` and the last `end` items; refuses when nothing would be left."""
    if start < 0 or end < 0:
        raise ValueError("trim counts must be non-negative")
    if start + end >= len(values):
        raise MeasurementError(f"trimming {start} + {end} samples leaves none of {len(values)}",
                               hint="lengthen the loop (--seconds), sample faster (--interval-ms) or trim less")
    return list(values[start:len(values) - end])


def ramp_length(powers: Sequence[float], fraction: float = 0.9) -> int:
    """How many leading samples stay below `fraction` of the median of `powers` (0: no ramp)."""
    if not 0 < fraction <= 1:
        raise ValueError("ramp fraction must be in (0, 1]")
    if len(powers) == 0:
        return 0
    threshold = fraction * float(np.median(powers))
    for i, p in enumerate(powers):
        if p >= threshold:
            return i
    return len(powers)


def energy_per_forward_mj(mean_power_w: float, loop_s: float, forwards: int) -> float:
    """E = P * T / N, in millijoules."""
    if forwards <= 0:
        raise MeasurementError("the loop completed no forwards")
    if loop_s <= 0:
        raise MeasurementError("the loop time is not positive")
    return mean_power_w * loop_s / forwards * 1e3


def counter_energy_per_forward_mj(energy_start_j: float, energy_end_j: float, forwards: int) -> float:
    """(counter end - counter start) / N, in millijoules. A counter that went backwards was reset: refused."""
    if forwards <= 0:
        raise MeasurementError("the loop completed no forwards")
    if energy_end_j < energy_start_j:
        raise MeasurementError(f"the NVML energy counter went backwards ({energy_start_j} J -> {energy_end_j} J); "
                               "the driver was reloaded or the counter wrapped")
    return (energy_end_j - energy_start_j) / forwards * 1e3


def _mean(xs: Sequence[float]) -> float | None:
    return float(np.mean(xs)) if len(xs) else None


def _median(xs: Sequence[float]) -> float | None:
    return float(np.median(xs)) if len(xs) else None


def summarize_loop(samples: Sequence[dict], loop: dict, trim_start: int = 20, trim_end: int = 10,
                   ramp_fraction: float = 0.9) -> dict:
    """One loop. `samples`: the readings of the sampled stream around the loop (dicts with time_s on the same
    clock as the loop's t_start/t_end, power_w, and optionally sm_clock_mhz, temperature_c, throttled), in time
    order; idle readings are passed as loop['idle_power_w'], not in `samples`. Readings without power are
    counted and left out of the power statistics."""
    forwards, loop_s = int(loop["forwards"]), float(loop["loop_s"])
    t0, t1 = float(loop["t_start"]), float(loop["t_end"])
    stream = [s for s in sorted(samples, key=lambda s: s["time_s"]) if s.get("power_w") is not None]
    kept = trim(stream, trim_start, trim_end)
    powers = [s["power_w"] for s in kept]
    in_loop = [s["power_w"] for s in stream if t0 <= s["time_s"] <= t1]
    ramp = ramp_length(powers, ramp_fraction)
    after_ramp = powers[ramp:]
    mean_p = float(np.mean(powers))
    out: dict = {
        "forwards": forwards,
        "loop_s": loop_s,
        "time_per_forward_ms": loop_s / forwards * 1e3 if forwards else None,
        "samples": len(samples),
        "samples_without_power": len(samples) - len(stream),
        "kept_samples": len(kept),
        "kept_outside_loop": sum(not (t0 <= s["time_s"] <= t1) for s in kept),
        "in_loop_samples": len(in_loop),
        "mean_power_w": mean_p,
        "median_power_w": float(np.median(powers)),
        "max_power_w": float(np.max(powers)),
        "median_sm_clock_mhz": _median([s["sm_clock_mhz"] for s in kept if s.get("sm_clock_mhz") is not None]),
        "max_temperature_c": max((s["temperature_c"] for s in kept if s.get("temperature_c") is not None),
                                 default=None),
        "throttled_samples": sum(bool(s.get("throttled")) for s in kept),
        "ramp": {
            "samples": ramp,
            "threshold_w": ramp_fraction * float(np.median(powers)),
            "fraction_of_median": ramp_fraction,
            "duration_s": (kept[ramp]["time_s"] - kept[0]["time_s"]) if 0 < ramp < len(kept) else 0.0,
            "mean_power_w": _mean(powers[:ramp]),
        },
        "idle_power_w": loop.get("idle_power_w"),
    }
    e = {
        "sampled": energy_per_forward_mj(mean_p, loop_s, forwards),
        "sampled_in_loop": energy_per_forward_mj(float(np.mean(in_loop)), loop_s, forwards) if in_loop else None,
        "sampled_no_ramp": energy_per_forward_mj(float(np.mean(after_ramp)), loop_s, forwards) if after_ramp else None,
        "counter": None,
    }
    if loop.get("energy_start_j") is not None and loop.get("energy_end_j") is not None:
        e["counter"] = counter_energy_per_forward_mj(loop["energy_start_j"], loop["energy_end_j"], forwards)
        out["counter_mean_power_w"] = (loop["energy_end_j"] - loop["energy_start_j"]) / loop_s
    out["energy_per_forward_mj"] = e
    if loop.get("idle_power_w") is not None:
        out["energy_above_idle_per_forward_mj"] = energy_per_forward_mj(mean_p - loop["idle_power_w"], loop_s, forwards)
    return out


def summarize_energy(loops: Sequence[dict], baseline: str) -> dict:
    """Per variant: the mean over its loops of every method, time per forward and mean power; the ratio of each
    other variant to `baseline` per method; and the drift of a variant between its first and last loop.
    `loops`: records with 'variant' and the fields of summarize_loop."""
    by_variant: dict[str, list[dict]] = defaultdict(list)
    for rec in loops:
        by_variant[rec["variant"]].append(rec)
    variants: dict[str, dict] = {}
    for name, recs in by_variant.items():
        energy = {}
        for m in METHODS:
            vals = [r["energy_per_forward_mj"][m] for r in recs if r["energy_per_forward_mj"].get(m) is not None]
            energy[m] = float(np.mean(vals)) if len(vals) == len(recs) else None  # a method missing in any loop: none
        variants[name] = {
            "loops": len(recs),
            "loop_indices": [r["loop"] for r in recs],
            "energy_per_forward_mj": energy,
            "time_per_forward_ms": float(np.mean([r["time_per_forward_ms"] for r in recs])),
            "mean_power_w": float(np.mean([r["mean_power_w"] for r in recs])),
            "forwards": int(sum(r["forwards"] for r in recs)),
            "median_sm_clock_mhz": _median([r["median_sm_clock_mhz"] for r in recs
                                            if r.get("median_sm_clock_mhz") is not None]),
            "idle_power_w": _mean([r["idle_power_w"] for r in recs if r.get("idle_power_w") is not None]),
        }
        if len(recs) >= 2:
            first, last = recs[0], recs[-1]
            drift = {m: change_pct(last["energy_per_forward_mj"].get(m), first["energy_per_forward_mj"].get(m))
                     for m in METHODS}
            variants[name]["drift_first_to_last_pct"] = {m: d for m, d in drift.items() if d is not None}
    ratios: dict[str, dict] = {}
    base = variants.get(baseline)
    if base is not None:
        for name, v in variants.items():
            if name == baseline:
                continue
            r = {m: (v["energy_per_forward_mj"][m] / base["energy_per_forward_mj"][m])
                 if v["energy_per_forward_mj"][m] is not None and base["energy_per_forward_mj"][m] else None
                 for m in METHODS}
            r["time_per_forward"] = v["time_per_forward_ms"] / base["time_per_forward_ms"]
            r["mean_power"] = v["mean_power_w"] / base["mean_power_w"]
            ratios[name] = {"ratio": r, "change_pct": {k: None if x is None else 100.0 * (x - 1.0) for k, x in r.items()}}
    return {"baseline": baseline, "variants": variants, "vs_baseline": ratios}
