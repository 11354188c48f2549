#!/usr/bin/env python3
"""Each mbarrier wait of an audited kernel, wait by wait (no GPU): the sites behind the audit's "mbarrier waits" column.

    python tools/analysis/mbarrier_waits.py sessions/<audit session> [more audits] [--variant A0]

Reads the per-instruction page `softbench audit --source-stalls` keeps (ncu/<variant>-sass.csv.gz) through
softbench.audit.barrier_waits, which says how a wait's samples and its purpose are read. Audits written before that
column have the page too, so their waits come out here. docs/leases.md's and docs/hopper-notes.md's wait counts for the
paired order, `-ka` and `-v3` (BF16 causal 16K, 2026-12-04) are this script's "at the branch" column."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout

from softbench.audit import barrier_waits, source_stalls  # noqa: E402

LEAST = 100  # by default, sites with fewer samples at their branch are left out of the table (they are in the totals)


def render(name: str, sites, least: int = LEAST) -> str:
    """A markdown table of the sites with at least `least` samples at their branch, with how often each ran (once
    per key tile and warp in a key loop, once per query block and warp at a block's start), then the totals per
    kind."""
    lines = [f"## {name}", "", "| row | barrier | samples at the branch | samples in all | waits for | executed |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in sites[sites["at_branch"] >= least].itertuples():
        lines.append(f"| {r.row} | {r.barrier} | {r.at_branch:,} | {r.samples:,} | {r.serves} | {r.executed:,} |")
    lines += ["", "| waits for | samples at the branches | samples in all (every site) |", "| --- | --- | --- |"]
    for kind in barrier_waits.KINDS:
        of = sites[sites["serves"] == kind]
        lines.append(f"| {kind} | {int(of['at_branch'].sum()):,} | {int(of['samples'].sum()):,} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("audits", nargs="+", type=Path, help="audit session folders (softbench audit --source-stalls)")
    ap.add_argument("--variant", default="A0", help="the audited variant whose page is read (default: A0)")
    ap.add_argument("--least", type=int, default=LEAST,
                    help=f"list the sites with at least this many samples at their branch (default: {LEAST})")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:  # a usage error: argparse has said why; the code is returned, as for a missing page
        return int(e.code or 0)
    variant = args.variant
    for folder in args.audits:
        page = folder / "ncu" / f"{variant}-sass.csv.gz"
        if not page.is_file():
            print(f"{folder} has no per-instruction page for {variant} ({page.name}): was it audited with "
                  "--source-stalls?", file=sys.stderr)
            return 2
        df = source_stalls.read(str(page))
        print(render(folder.name, barrier_waits.wait_sites(df), args.least))
        print(f"\nsamples at the key loop's warpgroup-MMA waits (the consumers' slack): "
              f"{barrier_waits.key_loop_mma_waits(df):,}")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
