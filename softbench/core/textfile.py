"""Reading a text file a user names (a protocol, a predictions file, a seal): a folder, a missing file, an
unreadable one or bytes that are not UTF-8 become one sentence instead of a traceback."""

from __future__ import annotations

from pathlib import Path

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
