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
