import json
import re
from pathlib import Path

import pytest

from softbench.core.errors import UsageError
from softbench.core.session import (Session, atomic_write_json, atomic_write_text, file_label,
                                    pair_labels, read_jsonl)


def test_session_folders_are_never_reused(tmp_path):
    a = Session.create(tmp_path, "latency", "x")
    b = Session.create(tmp_path, "latency", "x")
    assert a.path != b.path
    assert a.status() == {**a.status(), "complete": False, "state": "running"}


def test_a_tag_is_made_safe_for_a_folder_name(tmp_path):
    s = Session.create(tmp_path, "latency", "--fp8/8K causal!")
    assert re.fullmatch(r"\d{8}T\d{6}Z-latency-fp8-8K-causal", s.path.name)
    assert s.path.parent == tmp_path


def test_a_resumed_session_is_marked_running_and_counted_once(tmp_path, monkeypatch):
    import softbench.core.session as session_mod

    made = Session.create(tmp_path, "fidelity")
    made.set_status(complete=False, state="partial", reason="interrupted")
    monkeypatch.setattr(session_mod, "CREATED", [])
    s = Session.open(made.path)
    s.resume()
    s.resume()
    assert s.status() == {**s.status(), "command": "fidelity", "complete": False, "state": "running",
                          "reason": "resumed"}
    assert session_mod.CREATED == [s]


def test_append_and_torn_last_line(tmp_path):
    s = Session.create(tmp_path, "latency")
    s.append("w.jsonl", {"a": 1})
    s.append("w.jsonl", {"a": 2})
    with open(s.path / "w.jsonl", "a") as f:
        f.write('{"a": 3')  # a crash in the middle of a write
    assert [r["a"] for r in s.read_records("w.jsonl")] == [1, 2]


def test_an_append_after_a_torn_last_line_starts_a_line_of_its_own(tmp_path):
    """A crash mid-write leaves a fragment with no newline; the next record must not be glued to it (the file
    would then hold a bad line in the middle, which read_jsonl refuses for good). The fragment is dropped; a whole
    last record that only lacks its newline is kept."""
    s = Session.create(tmp_path, "fidelity")
    s.append("w.jsonl", {"a": 1})
    with open(s.path / "w.jsonl", "a") as f:
        f.write('{"a": 2, "b"')
    s.append("w.jsonl", {"a": 3})
    assert [r["a"] for r in s.read_records("w.jsonl")] == [1, 3]
    assert (s.path / "w.jsonl").read_text() == '{"a": 1}\n{"a": 3}\n'
    with open(s.path / "w.jsonl", "a") as f:
        f.write('{"a": 4}')  # complete, only its newline lost
    s.append("w.jsonl", {"a": 5})
    assert [r["a"] for r in s.read_records("w.jsonl")] == [1, 3, 4, 5]
    # a fragment longer than one read of the tail, after a record and as the whole file
    (s.path / "t.jsonl").write_text('{"a": 0}\n{"x": "' + "y" * 200_000)
    s.append("t.jsonl", {"a": 6})
    assert (s.path / "t.jsonl").read_text() == '{"a": 0}\n{"a": 6}\n'
    (s.path / "u.jsonl").write_text('{"x": "' + "y" * 200_000)
    s.append("u.jsonl", {"a": 7})
    assert (s.path / "u.jsonl").read_text() == '{"a": 7}\n'


def test_a_bad_line_in_the_middle_is_an_error(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\nnot json\n{"a": 2}\n')
    with pytest.raises(UsageError, match="line 2"):
        read_jsonl(p)


def test_a_record_that_is_no_json_object_is_refused_with_its_line(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n[1, 2]\n{"a": 2}\n')
    with pytest.raises(UsageError, match="line 2 is a JSON array, not an object"):
        read_jsonl(p)


def test_a_records_file_of_other_bytes_or_depth_is_refused_in_one_sentence(tmp_path):
    """A binary file copied over a records file, and a line nested past the JSON parser's depth, once went out as
    an internal error (UnicodeDecodeError, RecursionError) from every command that reads records, the report's
    figures among them."""
    binary = tmp_path / "samples.jsonl"
    binary.write_bytes(b'{"a": 1}\n' + b"\x00\xff" * 50 + b"\n")
    with pytest.raises(UsageError, match="is not UTF-8 text .a byte at offset 10 is not., so not JSON lines"):
        read_jsonl(binary)
    deep = tmp_path / "windows.jsonl"
    deep.write_text("[" * 100000 + "]" * 100000 + '\n{"a": 1}\n')
    with pytest.raises(UsageError, match="line 1 is not valid JSON"):
        read_jsonl(deep)
    deep.write_text('{"a": 1}\n' + "[" * 100000)  # the same as a torn last line: dropped
    assert read_jsonl(deep) == [{"a": 1}]


def test_a_records_file_replaced_by_a_folder_is_refused_in_one_sentence(tmp_path):
    """A folder where a records file belongs (a copy gone wrong) once left the commands as the machine's error,
    exit 74, as if the disk had failed: it is bad input, exit 2, and the sentence says which file."""
    folder = tmp_path / "pairs.jsonl"
    folder.mkdir()
    with pytest.raises(UsageError, match=r"pairs\.jsonl is a folder, not a JSON-lines file of records"):
        read_jsonl(folder)


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    atomic_write_json(tmp_path / "s.json", {"b": 2, "a": 1})
    assert json.loads((tmp_path / "s.json").read_text()) == {"a": 1, "b": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]


def test_atomic_writes_are_readable_by_others_as_the_umask_allows(tmp_path):
    """mkstemp makes its file 0600; a result written through it must not stay private to its writer."""
    import stat

    import softbench.core.session as session_mod

    atomic_write_json(tmp_path / "s.json", {"a": 1})
    assert stat.S_IMODE((tmp_path / "s.json").stat().st_mode) == 0o666 & ~session_mod._UMASK


def test_a_failed_atomic_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path):
    atomic_write_json(tmp_path / "s.json", {"a": 1})
    with pytest.raises(TypeError):
        atomic_write_text(tmp_path / "s.json", None)  # fails inside the write, after the temporary file exists
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]
    assert json.loads((tmp_path / "s.json").read_text()) == {"a": 1}


def test_json_files_are_written_with_sorted_keys(tmp_path):
    atomic_write_json(tmp_path / "s.json", {"b": 2, "a": {"d": 4, "c": 3}})
    assert (tmp_path / "s.json").read_text() == '{\n  "a": {\n    "c": 3,\n    "d": 4\n  },\n  "b": 2\n}\n'


def test_open_refuses_a_folder_that_is_not_a_session(tmp_path):
    Session.create(tmp_path, "latency", "a")
    with pytest.raises(UsageError, match="is not a softbench session"):
        Session.open(tmp_path)  # a folder of sessions is not itself one


def test_create_takes_the_folder_atomically(tmp_path, monkeypatch):
    """Another process may make the same folder between any check and the mkdir: creation must not check first."""
    import softbench.core.session as session_mod

    monkeypatch.setattr(session_mod, "utc_stamp", lambda now=None: "20260101T000000Z")
    (tmp_path / "20260101T000000Z-latency").mkdir()
    # as if the other process made it right after a check: exists() answers no
    monkeypatch.setattr(Path, "exists", lambda self: False)
    s = Session.create(tmp_path, "latency")
    assert s.path.name == "20260101T000000Z-latency.2"


def test_concurrent_creates_get_distinct_folders(tmp_path, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    import softbench.core.session as session_mod

    monkeypatch.setattr(session_mod, "utc_stamp", lambda now=None: "20260101T000000Z")
    with ThreadPoolExecutor(8) as pool:
        paths = list(pool.map(lambda _: Session.create(tmp_path, "gates").path, range(16)))
    assert len(set(paths)) == 16 and all((p / "status.json").exists() for p in paths)


@pytest.mark.parametrize("text, says", [('{"command": "fid', "could not be read as JSON"),
                                        ("[]", "is a JSON array, not an object"),
                                        (b"\xff\xfe", "could not be read as JSON")])
def test_opening_a_session_whose_status_does_not_parse_is_refused_in_one_sentence(tmp_path, text, says):
    """--resume opens a session a user may have edited or a crash cut short: a status.json that does not parse
    is refused with the file's name (it once raised JSONDecodeError, an internal error)."""
    (tmp_path / "status.json").write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(UsageError, match=f"{tmp_path / 'status.json'} {re.escape(says)}"):
        Session.open(tmp_path)


def test_the_a_a_null_labels_its_second_process_apart_and_files_carry_no_quote():
    assert pair_labels("A0", "A1") == ("A0", "A1")
    assert pair_labels("A0", "A0") == ("A0", "A0'")
    assert file_label(pair_labels("A0", "A0")[1]) == "A0b"


# --- cases a hand mutation of core/session.py survived -------------------------------------------------------------

def test_records_take_numpy_scalars_and_paths_as_plain_values_and_refuse_anything_else(tmp_path):
    """Measurements arrive as numpy scalars and file names as paths; both go to disk as plain JSON values. Any other
    object is refused rather than written as something no reader expects (null, or a repr)."""
    import numpy as np

    s = Session.create(tmp_path, "latency")
    s.append("w.jsonl", {"ms": np.float64(1.25), "n": np.int64(3), "file": tmp_path / "x.bin"})
    assert s.read_records("w.jsonl") == [{"ms": 1.25, "n": 3, "file": str(tmp_path / "x.bin")}]
    atomic_write_json(tmp_path / "s.json", {"ms": np.float32(0.5)})
    assert json.loads((tmp_path / "s.json").read_text()) == {"ms": 0.5}
    with pytest.raises(TypeError, match="cannot write object as JSON"):
        atomic_write_json(tmp_path / "t.json", {"x": object()})
    assert not (tmp_path / "t.json").exists()


def test_records_are_written_with_sorted_keys(tmp_path):
    """As the JSON files are: the same record gives the same line whatever order its dict was built in."""
    s = Session.create(tmp_path, "latency")
    s.append("w.jsonl", {"b": 1, "a": 2})
    assert (s.path / "w.jsonl").read_text() == '{"a": 2, "b": 1}\n'


def test_every_session_write_is_fsynced_whole_then_renamed_into_place(tmp_path, monkeypatch):
    """What makes a write survive a crash: the whole text reaches the disk (fsync, after the flush) in a temporary
    file of the same folder (a rename across file systems is no rename), and only then replaces the file. Appends
    are pushed to disk too. The real os calls run; they are only watched."""
    import os

    import softbench.core.session as session_mod

    s = Session.create(tmp_path, "latency")
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.fstat(fd).st_size))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", Path(src).parent, Path(dst), Path(src).stat().st_size))
        real_replace(src, dst)

    monkeypatch.setattr(session_mod.os, "fsync", fsync)
    monkeypatch.setattr(session_mod.os, "replace", replace)
    for write, name, data in ((s.write_json, "a.json", {"a": 1}), (s.write_yaml, "b.yaml", {"b": 2}),
                              (s.write_text, "c.txt", "text\n")):
        events.clear()
        path = write(name, data)
        assert path == s.path / name  # the writers return the file they wrote
        size = path.stat().st_size
        assert size > 0 and events == [("fsync", size), ("replace", s.path, path, size)]
    events.clear()
    s.set_status(complete=True, state="complete")
    size = (s.path / "status.json").stat().st_size
    assert events == [("fsync", size), ("replace", s.path, s.path / "status.json", size)]
    events.clear()
    s.append("w.jsonl", {"a": 1})
    assert events == [("fsync", (s.path / "w.jsonl").stat().st_size)]


def test_an_interrupt_during_an_atomic_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    """Ctrl-C (KeyboardInterrupt, no Exception) is how a measuring run is most often stopped: it must clean up as an
    error does."""
    import softbench.core.session as session_mod

    atomic_write_json(tmp_path / "s.json", {"a": 1})

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(session_mod.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_json(tmp_path / "s.json", {"a": 2})
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]
    assert json.loads((tmp_path / "s.json").read_text()) == {"a": 1}


def test_atomic_writes_and_sessions_make_the_folders_they_need(tmp_path):
    atomic_write_json(tmp_path / "a" / "b" / "s.json", {"a": 1})
    assert json.loads((tmp_path / "a" / "b" / "s.json").read_text()) == {"a": 1}
    s = Session.create(tmp_path / "new" / "sessions", "latency")
    assert s.path.parent == tmp_path / "new" / "sessions" and s.status()["state"] == "running"


def test_a_yaml_file_is_block_yaml_in_the_order_given(tmp_path):
    """protocol.yaml is read by people: block style, its keys in the order the writer gave (kind first), not
    sorted and not JSON (which a YAML reader would read back just the same)."""
    import yaml

    data = {"kind": "interleaved", "window_ms": 8.0, "budget_s": 30.0}
    text = Session.create(tmp_path, "latency").write_yaml("protocol.yaml", data).read_text()
    assert yaml.safe_load(text) == data
    assert [line.split(":")[0] for line in text.splitlines()] == list(data)


def test_a_blank_line_among_records_is_skipped(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n\n   \n{"a": 2}\n')
    assert read_jsonl(p) == [{"a": 1}, {"a": 2}]


def test_an_append_after_a_one_byte_fragment_drops_it(tmp_path):
    """The shortest torn line: one byte after the last newline. The byte before it is a newline, the last is not."""
    s = Session.create(tmp_path, "latency")
    s.append("w.jsonl", {"a": 1})
    with open(s.path / "w.jsonl", "a") as f:
        f.write("{")
    s.append("w.jsonl", {"a": 2})
    assert (s.path / "w.jsonl").read_text() == '{"a": 1}\n{"a": 2}\n'


def test_an_append_after_a_fragment_whose_newline_starts_the_last_tail_read_keeps_the_record_before(tmp_path):
    """The newline before the fragment is the first byte of the tail read (a fragment one byte shorter than a
    read): the fragment starts after it, and the whole record before it stays."""
    import softbench.core.session as session_mod

    s = Session.create(tmp_path, "latency")
    s.append("w.jsonl", {"a": 1})
    with open(s.path / "w.jsonl", "a") as f:
        f.write('{"x": "' + "y" * (session_mod._TAIL_CHUNK - 8))  # 1 + this = one tail read
    s.append("w.jsonl", {"a": 2})
    assert (s.path / "w.jsonl").read_text() == '{"a": 1}\n{"a": 2}\n'


def test_an_append_after_a_fragment_cut_inside_a_character_drops_it(tmp_path):
    """A fragment cut in the middle of a multi-byte character is no UTF-8: it is dropped as any other fragment is,
    not a UnicodeDecodeError out of the next append."""
    s = Session.create(tmp_path, "latency")
    s.append("w.jsonl", {"a": 1})
    with open(s.path / "w.jsonl", "ab") as f:
        f.write('{"x": "é'.encode()[:-1])
    s.append("w.jsonl", {"a": 2})
    assert (s.path / "w.jsonl").read_text() == '{"a": 1}\n{"a": 2}\n'


def test_a_tag_s_runs_of_unsafe_characters_become_one_dash(tmp_path):
    s = Session.create(tmp_path, "latency", "fp8 // 8K")
    assert s.path.name.endswith("-latency-fp8-8K")


def test_a_created_session_is_counted_among_this_process_s_sessions(tmp_path, monkeypatch):
    """An interrupt names the unfinished sessions from CREATED: a new session must be in it."""
    import softbench.core.session as session_mod

    monkeypatch.setattr(session_mod, "CREATED", [])
    s = Session.create(tmp_path, "latency")
    assert session_mod.CREATED == [s]


def test_a_status_says_when_it_was_written(tmp_path):
    from datetime import datetime, timedelta, timezone

    from softbench.core.utc import parse_utc

    before = datetime.now(timezone.utc)
    s = Session.create(tmp_path, "latency")
    written = parse_utc(s.status()["updated_utc"])
    assert written is not None and before - timedelta(seconds=1) <= written <= datetime.now(timezone.utc)


def test_reading_a_session_s_files_that_are_absent_or_damaged(tmp_path):
    s = Session.create(tmp_path, "fidelity")
    assert s.read_records("rows.jsonl") == [] and not s.has("rows.jsonl")
    s.append("rows.jsonl", {"a": 1})
    assert s.has("rows.jsonl") and s.read_records("rows.jsonl") == [{"a": 1}]
    (s.path / "options.json").write_text('{"seq": ')
    with pytest.raises(UsageError, match=re.escape(str(s.path / "options.json"))):
        s.read_mapping("options.json")
