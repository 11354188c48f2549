#!/usr/bin/env python3
"""Where a causal attention kernel leaves its tensor core idle: inside the key loop, or once per query block?
(CPU, no GPU; reads recorded audit sessions.)

    .venv/bin/python tools/analysis/tensor_idle_fit.py [SESSIONS] [--dtype bf16] [--config LABEL]

Each audit session that read the wgmma pipe's share (summary.json ncu.<kernel>.tensor_active_pct, softbench audit
since 2026-12-04) gives one point per kernel: the idle share 100 - tensor % at one causal sequence length. A causal
query block of 128 rows visits on average T = (n + 1) / 2 key tiles of 128, n = seq / 128. If every block costs
a fixed idle time (its first Q.K^T waited for, its last P.V, its masked diagonal tile, its epilogue) besides an
idle share inside the steady loop, the idle share falls with length as

    idle % = loop % + per_block / T

so a least-squares line in 1/T splits the two: `loop %` is the idle share the key loop keeps however long the
blocks, `per_block` (in %-tiles) / 100 is about how many tiles' worth of tensor time each block leaves idle. The
points are of one kernel configuration (`--config`, matched against summary.json's kernel_config.A0; FA3's
points come from the same sessions). Only complete sessions of b1 h16 d128 are read."""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout

from softbench.predictions.sessions import load_session  # noqa: E402

BLOCK = 128  # the query block and key tile of both kernels at head dim 128 causal (FA3's tile_size_fwd_sm90)
DEFAULT_CONFIG = "gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf"  # the 16-bit default of 2026-12-04 07:44-17:40


def mean_tiles(seq: int, block: int = BLOCK) -> float:
    """Key tiles a causal query block visits, on average over the blocks: block i visits i + 1."""
    n = math.ceil(seq / block)
    return (n + 1) / 2


def points(root: Path, dtype: str, config: str) -> dict[str, list[tuple[int, float, str]]]:
    """kernel -> [(seq, idle %, session name)] from every complete causal audit of `dtype` under `config`."""
    out: dict[str, list[tuple[int, float, str]]] = {}
    for d in sorted(root.glob("*-audit-*")):
        rec = load_session(d)  # a damaged file reads as {}: such a session is not complete and drops out below
        s = rec.summary
        shape = s.get("shape") or {}
        if (not rec.complete or shape.get("dtype") != dtype or not shape.get("causal")
                or (shape.get("batch"), shape.get("heads"), shape.get("head_dim")) != (1, 16, 128)
                or (s.get("kernel_config") or {}).get("A0") != config):
            continue
        for kernel, counters in (s.get("ncu") or {}).items():
            share = (counters or {}).get("tensor_active_pct")
            if isinstance(share, (int, float)):
                out.setdefault(kernel, []).append((int(shape["seq"]), 100.0 - float(share), d.name))
    return out


def fit(rows: list[tuple[int, float, str]]) -> tuple[float, float] | None:
    """(loop %, per_block %-tiles): the least-squares line idle = loop + per_block / T; None under two lengths."""
    xs = [1.0 / mean_tiles(seq) for seq, _, _ in rows]
    ys = [idle for _, idle, _ in rows]
    if len({round(x, 12) for x in xs}) < 2:
        return None
    slope, intercept = statistics.linear_regression(xs, ys)
    return intercept, slope


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sessions", nargs="?", default="sessions")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp8"))
    ap.add_argument("--config", default=DEFAULT_CONFIG, help="kernel_config.A0 of the sessions read")
    args = ap.parse_args(argv)
    found = points(Path(args.sessions), args.dtype, args.config)
    if not found:
        print(f"no complete causal {args.dtype} audit under {args.config} read the tensor pipe's share in "
              f"{args.sessions}")
        return 1
    print(f"{args.dtype} causal b1 h16 d128, A0's configuration {args.config}; idle % = 100 - tensor %")
    for kernel, rows in sorted(found.items()):
        rows.sort()
        listed = ", ".join(f"{seq // 1024}K {idle:.1f}% ({name[:16]})" for seq, idle, name in rows)
        print(f"{kernel}: {listed}")
        line = fit(rows)
        if line is None:
            print("  one length only: no fit")
            continue
        loop, per_block = line
        worst = max(abs(idle - (loop + per_block / mean_tiles(seq))) for seq, idle, _ in rows)
        print(f"  idle % = {loop:.2f} + {per_block:.0f} / T: {loop:.2f}% of the loop's time idle, about "
              f"{per_block / 100:.2f} tiles of tensor time idle per block; largest residual {worst:.2f} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
