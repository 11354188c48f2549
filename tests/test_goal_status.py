"""tools/analysis/goal_status.py: issue 15's goal table in the README is what the committed sessions give, and a
goal's status follows its interval: met where the lower end clears it, "mean only" where only the mean does."""

from pathlib import Path

from softbench.predictions.evaluate import resolved_option
from softbench.predictions.sessions import load_sessions
from softbench.report.replication import Replication, replications
from tests.repo_tools import copy_sessions, load_tool, relabel_board

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = ROOT / "sessions"
goal_status = load_tool("analysis/goal_status.py")


def _group(estimates):
    return Replication("NVIDIA H200", "bf16-8K-causal-b1h16d128", "at equal clock", "A0", "cfg", "ref-fa3",
                       tuple(f"s{i}" for i in range(len(estimates))), tuple(estimates),
                       tuple((e - 0.3, e + 0.3) for e in estimates), ())


def _verdict(group, at_least_pct):
    return goal_status.verdict(group, at_least_pct, goal_status.interval(group))


def test_status_follows_the_interval_across_sessions():
    assert _verdict(_group([0.5, 0.6, 0.7]), 0.0) == "met"
    assert _verdict(_group([-0.3, 0.2, 0.7]), 0.0) == "mean only"
    assert _verdict(_group([-0.3, -0.2, 0.1]), 0.0) == "not met"
    assert _verdict(_group([2.0, 2.2]), 3.0) == "not met"
    # on the goal is at it: a lower end equal to the goal meets it, a mean equal to it is "mean only"
    assert goal_status.verdict(_group([0.5, 0.6, 0.7]), 0.0, (0.0, 1.0)) == "met"
    assert goal_status.verdict(_group([-1.0, 0.0, 1.0]), 0.0, (-2.0, 2.0)) == "mean only"


def test_one_session_carries_its_own_interval():
    """h15-folded-clamped at BF16 causal 8K was timed against FA3 in one session under the default
    (20261204T212949Z): its status rests on that session's own per-pair interval, and says so."""
    name = "20261204T212949Z-latency-bf16-8K-causal-b1h16d128-triton-A0-vs-h15-folded-clamped-interleaved"
    groups, _ = replications(load_sessions([SESSIONS / name]), min_sessions=1)
    (one,) = [g for g in groups if g.kernel == "h15-folded-clamped"]
    low, high = goal_status.interval(one)
    assert -2.9 < low < -2.45 < high < -2.0
    assert _verdict(one, 3.0) == "not met (one session)"


def test_a_goal_reads_the_h200_alone(tmp_path):
    """Issue 15's goals are the H200's: a noexp session recorded as run on an H100 stays out of the ceiling row,
    which reads the H200's other session; asked for the H100 (--gpu), the row reads that one alone."""
    names = ["20261204T194842Z-latency-bf16-8K-causal-b1h16d128-triton-A0-vs-noexp-interleaved",
             "20261204T195200Z-latency-bf16-8K-causal-b1h16d128-triton-A0-vs-noexp-interleaved"]
    copy_sessions(names, tmp_path)
    relabel_board(tmp_path / names[0], "NVIDIA H100 80GB HBM3")
    groups, _ = replications(load_sessions([tmp_path]), min_sessions=1)
    (row,) = [r for r in goal_status.ceiling_rows(groups) if "bf16-8K-causal" in r]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == "1" and cells[6].endswith("(one session)")  # the H200's one session, not the H100's
    (h100,) = [r for r in goal_status.ceiling_rows(groups, "NVIDIA H100 80GB HBM3") if "bf16-8K-causal" in r]
    assert h100 != row and h100.split("|")[4].strip() == "1"  # asked for by name, the H100's session alone


def test_the_ceiling_reading_places_the_goal_against_the_interval():
    assert goal_status.ceiling_reading((-2.8, 3.9), 0.55, 3.0) == "goal inside the ceiling's interval"
    assert goal_status.ceiling_reading((0.2, 0.9), 0.55, 3.0) == "goal above the ceiling"
    assert goal_status.ceiling_reading((4.0, 5.0), 4.5, 3.0) == "goal below the ceiling"
    assert goal_status.ceiling_reading(None, 0.55, 3.0) == "goal above the ceiling"  # no interval: the mean
    # a goal on either end of the interval is inside it
    assert goal_status.ceiling_reading((1.0, 3.0), 2.0, 3.0) == "goal inside the ceiling's interval"
    assert goal_status.ceiling_reading((3.0, 4.0), 3.5, 3.0) == "goal inside the ceiling's interval"


def test_the_ceiling_row_reads_the_noexp_sessions():
    """The BF16 form goal's ceiling: noexp against FA3 at causal 8K under the 16-bit default, two sessions
    (20261204T194842Z, 195200Z; +0.29% and +0.82% per pair)."""
    names = ["20261204T194842Z-latency-bf16-8K-causal-b1h16d128-triton-A0-vs-noexp-interleaved",
             "20261204T195200Z-latency-bf16-8K-causal-b1h16d128-triton-A0-vs-noexp-interleaved"]
    groups, _ = replications(load_sessions([SESSIONS / n for n in names]), min_sessions=1)
    (row,) = [r for r in goal_status.ceiling_rows(groups) if "bf16-8K-causal" in r]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == "2" and cells[4].startswith("+0.55 [")
    assert cells[6] == "goal inside the ceiling's interval"  # a t interval on one degree of freedom is wide


def _tables(text):
    """The markdown tables in text, each as its lines joined."""
    blocks, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            blocks.append("\n".join(current))
            current = []
    return blocks


def test_the_readme_tables_are_what_the_sessions_give():
    readme = (ROOT / "README.md").read_text()
    printed = goal_status.table(goal_status.latency_sessions(SESSIONS))
    goals, ceilings = _tables(printed)
    assert len(goals.splitlines()) >= 2 + 9  # the header, then at least one row per goal
    assert len(ceilings.splitlines()) == 2 + 3  # one row per form goal
    assert goals in readme and ceilings in readme
    assert printed.splitlines()[0] in readme  # the default configurations it read the goals in


def test_the_readme_h100_table_is_what_the_sessions_give():
    """The board replication's table (tools/gpu/h100_replication.sh): the same goals read from the H100's sessions
    alone, the line naming the board included."""
    readme = (ROOT / "README.md").read_text()
    printed = goal_status.table(goal_status.latency_sessions(SESSIONS), "NVIDIA H100 80GB HBM3")
    goals, ceilings = _tables(printed)
    assert printed.splitlines()[0] in readme and goals in readme and ceilings in readme
    # its FP8 causal 8K row counts the H100's sessions of that shape with FA3 in the FP8 default, none of the H200's
    # and none under another configuration (fp8_k_ring.sh 2 timed K's ring of three there)
    h100 = [r for r in load_sessions([SESSIONS]) if r.board == "NVIDIA H100 80GB HBM3" and r.command == "latency"
            and r.summary.get("shape_tag") == "fp8-8K-causal-b1h16d128"
            and r.summary.get("quantity") == "at equal clock"
            and "ref-fa3" in (r.summary.get("references") or [])
            and resolved_option("label", r) == goal_status.default_label("fp8")]
    assert len(h100) >= 2
    assert f"| A0 at least as fast as FA3 | fp8-8K-causal-b1h16d128 | at equal clock | A0 | {len(h100)} |" in goals


def test_a_board_no_session_ran_on_is_one_sentence(capsys):
    """A misspelt board (--gpu H100) would give a table of "not known" rows; it is refused and the boards that
    are there are named."""
    assert goal_status.main([str(SESSIONS), "--gpu", "H100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'H100'" in err and "NVIDIA H100 80GB HBM3" in err and "NVIDIA H200" in err

