"""Sealed, pre-registered predictions: validate a predictions file, write it in one canonical form, fix its
SHA-256 beside it, and check both later.

Predictions file (YAML)::

    title: optional free text
    description: optional free text
    predictions:
      - id: P4
        statement: what is predicted, in words
        quantity: speedup_pct          # dotted path into a session's summary.json (median_ms.A1, ncu.A1.mufu_pipe_pct)
        relative_to: median_ms.A0      # optional: the value becomes 100 * (quantity / relative_to - 1), in percent
        comparator: between            # >, >=, <, <=, between, outside (or gt, ge, lt, le)
        threshold: [10, 15]            # a number, or {quantity: path} to compare against another quantity;
                                       # two of them for between/outside (inclusive bounds); `thresholds` also accepted
        scope: {command: latency, dtype: fp8, causal: true, head_dim: 128, baseline: A0, variant: A1}
        evidence: latency              # kind(s) of evidence needed: latency, ncu, energy, fidelity, ...
        unit: "%"                      # optional
        note: optional free text

Canonical form: the validated content dumped as YAML with sorted keys, predictions sorted by id (natural order),
free text with its whitespace collapsed, numbers in thresholds as floats, `seq: 8K` as 8192, comparators as
symbols, evidence as a sorted list. Comments, key order, indentation and line wrapping of the input therefore
do not change the sealed bytes; any change of meaning does.

Seal file `<name>.sha256`: its first line is `<sha256 hex>  <name>.yaml`, the format `sha256sum -c` reads;
the lines after it start with `# ` (which `sha256sum -c` skips) and hold `key: value` metadata: `format`,
`sealed_utc`, `git_commit` (or `none`), `git_dirty`, `source`, `softbench`, `predictions` (the count) and one
`prediction.<id>: <sha256>` per prediction (the hash of that prediction alone, so a mismatch can be traced to
the prediction that changed)."""

from __future__ import annotations

import datetime as _dt
import difflib
import hashlib
import math
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from softbench import __version__
from softbench.core.checks import check_out_dir
from softbench.core.errors import SealError, UsageError
from softbench.core.session import atomic_write_text, utc_iso
from softbench.core.shapes import DTYPES, parse_seq
from softbench.core.suggest import did_you_mean
from softbench.core.textfile import read_text_file
from softbench.predictions.vocabulary import evidence_problem, scope_key_problem

SEAL_FORMAT = "softbench-seal/1"
SINGLE_COMPARATORS = (">", ">=", "<", "<=")
RANGE_COMPARATORS = ("between", "outside")
COMPARATOR_ALIASES = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "=>": ">=", "=<": "<="}
TOP_KEYS = {"title", "description", "predictions"}
PREDICTION_KEYS = {"id", "statement", "quantity", "relative_to", "comparator", "threshold", "scope", "evidence",
                   "unit", "note"}
REQUIRED_KEYS = ("id", "statement", "quantity", "comparator", "threshold", "scope", "evidence")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_EVIDENCE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_HEX = re.compile(r"^[0-9a-f]{64}$")


class ValidationError(UsageError):
    """A predictions file that does not describe checkable predictions; the message names the id and field."""


# --- validation and normalization -------------------------------------------------------------------------

def _where(pid: str | None, fld: str) -> str:
    return f"prediction {pid!r}, field {fld!r}" if pid is not None else f"field {fld!r}"


def _text(value: Any, pid: str | None, fld: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{_where(pid, fld)}: must be non-empty text, got {value!r}")
    # folded, literal and plain YAML strings of the same words seal the same
    return " ".join(value.split())


def _path(value: Any, pid: str, fld: str) -> str:
    text = _text(value, pid, fld)
    if " " in text or any(not part for part in text.split(".")):
        raise ValidationError(f"{_where(pid, fld)}: {value!r} is not a dotted path (e.g. speedup_pct, median_ms.A1)")
    return text


def _number(value: Any, pid: str, fld: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{_where(pid, fld)}: must be a number or {{quantity: path}}, got {value!r}")
    if not math.isfinite(value):
        raise ValidationError(f"{_where(pid, fld)}: must be finite, got {value!r}")
    return float(value)


def _bound(value: Any, pid: str, fld: str) -> float | dict:
    """A threshold bound: a number, or a reference to another quantity of the same session."""
    if isinstance(value, dict):
        if set(value) != {"quantity"}:
            raise ValidationError(f"{_where(pid, fld)}: a reference must be exactly {{quantity: path}}, got {value!r}")
        return {"quantity": _path(value["quantity"], pid, fld)}
    return _number(value, pid, fld)


def _comparator(value: Any, pid: str) -> str:
    text = str(value).strip().lower() if isinstance(value, str) else None
    text = COMPARATOR_ALIASES.get(text, text)
    if text not in SINGLE_COMPARATORS + RANGE_COMPARATORS:
        raise ValidationError(
            f"{_where(pid, 'comparator')}: {value!r} is not one of {', '.join(SINGLE_COMPARATORS + RANGE_COMPARATORS)}",
            hint="quote symbols in YAML (comparator: \">=\"); a bare > starts a folded block")
    return text


def _threshold(value: Any, comparator: str, pid: str) -> float | dict | list:
    if comparator in RANGE_COMPARATORS:
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise ValidationError(f"{_where(pid, 'threshold')}: {comparator!r} needs two bounds [low, high], "
                                  f"got {value!r}")
        lo, hi = (_bound(v, pid, "threshold") for v in value)
        if isinstance(lo, float) and isinstance(hi, float) and lo > hi:
            raise ValidationError(f"{_where(pid, 'threshold')}: low bound {lo} is above high bound {hi}")
        return [lo, hi]
    if isinstance(value, (list, tuple)):
        raise ValidationError(f"{_where(pid, 'threshold')}: {comparator!r} takes one bound, got {value!r}")
    return _bound(value, pid, "threshold")


def _scope_scalar(key: str, value: Any, pid: str) -> Any:
    fld = f"scope.{key}"
    if isinstance(value, str):
        value = value.strip()
    if key == "seq":
        if isinstance(value, bool):
            raise ValidationError(f"{_where(pid, fld)}: must be a sequence length, got {value!r}")
        try:
            return parse_seq(str(value))
        except UsageError:
            raise ValidationError(f"{_where(pid, fld)}: {value!r} is not a sequence length (e.g. 8192 or 8K)") from None
    if key == "causal" and not isinstance(value, bool):
        raise ValidationError(f"{_where(pid, fld)}: must be true or false, got {value!r}")
    if key == "dtype" and value not in DTYPES:
        raise ValidationError(f"{_where(pid, fld)}: {value!r} is not one of {', '.join(DTYPES)}")
    if key in ("head_dim", "batch", "heads", "kv_heads"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 1:
            raise ValidationError(f"{_where(pid, fld)}: must be a positive integer, got {value!r}")
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)  # 128.0 and 128 select the same sessions
    if value is None or isinstance(value, (dict, list)):
        raise ValidationError(f"{_where(pid, fld)}: must be a scalar or a list of scalars, got {value!r}")
    if isinstance(value, str) and not value:
        raise ValidationError(f"{_where(pid, fld)}: must not be empty")
    return value


def _scope(value: Any, pid: str) -> dict:
    if not isinstance(value, dict) or not value:
        raise ValidationError(f"{_where(pid, 'scope')}: must be a non-empty mapping (e.g. {{command: latency}}), "
                              f"got {value!r}")
    out: dict = {}
    for key, v in value.items():
        key = str(key).strip()
        if isinstance(v, (list, tuple)):
            items = [_scope_scalar(key, x, pid) for x in v]
            if not items:
                raise ValidationError(f"{_where(pid, f'scope.{key}')}: an empty list matches nothing")
            # a list means "any of"; its order carries no meaning
            uniq = {yaml.safe_dump(x): x for x in items}
            out[key] = [uniq[k] for k in sorted(uniq)] if len(uniq) > 1 else next(iter(uniq.values()))
        else:
            out[key] = _scope_scalar(key, v, pid)
    return out


def _evidence(value: Any, pid: str) -> list[str]:
    items = value if isinstance(value, (list, tuple)) else [value]
    out = set()
    for v in items:
        if not isinstance(v, str) or not _EVIDENCE.match(v.strip().lower()):
            raise ValidationError(f"{_where(pid, 'evidence')}: {v!r} is not an evidence kind "
                                  "(e.g. latency, ncu, energy)")
        out.add(v.strip().lower())
    if not out:
        raise ValidationError(f"{_where(pid, 'evidence')}: name at least one evidence kind")
    return sorted(out)


def _prediction(raw: Any, index: int) -> dict:
    if not isinstance(raw, dict):
        raise ValidationError(f"predictions[{index}] must be a mapping, got {type(raw).__name__}")
    pid_raw = raw.get("id")
    if isinstance(pid_raw, bool) or not isinstance(pid_raw, (str, int)) or not str(pid_raw).strip():
        raise ValidationError(f"predictions[{index}]: field 'id' is missing or empty")
    pid = str(pid_raw).strip()
    if not _NAME.match(pid):
        raise ValidationError(f"{_where(pid, 'id')}: use letters, digits, '.', '_' or '-'")
    raw = dict(raw)
    if "thresholds" in raw:
        if "threshold" in raw:
            raise ValidationError(f"{_where(pid, 'thresholds')}: give either threshold or thresholds, not both")
        raw["threshold"] = raw.pop("thresholds")
    unknown = sorted(set(map(str, raw)) - PREDICTION_KEYS)
    if unknown:
        known = ", ".join(sorted(PREDICTION_KEYS))
        raise ValidationError(f"{_where(pid, unknown[0])}: unknown field",
                              hint=did_you_mean(unknown[0], PREDICTION_KEYS) or f"known: {known}")
    for k in REQUIRED_KEYS:
        if k not in raw or raw[k] is None:
            raise ValidationError(f"{_where(pid, k)}: missing")
    comparator = _comparator(raw["comparator"], pid)
    p = {
        "id": pid,
        "statement": _text(raw["statement"], pid, "statement"),
        "quantity": _path(raw["quantity"], pid, "quantity"),
        "comparator": comparator,
        "threshold": _threshold(raw["threshold"], comparator, pid),
        "scope": _scope(raw["scope"], pid),
        "evidence": _evidence(raw["evidence"], pid),
    }
    if raw.get("relative_to") is not None:
        p["relative_to"] = _path(raw["relative_to"], pid, "relative_to")
    for k in ("unit", "note"):
        if raw.get(k) is not None:
            p[k] = _text(raw[k], pid, k)
    return p


def _natural_key(text: str) -> list:
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", text) if t]


def normalize(data: Any, source: str = "predictions") -> dict:
    """Validate parsed predictions and return their canonical content (a plain dict)."""
    if not isinstance(data, dict):
        raise ValidationError(f"{source}: the top level must be a mapping with a 'predictions' list")
    unknown = sorted(set(map(str, data)) - TOP_KEYS)
    if unknown:
        raise ValidationError(f"{source}: unknown top-level field {unknown[0]!r} "
                              f"(known: {', '.join(sorted(TOP_KEYS))})")
    preds = data.get("predictions")
    if not isinstance(preds, list) or not preds:
        raise ValidationError(f"{source}: 'predictions' must be a non-empty list")
    out_preds = [_prediction(p, i) for i, p in enumerate(preds)]
    seen: set[str] = set()
    for p in out_preds:
        if p["id"] in seen:
            raise ValidationError(f"prediction {p['id']!r}, field 'id': used more than once")
        seen.add(p["id"])
    out: dict = {"predictions": sorted(out_preds, key=lambda p: _natural_key(p["id"]))}
    for k in ("title", "description"):
        if data.get(k) is not None:
            out[k] = _text(data[k], None, k)
    return out


def check_recorded(content: dict) -> None:
    """Every scope key and evidence kind must be one that sessions record (predictions.vocabulary), or the
    prediction could never be scored. Checked when sealing only: a seal made under an older vocabulary still
    verifies."""
    for p in content["predictions"]:
        for key in p["scope"]:
            problem = scope_key_problem(key, p["scope"])
            if problem:
                raise ValidationError(f"{_where(p['id'], f'scope.{key}')}: {problem[0]}", hint=problem[1])
        for kind in p["evidence"]:
            problem = evidence_problem(kind)
            if problem:
                raise ValidationError(f"{_where(p['id'], 'evidence')}: {problem[0]}", hint=problem[1])


def load_yaml_text(text: str, source: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValidationError(f"{source} is not valid YAML: {e}",
                              hint="quote comparator symbols: comparator: \">=\"") from None


def canonical_text(content: dict) -> str:
    # sort_keys and a fixed width make the dump a function of the content alone
    return yaml.safe_dump(content, sort_keys=True, default_flow_style=False, allow_unicode=True, width=100,
                          indent=2)


def canonical_bytes(content: dict) -> bytes:
    return canonical_text(content).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def prediction_hashes(content: dict) -> dict[str, str]:
    return {p["id"]: sha256_hex(canonical_bytes(p)) for p in content["predictions"]}


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
        lines = text.splitlines()
        first = lines[0].split() if lines else []
        if len(first) != 2 or not _HEX.match(first[0]):
            raise SealError(f"{source}: the first line must be '<sha256 hex>  <name>.yaml'",
                            hint="the seal file was damaged; restore it from version control")
        meta: dict = {}
        preds: dict = {}
        for line in lines[1:]:
            if not line.startswith("# ") or ": " not in line:
                continue
            key, _, value = line[2:].partition(": ")
            if key.startswith("prediction."):
                preds[key[len("prediction."):]] = value.strip()
            else:
                meta[key] = value.strip()
        return cls(sha256=first[0], filename=first[1].lstrip("*"), meta=meta, predictions=preds)


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
            old = SealRecord.parse(read_text_file(seal_path, "seal file", SealError), str(seal_path))
            digest = old.sha256[:12]
            stamp = _dt.datetime.fromisoformat(old.meta["sealed_utc"]).strftime("%Y%m%dT%H%M%SZ")
        except (SealError, KeyError, ValueError):
            pass  # a damaged seal is archived as it is, under a neutral name
    return directory / "replaced" / f"{stamp}-{digest}"


def _archive(yaml_path: Path, seal_path: Path) -> Path:
    dest = _archive_dir(yaml_path.parent, seal_path)
    dest.mkdir(parents=True, exist_ok=True)
    for p in (yaml_path, seal_path):
        if p.exists():
            os.replace(p, dest / p.name)
    return dest


def seal_file(source: Path | str, name: str | None = None, directory: Path | str = "sealed",
              replace: bool = False) -> SealResult:
    """Validate `source` and seal it as <directory>/<name>.yaml plus <name>.sha256.

    Sealing different content under an existing name raises SealError unless `replace`: then the old pair is
    moved, unchanged, under <directory>/replaced/ and the new seal names the hash it replaces. Identical content
    is a no-op (SealResult.created is False). Everything is validated before anything is written."""
    source = Path(source)
    name = name or source.stem
    if not _NAME.match(name):
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
        if old == data:
            record = SealRecord.parse(read_text_file(seal_path, "seal file", SealError), str(seal_path))
            return SealResult(yaml_path, seal_path, digest, created=False, record=record)
        if not replace:
            if not complete:
                present = yaml_path if yaml_path.exists() else seal_path
                raise SealError(f"{present} exists without its partner file: the seal under {name!r} is incomplete",
                                hint="restore the missing file from version control, or pass --replace to archive "
                                     "it and seal anew")
            diff = _udiff(old.decode("utf-8", "replace"), data.decode("utf-8"), f"sealed/{yaml_path.name}",
                          f"{source} (canonical)")
            raise SealError(f"{yaml_path} already holds different sealed content; a seal is not replaced "
                            f"silently\n{diff}",
                            hint="seal under another --name, or pass --replace to seal it under this name and keep "
                                 f"the old pair in {directory / 'replaced'}")
        old_hash = sha256_hex(old) if old is not None else "none (the pair was incomplete)"
        archived = _archive(yaml_path, seal_path)
        replaced = {"replaces": old_hash, "replaced_archive": str(archived)}
    commit, dirty = git_state(source.resolve().parent)
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
    if p.suffix == ".sha256":
        return p.with_suffix(".yaml"), p
    if p.suffix in (".yaml", ".yml"):
        return p, p.with_suffix(".sha256")
    return p.with_suffix(".yaml"), p.with_suffix(".sha256")  # a bare name: sealed/paper


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
        for pid in sorted(set(now) | set(record.predictions), key=_natural_key):
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
    else:
        parts.append("no earlier copy to diff against: the change keeps the canonical form; the per-prediction "
                     "lines above say where it is")
    return "\n".join(parts)


def verify(path: Path | str) -> Verified:
    """Recompute the seal of a sealed predictions file; raise SealError, with an explanation, on any mismatch."""
    yaml_path, seal_path = _resolve_pair(path)
    for p in (yaml_path, seal_path):
        if not p.is_file():
            raise SealError(f"{p} does not exist", hint="a sealed set is <name>.yaml plus <name>.sha256, written by "
                                                        "softbench seal")
    record = SealRecord.parse(read_text_file(seal_path, "seal file", SealError), str(seal_path))
    if record.filename != yaml_path.name:
        raise SealError(f"{seal_path} seals {record.filename!r}, not {yaml_path.name!r}")
    actual = yaml_path.read_bytes()
    if sha256_hex(actual) != record.sha256:
        raise SealError(f"{yaml_path} does not match its seal\n{_explain_mismatch(yaml_path, actual, record)}",
                        hint="a sealed file is never edited; restore it, or seal new predictions under a new name")
    text = actual.decode("utf-8")
    content = normalize(load_yaml_text(text, str(yaml_path)), str(yaml_path))
    if canonical_text(content) != text:
        # the hash fits, yet softbench would not have written these bytes: both files were made by hand
        raise SealError(f"{yaml_path} matches its hash but is not in canonical form; it was not written by "
                        f"softbench seal\n" + _udiff(canonical_text(content), text, "canonical", "file"))
    return Verified(yaml_path, seal_path, content, record)
