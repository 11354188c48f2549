"""The recorded interleaved sessions that carry an A/A null, read once for the analysis scripts beside this file."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

DEFAULT_GLOB = "*-latency-*-interleaved"


@dataclass
class RecordedNull:
    path: Path
    summary: dict
    measured: list[dict]  # the measuring windows, in time order
    baseline: str
    null: str


def recorded_nulls(root: str, pattern: str = DEFAULT_GLOB) -> Iterator[RecordedNull]:
    for d in sorted(Path(root).glob(pattern)):
        try:
            s = json.loads((d / "summary.json").read_text())
            windows = [json.loads(line) for line in (d / "windows.jsonl").read_text().splitlines()]
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(s.get("null"), str):
            yield RecordedNull(d, s, [w for w in windows if w.get("phase") == "measure"], s["baseline"], s["null"])
