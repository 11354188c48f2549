"""Markdown printers, pinned byte for byte: summary.md of one recorded session per kind, report.md over a few
recorded sessions, and cells holding '|' (escaped or replaced per printer). The expected files under
tests/data/markdown/ were written by the printers as they stood before the tables were built by one helper;
SOFTBENCH_UPDATE_GOLDEN=1 rewrites them (only when a change of output is intended)."""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path

import pytest

from softbench.audit.render import audit_markdown
from softbench.fidelity.report import fidelity_markdown
from softbench.gates.render import gates_markdown
from softbench.latency.render import latency_markdown
from softbench.energy.render import energy_markdown
from softbench.sweep.render import sweep_markdown
from softbench.trace.render import trace_markdown
from softbench.report.build import Report, _markdown, build_report
from softbench.report.tables import TableData

# copies of the recorded sessions these tests read, without their large raw files (traces, cubins, SASS, ncu reports)
SESSIONS = Path(__file__).resolve().parent / "data" / "sessions"
GOLDEN = Path(__file__).resolve().parent / "data" / "markdown"

PRINTERS = {"latency": latency_markdown, "energy": energy_markdown, "trace": trace_markdown,
            "sweep": sweep_markdown, "gates": gates_markdown, "audit": audit_markdown,
            "fidelity": lambda summary, title: fidelity_markdown(summary)}

RECORDED = [
    "20261130T114414Z-latency-bf16-4K-causal-b1h16d128-fa4-A0-vs-A1",  # with the smoke table
    "20261130T121447Z-energy-bf16-16K-causal-b1h16d128-fa4-A0-A1-A1-A0",
    "20261130T121826Z-trace-bf16-causal-4K-8K-16K-fa4-A0-A1",
    "20261130T121202Z-sweep-variants-bf16-8K-noncausal-b1h16d128-fa4-vs-A0",
    "20261130T120901Z-gates-bf16-512-causal-b1h4d128-fa4-A1-vs-A0",
    "20261130T121009Z-audit-bf16-8K-causal-b1h16d128-fa4",
    "20261130T131647Z-fidelity-smollm2-135m-sim",  # with paired contrasts
]


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("SOFTBENCH_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


def _summary(name: str) -> dict:
    return json.loads((SESSIONS / name / "summary.json").read_text())


@pytest.mark.parametrize("name", RECORDED)
def test_summary_markdown_of_recorded_session(name):
    summary = _summary(name)
    _check(f"{name}.md", PRINTERS[summary["command"]](summary, name))


def test_cells_with_bars():
    sweep = copy.deepcopy(_summary(RECORDED[3]))
    sweep["rows"][0]["description"] = "a | b"
    sweep["rows"].append({"variant": "broken", "description": "x", "beta_pct": None, "error": "exit 1 | no GPU"})
    _check("bars-sweep.md", sweep_markdown(sweep, "bars"))
    trace = copy.deepcopy(_summary(RECORDED[2]))
    trace["points"][0]["kernel_name"] = "void k<a|b>(x)"
    _check("bars-trace.md", trace_markdown(trace, "bars"))
    report = Report(out_dir=Path("."), tables=[TableData("t", ["a", "b|c"], [["1|2", "3"], ["4", "5"]])],
                    figures=[Path("x/fig.png")], unknown=[("s", "why")])
    _check("bars-report.md", _markdown(report, {"latency": [None, None]}))


def test_report_markdown_of_recorded_sessions(tmp_path):
    src = tmp_path / "sessions"
    for name in RECORDED:
        shutil.copytree(SESSIONS / name, src / name)
    build_report([src], tmp_path / "out")
    _check("report.md", (tmp_path / "out" / "report.md").read_text())


def test_md_table():
    from softbench.core.tables import md_table

    assert md_table(["a", "b"], [["1", "2"], ["3", "4"]]) == ["| a | b |", "| --- | --- |", "| 1 | 2 |", "| 3 | 4 |"]
    assert md_table(["a"], []) == ["| a |", "| --- |"]
    assert md_table(["a"], [["x|y"]], bar="/") == ["| a |", "| --- |", "| x/y |"]
    assert md_table(["a|b"], [["x|y"]], bar="\\|") == ["| a|b |", "| --- |", "| x\\|y |"]
