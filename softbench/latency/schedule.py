"""The balanced order of the interleaved and sustained protocols: every cycle measures each kernel once, and the
order is reversed every other cycle (two kernels: A B, B A, A B, ... = ABBA ABBA), so that a linear drift of the
board's clock over a cycle pair costs every kernel the same."""

from __future__ import annotations

from collections import defaultdict


def cycle_order(labels: list[str], cycle: int) -> list[str]:
    return list(labels) if cycle % 2 == 0 else list(reversed(labels))


def pairs_by_cycle(records: list[dict], baseline: str, other: str, key: str = "ms_per_call") -> tuple[list, list]:
    """(baseline values, other values) of the cycles in which both were measured, in cycle order. `records`
    carry 'round', 'cycle', 'label' and `key`."""
    seen: dict[tuple, dict[str, float]] = defaultdict(dict)
    for r in records:
        seen[(r.get("round", 0), r["cycle"])][r["label"]] = r[key]
    b, o = [], []
    for k in sorted(seen):
        if baseline in seen[k] and other in seen[k]:
            b.append(seen[k][baseline])
            o.append(seen[k][other])
    return b, o
