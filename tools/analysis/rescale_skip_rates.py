#!/usr/bin/env python3
"""How often a warp of the Gluon kernel can jump over O's rescale, on the benchmark's own inputs (CPU, no GPU).

    .venv/bin/python tools/analysis/rescale_skip_rates.py [--seq 8192] [--heads 1]

A warp (16 consecutive query rows of a 64-row wgmma tile) jumps over its 64 multiplies per tile and thread only
where every one of its rows keeps O's scale. Counted per key tile of 128, over the rows that tile reaches (causal:
keys <= row), for the rules the kernel has or could have:
- rs: the exact running maximum did not move (GluonConfig.rescale "moved");
- rl-a0: A0's lazy maximum, moved only past 2 octaves (rescale "lazy" at FP8; FA4's conditional rescale), and
  h15-folded's anchor under rescale "lazy-anchor" (-rla), which moves by the same rule;
- h15-even-N: h15-folded's anchor r = rne(2cm) in half octaves kept at a stale r_O while r - r_O is even and at most
  2N (N octaves): its lattice doubles under a shift of n by 2, so those weights are exact multiples of the
  exact-anchor ones and O needs no multiply (docs/hopper-notes.md, the -rl section). Not built.
Inputs are softbench.kernels.inputs.make_inputs's (seed 0), scores in log2 units at head dim 128."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout

import torch  # noqa: E402

from softbench.core.shapes import Shape, mask_words  # noqa: E402
from softbench.kernels.gluon_config import LAZY_THRESHOLD  # noqa: E402
from softbench.kernels.inputs import make_inputs  # noqa: E402

KEY_TILE = 128
WARP_ROWS = 16
LAZY_OCTAVES = LAZY_THRESHOLD[8]  # -rl's at FP8


def tile_maxima(q: torch.Tensor, k: torch.Tensor, causal: bool) -> torch.Tensor:
    """[rows, tiles] each row's largest score in each key tile, log2 units (-inf where the mask leaves none)."""
    scores = (q @ k.T) * (math.log2(math.e) / math.sqrt(q.shape[-1]))
    if causal:
        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
    rows, keys = scores.shape
    return scores.view(rows, keys // KEY_TILE, KEY_TILE).amax(-1)


def keeps(rule: str, tmax: torch.Tensor):
    """Per tile, which rows keep O's scale under `rule` (a generator of [rows] masks, tile by tile)."""
    m = torch.full(tmax.shape[:1], float("-inf"))
    anchor = torch.full(tmax.shape[:1], float("nan"))  # h15: O's anchor r_O, none before the first tile
    for j in range(tmax.shape[1]):
        tile = tmax[:, j]
        if rule == "rl-a0":  # the lazy maximum itself: m = -inf moves on the first tile a row reaches
            keep = tile <= m + LAZY_OCTAVES
            m = torch.where(keep, m, tile)
        else:  # the exact maximum
            new = torch.maximum(m, tile)
            if rule == "rs":
                keep = new == m
            else:
                r = torch.round(2 * new)  # round half to even, as the FFMA's magic add
                step = r - anchor
                keep = (step % 2 == 0) & (step >= 0) & (step <= 2 * float(rule.rsplit("-", 1)[1]))
                anchor = torch.where(keep, anchor, r)
            m = new
        yield keep


def warp_skip_rate(rule: str, tmax: torch.Tensor) -> float:
    """The share of (warp, tile) pairs, among the tiles a warp's rows reach, in which all its rows keep O."""
    skipped = total = 0
    for j, keep in enumerate(keeps(rule, tmax)):
        reached = (tmax[:, j] > float("-inf")).view(-1, WARP_ROWS)
        active = reached.any(1)
        skipped += (keep.view(-1, WARP_ROWS) | ~reached).all(1)[active].sum().item()
        total += active.sum().item()
    return skipped / total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=8192)
    ap.add_argument("--heads", type=int, default=1)
    args = ap.parse_args(argv)
    if args.seq % KEY_TILE:
        ap.error(f"--seq must be a multiple of {KEY_TILE}")
    rules = ("rs", "rl-a0", "h15-even-2", "h15-even-4", "h15-even-8")
    print("| mask | " + " | ".join(rules) + " |\n| --- |" + " --- |" * len(rules))
    for causal in (True, False):
        shape = Shape(dtype="bf16", seq=args.seq, heads=args.heads, head_dim=128, causal=causal)
        inputs = make_inputs(shape, seed=0, device="cpu")
        rates = {rule: 0.0 for rule in rules}
        for h in range(args.heads):
            tmax = tile_maxima(inputs.q[0, :, h].float(), inputs.k[0, :, h].float(), causal)
            for rule in rules:
                rates[rule] += warp_skip_rate(rule, tmax) / args.heads
        print(f"| {mask_words(causal)} | " + " | ".join(f"{rates[r]:.1%}" for r in rules) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
