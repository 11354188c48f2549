"""The predictions file: what a valid one holds, and the one canonical form (and hashes) its meaning is sealed in.

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
        until: 2026-12-05T17:00:00Z    # optional: only sessions started before this time count (one lease's runs)

Canonical form: the validated content dumped as YAML with sorted keys, predictions sorted by id (natural order),
free text with its whitespace collapsed, numbers in thresholds as floats, `seq: 8K` as 8192, comparators as
symbols, evidence as a sorted list, `until` as a UTC time in ISO 8601. Comments, key order, indentation and line
wrapping of the input therefore do not change the sealed bytes; any change of meaning does."""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
import re
from typing import Any

import yaml

from softbench.core.errors import UsageError
from softbench.core.shapes import DTYPES, parse_seq
from softbench.core.textfile import parse_yaml
from softbench.core.suggest import did_you_mean
from softbench.core.utc import parse_utc
from softbench.predictions.vocabulary import evidence_problem, scope_key_problem

SINGLE_COMPARATORS = (">", ">=", "<", "<=")
RANGE_COMPARATORS = ("between", "outside")
COMPARATOR_ALIASES = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "=>": ">=", "=<": "<="}
TOP_KEYS = {"title", "description", "predictions"}
PREDICTION_KEYS = {"id", "statement", "quantity", "relative_to", "comparator", "threshold", "scope", "evidence",
                   "unit", "note", "until"}
REQUIRED_KEYS = ("id", "statement", "quantity", "comparator", "threshold", "scope", "evidence")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_EVIDENCE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


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
    try:
        number = float(value)
    except OverflowError:  # an integer past float's range
        raise ValidationError(f"{_where(pid, fld)}: {value} is too large to be a threshold") from None
    if not math.isfinite(number):
        raise ValidationError(f"{_where(pid, fld)}: must be finite, got {value!r}")
    return number


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
    if isinstance(value, float) and not math.isfinite(value):
        raise ValidationError(f"{_where(pid, fld)}: must be finite, got {value!r}")
    if key == "gpu_capability" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{float(value):.1f}"  # sessions record it as text ('9.0'); an unquoted 9.0 means the same
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
    if pid_raw is None or (isinstance(pid_raw, str) and not pid_raw.strip()):
        raise ValidationError(f"predictions[{index}]: field 'id' is missing or empty")
    if isinstance(pid_raw, bool) or not isinstance(pid_raw, (str, int)):
        raise ValidationError(f"predictions[{index}]: field 'id' is {pid_raw!r}; an id is a name or a whole number",
                              hint="quote it: id: \"P1.5\"")
    pid = str(pid_raw).strip()
    if not NAME_RE.match(pid):
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
    if raw.get("until") is not None:
        p["until"] = _until(raw["until"], pid)
    return p


def _until(value: Any, pid: str) -> str:
    """The end of a prediction's evidence window as a UTC time in ISO 8601. A scope names what a session measured,
    not when it ran, so a prediction about one lease would otherwise take every later session of the same kind
    too; YAML reads an unquoted time as a datetime, a quoted one as text: both are taken, a time without a zone as
    UTC."""
    if isinstance(value, _dt.date) and not isinstance(value, _dt.datetime):
        value = _dt.datetime.combine(value, _dt.time())  # an unquoted 2030-01-01 reads as a date: its midnight
    t = parse_utc(value.strip()) if isinstance(value, str) else value
    if not isinstance(t, _dt.datetime):
        raise ValidationError(f"{_where(pid, 'until')}: {value!r} is not a time (ISO 8601, e.g. 2026-12-05T17:00:00Z)")
    t = t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)
    try:
        return t.astimezone(_dt.timezone.utc).isoformat(timespec="seconds")
    except OverflowError:  # a zone offset at the calendar's edge
        raise ValidationError(f"{_where(pid, 'until')}: {value!r} lies outside the calendar in UTC") from None


def natural_key(text: str) -> list:
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
    out: dict = {"predictions": sorted(out_preds, key=lambda p: natural_key(p["id"]))}
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


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader keeps the last of two equal keys in a mapping; for a file to be sealed that silently
    drops a prediction list or a threshold, so a repeated key is an error here."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)):
                continue  # an unhashable key: the base constructor refuses it in its own words
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"the key {key!r} appears twice in one mapping",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def load_yaml_text(text: str, source: str) -> Any:
    return parse_yaml(text, source, "a predictions file", ValidationError, _UniqueKeyLoader,
                      hint="quote comparator symbols: comparator: \">=\"")


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
