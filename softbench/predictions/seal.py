"""Sealed, pre-registered predictions: validate a predictions file, write it in one canonical form, fix its
SHA-256 beside it, and check both later.

The predictions file and its canonical form: softbench.predictions.schema.

Seal file `<name>.sha256`: its first line is `<sha256 hex>  <name>.yaml`, the format `sha256sum -c` reads;
the lines after it start with `# ` (which `sha256sum -c` skips) and hold `key: value` metadata: `format`,
`sealed_utc`, `git_commit` (of the repository holding the predictions file, else of the one holding the seal's
folder, else `none`), `git_dirty`, `source`, `softbench`, `predictions` (the count) and one
`prediction.<id>: <sha256>` per prediction (the hash of that prediction alone, so a mismatch can be traced to
the prediction that changed)."""

from __future__ import annotations

import datetime as _dt
import difflib
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from softbench import __version__
from softbench.core.checks import check_out_dir, refuse_empty
from softbench.core.errors import SealError, UsageError
from softbench.core.session import atomic_write_text
from softbench.core.textfile import MAX_TEXT_BYTES, read_text_file
from softbench.core.utc import parse_utc, utc_iso, utc_stamp
from softbench.predictions.schema import (NAME_RE, canonical_bytes, canonical_text, check_recorded, load_yaml_text,
                                          natural_key, normalize, prediction_hashes, sha256_hex)

SEAL_FORMAT = "softbench-seal/1"
_HEX = re.compile(r"^[0-9a-f]{64}$")
# the lines seal_file always writes: a seal without one of them was not written by softbench seal, and evaluate
# needs sealed_utc (which sessions count) and git_commit (which commit the seal may not predate)
REQUIRED_META = ("format", "sealed_utc", "git_commit", "git_dirty", "source", "softbench", "predictions")
# a commit as git_state records it: SHA-1 or, in a SHA-256 repository, 64 hex digits; `none` outside any
_COMMIT = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64}|none)$")
# what seal_file writes in the lines a reader relies on: (what it is, whether a value fits)
_META_VALUES = {
    "format": (f"{SEAL_FORMAT!r}, the only format this softbench reads", lambda v: v == SEAL_FORMAT),
    "sealed_utc": ("an ISO 8601 time", lambda v: parse_utc(v) is not None),
    "git_commit": ("a commit of 40 or 64 hex digits, or none", _COMMIT.match),
    "git_dirty": ("true, false or unknown", lambda v: v in ("true", "false", "unknown")),
    "predictions": ("a count", lambda v: v.isascii() and v.isdigit()),
}
# a seal is written as <name>.sha256 through a temporary .<name>.sha256.<random>.tmp: 100 keeps both far below
# the 255 bytes a file name may have
MAX_NAME_CHARS = 100


# --- seal files -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SealRecord:
    """What a `<name>.sha256` file says."""

    sha256: str
    filename: str
    meta: dict = field(default_factory=dict)
    predictions: dict = field(default_factory=dict)  # id -> sha256 of that prediction alone

    def to_text(self) -> str:
        lines = [f"{self.sha256}  {self.filename}"]
        lines += [f"# {k}: {v}" for k, v in self.meta.items()]
        lines += [f"# prediction.{pid}: {h}" for pid, h in self.predictions.items()]
        return "\n".join(lines) + "\n"

    @classmethod
    def parse(cls, text: str, source: str) -> "SealRecord":
        """The record in a seal file's text; UsageError (bad input, not a mismatch) where the text is not a seal
        as seal_file writes it: the first line, the format, a line it always writes missing, given twice or
        holding no value of its kind."""
        damaged = "the seal file was damaged; restore it from version control"
        lines = text.splitlines()
        first = lines[0].split() if lines else []
        if len(first) != 2 or not _HEX.match(first[0]):
            raise UsageError(f"{source}: the first line must be '<sha256 hex>  <name>.yaml'", hint=damaged)
        meta: dict = {}
        preds: dict = {}
        for line in lines[1:]:
            if not line.startswith("# ") or ": " not in line:
                continue
            key, _, value = line[2:].partition(": ")
            into, field_ = (preds, key[len("prediction."):]) if key.startswith("prediction.") else (meta, key)
            if field_ in into:  # the later line would win silently, e.g. a second, earlier sealed_utc
                raise UsageError(f"{source} gives its {key} line twice", hint=damaged)
            into[field_] = value.strip()
        missing = [k for k in REQUIRED_META if k not in meta]
        if missing:
            raise UsageError(f"{source} lacks the '# key: value' lines that softbench seal always writes: "
                             f"{', '.join(missing)}", hint=damaged)
        for key, (what, fits) in _META_VALUES.items():
            if not fits(meta[key]):
                raise UsageError(f"{source}: its {key} {meta[key]!r} is not {what}", hint=damaged)
        return cls(sha256=first[0], filename=first[1].lstrip("*"), meta=meta, predictions=preds)

    @classmethod
    def read(cls, path: Path) -> "SealRecord":
        return cls.parse(read_text_file(path, "seal file"), str(path))


@dataclass(frozen=True)
class SealResult:
    yaml_path: Path
    seal_path: Path
    sha256: str
    created: bool  # False: identical content was already sealed under this name
    record: SealRecord
    archived: Path | None = None  # --replace: where the pair it replaced now lies


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def git_state(cwd: Path) -> tuple[str, str]:
    """(commit, dirty) of the repository holding cwd: ('none', 'unknown') outside one."""
    head = _git(["rev-parse", "HEAD"], cwd)
    if head is None:
        return "none", "unknown"
    status = _git(["status", "--porcelain", "--untracked-files=no"], cwd)
    return head.strip(), ("unknown" if status is None else str(bool(status.strip())).lower())


def paths_for(name: str, directory: Path | str) -> tuple[Path, Path]:
    d = Path(directory)
    return d / f"{name}.yaml", d / f"{name}.sha256"


def _udiff(a: str, b: str, a_name: str, b_name: str) -> str:
    return "".join(difflib.unified_diff(a.splitlines(keepends=True), b.splitlines(keepends=True), a_name, b_name))


def _archive_dir(directory: Path, seal_path: Path) -> Path:
    """<directory>/replaced/<old seal's UTC stamp>-<its sha256 prefix>/: the replaced pair keeps its file names
    there, so `softbench verify` still reads it."""
    stamp, digest = "unsealed", "incomplete"
    if seal_path.exists():
        try:
            old = SealRecord.read(seal_path)
            digest = old.sha256[:12]
            # its own offset, if edited to carry one, converted: the stamp is in UTC
            stamp = utc_stamp(parse_utc(old.meta["sealed_utc"]))
        except UsageError:
            pass  # a damaged seal is archived as it is, under a neutral name
    dest = directory / "replaced" / f"{stamp}-{digest}"
    # two incomplete pairs replaced in turn share the neutral name: the second must not overwrite the first
    n = 2
    while dest.exists():
        dest, n = directory / "replaced" / f"{stamp}-{digest}-{n}", n + 1
    return dest


def _archive(yaml_path: Path, seal_path: Path) -> Path:
    dest = _archive_dir(yaml_path.parent, seal_path)
    dest.mkdir(parents=True, exist_ok=True)
    for p in (yaml_path, seal_path):
        if p.exists():
            os.replace(p, dest / p.name)
    return dest


def check_windows_open(content: dict, now: _dt.datetime | None = None) -> None:
    """Refuse a prediction whose window (`until`) has already closed: no session started after the seal could
    count for it, so sealing it would pre-register nothing."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    for p in content["predictions"]:
        if p.get("until") and parse_utc(p["until"]) <= now:
            raise UsageError(f"prediction {p['id']!r}: its window closed at {p['until']}, before this seal, so no "
                             "session could count for it",
                             hint="give an `until` after the time you seal, or leave it out")


def _refuse_edited_pair(yaml_path: Path, seal_path: Path, sealed_bytes: bytes) -> None:
    """A sealed file edited in place no longer matches its own seal. Comparing the edit with itself would call it
    already sealed, and --replace would archive the edit as the old seal; either way the sealed original is gone
    from the folder, so nothing is sealed until the pair is restored (fail closed)."""
    try:
        record = SealRecord.read(seal_path)
    except UsageError:
        return  # a damaged seal file: --replace archives it as it is
    if sha256_hex(sealed_bytes) != record.sha256:
        raise SealError(f"{yaml_path} was edited after it was sealed (it no longer matches {seal_path.name}), so "
                        "there is no sealed original to compare with or to archive",
                        hint=f"restore it (git checkout {yaml_path}), write the edit to a copy elsewhere, and seal "
                             "that copy with --replace")


def seal_file(source: Path | str, name: str | None = None, directory: Path | str = "sealed",
              replace: bool = False) -> SealResult:
    """Validate `source` and seal it as <directory>/<name>.yaml plus <name>.sha256.

    Sealing different content under an existing name raises SealError unless `replace`: then the old pair is
    moved, unchanged, under <directory>/replaced/ and the new seal names the hash it replaces. Identical content
    is a no-op (SealResult.created is False). Everything is validated before anything is written."""
    source = Path(source)
    if name is None:
        name = source.stem
    refuse_empty(name, "--name", "give --name a name, or leave --name out to use the file's stem")
    if len(name) > MAX_NAME_CHARS:
        raise UsageError(f"seal name {name[:20]!r}... has {len(name)} characters, more than the {MAX_NAME_CHARS} a "
                         "seal name may have")
    if not NAME_RE.match(name):
        raise UsageError(f"seal name {name!r} may use letters, digits, '.', '_' and '-' only")
    text = read_text_file(source, "predictions file")
    content = normalize(load_yaml_text(text, str(source)), str(source))
    check_recorded(content)
    directory = check_out_dir(directory, "--dir")
    data = canonical_bytes(content)
    digest = sha256_hex(data)
    yaml_path, seal_path = paths_for(name, directory)
    replaced: dict = {}
    archived = None
    if yaml_path.exists() or seal_path.exists():
        complete = yaml_path.exists() and seal_path.exists()
        old = yaml_path.read_bytes() if complete else None
        if complete:
            _refuse_edited_pair(yaml_path, seal_path, old)
        if old == data:
            record = SealRecord.read(seal_path)
            return SealResult(yaml_path, seal_path, digest, created=False, record=record)
        check_windows_open(content)  # before the old pair is archived; an identical re-seal above needs no window
        if not replace:
            if not complete:
                present = yaml_path if yaml_path.exists() else seal_path
                raise SealError(f"{present} exists without its partner file: the seal under {name!r} is incomplete",
                                hint="restore the missing file from version control, or pass --replace to archive "
                                     "it and seal anew")
            diff = _udiff(old.decode("utf-8", "replace"), data.decode("utf-8"), str(yaml_path),
                          f"{source} (canonical)")
            raise SealError(f"{yaml_path} already holds different sealed content; a seal is not replaced "
                            f"silently\n{diff}",
                            hint="seal under another --name, or pass --replace to seal it under this name and keep "
                                 f"the old pair in {directory / 'replaced'}")
        old_hash = sha256_hex(old) if old is not None else "none (the pair was incomplete)"
        archived = _archive(yaml_path, seal_path)
        replaced = {"replaces": old_hash, "replaced_archive": str(archived)}
    else:
        check_windows_open(content)
    # the repository that holds the predictions file; one written outside any (a draft under /tmp) takes the
    # commit of the repository its seal goes into, rather than none
    commit, dirty = git_state(source.resolve().parent)
    if commit == "none":
        folder = Path(directory).resolve()
        commit, dirty = git_state(next(p for p in (folder, *folder.parents) if p.is_dir()))  # it may not exist yet
    record = SealRecord(
        sha256=digest, filename=yaml_path.name,
        meta={"format": SEAL_FORMAT, "sealed_utc": utc_iso(), "git_commit": commit, "git_dirty": dirty,
              "source": str(source), "softbench": __version__, "predictions": len(content["predictions"]),
              **replaced},
        predictions=prediction_hashes(content))
    atomic_write_text(yaml_path, data.decode("utf-8"))
    atomic_write_text(seal_path, record.to_text())
    return SealResult(yaml_path, seal_path, digest, created=True, record=record, archived=archived)


# --- verification ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Verified:
    yaml_path: Path
    seal_path: Path
    content: dict
    record: SealRecord


def _resolve_pair(path: Path | str) -> tuple[Path, Path]:
    p = Path(path)
    if not p.name:  # '' (which Path reads as '.') or '/': no file to take the pair's name from
        raise UsageError(f"the sealed file's path {str(path)!r} names no file", hint="give sealed/NAME.yaml")
    if p.suffix == ".sha256":
        return p.with_suffix(".yaml"), p
    if p.suffix in (".yaml", ".yml"):
        return p, p.with_suffix(".sha256")
    # a bare name (sealed/paper, sealed/p18.v2): a dot in it is part of the name, not a suffix to swap
    return p.with_name(p.name + ".yaml"), p.with_name(p.name + ".sha256")


def _committed_copy(path: Path) -> str | None:
    """The file as last committed, when it lies in a git repository and is tracked (read-only git)."""
    top = _git(["rev-parse", "--show-toplevel"], path.resolve().parent)
    if top is None:
        return None
    rel = path.resolve().relative_to(Path(top.strip()).resolve())
    return _git(["show", f"HEAD:{rel.as_posix()}"], Path(top.strip()))


def _explain_mismatch(yaml_path: Path, actual: bytes, record: SealRecord) -> str:
    text = actual.decode("utf-8", "replace")
    parts = [f"recorded sha256 {record.sha256}", f"computed sha256 {sha256_hex(actual)}"]
    try:
        content = normalize(load_yaml_text(text, str(yaml_path)), str(yaml_path))
    except UsageError as e:
        parts.append(f"the sealed file no longer parses as predictions: {e}")
        content = None
    if content is not None and record.predictions:
        now = prediction_hashes(content)
        for pid in sorted(set(now) | set(record.predictions), key=natural_key):
            if pid not in now:
                parts.append(f"prediction {pid}: removed")
            elif pid not in record.predictions:
                parts.append(f"prediction {pid}: added")
            elif now[pid] != record.predictions[pid]:
                parts.append(f"prediction {pid}: changed")
    committed = _committed_copy(yaml_path)
    if committed is not None and committed != text:
        parts.append("diff against the committed copy:\n" + _udiff(committed, text, f"HEAD:{yaml_path.name}",
                                                                   f"{yaml_path.name} (now)"))
    elif content is not None and canonical_text(content) != text:
        parts.append("diff against the canonical form of the file's own content (the edit is where they differ):\n"
                     + _udiff(canonical_text(content), text, f"{yaml_path.name} (canonical)",
                              f"{yaml_path.name} (now)"))
    elif content is None:
        parts.append("no earlier copy to diff against, and the file does not parse, so no prediction can be named")
    else:
        parts.append("no earlier copy to diff against: the change keeps the canonical form; the per-prediction "
                     "lines above say where it is")
    return "\n".join(parts)


def verify(path: Path | str) -> Verified:
    """Recompute the seal of a sealed predictions file; raise SealError, with an explanation, on any mismatch."""
    yaml_path, seal_path = _resolve_pair(path)
    for p in (yaml_path, seal_path):
        if not p.is_file():  # bad input (2), not a mismatch (6): there is no seal to verify
            raise UsageError(f"{p} {'is not a file' if p.exists() else 'does not exist'}",
                             hint="a sealed set is <name>.yaml plus <name>.sha256, written by softbench seal")
    seal_text = read_text_file(seal_path, "seal file")
    record = SealRecord.parse(seal_text, str(seal_path))
    if record.filename != yaml_path.name:
        raise SealError(f"{seal_path} seals {record.filename!r}, not {yaml_path.name!r}")
    size = yaml_path.stat().st_size
    if size > MAX_TEXT_BYTES:  # seal reads no larger predictions file: this one was replaced
        raise SealError(f"{yaml_path} does not match its seal: it is {size / 2**20:.0f} MiB, "
                        f"more than any predictions file softbench seals ({MAX_TEXT_BYTES >> 20} MiB)",
                        hint="a sealed file is never edited; restore it, or seal new predictions under a new name")
    actual = yaml_path.read_bytes()
    if sha256_hex(actual) != record.sha256:
        raise SealError(f"{yaml_path} does not match its seal\n{_explain_mismatch(yaml_path, actual, record)}",
                        hint="a sealed file is never edited; restore it, or seal new predictions under a new name")
    try:
        text = actual.decode("utf-8")
    except UnicodeDecodeError:
        raise SealError(f"{yaml_path} matches its hash but is not UTF-8 text; it was not written by softbench "
                        "seal") from None
    content = normalize(load_yaml_text(text, str(yaml_path)), str(yaml_path))
    if canonical_text(content) != text:
        # the hash fits, yet softbench would not have written these bytes: both files were made by hand
        raise SealError(f"{yaml_path} matches its hash but is not in canonical form; it was not written by "
                        f"softbench seal\n" + _udiff(canonical_text(content), text, "canonical", "file"))
    _check_record(seal_path, seal_text, record, content)
    return Verified(yaml_path, seal_path, content, record)


def _commit_time(commit: str, cwd: Path) -> _dt.datetime | None:
    """The committer time of `commit` in the repository holding cwd; None where there is no git, no repository
    or no such commit (a seal copied elsewhere, a shallow clone): then the time cannot be checked."""
    out = _git(["show", "-s", "--format=%cI", f"{commit}^{{commit}}"], cwd)
    return parse_utc(out.strip()) if out else None


def _check_record(seal_path: Path, seal_text: str, record: SealRecord, content: dict) -> None:
    """The seal file's own lines: the yaml's hash guards the predictions, not the seal's time, and a session's
    standing as evidence rests on that time. What can be recomputed is (the count, each prediction's hash); the
    rest is compared with the committed seal file whenever that one seals the same bytes, so an edit of its time
    after the commit is caught."""
    commit, sealed_utc = record.meta["git_commit"], record.meta["sealed_utc"]
    made = _commit_time(commit, seal_path.resolve().parent) if commit != "none" else None
    if made is not None and parse_utc(sealed_utc) < made:
        # the seal was made at that commit, so after it: an earlier time would let earlier sessions count
        raise SealError(f"{seal_path}: its sealed_utc {sealed_utc} is earlier than its commit {commit[:12]} "
                        f"({utc_iso(made)}), at which it was made; the seal file was edited",
                        hint="restore it from version control")
    count = record.meta["predictions"]
    if count != str(len(content["predictions"])):
        raise SealError(f"{seal_path} counts {count} predictions where the sealed file holds "
                        f"{len(content['predictions'])}; the seal file was edited")
    if record.predictions and record.predictions != prediction_hashes(content):
        raise SealError(f"{seal_path}: its per-prediction hashes do not fit the sealed file; the seal file was edited")
    committed = _committed_copy(seal_path)
    if committed is None or committed == seal_text:
        return
    try:
        before = SealRecord.parse(committed, f"HEAD:{seal_path.name}")
    except UsageError:
        return
    if before.sha256 == record.sha256:  # the same seal as committed, so its lines may not differ
        changed = sorted(k for k in set(before.meta) | set(record.meta) if before.meta.get(k) != record.meta.get(k))
        raise SealError(f"{seal_path} differs from its committed copy in {', '.join(changed) or 'its lines'}, "
                        "for the same sealed file; the seal file was edited after it was committed",
                        hint=f"restore it: git checkout {seal_path}")
