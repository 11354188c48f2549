"""What the command line prints around the work itself: errors in one shape, paths and tables at 80 columns,
and what Ctrl-C leaves (the partial session's path)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

import softbench.core.session as session_mod
from softbench.cli import main

ROOT = Path(__file__).resolve().parents[1]
LONG = "a-long-folder-name-that-does-not-fit-beside-its-label-on-one-line-of-eighty-columns"
PRED = {"predictions": [{"id": "P1", "statement": "s", "quantity": "speedup_pct", "comparator": "<",
                         "threshold": 50, "evidence": "latency", "scope": {"command": "latency"}}]}


def run80(*args, cwd):
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "softbench", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_a_long_path_is_printed_on_one_line_at_80_columns(tmp_path):
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(PRED))
    done = run80("seal", "p.yaml", "--dir", f"{LONG}/sealed", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"sealed 1 predictions: {LONG}/sealed/p.yaml" in done.stdout.splitlines()


def test_session_names_in_tables_are_folded_not_cut(tmp_path):
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(PRED))
    name = "20260101T000000Z-latency-bf16-16K-causal-b1h16d128-fa4-A0-vs-A1-and-more"
    s = tmp_path / "sessions" / name
    s.mkdir(parents=True)
    (s / "status.json").write_text(json.dumps({"command": "latency", "complete": True}))
    (s / "summary.json").write_text(json.dumps({"command": "latency", "speedup_pct": 1.0}))
    assert run80("seal", "p.yaml", cwd=tmp_path).returncode == 0
    done = run80("evaluate", "sealed/p.yaml", "--sessions", "sessions", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout and "..." not in done.stdout.split("\n", 1)[1]
    # the excluded table's session column, read down its rows, gives the name back whole
    rows = [line.split("│") for line in done.stdout.splitlines() if line.count("│") == 4]
    assert name in "".join(r[2].strip() for r in rows)
    assert max(len(line) for line in done.stdout.splitlines()[1:]) <= 80


def test_ctrl_c_names_the_partial_session(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(session_mod, "CREATED", [])

    def interrupted(self, name, data):
        raise KeyboardInterrupt

    monkeypatch.setattr(session_mod.Session, "write_json", interrupted)
    assert main(["env", "--record", "--out", str(tmp_path)]) == 130
    (made,) = tmp_path.iterdir()
    assert f"interrupted: the partial session is kept: {made}" in capsys.readouterr().err


def test_ctrl_c_after_the_session_is_complete_says_so(tmp_path, monkeypatch, capsys):
    """Stopped once its session was marked complete: not "nothing was written" (a helper's sweep saw that line
    beside a complete session), but the session and that it is complete."""
    monkeypatch.setattr(session_mod, "CREATED", [])
    set_status = session_mod.Session.set_status

    def then_interrupted(self, *args, **kwargs):
        set_status(self, *args, **kwargs)
        if kwargs.get("complete") or (args and args[0]):
            raise KeyboardInterrupt

    monkeypatch.setattr(session_mod.Session, "set_status", then_interrupted)
    assert main(["env", "--record", "--out", str(tmp_path)]) == 130
    (made,) = tmp_path.iterdir()
    err = capsys.readouterr().err
    assert f"interrupted after the session was complete: {made}" in err and "nothing was written" not in err


def test_ctrl_c_before_any_session_says_nothing_was_written(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(session_mod, "CREATED", [])

    def interrupted(gpu=True):
        raise KeyboardInterrupt

    monkeypatch.setattr("softbench.core.envinfo.collect_env", interrupted)
    assert main(["env", "--record", "--out", str(tmp_path)]) == 130
    assert "no session had been started" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_ctrl_c_that_a_library_turned_into_its_own_error_is_still_an_interrupt(tmp_path, monkeypatch, capsys):
    # transformers' lazy import answers a KeyboardInterrupt that lands mid-import with an ImportError
    monkeypatch.setattr(session_mod, "CREATED", [])

    def import_cut_short(gpu=True):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as e:
            raise ImportError("could not import module 'LlamaConfig'") from e

    monkeypatch.setattr("softbench.core.envinfo.collect_env", import_cut_short)
    assert main(["env", "--record", "--out", str(tmp_path)]) == 130
    err = capsys.readouterr().err
    assert "no session had been started" in err and "internal error" not in err


def test_env_record_keeps_stdout_to_the_json(tmp_path, capsys):
    assert main(["env", "--record", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    env = json.loads(captured.out)  # the whole of stdout, as `softbench env --record | jq` reads it
    (made,) = tmp_path.iterdir()
    assert isinstance(env, dict) and f"session: {made}" in captured.err


def test_an_unexpected_exception_is_one_error_line(monkeypatch, capsys):
    def broken(gpu=True):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("softbench.core.envinfo.collect_env", broken)
    monkeypatch.delenv("SOFTBENCH_TRACEBACK", raising=False)
    assert main(["env"]) == 70
    err = capsys.readouterr().err
    assert err.startswith("error: internal error: ZeroDivisionError: division by zero\n") and "SOFTBENCH_TRACEBACK" in err


def test_a_table_too_wide_for_whole_words_is_printed_turned():
    """A table whose words cannot stand whole at the console's width is printed on its side when that fits (one
    row per column), so that no header is cut into one-letter columns; one that fits, or that fits neither way,
    keeps its shape."""
    from rich.console import Console

    from softbench.core.console import table, turned

    families = [f"FAMILY{k:02d}" for k in range(18)]
    columns, rows = ["variant"] + families, [["A0"] + [str(100 + k) for k in range(18)],
                                             ["ref-fa3"] + [str(200 + k) for k in range(18)]]
    assert turned(columns, rows) == (["variant", "A0", "ref-fa3"],
                                     [[f, str(100 + k), str(200 + k)] for k, f in enumerate(families)])
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(table("wide", columns, rows, width=80))
    text = console.export_text()
    assert all(f in text for f in families), text  # every header whole, each on its own row
    assert max(len(line) for line in text.splitlines()) <= 80
    narrow = table("narrow", ["kernel", "ms"], [["A0", "0.33"]], width=80)
    assert [c.header for c in narrow.columns] == ["kernel", "ms"]
    # a session name longer than the console fits neither way: the table keeps its shape (rich folds the name)
    long = "20261202T092243Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-folded-interleaved-and-more"
    kept = table("kept", ["id", "evidence"], [["R1", long]], width=80)
    assert [c.header for c in kept.columns] == ["id", "evidence"]
    # the same wide table at a width that holds its words is not turned
    wide = table("wide", columns, rows, width=400)
    assert [c.header for c in wide.columns] == columns
