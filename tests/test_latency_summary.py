"""The latency summaries' numbers on hand-built windows and units, each computed by hand: the window bootstrap
and outlier count of the paper's rounds, the board readings, a sustained block's numbers, and the paired
summary's per-round estimates, pooled speed-up, TFLOP/s, fastest exact kernel, nulls and the spread between
process pairs."""

from __future__ import annotations

import pytest

from softbench.latency.summary import board_readings, process_pairs, summarize_latency, summarize_paired
from softbench.latency.sustained import block_summary


def _windows(label: str, times: list[float]) -> list[dict]:
    return [{"label": label, "round": 0, "ms_per_call": ms} for ms in times]


def test_the_window_bootstrap_is_of_the_baseline_over_the_variant():
    s = summarize_latency(_windows("A0", [2.0] * 7) + _windows("A1", [1.0] * 7), "A0", "A1", flops=1e12)
    assert s["speedup_pct"] == 100.0
    assert s["bootstrap_ci95_pct"] == [100.0, 100.0]


def test_outliers_are_counted_over_both_kernels_windows():
    # eleven windows, median 1.0, MAD 0.01: the variant's 5.0 ms window is 270 modified z out, the rest under 1.4
    steady = [1.0, 1.01, 0.99, 1.0, 1.02]
    s = summarize_latency(_windows("A0", steady) + _windows("A1", steady + [5.0]), "A0", "A1", flops=1e12)
    assert s["outlier_windows"] == 1


def test_board_readings_take_medians_and_count_only_the_power_cap():
    windows = [{"gpu_sm_clock_mhz": 1000, "gpu_power_w": 500.0, "gpu_throttle_reasons": ["sw_power_cap"]},
               {"gpu_sm_clock_mhz": 1000, "gpu_power_w": 700.0, "gpu_throttle_reasons": ["hw_slowdown"]},
               {"gpu_sm_clock_mhz": 1900, "gpu_power_w": None, "gpu_throttle_reasons": ["sw_power_cap", "sw_thermal"]},
               {"gpu_sm_clock_mhz": None}]
    r = board_readings(windows)
    assert r == {"windows": 4, "sm_clock_mhz_median": 1000.0, "power_w_median": 600.0, "power_capped_windows": 2}


def _units(ms_by_round: dict[int, dict[str, float]], cycles: int = 10) -> list[dict]:
    return [{"label": lbl, "round": rnd, "cycle": c, "ms_per_call": ms}
            for rnd, times in ms_by_round.items() for c in range(cycles) for lbl, ms in times.items()]


KERNELS = {"A0": {"role": "baseline", "variant": "A0"}, "A1": {"role": "variant", "variant": "A1"},
           "ref-fa3": {"role": "reference", "variant": "A0"}}


def test_paired_summary_by_hand():
    # round 0: A0 1.1 ms, A1 1.0 ms (+10%); round 1: A0 1.2 ms (+20%); FA3 slower than A0 throughout
    units = _units({0: {"A0": 1.1, "A1": 1.0, "ref-fa3": 1.3}, 1: {"A0": 1.2, "A1": 1.0, "ref-fa3": 1.3}})
    s = summarize_paired(units, KERNELS, "A0", 1e12, "interleaved", "ms_per_call")
    a1 = s["comparisons"]["A1"]
    assert [r["estimate_pct"] for r in a1["per_round"]] == [pytest.approx(10.0), pytest.approx(20.0)]
    assert a1["paired"]["estimate_pct"] == pytest.approx(15.0)  # the median of ten pairs at 10% and ten at 20%
    assert a1["pooled_speedup_pct"] == pytest.approx(100 * (1.15 / 1.0 - 1))  # pooled medians: 1.15 and 1.0 ms
    assert s["kernels"]["A0"]["tflops"] == pytest.approx(1e12 / 1.15e-3 / 1e12)
    assert s["tflops"]["A1"] == pytest.approx(1000.0)
    # the fastest exact kernel is A0 here: the baseline is exact too
    assert s["best_exact"]["label"] == "A0"
    assert s["vs_best_exact"]["ref-fa3"] == pytest.approx(1.15 / 1.3)


def test_the_null_is_the_one_between_processes_and_the_in_process_twin_is_named_apart():
    twin = {"A0~": {"role": "null", "variant": "A0", "process_of": "A0"}}
    alone = summarize_paired(_units({0: {"A0": 1.0, "A0~": 1.0}}), {"A0": KERNELS["A0"], **twin}, "A0", 1e12,
                             "interleaved", "ms_per_call")
    assert alone["null"] is None and alone["null_pct"] is None and alone["null_in_process"] == "A0~"
    both = summarize_paired(_units({0: {"A0": 1.0, "A0~": 1.0, "A0'": 1.01}}),
                            {"A0": KERNELS["A0"], **twin, "A0'": {"role": "null", "variant": "A0"}}, "A0", 1e12,
                            "interleaved", "ms_per_call")
    assert both["null"] == "A0'" and both["null_in_process"] == "A0~"
    assert both["null_pct"] == pytest.approx(100 * (1.0 / 1.01 - 1))


def test_the_spread_between_process_pairs_is_a_sample_sd():
    # three pairs of processes whose pairs read exactly 0%, 1% and 2%: sd with n - 1 is 1.0 (0.816 with n)
    windows = [{"label": lbl, "round": 0, "cycle": c, "replica": rep, "ms_per_call": ms}
               for c in range(9)
               for lbl, rep, ms in (("A0", 0, 1.0), ("v", c % 3, 1.0 / (1 + (c % 3) / 100)))]
    (c,) = process_pairs(windows, "A0", ["v"], 3)["comparisons"].values()
    assert [p["median_pct"] for p in c["pairs_of_processes"]] == pytest.approx([0.0, 1.0, 2.0])
    assert c["sd_between_pp"] == pytest.approx(1.0)


def test_a_sustained_block_reads_its_measured_windows_only():
    settle = [{"phase": "settle", "ms_per_call": 9.0, "gpu_power_w": 50.0, "gpu_throttled": True}] * 2
    measured = [{"phase": "measure", "ms_per_call": ms, "gpu_power_w": w, "gpu_sm_clock_mhz": 1500}
                for ms, w in ((1.0, 100.0), (1.0, 100.0), (4.0, 400.0))]
    b = block_summary("A0", 1, 0, settle + measured, {"forwards": 300, "energy_j": 6.0, "measure_s": 2.0})
    assert (b["windows"], b["settle_windows"], b["throttled_windows"]) == (3, 2, 0)
    assert b["median_ms"] == 1.0  # the median of 1, 1 and 4 ms
    assert b["power_w_mean"] == 200.0 and b["sm_clock_mhz_mean"] == 1500.0  # power is averaged, as energy is
    assert b["energy_per_forward_mj"] == pytest.approx(20.0)  # 6 J over 300 forwards
    unknown = block_summary("A0", 1, 0, measured, {"energy_j": 6.0})
    assert unknown["forwards"] == 0 and unknown["energy_per_forward_mj"] is None


def test_the_headline_speed_up_and_null_are_the_paired_estimates_not_the_pooled_medians():
    # pairs (1, 1), (2, 1), (4, 4): per-pair 0%, 100%, 0%, median 0%; the pooled medians 2 and 1 ms read +100%
    units = [{"label": lbl, "round": 0, "cycle": c, "ms_per_call": ms}
             for c, (a0, other) in enumerate(((1.0, 1.0), (2.0, 1.0), (4.0, 4.0)))
             for lbl, ms in (("A0", a0), ("A1", other), ("A0'", other))]
    kernels = {"A0": KERNELS["A0"], "A1": KERNELS["A1"], "A0'": {"role": "null", "variant": "A0"}}
    s = summarize_paired(units, kernels, "A0", 1e12, "interleaved", "ms_per_call")
    assert s["comparisons"]["A1"]["pooled_speedup_pct"] == pytest.approx(100.0)
    assert s["speedup_pct"] == 0.0 and s["null_pct"] == 0.0


def test_two_process_pairs_have_a_spread():
    windows = [{"label": lbl, "round": 0, "cycle": c, "replica": rep, "ms_per_call": ms}
               for c in range(4) for lbl, rep, ms in (("A0", 0, 1.0), ("v", c % 2, 1.0 / (1 + (c % 2) / 100)))]
    (c,) = process_pairs(windows, "A0", ["v"], 2)["comparisons"].values()
    assert c["sd_between_pp"] == pytest.approx(0.7071, abs=1e-4)  # 0% and 1%: sd sqrt(0.5) with n - 1
