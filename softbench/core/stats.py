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
