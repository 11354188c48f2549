"""Reading a text file a user names (a protocol, a predictions file, a seal): a folder, a missing file, an
unreadable one, bytes that are not UTF-8 or YAML that does not parse become one sentence instead of a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from softbench.core.errors import SoftbenchError, UsageError


# protocols, predictions and seals are a few kilobytes: a file far larger is not one, and /dev/zero would be read
# until the memory ran out
MAX_TEXT_BYTES = 16 << 20


def read_text_file(path: Path | str, what: str, error: type[SoftbenchError] = UsageError,
                   max_bytes: int | None = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of `path`; `what` names the file in the message ('protocol file', 'predictions file').
    max_bytes: the largest file taken (None: any size, for exports that can be large)."""
    if str(path) == "":  # Path("") is ".", which would be reported as a folder the user never named
        raise error(f"the {what}'s path is empty")
    p = Path(path)
    if p.is_dir():
        raise error(f"{what} {p} is a folder")
    if not p.exists():
        raise error(f"{what} {p} does not exist")
    if not p.is_file():
        raise error(f"{what} {p} is not a regular file (a device, a pipe or a socket)")
    try:
        size = p.stat().st_size
        if max_bytes is not None and size > max_bytes:
            raise error(f"{what} {p} is {size / 2**20:.0f} MiB, more than the {max_bytes >> 20} MiB any {what} "
                        "could hold")
        return p.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{what} {p} is not UTF-8 text (a binary file?)") from None
    except OSError as e:
        raise error(f"{what} {p} cannot be read: {e.strerror}") from None


def parse_yaml(text: str, source: str, what: str, error: type[SoftbenchError] = UsageError, loader=None,
               hint: str | None = None) -> Any:
    """YAML `text` through a safe loader (yaml.SafeLoader unless `loader`, a subclass, is given). `source` names
    the file in the message, `what` says what it should have been ('a protocol file'), `hint` goes with a syntax
    error."""
    import yaml

    try:
        return yaml.load(text, Loader=loader or yaml.SafeLoader)  # noqa: S506 (safe loaders only)
    except yaml.YAMLError as e:
        if isinstance(e, yaml.constructor.ConstructorError) and "could not determine a constructor" in str(e.problem):
            # a tag the safe loader does not build (!!python/object): no syntax error, so not `hint`'s advice
            raise error(f"{source} is not plain YAML: {e}", hint="use plain values, no tags") from None
        raise error(f"{source} is not valid YAML{_where(e)}", hint=hint) from None
    except (ValueError, AttributeError) as e:
        if isinstance(e, ValueError) and _constructor_that_raised(e) == "construct_yaml_timestamp":
            # YAML reads an unquoted 2026-02-30 as a date, and building one that does not exist raises this
            raise error(f"{source} holds a value YAML reads as a date or time that does not exist ({e})",
                        hint="correct the date, or quote the value if it is meant as text") from None
        # the others come from explicit tags: `!!int many` (ValueError), `!!timestamp yesterday` (AttributeError,
        # PyYAML's timestamp constructor reading a failed match)
        raise error(f"{source} holds a tagged value its tag cannot build", hint="use plain values, no tags") from None
    except RecursionError:
        raise error(f"{source} nests too deeply to be {what}") from None


def _constructor_that_raised(e: BaseException) -> str | None:
    """The innermost PyYAML constructor method in `e`'s traceback (construct_yaml_int, ...), or None."""
    name, tb = None, e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_globals.get("__name__") == "yaml.constructor":
            name = tb.tb_frame.f_code.co_name
        tb = tb.tb_next
    return name


def _where(e) -> str:
    """A YAML error in one line: where it is, what is wrong, and what was being read, instead of PyYAML's
    several-line dump with a caret under an echo of the line."""
    mark, problem = getattr(e, "problem_mark", None), getattr(e, "problem", None)
    if mark is None or not problem:
        return f": {' '.join(str(e).split())}"
    text = f" at line {mark.line + 1}, column {mark.column + 1}: {problem}"
    context, start = getattr(e, "context", None), getattr(e, "context_mark", None)
    if context and start is not None and (start.line, start.column) != (mark.line, mark.column):
        text += f" ({context} that starts at line {start.line + 1}, column {start.column + 1})"
    elif context:
        text += f" ({context})"
    return text
