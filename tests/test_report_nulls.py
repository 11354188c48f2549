"""softbench.report.nulls: every recorded A/A null beside the run's protocol, kernel count and start order. Real
inputs: a recorded H200 session copied to tests/data/sessions, and a sim run started in a shuffled order."""
from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

from softbench.predictions.sessions import load_sessions
from softbench.report.build import build_report
from softbench.report.nulls import NullRow, null_rows, null_spread, null_summary, null_table_rows

RECORDED = (Path(__file__).resolve().parent / "data" / "sessions"
            / "20261201T093441Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-sat-interleaved")
QUICK = ("protocol:\n  kind: interleaved\n  calls: 2\n  untimed: 0\n  min_pairs: 10\n  check_every: 5\n"
         "  budget_s: 1\n  warmup_min_s: 0.2\n  warmup_max_s: 1\n")


def test_nulls_of_a_recorded_and_a_shuffled_run(tmp_path, cli):
    root = tmp_path / "sessions"
    root.mkdir()
    shutil.copytree(RECORDED, root / RECORDED.name)
    proto = tmp_path / "quick.yaml"
    proto.write_text(QUICK)
    r = cli("latency", "--backend", "sim", "--seq", "128", "--heads", "1", "--head-dim", "64", "--variant",
            "h15-sat", "--null", "--protocol", str(proto), "--start-order", "shuffled", "--out", str(root))
    assert r.returncode == 0, r.stderr

    rows = {row.session[:16]: row for row in null_rows(load_sessions([root]))}
    assert len(rows) == 2
    recorded = rows["20261201T093441Z"]
    paired = json.loads((RECORDED / "summary.json").read_text())["comparisons"]["A0'"]["paired"]
    assert recorded.estimate_pct == paired["estimate_pct"] and list(recorded.ci) == paired["ci95_pct"]
    assert (recorded.protocol, recorded.dtype, recorded.kernels) == ("interleaved", "fp8", 4)
    # recorded before start orders were: the listed order, which starts the baseline first
    assert recorded.start_order == "listed (not recorded)" and recorded.null_first is False
    assert recorded.covers_zero is (paired["ci95_pct"][0] <= 0 <= paired["ci95_pct"][1])

    (sim,) = [row for key, row in rows.items() if key != "20261201T093441Z"]
    (session,) = [p for p in root.iterdir() if p.name != RECORDED.name]
    order = json.loads((session / "env.json").read_text())["start_order"]["labels"]
    assert sim.start_order == "shuffled: " + ", ".join(order) and sim.kernels == 3
    assert sim.null_first is (order.index("A0'") < order.index("A0"))

    table = null_table_rows([recorded, sim])
    assert table[0][4] == "listed (not recorded)" and table[0][6] == f"{paired['estimate_pct']:+.2f}"
    lines = null_summary([recorded, sim])
    assert any(line.startswith("- interleaved, four or more kernels, baseline started first: 1 null(s)")
               for line in lines)

    report = build_report([root], tmp_path / "report")
    text = report.markdown_path.read_text()
    assert "## A/A nulls" in text and "## A/A nulls across sessions" in text and "shuffled: " in text


LEASE = Path(__file__).resolve().parents[1] / "sessions"  # the committed H200 sessions


def test_the_spread_of_the_recorded_nulls_against_their_intervals():
    # the 13 interleavings of the lease of 2026-12-02 00:49-01:15, as recorded: their nulls scatter more widely than
    # their own intervals imply
    rows = null_rows(load_sessions(sorted(LEASE.glob("20261202T0[01]*-latency-*-interleaved"))))
    assert len(rows) == 13
    (line,) = null_spread(rows)
    sd = statistics.stdev(r.estimate_pct for r in rows)
    implied = statistics.median((r.ci[1] - r.ci[0]) / 2 for r in rows) / 1.96
    assert line.startswith(f"- spread, interleaved: 13 nulls scatter with a standard deviation of {sd:.2f} pp")
    assert sd > 1.5 * implied and f"imply {implied:.2f} pp: {sd / implied:.1f} times wider" in line


def _null(estimate, half):
    return NullRow("s", "interleaved", "fp8", 4, "listed", False, estimate, (estimate - half, estimate + half))


def test_spread_needs_five_nulls_and_adds_nothing_when_the_scatter_matches_the_intervals():
    assert null_spread([_null(0.1, 0.2)] * 4) == []
    # a half-width of 0.196 implies a standard deviation of 0.10; nulls with that scatter are what it promises
    (line,) = null_spread([_null(x, 0.196) for x in (-0.1, 0.0, 0.1, -0.1, 0.0, 0.1, 0.0)])
    assert "imply 0.10 pp" in line and "times wider" not in line


def test_a_scatter_of_exactly_one_and_a_half_times_the_implied_is_not_flagged():
    # sd of (-1.5, -1.5, 0, 1.5, 1.5) is 1.5; a half-width of 1.96 implies 1.0
    (line,) = null_spread([_null(x, 1.96) for x in (-1.5, -1.5, 0.0, 1.5, 1.5)])
    assert line.endswith("standard deviation of 1.50 pp across sessions; their intervals (median half-width 1.96 pp) "
                         "imply 1.00 pp")


def test_each_group_counts_its_nulls_their_mean_signs_and_misses():
    two = [NullRow("s1", "interleaved", "fp8", 2, "listed", False, 0.0, (0.0, 0.5)),  # 0 on the interval's end
           NullRow("s2", "interleaved", "fp8", 2, "listed", False, 0.6, None),  # no interval: no miss either
           NullRow("s3", "interleaved", "fp8", 2, "listed", False, -0.3, (-0.9, -0.1))]
    assert two[0].covers_zero is True and two[1].covers_zero is None and two[2].covers_zero is False
    assert null_summary(two) == ["- interleaved, two kernels, baseline started first: 3 null(s), mean +0.10 pp, "
                                 "1 positive; misses of 0: 1 (-0.30)"]
    three = [NullRow("s4", "sustained", "bf16", 3, "shuffled: A0', A0, v", True, 0.2, (0.1, 0.3))]
    assert null_summary(three) == ["- sustained, three kernels, null started first: 1 null(s), mean +0.20 pp, "
                                   "1 positive; misses of 0: 1 (+0.20)"]
