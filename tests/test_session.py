import json

import pytest

from softbench.core.errors import UsageError
from softbench.core.session import Session, atomic_write_json, find_sessions, read_jsonl


def test_session_folders_are_never_reused(tmp_path):
    a = Session.create(tmp_path, "latency", "x")
    b = Session.create(tmp_path, "latency", "x")
    assert a.path != b.path
    assert a.status() == {**a.status(), "complete": False, "state": "running"}


def test_append_and_torn_last_line(tmp_path):
    s = Session.create(tmp_path, "latency")
    s.append("w.jsonl", {"a": 1})
    s.append("w.jsonl", {"a": 2})
    with open(s.path / "w.jsonl", "a") as f:
        f.write('{"a": 3')  # a crash in the middle of a write
    assert [r["a"] for r in s.read_records("w.jsonl")] == [1, 2]


def test_a_bad_line_in_the_middle_is_an_error(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\nnot json\n{"a": 2}\n')
    with pytest.raises(UsageError, match="line 2"):
        read_jsonl(p)


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    atomic_write_json(tmp_path / "s.json", {"b": 2, "a": 1})
    assert json.loads((tmp_path / "s.json").read_text()) == {"a": 1, "b": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]


def test_find_sessions(tmp_path):
    Session.create(tmp_path, "latency", "a")
    Session.create(tmp_path, "energy", "b")
    assert sorted(s.command for s in find_sessions([tmp_path])) == ["energy", "latency"]
    with pytest.raises(UsageError):
        find_sessions([tmp_path / "missing"])
