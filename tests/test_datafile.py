"""What counts as a damaged JSON or YAML mapping when softbench reads back a file it wrote."""

import pytest

from softbench.core.datafile import DamagedFile, load_mapping


def test_a_mapping_reads_back_by_its_suffix(tmp_path):
    (tmp_path / "s.json").write_text('{"a": 1}')
    (tmp_path / "p.yaml").write_text("a: 1\nb: [2, 3]\n")
    assert load_mapping(tmp_path / "s.json") == {"a": 1}
    assert load_mapping(tmp_path / "p.yaml") == {"a": 1, "b": [2, 3]}


@pytest.mark.parametrize("name, content, cause", [
    ("s.json", '{"a": ', "JSONDecodeError"),
    ("s.json", b"\xff\xfe{}", "UnicodeDecodeError"),
    ("s.json", "[" * 100000 + "]" * 100000, "RecursionError"),
    ("p.yaml", "a: [1\n", "ParserError"),
    ("p.yaml", "day: 2026-02-30\n", "ValueError"),  # YAML reads it as a date that does not exist
    # PyYAML's timestamp constructor fails on a value tagged as a time that is none (it raised through, a traceback)
    ("p.yaml", "day: !!timestamp yesterday\n", "AttributeError"),
    ("s.json", None, "IsADirectoryError"),  # a folder where the file belongs
])
def test_a_file_that_does_not_parse_is_damaged_and_names_its_cause(tmp_path, name, content, cause):
    p = tmp_path / name
    if content is None:
        p.mkdir()
    elif isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content)
    with pytest.raises(DamagedFile) as e:
        load_mapping(p)
    assert e.value.cause == cause and str(e.value).startswith(f"{p} could not be read as ")


@pytest.mark.parametrize("name, content, says", [("s.json", "[1]", "is a JSON array, not an object"),
                                                 ("s.json", "3", "is a JSON number, not an object"),
                                                 ("p.yaml", "- 1\n", "is a YAML sequence, not a mapping"),
                                                 ("p.yaml", "", "is an empty YAML document, not a mapping")])
def test_a_file_that_parses_to_no_mapping_is_damaged_without_a_cause(tmp_path, name, content, says):
    p = tmp_path / name
    p.write_text(content)
    with pytest.raises(DamagedFile, match=says) as e:
        load_mapping(p)
    assert e.value.cause is None
