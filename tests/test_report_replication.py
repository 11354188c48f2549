"""softbench.report.replication: each kernel against FA3 across the sessions that timed both. Real inputs: the
BF16 causal 16K sessions of 2026-12-04 in the project's sessions/ (H200, --null --reference fa3), read in place or
copied to a temporary folder where one is to be marked partial."""
from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest
from scipy import stats

from softbench.predictions.sessions import load_sessions
from softbench.report.build import build_report
from softbench.report.reestimate import against_reference
from softbench.report.replication import replication_rows, replication_summary, replications
from tests.repo_tools import copy_sessions, relabel_board

SESSIONS = Path(__file__).resolve().parents[1] / "sessions"
DEFAULT_16 = "gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf"
# BF16 causal 16K under the 16-bit default of 07:44-17:40 (A0 against h15-sat, noexp or h15-folded), and one under hg2
HG4 = ("20261204T072932Z-latency-bf16-16K-causal-b1h16d128-triton-A0-vs-h15-sat-interleaved",
       "20261204T084718Z-latency-bf16-16K-causal-b1h16d128-triton-A0-vs-h15-sat-interleaved",
       "20261204T090424Z-latency-bf16-16K-causal-b1h16d128-triton-A0-vs-noexp-interleaved",
       "20261204T101606Z-latency-bf16-16K-causal-b1h16d128-triton-A0-vs-h15-folded-interleaved")
HG2 = "20261204T084626Z-latency-bf16-16K-causal-b1h16d128-triton-A0-vs-h15-sat-interleaved"


def _copy(tmp_path: Path, names) -> Path:
    return copy_sessions(names, tmp_path / "sessions")


def _group(groups, kernel: str, config: str = DEFAULT_16):
    (g,) = [g for g in groups if g.kernel == kernel and g.config == config]
    return g


def test_a_group_holds_each_sessions_own_estimate_against_fa3():
    recs = load_sessions([SESSIONS / n for n in HG4 + (HG2,)])
    groups, notes = replications(recs)
    a0 = _group(groups, "A0")
    assert a0.sessions == HG4 and (a0.shape_tag, a0.quantity, a0.against) == ("bf16-16K-causal-b1h16d128",
                                                                             "at equal clock", "ref-fa3")
    by_name = {r.name: r for r in recs}
    expected = [against_reference(by_name[n], "ref-fa3")[0]["A0"] for n in HG4]
    assert list(a0.estimates_pct) == [e["estimate_pct"] for e in expected]
    assert list(a0.half_widths_pp) == [(e["ci95_pct"][1] - e["ci95_pct"][0]) / 2 for e in expected]
    # the nulls are the sessions' own A/A estimates against A0, as each summary wrote them
    written = [json.loads((SESSIONS / n / "summary.json").read_text())["comparisons"]["A0'"]["paired"]["estimate_pct"]
               for n in HG4]
    assert list(a0.nulls_pct) == written
    # the mean and its Student-t interval over the four sessions
    x = [e["estimate_pct"] for e in expected]
    half = stats.t.ppf(0.975, len(x) - 1) * statistics.stdev(x) / len(x) ** 0.5
    assert a0.mean_pct == pytest.approx(statistics.fmean(x))
    assert a0.t_interval() == pytest.approx((statistics.fmean(x) - half, statistics.fmean(x) + half))
    # hg2's A0 is another configuration: one session, left out, and so are the variants timed once
    assert all(g.config == DEFAULT_16 for g in groups)
    assert {g.kernel for g in groups} == {"A0", "h15-sat"}  # h15-sat in two of the four; noexp, h15-folded once
    assert any("one session only" in n for n in notes)


def test_rows_print_the_group_and_the_scatter_beyond_the_sessions_own_intervals():
    groups, notes = replications(load_sessions([SESSIONS / n for n in HG4]))
    rows = {r[3]: r for r in replication_rows(groups)}
    a0 = _group(groups, "A0")
    lo, hi = a0.t_interval()
    assert rows["A0"][:7] == ["NVIDIA H200", "bf16-16K-causal-b1h16d128", "at equal clock", "A0", DEFAULT_16,
                              "ref-fa3", "4"]
    assert rows["A0"][7] == f"{a0.mean_pct:+.2f} [{lo:+.2f}, {hi:+.2f}]"
    assert rows["A0"][10] == f"{min(a0.estimates_pct):+.2f} to {max(a0.estimates_pct):+.2f}"
    # the sample sd between sessions, the median of their own half-widths, and the nulls' range
    assert rows["A0"][8] == f"{statistics.stdev(a0.estimates_pct):.2f}"
    assert rows["A0"][9] == f"{statistics.median(a0.half_widths_pp):.2f}"
    assert rows["A0"][11] == f"{min(a0.nulls_pct):+.2f} to {max(a0.nulls_pct):+.2f}"
    assert len(set(a0.nulls_pct)) > 1 and set(a0.nulls_pct) != set(a0.estimates_pct)
    # each row names its sessions, so that a reader can find every value it averages
    assert rows["A0"][12] == ", ".join(n[:16] for n in HG4)
    text = replication_summary(groups, notes)
    for g in groups:  # a sentence exactly where the sessions scatter more than 1.5 times their intervals imply
        implied = statistics.median(g.half_widths_pp) / 1.96
        flagged = [s for s in text if s.startswith(f"- {g.kernel} (")]
        assert bool(flagged) == (statistics.stdev(g.estimates_pct) > 1.5 * implied)
        if flagged:  # how many times the scatter is what the intervals imply
            ratio = statistics.stdev(g.estimates_pct) / implied
            assert flagged[0].endswith(f"{ratio:.1f} times what their own intervals imply ({implied:.2f} pp)")
    assert any(s.startswith("- ") and "times what their own intervals imply" in s for s in text)



def test_a_session_whose_estimates_cannot_be_read_is_named_as_left_out():
    """The -lm run of 2026-12-02 timed FA3 but its A0 was not exact attention: it gives no point, and the
    section on how the table is made says so by name rather than leaving it out silently."""
    over_row = "20261202T132424Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-folded-interleaved"
    per_tile = "20261202T134042Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-folded-interleaved"
    _, notes = replications(load_sessions([SESSIONS / over_row, SESSIONS / per_tile]))
    (note,) = [n for n in notes if "left out in whole or in part" in n]
    assert note.startswith("1 session(s) that timed a reference") and note.endswith(": 20261202T132424Z")

def test_sessions_on_another_board_are_no_replicates(tmp_path):
    """An H100 and an H200 share the capability 9.0 but not their memory or clocks: the same kernel, shape and
    configuration on the two boards are two groups, each of its own sessions."""
    root = _copy(tmp_path, HG4)
    relabel_board(root / HG4[1], "NVIDIA H100 80GB HBM3")
    groups, notes = replications(load_sessions([root]), min_sessions=1)
    a0 = {g.gpu: g for g in groups if g.kernel == "A0"}
    assert set(a0) == {"NVIDIA H200", "NVIDIA H100 80GB HBM3"}
    assert a0["NVIDIA H100 80GB HBM3"].sessions == (HG4[1],)
    assert a0["NVIDIA H200"].sessions == (HG4[0],) + HG4[2:]
    several, notes = replications(load_sessions([root]))  # h15-sat: one session per board now, so left out
    assert {(g.gpu, g.kernel) for g in several} == {("NVIDIA H200", "A0")}
    assert any("one session only (per board" in n for n in notes)


def test_a_partial_session_is_no_replicate(tmp_path):
    root = _copy(tmp_path, HG4[:2])
    status = root / HG4[1] / "status.json"
    s = json.loads(status.read_text())
    s["complete"] = False
    status.write_text(json.dumps(s))
    groups, notes = replications(load_sessions([root]))
    assert groups == []  # one complete session left per kernel
    assert "1 partial session(s) that timed a reference are left out" in notes
    assert replication_summary(groups, notes)[-1].startswith("- No kernel was timed against a reference in 2")


def test_the_report_writes_the_table_and_how_it_is_made(tmp_path):
    root = _copy(tmp_path, HG4[:3])
    rep = build_report([root], tmp_path / "out")
    (table,) = [t for t in rep.tables if t.title == "against the reference across sessions"]
    assert [r[3] for r in table.rows] == ["A0", "h15-sat"]
    md = rep.markdown_path.read_text()
    assert "## against the reference across sessions: how it is made" in md
    assert f"| NVIDIA H200 | bf16-16K-causal-b1h16d128 | at equal clock | A0 | {DEFAULT_16} | ref-fa3 | 3 |" in md


def test_a_session_without_an_interval_gives_no_half_width():
    """A speed-up whose interval the session could not give (NaN bounds, too few pairs) still counts as a value
    across sessions, but not as a half-width, so the median half-width stays a number."""
    import dataclasses

    from softbench.report import replication
    from softbench.report.speedups import session_speedups

    recs = load_sessions([SESSIONS / n for n in HG4[:2]])
    p = next(p for p in session_speedups(recs[0])[0] if p.against == "ref-fa3" and p.variant == "A0")
    assert replication._interval(p) == (p.ci_low, p.ci_high)
    undefined = dataclasses.replace(p, ci_low=float("nan"), ci_high=float("nan"))
    assert replication._interval(undefined) is None
    assert replication._interval(dataclasses.replace(p, ci_low=None)) is None
    # a group's half-widths are those of the sessions that have an interval
    group = dataclasses.replace(replications(recs)[0][0], intervals_pct=((p.ci_low, p.ci_high), None))
    assert group.half_widths_pp == ((p.ci_high - p.ci_low) / 2,)


def test_a_least_of_one_session_keeps_the_kernel_timed_once():
    """hg2's session is a group of its own under min_sessions=1 (issue 15's goal table names such groups as one
    session), and the groups of several sessions are the same as under the default least of two."""
    recs = load_sessions([SESSIONS / n for n in HG4 + (HG2,)])
    every, notes = replications(recs, min_sessions=1)
    hg2 = _group(every, "A0", "gluon-n128s2-c240l24-hg2-pd-rl-ro-ltt-pm-tb-mlf")
    assert hg2.sessions == (HG2,) and not any("one session only" in n for n in notes)
    several, _ = replications(recs)
    assert [g for g in every if len(g.sessions) > 1] == several


def test_a_session_without_a_null_adds_its_estimate_and_no_null(tmp_path):
    for name in HG4:
        shutil.copytree(SESSIONS / name, tmp_path / name)
    summary_path = tmp_path / HG4[0] / "summary.json"
    summary = json.loads(summary_path.read_text())
    del summary["comparisons"]["A0'"], summary["kernels"]["A0'"]
    summary["null"] = None
    summary_path.write_text(json.dumps(summary))
    with_nulls, _ = replications(load_sessions([SESSIONS / n for n in HG4]))
    without, _ = replications(load_sessions([tmp_path / n for n in HG4]))
    a0_with, a0_without = _group(with_nulls, "A0"), _group(without, "A0")
    assert a0_without.sessions == a0_with.sessions and a0_without.estimates_pct == a0_with.estimates_pct
    assert a0_without.nulls_pct == a0_with.nulls_pct[1:]  # the first session's null is gone, the rest are kept
