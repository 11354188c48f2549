"""The orders of the interleaved and sustained protocols.

Interleaved windows carry over: on the H200 a window that follows a power-hungry kernel starts at a lower SM clock
(softbench's BF16 A0 ran 5% slower after FlashAttention-3's windows than after its own, session
20261201T092248Z), so an order in which two kernels have different predecessors measures their neighbours.
`carryover_circuit` orders the windows so that every kernel follows every kernel (itself included) exactly once
per cycle: an Eulerian circuit of the complete directed graph with loops, n*n windows for n kernels. Pairs are
then taken between windows with the same predecessor (`pairs_by_cycle` with key "predecessor"), so the carry-over
cancels inside each pair. Every other cycle runs the circuit backwards (still balanced: the reversed complete graph
is the complete graph), which puts each kernel early and late alike against a slow drift. For two kernels the
cycles are A B B A, then A B B A again (the circuit A A B B, started on its loop).

The circuit balances the window just before, not the ones before that, and the H200's power controller remembers
more: at FP8 causal 8K a window after two h15-sat windows ran 1.5-3% slower than one after A0 then h15-sat, and
the circuit's A/A null read -0.5 to -1.2% (sessions 20261201T0932-0934). `random_cycle` is the default order
instead: a fresh random permutation of the kernels every cycle, so that every kernel's history of any length has
the same distribution and no carry-over of any order can favour one of them; it costs variance, not bias, and
the bootstrap over pairs (one pair per cycle) carries that variance into the interval.

Sustained blocks settle before they measure, so their order only alternates (A B, B A, ...: ABBA)."""

from __future__ import annotations

from collections import defaultdict


def cycle_order(labels: list[str], cycle: int) -> list[str]:
    """Sustained blocks: one per kernel per cycle, reversed every other cycle."""
    return list(labels) if cycle % 2 == 0 else list(reversed(labels))


def carryover_circuit(labels: list[str]) -> list[str]:
    """u_0 .. u_{m-1} (m = n*n) with every ordered pair (u_i, u_i+1), the closing pair (u_{m-1}, u_0) included,
    occurring exactly once (Hierholzer's algorithm on the complete digraph with loops), rotated to start on a
    self-loop (u_1 == u_0), which is what lets `circuit_cycle` run it backwards without losing the balance."""
    labels = list(labels)
    if len(set(labels)) != len(labels) or not labels:
        raise ValueError(f"labels must be distinct and non-empty: {labels}")
    unused = {a: list(labels) for a in labels}  # out-edges not yet walked, taken from the front
    stack, walk = [labels[0]], []
    while stack:
        v = stack[-1]
        if unused[v]:
            stack.append(unused[v].pop(0))
        else:
            walk.append(stack.pop())
    walk.reverse()  # a closed walk u_0 .. u_m with u_m == u_0
    circuit = walk[:-1]
    start = next(i for i in range(len(circuit)) if circuit[i] == circuit[(i + 1) % len(circuit)])
    return circuit[start:] + circuit[:start]


def circuit_cycle(circuit: list[str], cycle: int) -> list[str]:
    """The windows of one cycle: forwards u_1 .. u_{m-1}, u_0, then the same list backwards. Forwards every
    cycle ends on u_0 and the next starts after it, as the circuit wants; backwards, each transition is a forward
    one reversed, and the one across the boundary (u_0 then u_0) stands for the reversed u_0 -> u_1 because
    u_1 == u_0. So every cycle holds every ordered pair once, and a pair of cycles mirrors every window's
    position in time, which cancels a linear drift."""
    forwards = circuit[1:] + circuit[:1]
    return forwards if cycle % 2 == 0 else list(reversed(forwards))


def random_cycle(labels: list[str], rng) -> list[str]:
    """One cycle of the default interleaved order: every kernel once, in a random order (numpy Generator)."""
    return [labels[i] for i in rng.permutation(len(labels))]


def pairs_by_cycle(records: list[dict], baseline: str, other: str, key: str = "ms_per_call",
                   slot: str | None = None) -> tuple[list, list]:
    """(baseline values, other values) of the units measured in the same round, cycle and, with `slot`, the same
    value of that field (the interleaved protocol pairs windows by their predecessor), in order. `records`
    carry 'round', 'cycle', 'label' and `key`."""
    seen: dict[tuple, dict[str, float]] = defaultdict(dict)
    for r in records:
        seen[(r.get("round", 0), r["cycle"], r.get(slot) if slot else None)][r["label"]] = r[key]
    b, o = [], []
    for k in sorted(seen, key=lambda k: (k[0], k[1], str(k[2]))):
        if baseline in seen[k] and other in seen[k]:
            b.append(seen[k][baseline])
            o.append(seen[k][other])
    return b, o
