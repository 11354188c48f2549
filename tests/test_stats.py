"""Statistics on hand-computed cases."""

import numpy as np
import pytest

from softbench.core import stats


def test_speedup_definition():
    # 100 * (1.10 / 1.00 - 1) = 10
    assert stats.speedup_pct(1.10, 1.00) == pytest.approx(10.0)
    assert stats.speedup_pct(1.0, 1.25) == pytest.approx(-20.0)
    with pytest.raises(ValueError):
        stats.speedup_pct(0.0, 1.0)


def test_pooled_median_even_count_interpolates():
    # medians: A0 of [1, 2, 3, 10] = 2.5, A1 of [1, 2, 2, 3] = 2.0 -> +25%
    assert stats.pooled_speedup_pct([1, 2, 3, 10], [1, 2, 2, 3]) == pytest.approx(25.0)


def test_median_and_sd_of_no_values_are_refused():
    # numpy answers nan with a warning; a summary of no windows must not read as a number
    with pytest.raises(ValueError, match="median of no values"):
        stats.median([])
    with pytest.raises(ValueError, match="sd of no values"):
        stats.population_sd([])


def test_population_sd_not_sample_sd():
    # values 1, 3: mean 2, population variance 1
    assert stats.population_sd([1.0, 3.0]) == pytest.approx(1.0)
    assert stats.population_sd([5.0]) == 0.0


def test_window_bootstrap_degenerate_and_reproducible():
    lo, hi = stats.bootstrap_speedup_interval([2.0] * 7, [1.0] * 7)
    assert lo == pytest.approx(100.0) and hi == pytest.approx(100.0)
    a = stats.bootstrap_speedup_interval([1, 1.1, 1.2, 0.9], [1, 1, 1.05, 0.95], seed=3)
    b = stats.bootstrap_speedup_interval([1, 1.1, 1.2, 0.9], [1, 1, 1.05, 0.95], seed=3)
    assert a == b and a[0] <= a[1]


def test_paired_block_bootstrap_hand_case():
    # two blocks with differences 0 and 1: every replicate mean is 0, 0.5 or 1 with probabilities 1/4, 1/2, 1/4
    res = stats.paired_block_bootstrap([0.0, 1.0], n_boot=20000, seed=0)
    assert res.mean == 0.5
    assert res.ci_low == 0.0 and res.ci_high == 1.0
    assert not res.resolved
    shifted = stats.paired_block_bootstrap([1.0, 2.0], n_boot=2000, seed=0)
    assert shifted.resolved and shifted.ci_low == 1.0


def test_paired_block_bootstrap_reports_the_mean_not_the_median():
    # differences 0, 0, 3: mean 1, median 0
    assert stats.paired_block_bootstrap([0.0, 0.0, 3.0], n_boot=200, seed=0).mean == 1.0


def test_bootstrap_indices_shared_across_conditions():
    idx = stats.bootstrap_indices(97, n_boot=5000, seed=0)
    assert idx.shape == (5000, 97)
    d1 = np.arange(97, dtype=float)
    r1 = stats.paired_block_bootstrap(d1, indices=idx)
    r2 = stats.paired_block_bootstrap(d1 * 2, indices=idx)
    assert r2.ci_low == pytest.approx(2 * r1.ci_low) and r2.ci_high == pytest.approx(2 * r1.ci_high)
    with pytest.raises(ValueError):
        stats.paired_block_bootstrap(np.zeros(5), indices=idx)


def test_mad_outliers_flags_only_the_outlier():
    mask = stats.mad_outliers([1.0, 1.01, 0.99, 1.0, 1.02, 5.0])
    assert mask.tolist() == [False] * 5 + [True]


def test_change_pct_is_none_where_there_is_nothing_to_divide_by():
    assert stats.change_pct(110.0, 100.0) == pytest.approx(10.0)
    assert stats.change_pct(90.0, 100.0) == pytest.approx(-10.0)
    assert stats.change_pct(1.0, 0) is None and stats.change_pct(None, 1.0) is None
    assert stats.change_pct(1.0, None) is None
    # a speed-up is the baseline's time relative to the variant's
    assert stats.change_pct(1.2, 1.0) == pytest.approx(stats.speedup_pct(1.2, 1.0))


def test_an_interval_that_ends_at_zero_is_not_resolved():
    # resample means of [-1, 0] are -1, -0.5 or 0, each end with probability 1/4: the interval is [-1, 0] exactly
    res = stats.paired_block_bootstrap([-1.0, 0.0], n_boot=2000, seed=0)
    assert (res.ci_low, res.ci_high) == (-1.0, 0.0)
    assert not res.resolved
    assert stats.paired_block_bootstrap([1.0, 2.0], n_boot=2000, seed=0).resolved


def test_an_interval_wholly_below_zero_is_resolved():
    # resample means of [-2, -1] lie in [-2, -1]: the interval excludes zero on the negative side
    res = stats.paired_block_bootstrap([-2.0, -1.0], n_boot=2000, seed=0)
    assert res.ci_high == -1.0 and res.resolved


def test_mad_outliers_uses_the_normal_consistency_constant():
    # median 1.5, MAD 1.0: 6.7 lies 5.2 MADs out, modified z 0.6745 * 5.2 = 3.51 > 3.5; 6.6 gives 3.44
    assert stats.mad_outliers([0, 2, 0, 2, 1, 6.7]).tolist() == [False] * 5 + [True]
    assert not stats.mad_outliers([0, 2, 0, 2, 1, 6.6]).any()


def test_mad_outliers_threshold_is_strict_and_no_spread_flags_nothing():
    # median 3, MAD 1: 1 and 5 score 0.6745 * 2 exactly, which is not above a threshold of the same value
    assert not stats.mad_outliers([1.0, 2.0, 3.0, 4.0, 5.0], threshold=0.6745 * 2).any()
    assert stats.mad_outliers([1.0, 2.0, 3.0, 4.0, 5.0], threshold=1.3).tolist() == [True, False, False, False, True]
    # MAD 0 (most values equal): no scale to measure by, so nothing is flagged
    assert not stats.mad_outliers([1.0, 1.0, 1.0, 1.0, 5.0]).any()


def test_moving_block_length_rounds_the_cube_root():
    assert [stats.moving_block_length(n) for n in (1, 7, 20, 125, 1000)] == [1, 2, 3, 5, 10]


def test_moving_blocks_may_start_anywhere_a_whole_block_fits():
    idx = stats.moving_block_indices(10, 3, 2000, np.random.default_rng(0))
    assert idx.shape == (2000, 10)
    assert set(idx[:, 0].tolist()) == set(range(8))  # starts 0..7: the block 7, 8, 9 included
    assert ((idx[:, 1] - idx[:, 0]) == 1).all()  # a block runs over consecutive pairs


def test_paired_median_gives_an_interval_from_the_minimum_pair_count():
    few = stats.paired_median_estimate(range(stats.MIN_BOOTSTRAP_PAIRS - 1))
    assert np.isnan(few.ci_low) and np.isnan(few.ci_high) and "no interval" in few.method
    enough = stats.paired_median_estimate(range(stats.MIN_BOOTSTRAP_PAIRS))
    assert np.isfinite(enough.ci_low) and np.isfinite(enough.ci_high) and "moving-block" in enough.method
    assert enough.ci_low <= enough.estimate_pct == 4.5 <= enough.ci_high


def test_window_bootstrap_needs_two_windows_of_each_kernel():
    assert all(np.isnan(stats.bootstrap_speedup_interval([1.0], [1.0, 1.1])))
    assert all(np.isnan(stats.bootstrap_speedup_interval([1.0, 1.1], [1.0])))


def test_paired_t_interval_from_two_pairs():
    # mean 2, sd 1.414, standard error 1; t(0.975, 1 df) = 12.706
    est = stats.paired_mean_t_estimate([1.0, 3.0])
    assert est.estimate_pct == 2.0 and est.n_pairs == 2
    assert (est.ci_low, est.ci_high) == pytest.approx((2.0 - 12.7062, 2.0 + 12.7062), abs=1e-3)
    assert np.isnan(stats.paired_mean_t_estimate([1.0]).ci_low)


def test_paired_t_with_one_pair_names_no_interval_and_half_width_is_half():
    one = stats.paired_mean_t_estimate([1.5])
    assert one.estimate_pct == 1.5 and one.n_pairs == 1 and "no interval below 2 pairs" in one.method
    est = stats.PairedEstimate(1.0, -1.0, 3.0, 10, "m")
    assert est.half_width_pp == 2.0 and est.to_dict()["half_width_pp"] == 2.0


def test_paired_median_is_a_median_with_or_without_an_interval():
    assert stats.paired_median_estimate([0.0, 0.0, 9.0]).estimate_pct == 0.0
    est = stats.paired_median_estimate([0.0] * 10 + [100.0])
    assert est.estimate_pct == 0.0 and est.ci_low == est.ci_high == 0.0  # one outlying pair moves no median


def test_pair_speedups_refuse_a_time_of_zero():
    with pytest.raises(ValueError, match="positive"):
        stats.pair_speedups_pct([0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="positive"):
        stats.pair_speedups_pct([1.0, 1.0], [1.0, 0.0])
