"""Reading back a JSON or YAML mapping that softbench wrote (a summary, a status, a protocol, a child's result)
and a user may since have edited or damaged. This module decides what counts as damage; each caller decides what
damage means for it (an error, a note beside the other sessions, an empty result)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

# What a damaged file raises while read and parsed: OSError (a folder in its place, no permission), ValueError
# (JSON's and UTF-8's errors, and YAML's impossible dates), RecursionError (nested past the parser's depth),
# AttributeError (PyYAML's timestamp constructor, on a !!timestamp value that is no date or time)
_DAMAGE = (OSError, ValueError, RecursionError, AttributeError, yaml.YAMLError)


_YAML_KINDS = {list: "sequence", str: "string", bool: "boolean", int: "number", float: "number"}


class DamagedFile(Exception):
    """`problem` completes a sentence that begins with the file's path; `cause` names the parser's or the
    system's error, None where the file parsed but holds no mapping."""

    def __init__(self, path: Path, problem: str, cause: str | None):
        super().__init__(f"{path} {problem}")
        self.path, self.problem, self.cause = path, problem, cause


def json_type(value: Any) -> str:
    """A parsed JSON value's kind, in JSON's words."""
    return {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(value), "null")


def load_mapping(path: Path | str) -> dict:
    """The mapping in a .json file (JSON) or any other (YAML); raises DamagedFile where it cannot be read, does
    not parse, or holds something other than a mapping."""
    path = Path(path)
    fmt = "JSON" if path.suffix == ".json" else "YAML"
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if fmt == "JSON" else yaml.safe_load(text)
    except _DAMAGE as e:
        raise DamagedFile(path, f"could not be read as {fmt} ({type(e).__name__}: {e})", type(e).__name__) from None
    if fmt == "JSON" and not isinstance(data, dict):
        raise DamagedFile(path, f"is a JSON {json_type(data)}, not an object", None)
    if not isinstance(data, dict):
        kind = "an empty YAML document" if data is None else f"a YAML {_YAML_KINDS.get(type(data), 'scalar')}"
        raise DamagedFile(path, f"is {kind}, not a mapping", None)
    return data
