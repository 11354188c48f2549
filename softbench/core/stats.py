"""Statistics as pure functions over arrays, each naming its method.

Conventions follow the paper's Appendix B.3 and A.9:
- medians are numpy's default (linear interpolation between the two middle values for an even count);
- speed-up = 100 * (median_A0 / median_A1 - 1) over each kernel's pooled windows;
- spread = population standard deviation (ddof=0) of the per-round speed-ups, not a confidence interval;
- bootstrap intervals are two-sided percentile intervals (numpy's default linear quantile rule)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


def median(values: Sequence[float]) -> float:
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0:
        raise ValueError("median of no values")
    return float(np.median(a))


def change_pct(value: float | None, reference: float | None) -> float | None:
    """Percent by which `value` lies above `reference`, 100 * (value / reference - 1); None where either is
    missing or the reference is zero, so a caller reading back a summary gets no division error. A speed-up is
    this with the baseline's time as the value and the variant's as the reference."""
    if value is None or reference is None or reference == 0:
        return None
    return 100.0 * (value / reference - 1.0)


def speedup_pct(baseline_ms: float, variant_ms: float) -> float:
    """Percent by which `variant` is faster than `baseline`: positive means the variant takes less time."""
    if baseline_ms <= 0 or variant_ms <= 0:
        raise ValueError("times must be positive")
    return 100.0 * (baseline_ms / variant_ms - 1.0)


def pooled_speedup_pct(baseline: Sequence[float], variant: Sequence[float]) -> float:
    return speedup_pct(median(baseline), median(variant))


def population_sd(values: Sequence[float]) -> float:
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0:
        raise ValueError("sd of no values")
    return float(np.std(a, ddof=0))


def percentile_interval(replicates: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(np.asarray(replicates, dtype=np.float64), [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def bootstrap_speedup_interval(
    baseline: Sequence[float], variant: Sequence[float], n_boot: int = 5000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile interval of the pooled-median speed-up, resampling each kernel's windows independently
    with replacement. Windows are treated as exchangeable, which ignores drift between rounds: an addition to
    the paper's per-round sd, not a replacement for it."""
    b = np.asarray(baseline, dtype=np.float64)
    v = np.asarray(variant, dtype=np.float64)
    if b.size < 2 or v.size < 2:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    mb = np.median(b[rng.integers(0, b.size, size=(n_boot, b.size))], axis=1)
    mv = np.median(v[rng.integers(0, v.size, size=(n_boot, v.size))], axis=1)
    return percentile_interval(100.0 * (mb / mv - 1.0), level)


@dataclass(frozen=True)
class PairedBootstrap:
    mean: float
    ci_low: float
    ci_high: float
    n_blocks: int
    n_boot: int
    seed: int

    @property
    def resolved(self) -> bool:
        """The interval excludes zero."""
        return self.ci_low > 0.0 or self.ci_high < 0.0


def bootstrap_indices(n_blocks: int, n_boot: int = 5000, seed: int = 0) -> np.ndarray:
    """Block indices resampled with replacement: (n_boot, n_blocks). The same array is reused for every
    condition so that all contrasts are paired on the same resamples."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, n_blocks, size=(n_boot, n_blocks))


def paired_block_bootstrap(
    differences: Sequence[float], n_boot: int = 5000, seed: int = 0, level: float = 0.95,
    indices: np.ndarray | None = None,
) -> PairedBootstrap:
    """Mean of per-block differences with a percentile interval from resampling blocks with replacement."""
    d = np.asarray(differences, dtype=np.float64)
    if d.size == 0:
        raise ValueError("no blocks")
    idx = bootstrap_indices(d.size, n_boot, seed) if indices is None else indices
    if idx.shape[1] != d.size:
        raise ValueError(f"indices are for {idx.shape[1]} blocks, got {d.size}")
    reps = d[idx].mean(axis=1)
    lo, hi = percentile_interval(reps, level)
    return PairedBootstrap(float(d.mean()), lo, hi, int(d.size), int(idx.shape[0]), seed)


def mad_outliers(values: Sequence[float], threshold: float = 3.5) -> np.ndarray:
    """Boolean mask of modified-z-score outliers (Iglewicz and Hoaglin: 0.6745 * |x - median| / MAD > threshold).
    Used to flag windows, never to drop them silently."""
    a = np.asarray(values, dtype=np.float64)
    med = np.median(a)
    mad = np.median(np.abs(a - med))
    if mad == 0:
        return np.zeros(a.shape, dtype=bool)
    return 0.6745 * np.abs(a - med) / mad > threshold


# --- paired estimators (interleaved and sustained latency protocols) ---------------------------------------

def pair_speedups_pct(baseline: Sequence[float], variant: Sequence[float]) -> np.ndarray:
    """Per-pair speed-up 100 * (baseline / variant - 1) of two equally long, paired series (pair i: the two
    kernels' units measured next to each other in time, so slow drift of the board cancels within the pair)."""
    b = np.asarray(baseline, dtype=np.float64)
    v = np.asarray(variant, dtype=np.float64)
    if b.shape != v.shape:
        raise ValueError(f"paired series differ in length: {b.size} and {v.size}")
    if (b <= 0).any() or (v <= 0).any():
        raise ValueError("times must be positive")
    return 100.0 * (b / v - 1.0)


@dataclass(frozen=True)
class PairedEstimate:
    """The median of per-pair speed-ups with a percentile bootstrap interval over pairs."""

    estimate_pct: float  # the median of pairs (interleaved) or their mean (sustained): `method` says which
    ci_low: float
    ci_high: float
    n_pairs: int
    method: str

    @property
    def half_width_pp(self) -> float:
        return (self.ci_high - self.ci_low) / 2.0

    def to_dict(self) -> dict:
        return {"estimate_pct": self.estimate_pct, "ci95_pct": [self.ci_low, self.ci_high], "n_pairs": self.n_pairs,
                "half_width_pp": self.half_width_pp, "method": self.method}


# Below this many pairs a percentile bootstrap of a median has too few distinct resamples to be read as an
# interval (with 5 pairs the median takes at most 5 values); the engines measure at least this many before
# they may stop.
MIN_BOOTSTRAP_PAIRS = 10


def moving_block_length(n: int) -> int:
    """Pairs per block of the moving-block bootstrap: n^(1/3), the usual order for a median under short-range
    dependence (Hall, Horowitz and Jing 1995), at least 1."""
    return max(1, int(round(n ** (1.0 / 3.0))))


def moving_block_indices(n: int, block: int, n_boot: int, rng) -> np.ndarray:
    """(n_boot, n) indices into a series of n, each row the concatenation of random runs of `block` consecutive
    indices (Kuensch's moving-block bootstrap), cut to n."""
    k = -(-n // block)
    starts = rng.integers(0, n - block + 1, size=(n_boot, k))
    return (starts[:, :, None] + np.arange(block)).reshape(n_boot, -1)[:, :n]


def paired_median_estimate(pair_pct: Sequence[float], n_boot: int = 2000, seed: int = 0,
                           level: float = 0.95) -> PairedEstimate:
    """The median of per-pair speed-ups in time order, with a moving-block bootstrap interval: consecutive pairs
    share the board's state (on the H200 the power controller moves the clock over a few hundred milliseconds, and
    pairs of one kernel correlated up to 0.2 at lags 1-3, sessions 20261201T1204-1205), which an interval that
    resamples single pairs would ignore and so read too narrow."""
    a = np.asarray(pair_pct, dtype=np.float64)
    if a.size < MIN_BOOTSTRAP_PAIRS:
        nan = float("nan")
        return PairedEstimate(float(np.median(a)) if a.size else nan, nan, nan, int(a.size),
                              f"median of pairs; no interval below {MIN_BOOTSTRAP_PAIRS} pairs")
    rng = np.random.default_rng(seed)
    block = moving_block_length(a.size)
    reps = np.median(a[moving_block_indices(a.size, block, n_boot, rng)], axis=1)
    lo, hi = percentile_interval(reps, level)
    return PairedEstimate(float(np.median(a)), lo, hi, int(a.size),
                          f"median of per-pair speed-ups, moving-block bootstrap over pairs in time order (blocks "
                          f"of {block} pairs), {n_boot} replicates, seed {seed}")


def paired_mean_t_estimate(pair_pct: Sequence[float], level: float = 0.95) -> PairedEstimate:
    """Mean of few per-pair speed-ups (sustained blocks: 4-8 pairs) with a Student-t interval: with so few
    pairs a bootstrap has almost no distinct resamples, while the t interval stays honest about its width."""
    from scipy import stats as sps

    a = np.asarray(pair_pct, dtype=np.float64)
    nan = float("nan")
    if a.size < 2:
        return PairedEstimate(float(a.mean()) if a.size else nan, nan, nan, int(a.size),
                              "mean of pairs; no interval below 2 pairs")
    m = float(a.mean())
    half = float(sps.t.ppf(0.5 + level / 2.0, a.size - 1) * a.std(ddof=1) / np.sqrt(a.size))
    return PairedEstimate(m, m - half, m + half, int(a.size),
                          f"mean of per-pair speed-ups, Student-t {int(level * 100)}% interval over pairs")
