"""tools/analysis/goal_status.py: issue 15's goal table in the README is what the committed sessions give, and a
goal's status follows its interval: met where the lower end clears it, "mean only" where only the mean does."""

from pathlib import Path

from softbench.predictions.sessions import load_sessions
from softbench.report.replication import Replication, replications
from tests.repo_tools import load_tool

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = ROOT / "sessions"
goal_status = load_tool("analysis/goal_status.py")


def _group(estimates):
    return Replication("bf16-8K-causal-b1h16d128", "at equal clock", "A0", "cfg", "ref-fa3",
                       tuple(f"s{i}" for i in range(len(estimates))), tuple(estimates),
                       tuple((e - 0.3, e + 0.3) for e in estimates), ())


def _verdict(group, at_least_pct):
    return goal_status.verdict(group, at_least_pct, goal_status.interval(group))


def test_status_follows_the_interval_across_sessions():
    assert _verdict(_group([0.5, 0.6, 0.7]), 0.0) == "met"
    assert _verdict(_group([-0.3, 0.2, 0.7]), 0.0) == "mean only"
    assert _verdict(_group([-0.3, -0.2, 0.1]), 0.0) == "not met"
    assert _verdict(_group([2.0, 2.2]), 3.0) == "not met"


def test_one_session_carries_its_own_interval():
    """h15-folded-clamped at BF16 causal 8K was timed against FA3 in one session under the default
    (20261204T212949Z): its status rests on that session's own per-pair interval, and says so."""
    name = "20261204T212949Z-latency-bf16-8K-causal-b1h16d128-triton-A0-vs-h15-folded-clamped-interleaved"
    groups, _ = replications(load_sessions([SESSIONS / name]), min_sessions=1)
    (one,) = [g for g in groups if g.kernel == "h15-folded-clamped"]
    low, high = goal_status.interval(one)
    assert -2.9 < low < -2.45 < high < -2.0
    assert _verdict(one, 3.0) == "not met (one session)"


def test_the_readme_table_is_what_the_sessions_give():
    readme = (ROOT / "README.md").read_text()
    printed = goal_status.table(SESSIONS)
    table = [line for line in printed.splitlines() if line.startswith("|")]
    assert len(table) >= 2 + 9  # the header, then at least one row per goal
    start = readme.index(table[0])
    assert readme[start:start + len("\n".join(table))] == "\n".join(table)
    assert printed.splitlines()[0] in readme  # the default configurations it read the goals in
