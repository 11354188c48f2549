"""Measurement protocols: how many rounds, windows and calls, in which order. Frozen and validated, loadable
from YAML so that a session records exactly the protocol it ran."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import yaml

from softbench.core.errors import UsageError


@dataclass(frozen=True)
class LatencyProtocol:
    """Paper B.3 defaults: 3 rounds in alternating order, 50 warm-up calls, 7 windows of 100 calls each."""

    rounds: int = 3
    windows: int = 7
    calls: int = 100
    warmup: int = 50
    seed: int = 0
    order: str = "alternate"  # alternate: A0A1, A1A0, A0A1, ...; fixed: A0A1 every round

    def __post_init__(self):
        for name in ("rounds", "windows", "calls"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise UsageError(f"protocol: {name} must be a positive integer, got {v!r}")
        if not isinstance(self.warmup, int) or self.warmup < 0:
            raise UsageError(f"protocol: warmup must be a non-negative integer, got {self.warmup!r}")
        if self.order not in ("alternate", "fixed"):
            raise UsageError(f"protocol: order must be 'alternate' or 'fixed', got {self.order!r}")

    def round_order(self, first: str, second: str) -> list[tuple[str, str]]:
        """Which variant runs first in each round: (first, second), (second, first), ... when alternating."""
        out = []
        for r in range(self.rounds):
            swap = self.order == "alternate" and r % 2 == 1
            out.append((second, first) if swap else (first, second))
        return out

    def to_dict(self) -> dict:
        return asdict(self)

    def with_overrides(self, **overrides) -> "LatencyProtocol":
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


def packaged_protocols() -> list[str]:
    """The protocol files shipped inside the package (softbench/protocols/*.yaml), by name."""
    from importlib.resources import files

    return sorted(f.name[:-5] for f in files("softbench.protocols").iterdir() if f.name.endswith(".yaml"))


def packaged_protocol(name: str) -> str:
    """The text of a shipped protocol file, read through importlib.resources so that it works from a wheel."""
    from importlib.resources import files

    entry = files("softbench.protocols") / f"{name}.yaml"
    if not entry.is_file():
        raise UsageError(f"no packaged protocol named {name!r} (packaged: {', '.join(packaged_protocols())})")
    return entry.read_text(encoding="utf-8")


def read_protocol_text(path: Path | str) -> tuple[str, str]:
    """(text, source) of a protocol given as a file path or as the name of a packaged protocol ("energy")."""
    from softbench.core.textfile import read_text_file

    p = Path(path)
    if p.exists():
        return read_text_file(p, "protocol file"), str(p)
    name = p.name[:-5] if p.name.endswith(".yaml") else p.name
    if str(p) == p.name and name in packaged_protocols():
        return packaged_protocol(name), f"softbench/protocols/{name}.yaml"
    raise UsageError(f"protocol file {p} does not exist",
                     hint=f"a packaged protocol can be named instead: {', '.join(packaged_protocols())}")


def load_yaml_mapping(path: Path | str) -> dict:
    text, p = read_protocol_text(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise UsageError(f"protocol file {p} is not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise UsageError(f"protocol file {p} must hold a mapping at the top level")
    return data


def latency_protocol_from_mapping(data: dict, source: str = "protocol") -> LatencyProtocol:
    known = {f.name for f in fields(LatencyProtocol)}
    section = data.get("protocol", data)
    if not isinstance(section, dict):
        raise UsageError(f"{source}: 'protocol' must be a mapping")
    unknown = set(section) - known
    if unknown:
        raise UsageError(f"{source}: unknown protocol keys {sorted(unknown)} (known: {sorted(known)})")
    return LatencyProtocol(**section)


@dataclass(frozen=True)
class LatencyPlan:
    """A latency protocol file: the protocol, and optionally the cells (shapes) and the pair of variants it is for.
    Shape keys of a cell override the file's `shape` defaults."""

    protocol: LatencyProtocol
    shape_defaults: dict
    cells: tuple[dict, ...]
    baseline: str | None = None
    variant: str | None = None
    backend: str | None = None

    def shapes(self):
        from softbench.core.shapes import Shape, parse_seq

        out = []
        for i, cell in enumerate(self.cells):
            merged = {**self.shape_defaults, **cell}
            if "seq" in merged:
                merged["seq"] = parse_seq(merged["seq"])
            try:
                out.append(Shape(**merged))
            except TypeError as e:
                raise UsageError(f"protocol cell {i + 1}: {e}") from None
        return tuple(out)


_PLAN_KEYS = {"name", "description", "protocol", "shape", "cells", "baseline", "variant", "backend"}
_SHAPE_KEYS = {"dtype", "seq", "causal", "batch", "heads", "kv_heads", "head_dim"}


def latency_plan_from_mapping(data: dict, source: str = "protocol") -> LatencyPlan:
    """Validate a protocol file. A file with only protocol keys (rounds, windows, ...) at the top level is a plan
    with no cells, for compatibility with the short form."""
    if "protocol" not in data and "cells" not in data:
        return LatencyPlan(latency_protocol_from_mapping(data, source), {}, ())
    unknown = set(data) - _PLAN_KEYS
    if unknown:
        raise UsageError(f"{source}: unknown keys {sorted(unknown)} (known: {sorted(_PLAN_KEYS)})")
    proto = latency_protocol_from_mapping(data.get("protocol") or {}, source)
    defaults = data.get("shape") or {}
    cells = data.get("cells") or []
    if not isinstance(defaults, dict) or not isinstance(cells, list):
        raise UsageError(f"{source}: 'shape' must be a mapping and 'cells' a list of mappings")
    for i, cell in enumerate([defaults, *cells]):
        if not isinstance(cell, dict):
            raise UsageError(f"{source}: cell {i} is not a mapping")
        bad = set(cell) - _SHAPE_KEYS
        if bad:
            where = "shape" if i == 0 else f"cell {i}"
            raise UsageError(f"{source}: {where} has unknown keys {sorted(bad)} (known: {sorted(_SHAPE_KEYS)})")
    plan = LatencyPlan(proto, dict(defaults), tuple(dict(c) for c in cells), data.get("baseline"),
                       data.get("variant"), data.get("backend"))
    plan.shapes()  # every cell must be a valid shape before anything runs
    return plan
