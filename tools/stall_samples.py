#!/usr/bin/env python3
"""Where a kernel's warps wait, instruction by instruction, from Nsight Compute's per-instruction warp-stall samples
(the SourceCounters section, its SASS page exported as CSV: tools/gpu/stalls.sh 2 records them).

    .venv/bin/python tools/stall_samples.py sessions/stalls-h200-20261202-0725/gluon-a0-fp8-sass.csv.gz [...]

For each file: the share of all samples per stall reason; the samples per opcode with their three main reasons; the
longest runs of MUFU.EX2 issued back to back (an exponential every instruction, so the warp has nothing else to
issue while the MUFU pipe works through them) with their samples. Samples of NOPs stalled at a barrier are shown
apart: they are warps parked for the whole launch (Triton pads the Gluon kernel's one-warp producer to a
warpgroup), not time any working warp waits. Prints Markdown."""

from __future__ import annotations

import itertools
import sys

import pandas as pd

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def read(path: str) -> pd.DataFrame:
    """The SASS page: one row per instruction in address order, its opcode (predicate and modifiers dropped) and
    the stall_<reason> columns (all samples, not only those where no instruction issued)."""
    df = pd.read_csv(path, skiprows=1)  # the first line names the kernel
    src = df["Source"].str.strip()
    df["opcode"] = src.str.replace(r"^@!?U?P\w+\s+", "", regex=True).str.split().str[0]
    df["base"] = df["opcode"].str.split(".").str[0]
    return df


def reasons(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if c.startswith("stall_") and not c.endswith("(Not Issued)")]


def parked(df: pd.DataFrame) -> pd.Series:
    """NOPs whose samples are almost all barrier stalls: warps that wait out the launch."""
    return (df["base"] == "NOP") & (df["stall_barrier"] >= 0.9 * df[SAMPLES]) & (df[SAMPLES] > 0)


def by_reason(df: pd.DataFrame) -> pd.Series:
    working = df[~parked(df)]
    return (working[reasons(df)].sum() / working[SAMPLES].sum() * 100).sort_values(ascending=False)


def by_opcode(df: pd.DataFrame, top: int = 12) -> pd.DataFrame:
    working = df[~parked(df)]
    cols = reasons(df)
    g = working.groupby("base")[[SAMPLES, EXECUTED, *cols]].sum()
    g = g.sort_values(SAMPLES, ascending=False).head(top)
    main = g[cols].apply(lambda r: ", ".join(f"{k[6:]} {v:.0f}" for k, v in r.sort_values(ascending=False)[:3].items()
                                              if v > 0), axis=1)
    return pd.DataFrame({"samples": g[SAMPLES], "executed": g[EXECUTED], "main reasons": main})


def mufu_runs(df: pd.DataFrame, least: int = 8) -> list[tuple[int, int, int, int]]:
    """(first row, length, executions of its first instruction, samples) of each run of at least `least` MUFU.EX2
    one after another in address order."""
    runs, row = [], 0
    for is_ex2, group in itertools.groupby(df["opcode"].str.startswith("MUFU.EX2")):
        n = len(list(group))
        if is_ex2 and n >= least:
            part = df.iloc[row:row + n]
            runs.append((row, n, int(part[EXECUTED].iloc[0]), int(part[SAMPLES].sum())))
        row += n
    return runs


def render(path: str) -> str:
    df = read(path)
    total, idle = int(df[SAMPLES].sum()), int(df.loc[parked(df), SAMPLES].sum())
    lines = [f"## {path}", "",
             f"{total} samples, {idle} of them ({idle / total:.0%}) parked warps (NOPs at a barrier), left out below; "
             f"{int(df[EXECUTED].sum())} warp instructions executed.", "",
             "Stall reasons, % of the working warps' samples: "
             + ", ".join(f"{k[6:]} {v:.1f}" for k, v in by_reason(df).items() if v >= 0.5), "",
             "| opcode | samples | executed | main reasons |", "| --- | --- | --- | --- |"]
    lines += [f"| {op} | {r.samples} | {r.executed} | {r['main reasons']} |" for op, r in by_opcode(df).iterrows()]
    runs = mufu_runs(df)
    lines += ["", "Runs of 8 or more MUFU.EX2 back to back (row, length, executions, samples): "
              + ("; ".join(f"{r} x{n} ({e}, {s})" for r, n, e, s in runs) if runs else "none"), ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    print("\n".join(render(p) for p in argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
