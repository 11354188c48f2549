"""Session folders: one per measuring command run, never overwritten.

`sessions/<utc-stamp>-<command>[-<tag>]/` holds env.json, protocol.yaml, raw JSON-lines records and a summary.
Files are written atomically (temporary file, fsync, rename), raw records are appended and flushed line by line,
and `status.json` says whether the session is complete, so an interrupted run keeps what it measured and says
it is partial."""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from softbench.core.datafile import DamagedFile, json_type, load_mapping
from softbench.core.errors import UsageError
from softbench.core.utc import utc_iso, utc_stamp

STATUS_FILE = "status.json"
# the sessions this process made or resumed, in order: the CLI names the unfinished ones when a run is interrupted
CREATED: list["Session"] = []
_UMASK = os.umask(0)
os.umask(_UMASK)


def _json_default(obj: Any):
    # numpy scalars and paths appear in records; write them as plain JSON values
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot write {type(obj).__name__} as JSON")


def atomic_write_text(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; results are meant to be read by others
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=_json_default) + "\n")


def atomic_write_yaml(path: Path, data: Any) -> None:
    atomic_write_text(path, yaml.safe_dump(data, sort_keys=False))


def read_jsonl(path: Path) -> list[dict]:
    """Read a JSON-lines file; a torn last line (a crash mid-write) is dropped, any other bad line is an error."""
    rows: list[dict] = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:  # bytes no record writer made: a binary file copied over it
        raise UsageError(f"{path} is not UTF-8 text (a byte at offset {e.start} is not), so not JSON lines") from None
    except IsADirectoryError:  # a copy gone wrong, not a failing disk: bad input rather than the machine's error
        raise UsageError(f"{path} is a folder, not a JSON-lines file of records") from None
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError):  # the latter: a line nested past the parser's depth
            if i == len(lines) - 1:
                break
            raise UsageError(f"{path}: line {i + 1} is not valid JSON") from None
        if not isinstance(row, dict):  # every record softbench writes is one object: anything else was edited in
            raise UsageError(f"{path}: line {i + 1} is a JSON {json_type(row)}, not an object")
        rows.append(row)
    return rows


_TAIL_CHUNK = 1 << 16


def _end_torn_line(f) -> None:
    """Make `f` (a JSON-lines file opened "a+b") end in a newline before a record is appended to it.

    Without a final newline the last line was torn by a crash mid-write, and a record written straight after it
    would be glued to the fragment: one line that is no JSON, and no longer the last, which read_jsonl rightly
    refuses (a bad line in the middle is how real damage shows), so the session could never be read again.
    The fragment is dropped rather than kept on a line of its own: it is no record, read_jsonl never returned it,
    so nothing the session reported from this file is lost; keeping it would need read_jsonl to let bad lines
    through anywhere, hiding real damage. A last line that is a whole record (only its newline missing) is one
    read_jsonl returns, so it is kept and given its newline."""
    end = f.seek(0, os.SEEK_END)
    if end == 0:
        return
    f.seek(end - 1)
    if f.read(1) == b"\n":
        return
    start = end  # where the last line begins: just after the last newline, else at 0
    while start > 0:
        step = min(_TAIL_CHUNK, start)
        f.seek(start - step)
        cut = f.read(step).rfind(b"\n")
        if cut >= 0:
            start = start - step + cut + 1
            break
        start -= step
    f.seek(start)
    try:
        json.loads(f.read(end - start))
        whole = True
    except ValueError:  # JSONDecodeError and UnicodeDecodeError both are
        whole = False
    if whole:
        f.write(b"\n")
    else:
        f.truncate(start)


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def null_label(label: str) -> str:
    """The A/A null's second label: the same kernel in another process, named apart by a quote (A0')."""
    return label + "'"


def pair_labels(baseline: str, variant: str) -> tuple[str, str]:
    """A comparison's two labels; a variant that is the baseline itself (the A/A null) takes null_label."""
    return (baseline, variant) if baseline != variant else (baseline, null_label(variant))


def file_label(label: str) -> str:
    """A kernel label as file names carry it: the A/A null's second label A0' written A0b (no quote for a shell
    to trip on)."""
    return label.replace("'", "b")


def safe_tag(tag: str) -> str:
    return _SAFE.sub("-", tag).strip("-")


@dataclass
class Session:
    path: Path
    command: str

    @classmethod
    def create(cls, out_dir: Path | str, command: str, tag: str = "") -> "Session":
        out_dir = Path(out_dir)
        name = f"{utc_stamp()}-{command}" + (f"-{safe_tag(tag)}" if tag else "")
        out_dir.mkdir(parents=True, exist_ok=True)
        path, n = out_dir / name, 1
        while True:
            try:
                # mkdir itself is the test: two processes starting in the same second cannot both get a folder
                path.mkdir()
                break
            except FileExistsError:
                n += 1
                path = out_dir / f"{name}.{n}"
        s = cls(path=path, command=command)
        s.set_status(complete=False, state="running")
        CREATED.append(s)
        return s

    @classmethod
    def open(cls, path: Path | str) -> "Session":
        path = Path(path)
        if not (path / STATUS_FILE).exists():
            raise UsageError(f"{path} is not a softbench session (no {STATUS_FILE})")
        status = _read_mapping(path / STATUS_FILE)
        return cls(path=path, command=str(status.get("command", "?")))

    def resume(self) -> None:
        """Mark a session read back from disk as running again (--resume), and count it among this process's
        sessions, so that an interrupt names it as the partial session it keeps rather than saying none was
        started."""
        self.set_status(complete=False, state="running", reason="resumed")
        if self not in CREATED:
            CREATED.append(self)

    # --- writing -------------------------------------------------------------------------------------
    def write_json(self, name: str, data: Any) -> Path:
        atomic_write_json(self.path / name, data)
        return self.path / name

    def write_yaml(self, name: str, data: Any) -> Path:
        atomic_write_yaml(self.path / name, data)
        return self.path / name

    def write_text(self, name: str, text: str) -> Path:
        atomic_write_text(self.path / name, text)
        return self.path / name

    def append(self, name: str, record: dict) -> None:
        """Append one record and push it to disk, so a crash loses at most the line being written. A line torn
        by an earlier crash is dealt with first (_end_torn_line), so the new record starts a line of its own."""
        line = (json.dumps(record, sort_keys=True, default=_json_default) + "\n").encode("utf-8")
        with open(self.path / name, "a+b") as f:
            _end_torn_line(f)
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def set_status(self, complete: bool, state: str, reason: str | None = None) -> None:
        data = {"command": self.command, "complete": complete, "state": state, "updated_utc": utc_iso()}
        if reason:
            data["reason"] = reason
        atomic_write_json(self.path / STATUS_FILE, data)

    # --- reading -------------------------------------------------------------------------------------
    def status(self) -> dict:
        return json.loads((self.path / STATUS_FILE).read_text())

    def read_json(self, name: str) -> Any:
        return json.loads((self.path / name).read_text())

    def read_mapping(self, name: str) -> dict:
        """A JSON file of the session that a user may have edited (options.json read back by --resume): one that
        does not parse, or holds no mapping, is refused in one sentence that names it."""
        return _read_mapping(self.path / name)

    def read_records(self, name: str) -> list[dict]:
        p = self.path / name
        return read_jsonl(p) if p.exists() else []

    def has(self, name: str) -> bool:
        return (self.path / name).exists()


def _read_mapping(path: Path) -> dict:
    try:
        return load_mapping(path)
    except DamagedFile as e:
        raise UsageError(str(e)) from None


