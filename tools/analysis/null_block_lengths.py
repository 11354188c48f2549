#!/usr/bin/env python3
"""Are the A/A nulls that miss 0 a bias, or intervals drawn too narrow? Recompute every recorded interleaved
null's interval from its windows with moving-block bootstraps of longer and longer blocks.

For each latency session under SESSIONS whose summary names a null: the per-pair speed-ups of the null against
the baseline in time order (as softbench.latency.summary pairs them), then 95% percentile intervals of their
median from 2000 moving-block replicates (seed 0) at blocks of n^(1/3) (softbench's rule), the Politis-White
automatic length (arch.bootstrap.optimal_block_length, circular; needs PyPI `arch`), n^(1/2) and n/10 pairs. If
the misses were intervals too narrow for slowly wandering pairs, the longer blocks would cover 0.
Usage:  python3 tools/analysis/null_block_lengths.py SESSIONS [GLOB]   (GLOB default: *-latency-*-interleaved)"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recorded_nulls import DEFAULT_GLOB, recorded_nulls  # noqa: E402

from softbench.core import stats  # noqa: E402
from softbench.latency.schedule import pairs_by_cycle  # noqa: E402


def interval(a: np.ndarray, block: int) -> tuple[float, float]:
    reps = np.median(a[stats.moving_block_indices(a.size, block, 2000, np.random.default_rng(0))], axis=1)
    lo, hi = np.percentile(reps, [2.5, 97.5])
    return float(lo), float(hi)


def main(root: str, pattern: str = DEFAULT_GLOB) -> int:
    from arch.bootstrap import optimal_block_length

    rules = ("n^(1/3)", "Politis-White", "n^(1/2)", "n/10")
    misses = dict.fromkeys(rules, 0)
    print("| session | kernels | pairs | null % | " + " | ".join(f"{r}: block, 95% CI" for r in rules) + " |")
    print("| --- " * (4 + len(rules)) + "|")
    for rec in recorded_nulls(root, pattern):
        d, s = rec.path, rec.summary
        b, o = pairs_by_cycle(rec.measured, rec.baseline, rec.null, "ms_per_call", None)
        a = np.asarray(stats.pair_speedups_pct(b, o))
        if a.size < stats.MIN_BOOTSTRAP_PAIRS:
            continue
        n = a.size
        blocks = (stats.moving_block_length(n), int(np.ceil(optimal_block_length(a)["circular"].iloc[0])),
                  int(round(n ** 0.5)), max(1, n // 10))
        cells = []
        for rule, blk in zip(rules, blocks):
            lo, hi = interval(a, max(1, blk))
            miss = not lo <= 0 <= hi
            misses[rule] += miss
            cells.append(f"{blk}, [{lo:+.2f}, {hi:+.2f}]{' miss' if miss else ''}")
        print(f"| {d.name[:16]} | {len(s.get('kernels') or {})} | {n} | {np.median(a):+.2f} | " + " | ".join(cells) + " |")
    print("\nmisses of 0 per rule: " + ", ".join(f"{r} {m}" for r, m in misses.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
