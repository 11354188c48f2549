"""What `softbench report` prints of its tables on a console: whole where they fit, else the columns that carry
the result with sessions named by their start stamps, and a line saying what report.md has besides. Read from
sessions the H200 recorded (in place, never modified)."""
from __future__ import annotations

from pathlib import Path

from softbench.cli import main
from softbench.core import console
from softbench.predictions.sessions import load_sessions
from softbench.report.console_view import console_view, left_out_note
from softbench.report.tables import latency_table

SESSIONS = Path(__file__).resolve().parents[1] / "sessions"
SUSTAINED = SESSIONS / "20261205T143052Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-folded-sustained"
INTERLEAVED = SESSIONS / "20261205T193812Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-folded-interleaved"


def test_a_narrow_console_gets_the_result_columns_with_their_cells_unchanged():
    table = latency_table(load_sessions([SUSTAINED, INTERLEAVED]))
    view = console_view(table, 80)
    assert view.columns == list(table.narrow) and view.stamps_only
    assert set(view.left_out) == {"backend", "per-round sd pp", "per-round %", "median ms"}
    assert [r[0] for r in view.rows] == ["20261205T143052Z", "20261205T193812Z"]
    for full, cut in zip(table.rows, view.rows):  # every other cell as the whole table has it
        assert cut[1:] == [full[table.columns.index(c)] for c in view.columns[1:]]
    note = left_out_note(table, view, "out/report.md")
    assert note.startswith("latency sessions: 4 more columns (backend, per-round sd pp, per-round %, median ms) and "
                           "the sessions' whole folder names in out/report.md")
    # a console wide enough for every word gets the whole table and no note
    whole = console_view(table, 1000)
    assert whole.columns == table.columns and whole.rows == table.rows
    assert left_out_note(table, whole, "out/report.md") is None


def test_a_partial_session_keeps_its_mark_and_a_name_without_a_stamp_stays_whole():
    table = latency_table(load_sessions([SUSTAINED]))
    table.rows[0][0] = f"{SUSTAINED.name} (partial)"
    table.rows.append(["my-own-run"] + table.rows[0][1:])
    assert [r[0] for r in console_view(table, 80).rows] == ["20261205T143052Z (partial)", "my-own-run"]


def test_a_table_without_a_narrow_view_stays_whole_and_one_whose_view_has_no_session_keeps_its_names():
    from dataclasses import replace

    table = latency_table(load_sessions([SUSTAINED, INTERLEAVED]))
    whole = console_view(replace(table, narrow=()), 80)  # too wide, but nothing narrower to show
    assert (whole.columns, whole.rows, whole.left_out, whole.stamps_only) == (table.columns, table.rows, [], False)
    no_session = console_view(replace(table, narrow=table.narrow[1:]), 80)
    assert "session" not in no_session.columns and not no_session.stamps_only
    assert "folder names" not in left_out_note(table, no_session, "out/report.md")


def test_report_prints_the_narrow_view_at_80_columns_and_the_whole_table_when_wide(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(console.out, "_width", 80)
    assert main(["report", str(SUSTAINED), str(INTERLEAVED), "--out", str(tmp_path / "narrow")]) == 0
    text = capsys.readouterr().out
    assert "20261205T143052Z" in text and SUSTAINED.name not in text.replace("\n", "")
    assert "latency sessions: 4 more columns" in text
    markdown = (tmp_path / "narrow" / "report.md").read_text()
    assert SUSTAINED.name in markdown and "median ms" in markdown  # the file keeps every column
    monkeypatch.setattr(console.out, "_width", 1000)
    assert main(["report", str(SUSTAINED), str(INTERLEAVED), "--out", str(tmp_path / "wide")]) == 0
    text = capsys.readouterr().out
    assert SUSTAINED.name in text and "median ms" in text and "more columns" not in text
