"""Measurement protocols: how many rounds, windows and calls, in which order. Frozen and validated, loadable
from YAML so that a session records exactly the protocol it ran."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import yaml

from softbench.errors import UsageError


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


def load_yaml_mapping(path: Path | str) -> dict:
    p = Path(path)
    if not p.exists():
        raise UsageError(f"protocol file {p} does not exist")
    try:
        data = yaml.safe_load(p.read_text())
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
