#!/usr/bin/env python3
"""Where a Gluon kernel's warps wait at its mbarriers, site by site, from an audit's per-instruction samples (no GPU).

    python tools/analysis/mbarrier_waits.py sessions/<audit session> [more audits] [--variant A0]

`softbench audit --source-stalls` keeps Nsight Compute's warp-stall samples per SASS instruction
(ncu/<variant>-sass.csv.gz). ptxas lowers each mbarrier wait to a SYNCS.PHASECHK.TRANS64.TRYWAIT followed by a
branch on its predicate, a few instructions on, to a retry loop placed at the end of the kernel. A warp suspended in the try-wait is sampled at that
branch (the retry loops collect no samples in the H200 audits), so a site's samples are the try-wait's and its
branch's. What a site waits for is read from what follows it: the next warpgroup MMA or TMA copy. A wgmma whose A
operand is a shared-memory descriptor is a Q.K^T (the wait was for K, or once per block for Q), one whose A operand
is a register is P.V (the wait was for V); a TMA copy first means the producer waiting for a free slot. The README's
and docs/hopper-notes.md's wait counts for `-ka` (samples at the branch, written before this script from the same
pages) and `-v3` (BF16 causal 16K, 2026-12-04) are this script's output."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout

import pandas as pd  # noqa: E402

from softbench.audit import source_stalls  # noqa: E402

SAMPLES = "Warp Stall Sampling (All Samples)"
TRY_WAIT = "SYNCS.PHASECHK.TRANS64.TRYWAIT"
LOOK_AHEAD = 160  # instructions after a site searched for the MMA or copy it guards
BRANCH_WITHIN = 6  # instructions after a try-wait searched for its branch (ptxas schedules a few in between)
_BARRIER = re.compile(r"\[(UR\d+|R\d+)(\+0x[0-9a-f]+)?\]")


def _serves(sources: list[str]) -> str:
    """What the first warpgroup MMA or TMA copy among `sources` says a wait was for."""
    for text in sources:
        op = text.split()
        if not op:
            continue
        head = op[0] if not op[0].startswith("@") else (op[1] if len(op) > 1 else "")
        if head.startswith("UTMALDG"):
            return "producer: a free slot"
        if head.startswith("HGMMA"):
            a_operand = text.split(",")[1].strip()
            return "Q.K^T: K (or Q)" if a_operand.startswith("gdesc") else "P.V: V"
    return "other"


def wait_sites(df: pd.DataFrame) -> pd.DataFrame:
    """One row per mbarrier wait in the kernel's main path (not the retry loops, which branch back to a try-wait):
    its position, address, barrier operand, samples at its branch, samples in all (the try-wait's and its branch's)
    and what it guards."""
    df = df.reset_index(drop=True)
    src = df["Source"].astype(str)
    samples = pd.to_numeric(df[SAMPLES], errors="coerce").fillna(0).astype(int)
    rows = []
    for i in df.index[src.str.contains(TRY_WAIT, regex=False)]:
        predicate = src[i].split(TRY_WAIT, 1)[1].split(",")[0].strip()  # P0, P1, ...
        branch = next((j for j in range(i + 1, min(i + 1 + BRANCH_WITHIN, len(df)))
                       if re.match(rf"@!{predicate}\s+BRA\s+0x[0-9a-f]+", src[j].strip())), None)
        if branch is not None and int(src[branch].split()[-1], 16) <= int(df["Address"][i], 16):
            continue  # a retry loop: its branch goes back to the try-wait
        m = _BARRIER.search(src[i])
        rows.append({"position": int(i), "address": df["Address"][i],
                     "barrier": (m.group(2) or "+0x0")[1:] if m else "?",
                     "at_branch": int(samples[branch]) if branch is not None else 0,
                     "samples": int(samples[i] + (samples[branch] if branch is not None else 0)),
                     "serves": _serves(list(src[i + 1:i + 1 + LOOK_AHEAD]))})
    return pd.DataFrame(rows, columns=["position", "address", "barrier", "at_branch", "samples", "serves"])


def totals(sites: pd.DataFrame) -> pd.DataFrame:
    """Samples per kind of wait (at the branches, and in all)."""
    return sites.groupby("serves")[["at_branch", "samples"]].sum().sort_values("samples", ascending=False)


def render(name: str, sites: pd.DataFrame, least: int = 100) -> str:
    """A markdown table of the sites with at least `least` samples, then the totals per kind."""
    lines = [f"## {name}", "", "| position | barrier | samples at the branch | samples in all | waits for |",
             "| --- | --- | --- | --- | --- |"]
    for _, r in sites[sites["samples"] >= least].iterrows():
        lines.append(f"| {r['position']} | {r['barrier']} | {r['at_branch']:,} | {r['samples']:,} | {r['serves']} |")
    lines += ["", "| waits for | samples at the branches | samples in all (every site) |", "| --- | --- | --- |"]
    lines += [f"| {k} | {r['at_branch']:,} | {r['samples']:,} |" for k, r in totals(sites).iterrows()]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    variant = "A0"
    if "--variant" in argv:
        k = argv.index("--variant")
        variant = argv[k + 1]
        argv = argv[:k] + argv[k + 2:]
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    for folder in argv:
        page = Path(folder) / "ncu" / f"{variant}-sass.csv.gz"
        if not page.is_file():
            print(f"{folder} has no per-instruction page for {variant} ({page.name}): was it audited with "
                  "--source-stalls?", file=sys.stderr)
            return 2
        print(render(Path(folder).name, wait_sites(source_stalls.read(page))))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
