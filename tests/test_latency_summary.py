"""The latency summaries' numbers on hand-built windows and units, each computed by hand: the window bootstrap
and outlier count of the paper's rounds, the board readings, a sustained block's numbers, and the paired
summary's per-round estimates, pooled speed-up, TFLOP/s, fastest exact kernel, nulls and the spread between
process pairs."""

from __future__ import annotations

import pytest

from softbench.latency.summary import (board_readings, carryover_pct, median_or_none, process_pairs, summarize_latency,
                                       summarize_paired)
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


def test_a_round_without_both_kernels_is_not_a_complete_round():
    # round 1 holds the baseline's windows alone (the run stopped before the variant's): no speed-up for it
    windows = _windows("A0", [1.1] * 3) + _windows("A1", [1.0] * 3) + [
        {"label": "A0", "round": 1, "ms_per_call": 1.2}]
    s = summarize_latency(windows, "A0", "A1", flops=1e12)
    assert s["rounds_complete"] == 1
    assert s["per_round_speedup_pct"] == [pytest.approx(10.0)]  # round 0: 1.1 / 1.0 ms


def test_without_a_round_holding_both_kernels_there_is_no_per_round_spread():
    # A0 measured in round 0 only and A1 in round 1 only: a pooled speed-up, but no round to compare within
    windows = _windows("A0", [1.1] * 3) + [{"label": "A1", "round": 1, "ms_per_call": 1.0}] * 3
    s = summarize_latency(windows, "A0", "A1", flops=1e12)
    assert s["speedup_pct"] == pytest.approx(10.0)
    assert (s["rounds_complete"], s["per_round_speedup_pct"], s["per_round_sd_pp"]) == (0, [], None)


def test_every_outlier_window_is_counted():
    # five steady windows near 1.0 ms and one of 5.0 ms in each kernel: two windows far out, counted as two
    steady = [1.0, 1.01, 0.99, 1.0, 1.02]
    s = summarize_latency(_windows("A0", steady + [5.0]) + _windows("A1", steady + [5.0]), "A0", "A1", flops=1e12)
    assert s["outlier_windows"] == 2


def test_the_paper_summary_counts_throttled_windows_and_gives_the_clock_range_low_to_high():
    windows = [{"label": "A0", "round": 0, "ms_per_call": 1.0, "gpu_sm_clock_mhz": mhz, "gpu_throttled": t}
               for mhz, t in ((1900, False), (1500, True), (1700, None))]
    windows += [{"label": "A1", "round": 0, "ms_per_call": 1.0}]  # no readings at all
    s = summarize_latency(windows, "A0", "A1", flops=1e12)
    assert s["throttled_windows"] == {"A0": 1, "A1": 0}
    assert s["sm_clock_mhz_range"] == {"A0": [1500.0, 1900.0]}
    assert s["sm_clock_mhz_median"] == {"A0": 1700.0}


def test_a_zero_reading_is_a_reading_and_none_is_not():
    assert median_or_none([0.0, 0.0, None, 5.0]) == 0.0
    assert median_or_none([None, None]) is None


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


def test_a_kernel_without_pairs_has_no_estimate_and_the_baseline_is_not_compared_with_itself():
    # the reference never ran a window (e.g. it failed to load): it is listed, with nothing to report
    units = _units({0: {"A0": 1.1, "A1": 1.0}})
    s = summarize_paired(units, KERNELS, "A0", 1e12, "interleaved", "ms_per_call")
    assert set(s["comparisons"]) == {"A1", "ref-fa3"}
    assert s["comparisons"]["ref-fa3"] == {"role": "reference", "paired": None, "pooled_speedup_pct": None}
    assert (s["kernels"]["ref-fa3"]["median_ms"], s["kernels"]["ref-fa3"]["units"]) == (None, 0)
    # the fastest exact kernel is the one measured: A0 at 1.1 ms, 1e12 FLOP / 1.1 ms = 909 TFLOP/s
    assert s["best_exact"] == {"label": "A0", "median_ms": 1.1, "tflops": pytest.approx(1e12 / 1.1e-3 / 1e12)}


def test_the_headline_is_the_first_variants_paired_estimate_and_interval():
    # two variants (sweep's --variants): per-pair speed-ups cycle through 8..12% for A1 and 18..22% for A2
    units = [{"label": lbl, "round": 0, "cycle": c, "ms_per_call": ms}
             for c in range(20)
             for lbl, ms in (("A0", 1.0), ("A1", 1 / (1 + (8 + c % 5) / 100)), ("A2", 1 / (1 + (18 + c % 5) / 100)))]
    kernels = {"A0": KERNELS["A0"], "A1": KERNELS["A1"], "A2": {"role": "variant", "variant": "A2"}}
    s = summarize_paired(units, kernels, "A0", 1e12, "interleaved", "ms_per_call")
    first = s["comparisons"]["A1"]["paired"]
    assert s["variants"] == ["A1", "A2"] and s["variant"] == "A1"
    assert s["speedup_pct"] == pytest.approx(10.0)  # the median of 8, 9, 10, 11 and 12%, four times each
    assert s["speedup_ci95_pct"] == first["ci95_pct"]
    lo, hi = s["speedup_ci95_pct"]
    assert lo < hi


def test_a_sustained_summary_counts_blocks_as_units_and_quotes_no_clock_shared_by_both_kernels():
    # sustained blocks each settle at their own kernel's clock: one median over both kernels' windows (what the
    # interleaved headline quotes as its equal clock) would describe neither, nor is there a carry-over
    blocks = [{"label": lbl, "round": 0, "cycle": c, "median_ms": ms} for c in range(2)
              for lbl, ms in (("A0", 1.1), ("A1", 1.0))]
    windows = [{"label": b["label"], "ms_per_call": b["median_ms"], "gpu_sm_clock_mhz": 1500.0,
                "gpu_power_w": 700.0, "gpu_throttled": i == 0} for b in blocks for i in range(3)]
    s = summarize_paired(blocks, {"A0": KERNELS["A0"], "A1": KERNELS["A1"]}, "A0", 1e12, "sustained", "median_ms",
                         windows=windows)
    assert (s["kernels"]["A0"]["units"], s["kernels"]["A0"]["windows"]) == (2, 6)  # 2 blocks of 3 windows
    assert s["kernels"]["A0"]["throttled_windows"] == 2  # the first window of each block
    assert "clock_during_pairs" not in s and "carryover" not in s
    assert s["speedup_pct"] == pytest.approx(10.0)


def test_the_carry_over_is_the_median_over_the_windows_after_each_kernel():
    # after B, A's windows read 0%, 0% and +30% against A's median of 1.0 ms: the median 0%, not the mean +10%
    windows = [{"label": "A", "predecessor": p, "ms_per_call": ms}
               for p, ms in (("B", 1.0), ("B", 1.0), ("B", 1.3), ("A", 1.0), (None, 2.0))]
    c = carryover_pct(windows, {"A": 1.0})
    assert c["after_pct"] == {"A": 0.0, "B": 0.0}
    assert c["windows"] == {"A": 1, "B": 3}  # the run's first window follows nothing


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


def test_a_sustained_blocks_means_skip_windows_without_that_reading():
    # one measured window lacks its power reading and another its clock: each mean is over the others
    measured = [{"phase": "measure", "ms_per_call": 1.0, "gpu_power_w": 100.0, "gpu_sm_clock_mhz": 1500},
                {"phase": "measure", "ms_per_call": 1.0, "gpu_power_w": None, "gpu_sm_clock_mhz": 1700},
                {"phase": "measure", "ms_per_call": 1.0, "gpu_power_w": 300.0}]
    b = block_summary("A0", 0, 0, measured, {})
    assert (b["power_w_mean"], b["sm_clock_mhz_mean"]) == (200.0, 1600.0)


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


def test_each_pair_of_processes_reads_the_median_of_its_pairs_and_pairs_are_listed_in_replica_order():
    # replica 1 of v runs first; its pairs read 0%, 0% and +30%: their median 0%, not the mean +10%
    def pair(c, rep, ms):
        return [{"label": "A0", "round": 0, "cycle": c, "replica": 0, "ms_per_call": 1.0},
                {"label": "v", "round": 0, "cycle": c, "replica": rep, "ms_per_call": ms}]
    windows = [w for c, (rep, ms) in enumerate(((1, 1.0), (0, 1.0), (1, 1.0), (0, 1.0), (1, 1 / 1.3)))
               for w in pair(c, rep, ms)]
    (c,) = process_pairs(windows, "A0", ["v"], 2)["comparisons"].values()
    assert [(p["baseline_replica"], p["replica"], p["n_pairs"]) for p in c["pairs_of_processes"]] == [
        (0, 0, 2), (0, 1, 3)]
    assert [p["median_pct"] for p in c["pairs_of_processes"]] == [0.0, pytest.approx(0.0)]


def test_pairs_of_processes_in_a_circuit_are_taken_by_predecessor():
    # the circuit order pairs windows of one cycle that follow the same kernel: two pairs in this one cycle
    windows = [{"label": lbl, "round": 0, "cycle": 0, "replica": 0, "predecessor": p, "ms_per_call": ms}
               for lbl, p, ms in (("A0", "A0", 1.0), ("v", "A0", 0.9), ("A0", "v", 1.0), ("v", "v", 0.9))]
    (c,) = process_pairs(windows, "A0", ["v"], 2, slot="predecessor")["comparisons"].values()
    assert c["pairs_of_processes"][0]["n_pairs"] == 2
