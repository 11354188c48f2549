#!/usr/bin/env python3
"""Issue 15's speed goals, where the committed sessions put them (no GPU).

    python tools/analysis/goal_status.py [sessions] [--gpu BOARD]

BOARD (default: the H200 the goals name) reads the same goals from another board's sessions, e.g. "NVIDIA H100
80GB HBM3" for the replication on an H100 (tools/gpu/h100_replication.sh): that table is a replication, not
evidence for the goals.

Every figure is the report's own grouping across sessions (softbench.report.replication: each complete latency
session that timed FA3 in the same run, its per-pair estimate re-estimated from its units, grouped by shape,
quantity, kernel and configuration; the mean with a Student-t interval across sessions, or, for a kernel timed in
one session only, that session's own interval, said so). Each goal is read in the configuration the backend runs by
default for its dtype (gluon_config.default_config); for a goal on "the best correct form" every Rowmax-H15 form
timed there is listed, the best first. A goal is "met" where the interval's lower end clears it, "mean only" where
the mean does and the interval still holds the goal, else "not met".

A second table sets each form goal beside the exponential-free control (noexp: every weight 1, no exponential
and no Rowmax-H15, not a correct form) timed against FA3 at the same shape, quantity and configuration: no form
of the weights can run faster than the kernel without any, so a goal above that ceiling's interval is one the
weights alone cannot reach there; the kernel around them has to move first."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout

import torch  # noqa: E402

from softbench.kernels import gluon_config  # noqa: E402
from softbench.predictions.sessions import SessionRecord, load_sessions  # noqa: E402
from softbench.report.replication import Replication, replications  # noqa: E402

REFERENCE = "ref-fa3"
# the board issue 15's goals name: an H100's sessions (the same capability, slower memory, other clocks) are a
# replication elsewhere, not evidence for these goals
GOAL_GPU = "NVIDIA H200"
# the Rowmax-H15 forms whose gates have passed in the Gluon kernel (docs/leases.md's gate rows name the configurations)
ROWMAX_FORMS = ("h15-folded", "h15-folded-clamped", "h15-sat", "h15-proved", "A1", "h15-1of4", "h15-1of2")
SHAPES = ("causal-b1h16d128", "noncausal-b1h16d128")
CEILING = "noexp"  # the exponential-free control: the weights' cost taken out of the kernel


@dataclass(frozen=True)
class Goal:
    what: str
    dtype: str  # bf16 or fp8
    shape_tag: str
    quantity: str  # as sessions record it: 'at equal clock' or 'sustained'
    kernels: tuple[str, ...]
    at_least_pct: float  # the goal as a speed-up over FA3, %


def goals() -> list[Goal]:
    parity = [Goal("A0 at least as fast as FA3", dtype, f"{dtype}-{seq}-{mask}", "at equal clock", ("A0",), 0.0)
              for dtype in ("fp8", "bf16") for seq, mask in (("8K", SHAPES[0]), ("16K", SHAPES[0]),
                                                            ("8K", SHAPES[1]))]
    return parity + [
        Goal("best correct Rowmax-H15 form >= 1.10 of FA3", "fp8", f"fp8-8K-{SHAPES[0]}", "at equal clock",
             ROWMAX_FORMS, 10.0),
        Goal("best correct Rowmax-H15 form >= 1.05 of FA3 sustained", "fp8", f"fp8-8K-{SHAPES[0]}", "sustained",
             ROWMAX_FORMS, 5.0),
        Goal("best correct Rowmax-H15 form >= 1.03 of FA3", "bf16", f"bf16-8K-{SHAPES[0]}", "at equal clock",
             ROWMAX_FORMS, 3.0),
    ]


def default_label(dtype: str) -> str:
    torch_dtype = torch.float8_e4m3fn if dtype == "fp8" else torch.bfloat16
    return gluon_config.default_config(torch_dtype, 128).label()


def interval(group: Replication) -> tuple[float, float] | None:
    """The t interval across sessions; for a group of one session, that session's own 95% interval (None where it
    has none)."""
    return group.t_interval() if len(group.sessions) > 1 else group.intervals_pct[0]


def estimate(group: Replication, bounds: tuple[float, float] | None) -> str:
    """+0.57 [+0.26, +0.87]: the mean across sessions and the interval `bounds`, where it has one."""
    return f"{group.mean_pct:+.2f}" + (f" [{bounds[0]:+.2f}, {bounds[1]:+.2f}]" if bounds else "")


def verdict(group: Replication, at_least_pct: float, bounds: tuple[float, float] | None) -> str:
    """met, mean only or not met (see the module's doc), for the group and its interval `bounds`."""
    if bounds is not None and bounds[0] >= at_least_pct:
        status = "met"
    else:
        status = "mean only" if group.mean_pct >= at_least_pct else "not met"
    return status + (" (one session)" if len(group.sessions) == 1 else "")


HEADER = ("| goal | shape | quantity | kernel | sessions | against FA3, % (mean [95% t]) | goal, % | status |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |")


def matching(groups: list[Replication], goal: Goal, kernels: tuple[str, ...], gpu: str = GOAL_GPU) -> list[Replication]:
    """The groups of these kernels against FA3 on board `gpu` at the goal's shape and quantity, in its dtype's
    default configuration, the fastest first."""
    config = default_label(goal.dtype)
    return sorted((g for g in groups if g.gpu == gpu and g.shape_tag == goal.shape_tag
                   and g.quantity == goal.quantity and g.config == config and g.against == REFERENCE
                   and g.kernel in kernels),
                  key=lambda g: -g.mean_pct)


def rows(groups: list[Replication], gpu: str = GOAL_GPU) -> list[str]:
    out = []
    for goal in goals():
        found = matching(groups, goal, goal.kernels, gpu)
        if not found:
            out.append(f"| {goal.what} | {goal.shape_tag} | {goal.quantity} | {', '.join(goal.kernels)} | 0 | "
                       f"not timed under `{default_label(goal.dtype)}` | {goal.at_least_pct:+.0f} | not known |")
        for g in found:
            bounds = interval(g)
            out.append(f"| {goal.what} | {goal.shape_tag} | {goal.quantity} | {g.kernel} | {len(g.sessions)} | "
                       f"{estimate(g, bounds)} | {goal.at_least_pct:+.0f} | "
                       f"{verdict(g, goal.at_least_pct, bounds)} |")
    return out


def ceiling_reading(bounds: tuple[float, float] | None, mean_pct: float, at_least_pct: float) -> str:
    """Where the goal lies against the ceiling's interval (its mean where it has none)."""
    low, high = bounds if bounds is not None else (mean_pct, mean_pct)
    if at_least_pct > high:
        return "goal above the ceiling"
    return "goal below the ceiling" if at_least_pct < low else "goal inside the ceiling's interval"


CEILING_HEADER = ("| form goal | shape | quantity | sessions | noexp against FA3, % (mean [95% t]) | goal, % | "
                  "reading |\n| --- | --- | --- | --- | --- | --- | --- |")


def ceiling_rows(groups: list[Replication], gpu: str = GOAL_GPU) -> list[str]:
    out = []
    for goal in goals():
        if goal.kernels != ROWMAX_FORMS:  # the parity goals are A0's own, not a form's
            continue
        found = matching(groups, goal, (CEILING, ), gpu)
        for g in found:
            bounds = interval(g)
            one = " (one session)" if len(g.sessions) == 1 else ""
            out.append(f"| {goal.what} | {goal.shape_tag} | {goal.quantity} | {len(g.sessions)} | "
                       f"{estimate(g, bounds)} | {goal.at_least_pct:+.0f} | "
                       f"{ceiling_reading(bounds, g.mean_pct, goal.at_least_pct)}{one} |")
        if not found:
            out.append(f"| {goal.what} | {goal.shape_tag} | {goal.quantity} | 0 | not timed under "
                       f"`{default_label(goal.dtype)}` | {goal.at_least_pct:+.0f} | not known |")
    return out


def latency_sessions(folder: Path) -> list[SessionRecord]:
    return [r for r in load_sessions([folder]) if r.facts.get("command") == "latency"]


def table(latency: list[SessionRecord], gpu: str = GOAL_GPU) -> str:
    """Both tables for board `gpu`, from these latency sessions."""
    groups, _ = replications(latency, min_sessions=1)
    configs = ", ".join(f"{d.upper()} `{default_label(d)}`" for d in ("bf16", "fp8"))
    return "\n".join([f"On the {gpu}. Default configurations: {configs}.", "", HEADER, *rows(groups, gpu), "",
                      "The exponential-free ceiling beside each form goal (the same grouping):", "", CEILING_HEADER,
                      *ceiling_rows(groups, gpu)])


def sessions_on(folder: Path, gpu: str) -> tuple[list[SessionRecord], str | None]:
    """The latency sessions in `folder`, and None; or none and the one sentence that says why there is nothing to
    read for board `gpu` (a misspelt board would otherwise give tables of "not known" rows)."""
    if not folder.is_dir():
        return [], f"{folder} is not a folder of sessions"
    latency = latency_sessions(folder)
    boards = sorted({r.board for r in latency})
    if gpu not in boards:
        return [], f"no latency session in {folder} ran on {gpu!r}; the boards there: {', '.join(boards)}"
    return latency, None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Issue 15's speed goals, where the committed sessions put them.")
    parser.add_argument("sessions", nargs="?", default="sessions", type=Path)
    parser.add_argument("--gpu", default=GOAL_GPU, help=f"the board whose sessions to read (default: {GOAL_GPU})")
    args = parser.parse_args(argv)
    latency, refusal = sessions_on(args.sessions, args.gpu)
    if refusal:
        print(refusal, file=sys.stderr)
        return 2
    print(table(latency, args.gpu))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
