"""tools/analysis/lead_by_clock.py: each kernel's speed-up over FA3 against its session's SM clock, read from the
committed H100 sessions of 2026-12-05 (several machines, 1,830-1,950 MHz)."""

from pathlib import Path

import pytest
from scipy import stats

from softbench.predictions.sessions import load_sessions
from softbench.report.replication import replications
from tests.repo_tools import load_tool

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = ROOT / "sessions"
H100 = "NVIDIA H100 80GB HBM3"
SHAPE = "fp8-8K-causal-b1h16d128"
lead_by_clock = load_tool("analysis/lead_by_clock.py")


@pytest.fixture(scope="module")
def h100_fp8_8k():
    folders = sorted(SESSIONS.glob("20261205T1[456]*-latency-fp8-8K-causal-*-interleaved"))
    return [r for r in load_sessions(folders) if r.command == "latency"]


def test_each_point_is_the_goal_tables_estimate_at_its_recorded_clock(h100_fp8_8k):
    """The speed-ups are the ones the goal table averages (one grouping, softbench.report.replication), and each
    clock is the baseline's median the session recorded."""
    groups, _ = replications(h100_fp8_8k, min_sessions=1)
    points = lead_by_clock.points(groups, {r.name: r for r in h100_fp8_8k}, H100, SHAPE, "h15-folded")
    (group,) = [g for g in groups if g.gpu == H100 and g.kernel == "h15-folded" and g.shape_tag == SHAPE
                and g.quantity == "at equal clock" and g.config == lead_by_clock.default_label("fp8")
                and g.against == "ref-fa3"]
    assert len(points) >= 9
    assert dict(zip(group.sessions, group.estimates_pct)) == {p.session: p.lead_pct for p in points}
    by_name = {r.name: r for r in h100_fp8_8k}
    for p in points:
        summary = by_name[p.session].summary
        assert p.clock_mhz == summary["sm_clock_mhz_median"][summary["baseline"]]
        assert len(p.machine) == 6 and p.machine in by_name[p.session].env["gpu"]["nvml"]["uuid"]
    # K's ring of three (fp8_k_ring.sh 2) ran h15-folded under another configuration: not a point here
    assert not any(p.session.startswith(("20261205T160727Z", "20261205T161016Z")) for p in points)


def test_the_line_across_sessions_is_ordinary_least_squares(h100_fp8_8k):
    """Checked against scipy's linregress: the slope, and the 95% interval from its standard error."""
    groups, _ = replications(h100_fp8_8k, min_sessions=1)
    points = lead_by_clock.points(groups, {r.name: r for r in h100_fp8_8k}, H100, SHAPE, "A0")
    line = lead_by_clock.line_across(points)
    fit = stats.linregress([p.clock_mhz for p in points], [p.lead_pct for p in points])
    half = stats.t.ppf(0.975, len(points) - 2) * fit.stderr
    assert line.n == len(points)
    assert line.slope_pct_per_100mhz == pytest.approx(fit.slope * 100)
    assert line.interval == pytest.approx(((fit.slope - half) * 100, (fit.slope + half) * 100))
    assert line.r == pytest.approx(fit.rvalue)


def _point(machine, clock, lead):
    return lead_by_clock.Point(f"s-{machine}-{clock}", machine, clock, lead)


def test_a_machine_offset_is_not_read_as_the_clock():
    """Two machines, each flat in the clock, the faster-clocked one lower: across sessions the line falls,
    within machines it is flat."""
    pts = [_point("aaaaaa", 1800, 10.0), _point("aaaaaa", 1900, 10.0), _point("aaaaaa", 1850, 10.0),
           _point("bbbbbb", 1900, 8.0), _point("bbbbbb", 2000, 8.0)]
    assert lead_by_clock.line_across(pts).slope_pct_per_100mhz < -1
    assert lead_by_clock.line_within(pts).slope_pct_per_100mhz == pytest.approx(0.0)


def test_no_line_without_a_clock_that_differs_on_one_machine():
    pts = [_point("aaaaaa", 1900, 10.0), _point("bbbbbb", 1920, 9.0), _point("cccccc", 1860, 11.0)]
    assert lead_by_clock.line_within(pts) is None
    assert lead_by_clock.line_across(pts[:2]) is None  # two sessions: no degrees of freedom left
    assert "no line" in lead_by_clock.describe(None, "within machines")


def test_a_board_no_session_ran_on_is_one_sentence(capsys, tmp_path):
    folder = SESSIONS / "20261205T162746Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-noexp-interleaved"
    (tmp_path / folder.name).symlink_to(folder)
    assert lead_by_clock.main([str(tmp_path), "--gpu", "H100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'H100'" in err and H100 in err
