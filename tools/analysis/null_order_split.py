#!/usr/bin/env python3
"""Does the order inside a cycle move the A/A null? For each recorded interleaved session with a null: in how many
cycles the baseline's window came after its twin's, the median per-pair speed-up in those cycles and in the others,
and their mean (the estimate with the within-cycle order balanced). A twin that is simply slower shows in the
balanced mean; a later window that is slower shows as the gap between the two medians.
Usage:  python3 tools/analysis/null_order_split.py SESSIONS [GLOB]   (GLOB default: *-latency-*-interleaved)"""
from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recorded_nulls import DEFAULT_GLOB, recorded_nulls  # noqa: E402


def main(root: str, pattern: str = DEFAULT_GLOB) -> int:
    print("| session | kernels | null % | baseline after its twin | median then | median otherwise | balanced |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for rec in recorded_nulls(root, pattern):
        d, s, null, base = rec.path, rec.summary, rec.null, rec.baseline
        cycles: dict[tuple, dict] = defaultdict(dict)
        for w in rec.measured:
            cycles[(w.get("round", 0), w["cycle"])][w["label"]] = (w.get("position", 0), w["ms_per_call"])
        after, before = [], []
        for c in cycles.values():
            if base in c and null in c:
                pct = (c[base][1] / c[null][1] - 1.0) * 100.0
                (after if c[base][0] > c[null][0] else before).append(pct)
        if not after or not before:
            continue
        est = s["comparisons"][null]["paired"]["estimate_pct"]
        share = len(after) / (len(after) + len(before))
        print(f"| {d.name[:16]} | {len(s.get('kernels') or {})} | {est:+.2f} | {share:.2f} of {len(after) + len(before)} "
              f"| {np.median(after):+.2f} | {np.median(before):+.2f} | {(np.median(after) + np.median(before)) / 2:+.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
