"""softbench.report.drawing: a report's figures drawn in worker processes are the report drawn in one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from softbench.cli import main
from softbench.report.build import build_report
from softbench.report.drawing import MIN_FIGURES_FOR_WORKERS, PlannedFigure, draw_all
from tests.repo_tools import copy_sessions
from tests.test_report import _GOOD, _PAPER, CountingProgress, latency_session


def write_pid(path: Path) -> Path:
    """A plot that writes the id of the process that drew it (module level, so that a worker can be sent it)."""
    path.write_text(str(os.getpid()))
    return path


def _sessions_with_damage(src: Path) -> Path:
    copy_sessions([_PAPER, _GOOD], src)
    for seq in range(1024, 1024 * 14, 1024):
        latency_session(src, "bf16", seq, True, speedup=seq / 1024)
    broken = latency_session(src, "fp8", 8192, True, 9.0)  # a records file that no figure can read
    lines = (broken / "windows.jsonl").read_text().splitlines()
    lines[3] = "{not json"
    (broken / "windows.jsonl").write_text("\n".join(lines) + "\n")
    summary = src / _PAPER / "summary.json"  # a value that only the bars figure cannot draw
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "per_round_sd_pp": -1}))
    return src


def test_a_report_drawn_in_workers_is_the_report_drawn_in_one_process(tmp_path):
    src = _sessions_with_damage(tmp_path / "sessions")
    one = build_report([src], tmp_path / "one", jobs=1)
    many = build_report([src], tmp_path / "many", jobs=2, on_figures=(bar := CountingProgress()))
    assert len(one.figures) >= MIN_FIGURES_FOR_WORKERS  # enough for the workers to start
    assert [p.name for p in many.figures] == [p.name for p in one.figures]
    assert bar.total == bar.done == len(one.figures) + 2  # the broken session's windows and the bars are not drawn
    for a, b in zip(one.figures, many.figures):
        assert a.read_bytes() == b.read_bytes(), a.name
    assert many.unknown == one.unknown
    reasons = dict(one.unknown)
    assert "line 4" in reasons["2026T-latency-fp8-8192-causal"]
    assert "cannot draw (ValueError" in reasons["latency-speedup-bars.png"]
    assert many.markdown_path.read_text() == one.markdown_path.read_text()


def test_workers_draw_only_when_asked_and_when_there_are_enough_figures(tmp_path):
    def drawers(n: int, jobs: int) -> set[int]:
        folder = tmp_path / f"{n}-{jobs}"
        folder.mkdir()
        planned = [PlannedFigure(write_pid, (), folder / f"{i}.txt") for i in range(n)]
        assert all(o.drawn for o in draw_all(planned, jobs))
        return {int(p.read_text()) for p in folder.iterdir()}

    assert drawers(MIN_FIGURES_FOR_WORKERS, 1) == {os.getpid()}
    assert drawers(MIN_FIGURES_FOR_WORKERS - 1, 2) == {os.getpid()}
    workers = drawers(MIN_FIGURES_FOR_WORKERS, 2)
    assert os.getpid() not in workers and 1 <= len(workers) <= 2


def test_a_per_session_figure_that_cannot_draw_a_value_names_itself_and_its_session(tmp_path):
    from softbench.predictions.sessions import load_session
    from softbench.report.drawing import draw_one

    rec = load_session(latency_session(tmp_path / "src", "bf16", 4096, True, 5.0))

    def cannot(_rec, _path):
        raise ValueError("x and y must have the same length")

    outcome = draw_one(PlannedFigure(cannot, (rec,), tmp_path / "latency-windows-s.png", rec, "windows.jsonl"))
    assert not outcome.drawn and outcome.who == rec.name
    assert outcome.why == ("figure latency-windows-s.png: a session holds a value of a kind this figure cannot "
                           "draw (ValueError: x and y must have the same length)")


@pytest.mark.parametrize("jobs", ["0", "-1", "257", "two"])
def test_a_job_count_out_of_range_is_refused_before_anything_is_read(tmp_path, capsys, jobs):
    src = copy_sessions([_GOOD], tmp_path / "sessions")
    assert main(["report", str(src), "--out", str(tmp_path / "out"), "--jobs", jobs]) == 2
    assert "--jobs" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
