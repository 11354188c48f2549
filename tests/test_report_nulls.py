"""softbench.report.nulls: every recorded A/A null beside the run's protocol, kernel count and start order. Real
inputs: a recorded H200 session copied to tests/data/sessions, and a sim run started in a shuffled order."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from softbench.predictions.sessions import load_sessions
from softbench.report.build import build_report
from softbench.report.nulls import null_rows, null_summary, null_table_rows

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
