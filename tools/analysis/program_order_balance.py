#!/usr/bin/env python3
"""How evenly a launch's query blocks fill the SMs, by program order (CPU, no GPU): a list-scheduling model.

    .venv/bin/python tools/analysis/program_order_balance.py [--seq 8192] [--heads 16] [--batch 1] [--no-causal]
        [--block-m 128] [--block-n 128] [--slots 132] [--fixed 1.7]

Each query block costs its key tiles (causal: the tiles up to and including the diagonal) plus a fixed cost per
block, `--fixed`, in tiles. Three dispatchers are modelled over `--slots` program slots (132: the H200's SMs, one
program each with two consumer warpgroups):
- greedy: the hardware's, one program per block in program-id order, each started on the first slot that frees;
- rounds: the Gluon kernel's persistent schedule (`-pt`), slot p taking block r * slots + p in even rounds r and
  r * slots + slots - 1 - p in odd ones (gluon_producer._round_item), with no fixed cost but the first block's;
- dynamic: its dynamic persistent schedule (`-pd`), blocks in program-id order, each taken by the first slot to
  free (a global counter), with no fixed cost but the first block's.
The program order is triton_attn._program_tile's (both kernels call it): groups of head_group heads, the block
index slowest inside a group, causal longest first. Each dispatcher's makespan is printed for head groups 1 to
16 against the ideal (all work spread evenly).

What it showed on 2026-12-03 (docs/hopper-notes.md): at causal 8K, b1 h16, greedy is within 0.4% of the ideal
for head groups 2-16 and 11% worse at 1, where each head's longest blocks wait for the heads before it; rounds
match greedy only when one group holds all heads (hg16)."""

from __future__ import annotations

import argparse
import heapq
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout

from softbench.core.shapes import mask_words  # noqa: E402


def program_tile(pid: int, n_m: int, head_group: int, causal: bool) -> tuple[int, int]:
    """(batch x head index, query block index) of program pid: triton_attn._program_tile's arithmetic, in Python
    so that the model runs without Triton (tests/test_triton_attn.py checks the two agree on every pid)."""
    span = n_m * head_group
    g, r = divmod(pid, span)
    m_idx, within = divmod(r, head_group)
    return g * head_group + within, (n_m - 1 - m_idx) if causal else m_idx


def block_tiles(start_m: int, seq: int, block_m: int, block_n: int, causal: bool) -> int:
    """Key tiles a query block visits (the kernel's n_tiles)."""
    end = min((start_m + 1) * block_m, seq) if causal else seq
    return math.ceil(end / block_n)


def block_costs(seq: int, batch_heads: int, head_group: int, causal: bool, block_m: int, block_n: int) -> list[int]:
    """Each program's key tiles, in program-id order."""
    n_m = math.ceil(seq / block_m)
    return [block_tiles(program_tile(pid, n_m, head_group, causal)[1], seq, block_m, block_n, causal)
            for pid in range(n_m * batch_heads)]


def greedy_makespan(costs: list[int], slots: int, fixed: float) -> float:
    """The hardware dispatcher: blocks in program-id order, each on the first slot to free."""
    free = [0.0] * slots
    for c in costs:
        heapq.heappush(free, heapq.heappop(free) + c + fixed)
    return max(free)


def rounds_makespan(costs: list[int], slots: int, fixed: float) -> float:
    """The persistent schedule's rounds (gluon_producer._round_item): one fixed cost per slot, not per block."""
    busy = [fixed] * slots
    for t, c in enumerate(costs):
        r, k = divmod(t, slots)
        busy[k if r % 2 == 0 else slots - 1 - k] += c
    return max(busy)


def dynamic_makespan(costs: list[int], slots: int, fixed: float) -> float:
    """The dynamic persistent schedule (gluon_producer._loader_persistent): greedy's order and balance, one fixed cost
    per slot. Every slot starts its first block after the same fixed cost, so the schedule is greedy's without a
    fixed cost per block, shifted by it."""
    return fixed + greedy_makespan(costs, slots, 0.0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--causal", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--block-m", type=int, default=128)
    p.add_argument("--block-n", type=int, default=128)
    p.add_argument("--slots", type=int, default=132)
    p.add_argument("--fixed", type=float, default=1.7, help="fixed cost per query block, in key tiles")
    a = p.parse_args(argv)
    bh = a.batch * a.heads
    print(f"seq {a.seq}, {bh} batch x heads, {mask_words(a.causal)}, {a.slots} slots, "
          f"fixed cost {a.fixed} tiles per block")
    print("head group | ideal | greedy (vs ideal) | rounds (vs ideal) | dynamic (vs ideal)")
    for hg in (1, 2, 4, 8, 16):
        if bh % hg:
            continue
        costs = block_costs(a.seq, bh, hg, a.causal, a.block_m, a.block_n)
        ideal = (sum(costs) + a.fixed * len(costs)) / a.slots
        g, r = greedy_makespan(costs, a.slots, a.fixed), rounds_makespan(costs, a.slots, a.fixed)
        dyn = dynamic_makespan(costs, a.slots, a.fixed)
        print(f"{hg:10d} | {ideal:7.1f} | {g:7.1f} ({g / ideal - 1:+.1%}) | {r:7.1f} ({r / ideal - 1:+.1%}) | "
              f"{dyn:7.1f} ({dyn / ideal - 1:+.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
