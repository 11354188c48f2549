#!/usr/bin/env python3
"""Two audits' Nsight Compute counters side by side, kernel by kernel (no GPU).

    python tools/analysis/audit_pair.py AUDIT_A AUDIT_B [--stall-change 0.02]

Made for two boards that ran the same shape and configuration (the H200's FP8 causal 8K audit of 2026-12-04
beside the H100's of 2026-12-05): for every kernel both audits profiled, the counters that say how long a launch
took in the SM's own cycles (duration x clock is the board's business; SM active cycles are the kernel's) and
where its warps stalled. Each stall reason is the audit's per-issued-instruction ratio
(smsp__average_warps_issue_stalled_<reason>_per_issue_active); a reason is listed where it moves by at least
--stall-change between the two, so that a difference between the boards shows as the reason that carries it.
Each kernel's configuration is printed from both audits: a pair that did not build the same kernel says so."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout

from softbench.predictions.sessions import load_session  # noqa: E402

COUNTERS = (  # (summary key, what it is, format)
    ("duration_us", "duration, us", ",.1f"),
    ("sm_clock_mhz", "SM clock, MHz", ",.0f"),
    ("sm_active_cycles_mean", "SM active cycles (mean over SMs)", ",.0f"),
    ("instructions", "instructions", ",.0f"),
    ("issue_active_pct", "issue slots busy, %", ".1f"),
    ("tensor_active_pct", "tensor pipe busy, %", ".1f"),
    ("l2_hit_rate_pct", "L2 hit rate, %", ".1f"),
    ("dram_read_bytes", "DRAM read bytes", ",.0f"),
)


class NotAnAudit(Exception):
    pass


def load(folder: Path) -> tuple[str, dict, dict]:
    """The board's name, the per-kernel counters and the per-kernel configuration labels of an audit session, read
    as every other tool reads a session (softbench.predictions.sessions: the board as SessionRecord.board)."""
    if not folder.is_dir():
        raise NotAnAudit(f"{folder} is not a readable session (no such folder)")
    rec = load_session(folder)
    if rec.problems:
        raise NotAnAudit(f"{folder} is not a readable session ({'; '.join(rec.problems)})")
    counters = rec.summary.get("ncu")
    if rec.command != "audit" or not isinstance(counters, dict) or not counters:
        raise NotAnAudit(f"{folder} holds no audit with Nsight Compute counters")
    built = rec.summary.get("kernel_config") or {}
    configs = {k: (v.get("label") if isinstance(v, dict) else v) for k, v in built.items()}
    return rec.board or "?", counters, configs


def change(key: str, a: float | None, b: float | None) -> str:
    """B against A: in percentage points for a counter that is itself a percentage, else relative."""
    if a is None or b is None:
        return "-"
    if key.endswith("_pct"):
        return f"{b - a:+.1f} pp"
    return f"{(b / a - 1) * 100:+.1f}%" if a else "-"


def fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def kernel_table(kernel: str, a: dict, b: dict, stall_change: float) -> list[str]:
    rows = ["| counter | A | B | B against A |", "| --- | --- | --- | --- |"]
    for key, what, spec in COUNTERS:
        va, vb = a.get(key), b.get(key)
        if va is None and vb is None:
            continue
        rows.append(f"| {what} | {fmt(va, spec)} | {fmt(vb, spec)} | {change(key, va, vb)} |")
    for key in sorted(k for k in a if k.startswith("stall_") and k in b):
        va, vb = a[key], b[key]
        if isinstance(va, (int, float)) and isinstance(vb, (int, float)) and abs(vb - va) >= stall_change:
            rows.append(f"| stalls per issued instruction: {key.removeprefix('stall_')} | {va:.3f} | {vb:.3f} | "
                        f"{vb - va:+.3f} |")
    return [f"{kernel}:", "", *rows, ""]


def report(path_a: Path, path_b: Path, stall_change: float) -> str:
    board_a, counters_a, configs_a = load(path_a)
    board_b, counters_b, configs_b = load(path_b)
    out = [f"A: `{path_a.name}` on the {board_a}", f"B: `{path_b.name}` on the {board_b}", ""]
    for kernel in [k for k in counters_a if k in counters_b]:
        ca, cb = configs_a.get(kernel), configs_b.get(kernel)
        same = "the same configuration" if ca == cb else "CONFIGURATIONS DIFFER"
        out.append(f"- {kernel}: A `{ca or '-'}`, B `{cb or '-'}` ({same})")
    only = sorted(set(counters_a) ^ set(counters_b))
    if only:
        out.append(f"- profiled in one audit only: {', '.join(only)}")
    out.append("")
    for kernel in [k for k in counters_a if k in counters_b]:
        out += kernel_table(kernel, counters_a[kernel], counters_b[kernel], stall_change)
    return "\n".join(out).rstrip("\n")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Two audits' Nsight Compute counters side by side.")
    parser.add_argument("audit_a", type=Path)
    parser.add_argument("audit_b", type=Path)
    parser.add_argument("--stall-change", type=float, default=0.02,
                        help="list a stall reason where it moves by at least this much per issued instruction")
    args = parser.parse_args(argv)
    try:
        print(report(args.audit_a, args.audit_b, args.stall_change))
    except NotAnAudit as e:
        print(e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
