"""core.textfile: the one reader of the text files a user names (protocols, predictions, seals, Chrome traces).
Whatever the path holds, the command answers with one sentence and exit 2; a YAML syntax error is said in one
line with where it is."""
from __future__ import annotations

import pytest

from softbench.core.errors import UsageError
from softbench.core.textfile import parse_yaml, read_text_file


def _one_error_line(r) -> str:
    """The command's error sentence, after checking it is the only line besides an optional hint."""
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and lines[0].startswith("error: "), r.stderr
    assert all(line.startswith("hint: ") for line in lines[1:]), r.stderr
    return lines[0]


def test_a_yaml_syntax_error_is_one_line_with_its_position(cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\nb: :\n")
    for args in (["seal", str(bad), "--dir", str(tmp_path / "sealed")],
                 ["latency", "--backend", "sim", "--protocol", str(bad), "--out", str(tmp_path / "s")]):
        line = _one_error_line(cli(*args))
        assert line.endswith("is not valid YAML at line 2, column 2: expected ',' or ']', but got ':' (while "
                             "parsing a flow sequence that starts at line 1, column 4)"), line
    assert not (tmp_path / "sealed").exists() and not (tmp_path / "s").exists()
    with pytest.raises(UsageError, match=r"x\.yaml is not valid YAML at line 2, column 1: found character '\\t' "
                                         r"that cannot start any token"):
        parse_yaml("a: 1\n\tb: 2\n", "x.yaml", "a protocol file")


def test_a_tagged_value_its_tag_cannot_build_is_one_sentence():
    # PyYAML fails inside its timestamp constructor with an AttributeError on a !!timestamp that is no time; it
    # went through parse_yaml as a traceback
    with pytest.raises(UsageError, match=r"^p\.yaml holds a tagged value its tag cannot build$") as e:
        parse_yaml("rounds: 3\nwhen: !!timestamp yesterday\n", "p.yaml", "a protocol file")
    assert e.value.hint == "use plain values, no tags"
    # a tagged number that is no number raises ValueError, as an impossible date does; it was called a bad date
    for text in ("rounds: !!int many\n", "x: !!float abc\n"):
        with pytest.raises(UsageError, match=r"^p\.yaml holds a tagged value its tag cannot build$"):
            parse_yaml(text, "p.yaml", "a protocol file")
    with pytest.raises(UsageError, match=r"date or time that does not exist \(day is out of range for month\)$"):
        parse_yaml("day: 2026-02-30\n", "p.yaml", "a protocol file")


def test_a_device_an_oversized_file_and_an_empty_path_are_refused_before_reading(cli, tmp_path):
    # /dev/zero was read until the memory ran out
    line = _one_error_line(cli("seal", "/dev/zero", "--dir", str(tmp_path / "sealed")))
    assert line == "error: predictions file /dev/zero is not a regular file (a device, a pipe or a socket)"
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.truncate(17 << 20)  # sparse: no 17 MiB written to the disk
    with pytest.raises(UsageError, match=r"big\.yaml is 17 MiB, more than the 16 MiB any protocol file could hold"):
        read_text_file(big, "protocol file")
    assert read_text_file(big, "trace", max_bytes=None) == "\0" * (17 << 20)  # exports may be large
    # the limit itself is allowed: a file of exactly max_bytes is read, one byte more is refused
    edge = tmp_path / "edge.yaml"
    edge.write_text("a: 1")
    assert read_text_file(edge, "protocol file", max_bytes=4) == "a: 1"
    with pytest.raises(UsageError, match=r"edge\.yaml is .* more than the"):
        read_text_file(edge, "protocol file", max_bytes=3)
    # Path("") is ".": the message named a folder the user never gave
    with pytest.raises(UsageError, match=r"^the protocol file's path is empty$"):
        read_text_file("", "protocol file")
