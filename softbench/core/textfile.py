"""Reading a text file a user names (a protocol, a predictions file, a seal): a folder, a missing file, an
unreadable one, bytes that are not UTF-8 or YAML that does not parse become one sentence instead of a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from softbench.core.errors import SoftbenchError, UsageError


def read_text_file(path: Path | str, what: str, error: type[SoftbenchError] = UsageError) -> str:
    """The UTF-8 text of `path`; `what` names the file in the message ('protocol file', 'predictions file')."""
    p = Path(path)
    if p.is_dir():
        raise error(f"{what} {p} is a folder")
    if not p.exists():
        raise error(f"{what} {p} does not exist")
    try:
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
        raise error(f"{source} is not valid YAML: {e}", hint=hint) from None
    except ValueError as e:  # YAML reads an unquoted 2026-02-30 as a date, and one that cannot be raises this
        raise error(f"{source} holds a value YAML reads as a date or time that does not exist ({e})",
                    hint="correct the date, or quote the value if it is meant as text") from None
    except RecursionError:
        raise error(f"{source} nests too deeply to be {what}") from None
