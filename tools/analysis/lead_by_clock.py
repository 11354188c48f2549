#!/usr/bin/env python3
"""Each kernel's speed-up over FA3 against the SM clock its session ran at, on one board (no GPU).

    python tools/analysis/lead_by_clock.py [sessions] --gpu BOARD [--shape TAG] [--kernel NAME ...]

An interleaved session runs all its kernels at one clock (the protocol's equal clock), but the clock itself is the
board's choice under its power cap, and it differs from session to session (1,830-1,950 MHz at FP8 causal 8K on
the H100s of 2026-12-05). A kernel whose time does not shrink with the SM clock as FA3's does (one that waits on
memory more) reads a smaller speed-up over FA3 at a higher clock. This prints, per kernel, every complete session
at the shape in the dtype's default configuration with FA3 in the same run: the board that ran it (the tail of its
NVML UUID: the device tool lends a different machine per lease), the baseline's median SM clock, and the speed-up
over FA3 as the report re-estimates it (the same values tools/analysis/goal_status.py averages). Then two
least-squares lines through them: across all sessions, and within machines (each machine's mean clock and speed-up
taken out first), so that a machine's own offset is not read as the clock's effect. A line needs three sessions;
the within-machine one needs clocks that differ on at least one machine."""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))  # goal_status beside it: the goals' reference and defaults

from goal_status import REFERENCE, default_label, sessions_on  # noqa: E402
from scipy import stats  # noqa: E402

from softbench.predictions.sessions import SessionRecord  # noqa: E402
from softbench.report.replication import Replication, replications  # noqa: E402

QUANTITY = "at equal clock"  # a sustained session's kernels run at clocks of their own: no one clock to plot against


@dataclass(frozen=True)
class Point:
    session: str
    machine: str  # the last six characters of the board's NVML UUID; '?' where the session records none
    clock_mhz: float  # the baseline's median SM clock over the session's pairs
    lead_pct: float  # the kernel's speed-up over FA3 in that session


@dataclass(frozen=True)
class Line:
    n: int
    slope_pct_per_100mhz: float
    interval: tuple[float, float]  # 95% Student-t on n - 2 degrees of freedom (n - 1 - machines within machines)
    r: float


def machine(rec: SessionRecord) -> str:
    uuid = str(((rec.env.get("gpu") or {}).get("nvml") or {}).get("uuid") or "")
    return uuid[-6:] or "?"


def points(groups: list[Replication], records: dict[str, SessionRecord], gpu: str, shape_tag: str,
           kernel: str) -> list[Point]:
    """The sessions of the goal table's group for `kernel` on `gpu` at `shape_tag` (against FA3, at equal clock, in
    the dtype's default configuration: softbench.report.replication's grouping of complete sessions), each at the
    clock its record gives, oldest first. `records` are the latency sessions by name."""
    wanted = (gpu, shape_tag, QUANTITY, kernel, default_label(shape_tag.split("-")[0]), REFERENCE)
    out = []
    for g in groups:
        if (g.gpu, g.shape_tag, g.quantity, g.kernel, g.config, g.against) != wanted:
            continue
        for name, lead in zip(g.sessions, g.estimates_pct):
            rec = records[name]
            clock = (rec.summary.get("sm_clock_mhz_median") or {}).get(rec.summary.get("baseline"))
            if isinstance(clock, (int, float)):
                out.append(Point(name, machine(rec), float(clock), lead))
    return sorted(out, key=lambda p: p.session)


def _fit(xs: list[float], ys: list[float], dof: int) -> Line | None:
    sxx = sum(x * x for x in xs)
    if dof < 1 or sxx == 0:
        return None
    slope = sum(x * y for x, y in zip(xs, ys)) / sxx
    resid = [y - slope * x for x, y in zip(xs, ys)]
    se = math.sqrt(sum(e * e for e in resid) / dof / sxx)
    half = stats.t.ppf(0.975, dof) * se
    syy = sum(y * y for y in ys)
    r = slope * math.sqrt(sxx / syy) if syy > 0 else float("nan")
    return Line(len(xs), slope * 100, ((slope - half) * 100, (slope + half) * 100), r)


def line_across(pts: list[Point]) -> Line | None:
    """The least-squares line through every session (centred on the mean clock and speed-up)."""
    if len(pts) < 3:
        return None
    mx = sum(p.clock_mhz for p in pts) / len(pts)
    my = sum(p.lead_pct for p in pts) / len(pts)
    return _fit([p.clock_mhz - mx for p in pts], [p.lead_pct - my for p in pts], len(pts) - 2)


def line_within(pts: list[Point]) -> Line | None:
    """The same, each machine's own means taken out first (a fixed offset per machine); None where no machine ran
    the kernel at two clocks."""
    by_machine: dict[str, list[Point]] = {}
    for p in pts:
        by_machine.setdefault(p.machine, []).append(p)
    xs, ys = [], []
    for group in by_machine.values():
        mx = sum(p.clock_mhz for p in group) / len(group)
        my = sum(p.lead_pct for p in group) / len(group)
        xs += [p.clock_mhz - mx for p in group]
        ys += [p.lead_pct - my for p in group]
    return _fit(xs, ys, len(pts) - len(by_machine) - 1)


def describe(line: Line | None, what: str) -> str:
    if line is None:
        return f"{what}: no line (too few sessions, or no clock that differs)"
    lo, hi = line.interval
    return (f"{what}: {line.slope_pct_per_100mhz:+.2f} points per 100 MHz [{lo:+.2f}, {hi:+.2f}], r {line.r:+.2f}, "
            f"{line.n} sessions")


def report(latency: list[SessionRecord], gpu: str, shape_tag: str, kernels: list[str]) -> str:
    config = default_label(shape_tag.split("-")[0])
    groups, _ = replications(latency, min_sessions=1)
    records = {r.name: r for r in latency}
    out = [f"On the {gpu}, {shape_tag} at equal clock, each kernel against FA3 in `{config}`.", ""]
    for kernel in kernels:
        pts = points(groups, records, gpu, shape_tag, kernel)
        out += [f"{kernel}:", "", "| session | machine | SM clock, MHz | against FA3, % |", "| --- | --- | --- | --- |"]
        out += [f"| `{p.session[:16]}` | {p.machine} | {p.clock_mhz:,.0f} | {p.lead_pct:+.2f} |" for p in pts]
        machines = len({p.machine for p in pts})
        out += ["", f"- {describe(line_across(pts), 'across sessions')}",
                f"- {describe(line_within(pts), f'within machines ({machines})')}", ""]
    return "\n".join(out).rstrip("\n")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Each kernel's speed-up over FA3 against its session's SM clock.")
    parser.add_argument("sessions", nargs="?", default="sessions", type=Path)
    parser.add_argument("--gpu", required=True, help="the board whose sessions to read, e.g. 'NVIDIA H100 80GB HBM3'")
    parser.add_argument("--shape", default="fp8-8K-causal-b1h16d128", help="the sessions' shape tag")
    parser.add_argument("--kernel", action="append", help="a kernel (repeatable; default: A0, h15-folded, noexp)")
    args = parser.parse_args(argv)
    if args.shape.split("-")[0] not in ("fp8", "bf16"):
        print(f"--shape {args.shape!r} does not start with a dtype the goals use (fp8 or bf16)", file=sys.stderr)
        return 2
    latency, refusal = sessions_on(args.sessions, args.gpu)
    if refusal:
        print(refusal, file=sys.stderr)
        return 2
    print(report(latency, args.gpu, args.shape, args.kernel or ["A0", "h15-folded", "noexp"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
