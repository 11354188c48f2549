"""Where a kernel's warps wait, instruction by instruction: Nsight Compute's per-instruction warp-stall samples (its
SourceCounters section), exported as the report's SASS page (`ncu --import R --page source --csv --print-source
sass`) and summarized. `softbench audit --source-stalls` asks ncu for the section, keeps the page beside the report
(ncu/<variant>-sass.csv.gz) and puts the summary in summary.json; `python -m softbench.audit.source_stalls PAGE...`
prints the summary of pages already recorded.

The summary per launch: the share of the samples per stall reason; the samples per opcode with their main reasons;
the runs of MUFU.EX2 issued back to back (an exponential every instruction, so that the warp has nothing else to
issue while the MUFU pipe works through them). Samples of NOPs stalled at a barrier are counted apart ("parked"):
warps that wait out the whole launch (Triton pads the Gluon kernel's one-warp producer to a warpgroup), not time any
working warp waits."""

from __future__ import annotations

import gzip
import io
import itertools
import sys
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
SECTION = "SourceCounters"  # the ncu section that samples stalls per instruction
LONGEST_RUNS = 8  # runs of MUFU.EX2 this long or longer are listed
TOP_OPCODES = 12


def export_command(ncu: str, report: str) -> list[str]:
    """The report's SASS page with its per-instruction counters, as CSV on stdout."""
    return [ncu, "--import", report, "--page", "source", "--csv", "--print-source", "sass"]


def read(source) -> "pd.DataFrame":
    """The SASS page (a path, gzipped or not, or its text): one row per instruction in address order, with its
    opcode (predicate dropped), the opcode's base and the stall_<reason> columns. The page's first line names
    the kernel."""
    import pandas as pd  # heavy import, deferred

    try:
        if isinstance(source, str) and "\n" in source:
            df = pd.read_csv(io.StringIO(source), skiprows=1)
        else:
            df = pd.read_csv(source, skiprows=1)
    except (EOFError, zlib.error) as e:
        # gzip reports a copy cut short (EOFError) or damaged (zlib.error) with errors that are neither OSError
        # nor ValueError; turn them into the ValueError callers already report as a bad page
        raise ValueError(f"the gzipped page is cut short or damaged ({e})") from None
    missing = [c for c in ("Source", SAMPLES, EXECUTED, "stall_barrier") if c not in df.columns]
    if missing:
        raise ValueError(f"not a SASS page with warp-stall samples: it has no column {', '.join(map(repr, missing))} "
                         f"(was the report made with --section {SECTION}?)")
    src = df["Source"].astype(str).str.strip()
    df["opcode"] = src.str.replace(r"^@!?U?P\w+\s+", "", regex=True).str.split().str[0]
    df["base"] = df["opcode"].str.split(".").str[0]
    return df


def reasons(df: "pd.DataFrame") -> list[str]:
    return [c for c in df.columns if c.startswith("stall_") and not c.endswith("(Not Issued)")]


def parked(df: "pd.DataFrame") -> "pd.Series":
    """NOPs whose samples are almost all barrier stalls: warps that wait out the launch."""
    return (df["base"] == "NOP") & (df["stall_barrier"] >= 0.9 * df[SAMPLES]) & (df[SAMPLES] > 0)


def by_reason(df: "pd.DataFrame") -> "pd.Series":
    """Each reason's share (%) of the working warps' samples, largest first."""
    import pandas as pd

    working = df[~parked(df)]
    total = working[SAMPLES].sum()
    if total == 0:
        # no samples (a header-only page, or every count 0): no shares, where dividing would raise or give NaN
        return pd.Series(dtype="float64")
    return (working[reasons(df)].sum() / total * 100).sort_values(ascending=False)


def by_opcode(df: "pd.DataFrame", top: int = TOP_OPCODES) -> "pd.DataFrame":
    """The `top` opcodes (base names) with the most samples: samples, warp instructions executed and the three
    main reasons."""
    import pandas as pd

    working = df[~parked(df)]
    cols = reasons(df)
    g = working.groupby("base")[[SAMPLES, EXECUTED, *cols]].sum()
    g = g.sort_values(SAMPLES, ascending=False).head(top)
    main = g[cols].apply(lambda r: ", ".join(f"{k[6:]} {v:.0f}" for k, v in r.sort_values(ascending=False)[:3].items()
                                              if v > 0), axis=1)
    return pd.DataFrame({"samples": g[SAMPLES], "executed": g[EXECUTED], "main reasons": main})


def mufu_runs(df: "pd.DataFrame", least: int = LONGEST_RUNS) -> list[tuple[int, int, int, int]]:
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


def summarize(df: "pd.DataFrame") -> dict:
    """summary.json's source_stalls.<variant>: what the tables print, as numbers."""
    from softbench.audit import barrier_waits

    total, idle = int(df[SAMPLES].sum()), int(df.loc[parked(df), SAMPLES].sum())
    ops = by_opcode(df)
    return {
        "samples": total, "parked_samples": idle, "instructions_executed": int(df[EXECUTED].sum()),
        "reasons_pct": {k[6:]: round(float(v), 2) for k, v in by_reason(df).items() if v > 0},
        "opcodes": [{"opcode": op, "samples": int(r.samples), "executed": int(r.executed),
                     "main_reasons": r["main reasons"]} for op, r in ops.iterrows()],
        "mufu_runs": [{"row": r, "length": n, "executions": e, "samples": s} for r, n, e, s in mufu_runs(df)],
        "barrier_waits": barrier_waits.summarize(df),
    }


def write_page(text: str, path: Path) -> Path:
    """The exported page, gzipped (a launch's page is about a megabyte of CSV)."""
    with gzip.open(path, "wt") as f:
        f.write(text)
    return path


def render(name: str, df: "pd.DataFrame") -> str:
    s = summarize(df)
    total, idle = s["samples"], s["parked_samples"]
    if total == 0:
        # nothing to share out (a header-only page, or a launch too short to be sampled); no percentages to print
        raise ValueError("the page has no warp-stall samples (was the launch long enough to be sampled, "
                         f"and the report made with --section {SECTION}?)")
    lines = [f"## {name}", "",
             f"{total} samples, {idle} of them ({idle / total:.0%}) parked warps (NOPs at a barrier), left out below; "
             f"{s['instructions_executed']} warp instructions executed.", "",
             "Stall reasons, % of the working warps' samples: "
             + ", ".join(f"{k} {v:.1f}" for k, v in s["reasons_pct"].items() if v >= 0.5), "",
             "| opcode | samples | executed | main reasons |", "| --- | --- | --- | --- |"]
    lines += [f"| {o['opcode']} | {o['samples']} | {o['executed']} | {o['main_reasons']} |" for o in s["opcodes"]]
    runs = "; ".join(f"{r['row']} x{r['length']} ({r['executions']}, {r['samples']})" for r in s["mufu_runs"])
    lines += ["", f"Runs of {LONGEST_RUNS} or more MUFU.EX2 back to back (row, length, executions, samples): "
              + (runs or "none"), ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    out = []
    for path in argv:
        try:
            out.append(render(path, read(path)))
        except (OSError, ValueError) as e:
            print(f"error: {path}: {e}", file=sys.stderr)
            return 2
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
