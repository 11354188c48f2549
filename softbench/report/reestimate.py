"""Speed-ups against a reference kernel (FA3) from a paired latency session's own units.

A session of the interleaved or sustained protocol writes every kernel's estimate against its baseline (A0)
only. The speed-up against a reference kernel timed in the same run is estimated here from the same recorded
units (interleaved: the measured windows of windows.jsonl; sustained: the blocks of blocks.jsonl), paired as
the session paired them, by the session's own estimator (softbench.latency.summary.paired_estimate). First the
same units must give back every estimate the session wrote against A0: otherwise what is read here is not what
the session measured, and nothing is estimated."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from softbench.core.errors import UsageError
from softbench.core.numbers import finite
from softbench.core.workers import ordered_map
from softbench.latency.summary import paired_estimate
from softbench.predictions.sessions import SessionRecord
from softbench.report.records import raw_records

# against_reference's signature: the function itself, or a report's ReferenceEstimates
EstimateAgainst = Callable[[SessionRecord, str], tuple[dict[str, dict], str | None]]

# Below this many estimates, starting worker processes (each importing numpy and the summaries) costs more than the
# estimates take: each is a bootstrap per kernel, about 0.1 s.
MIN_ESTIMATES_FOR_WORKERS = 32


def units_file(summary: dict) -> str:
    """The records file that holds a latency session's paired units: the sustained protocol's blocks, else windows."""
    return "blocks.jsonl" if summary.get("protocol_kind") == "sustained" else "windows.jsonl"


def paired_units(rec: SessionRecord) -> tuple[list[dict], str, str | None]:
    """(units, the field that holds ms per call, the pairing slot) as the latency engine summarized them."""
    s = rec.summary
    if units_file(s) == "blocks.jsonl":
        return raw_records(rec, "blocks.jsonl"), "median_ms", None
    windows = [w for w in raw_records(rec, "windows.jsonl") if w.get("phase") in ("measure", None)]
    # the carry-over circuit pairs windows that followed the same kernel; the other orders pair per cycle
    order = (s.get("run") or {}).get("order") or {}
    circuit = bool(order.get("circuit")) or (s.get("protocol") or {}).get("order") == "circuit"
    return windows, "ms_per_call", "predecessor" if circuit else None


def _unit_problem(units: list[dict], key: str, slot: str | None) -> str | None:
    """What makes a recorded unit unpairable, in words, or None: a records row edited to a value of another kind
    is named here, in the records file it came from, instead of failing later as a fault of the summary."""
    for u in units:
        label, value = u.get("label"), u.get(key)
        if not isinstance(label, str):
            return f"a unit's label is {label!r}, not a kernel's name"
        for field, n in (("round", u.get("round", 0)), ("cycle", u.get("cycle"))):  # a unit without a round: 0
            if not (isinstance(n, int) and not isinstance(n, bool)):
                return f"a unit of {label} has {field} {n!r}, not a count"
        if slot and not isinstance(u.get(slot), (str, type(None))):
            return f"a unit of {label} has {slot} {u.get(slot)!r}, not a kernel's name"
        ms = finite(value)
        if ms is None or ms <= 0:
            return f"a unit of {label} has {key} {value!r}, not a time"
    return None


def _same(a, b) -> bool:
    """Equal estimates: the same numbers to rounding, an interval left undefined (NaN) on both sides."""
    a = float("nan") if a is None else float(a)
    b = float("nan") if b is None else float(b)
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _reproduces(written: dict | None, again: dict | None) -> bool:
    """The same pairs and estimate; the same interval too when the session's interval method is today's (a
    session summarized before the interleaved interval became a moving-block bootstrap keeps its own, and the
    estimates against the reference then carry today's method, which they name)."""
    if not written or not again:
        return written == again
    same_point = (written.get("n_pairs") == again["n_pairs"]
                  and _same(written.get("estimate_pct"), again["estimate_pct"]))
    if written.get("method") != again.get("method"):
        return same_point
    return same_point and all(_same(x, y) for x, y in zip(written.get("ci95_pct") or [None, None], again["ci95_pct"]))


def against_reference(rec: SessionRecord, reference: str) -> tuple[dict[str, dict], str | None]:
    """({label: paired estimate of that kernel against `reference`}, None) for the baseline and the variants of
    `rec`, or ({}, why not) in one sentence."""
    s = rec.summary
    try:
        units, key, slot = paired_units(rec)
    except UsageError as e:  # a damaged records file
        return {}, f"its units are unreadable ({e})"
    if not units:
        return {}, "it holds no recorded units (windows.jsonl or blocks.jsonl) to pair"
    problem = _unit_problem(units, key, slot)
    if problem:
        return {}, f"its units in {units_file(s)} cannot be paired: {problem}"
    with np.errstate(all="ignore"):  # a time near a float's limit overflows its ratios: the check below says so
        return _estimates(s, units, key, slot, reference)


def _estimates(s: dict, units: list[dict], key: str, slot: str | None,
               reference: str) -> tuple[dict[str, dict], str | None]:
    """against_reference's estimates from units already checked: first the session's own, then the reference's."""
    kind, base = s.get("protocol_kind"), s.get("baseline")
    for label, comp in (s.get("comparisons") or {}).items():
        if not _reproduces(comp.get("paired"), paired_estimate(units, base, label, kind, key, slot)):
            return {}, f"its recorded units do not give back its own estimate of {label} against {base}"
    roles = {label: k.get("role") for label, k in (s.get("kernels") or {}).items()}
    out = {}
    for label, role in roles.items():
        if role in ("baseline", "variant"):
            est = paired_estimate(units, reference, label, kind, key, slot)
            if est is not None:
                out[label] = est
    return out, None


def _references(rec: SessionRecord) -> list[str]:
    """The reference kernels a latency session names as timed beside it (a damaged list is left to the tables)."""
    refs = rec.summary.get("references")  # summary is always a mapping: load_sessions gives {} for a damaged one
    return [r for r in refs if isinstance(r, str)] if isinstance(refs, list) else []


def _estimate_if_readable(ask: tuple[SessionRecord, str]) -> tuple[dict[str, dict], str | None] | None:
    """against_reference, or None where it raises: such a session is asked again in the report's own process,
    where the tables' check of its values says what is wrong with it, as it would have without this prefetch."""
    try:
        return against_reference(*ask)
    except Exception:  # noqa: BLE001 - any failure is met again, and reported, by the caller's second asking
        return None


class ReferenceEstimates:
    """against_reference, once per session and reference kernel within one report. Each call re-checks every
    estimate the session wrote with a fresh bootstrap, and three parts of a report read the same estimates (the
    latency table, the replications across sessions, speed against fidelity): one instance per report."""

    def __init__(self) -> None:
        self._memo: dict[tuple[int, str], tuple[SessionRecord, tuple[dict[str, dict], str | None]]] = {}

    def __call__(self, rec: SessionRecord, reference: str) -> tuple[dict[str, dict], str | None]:
        key = (id(rec), reference)
        if key not in self._memo:
            # the record is held with its estimates, so that no other record can take its id while it is kept
            self._memo[key] = (rec, against_reference(rec, reference))
        return self._memo[key][1]

    def prefetch(self, records: list[SessionRecord], jobs: int) -> None:
        """Every latency session's estimates against each reference it timed, worked out in up to `jobs` processes
        before the report's tables ask for them one by one: over hundreds of sessions they are most of the report's
        time when its figures are left out. The estimates are the ones asking would give (the same units, the same
        seeded bootstrap)."""
        asks = [(r, ref) for r in records if r.command == "latency" for ref in _references(r)]
        found = ordered_map(_estimate_if_readable, asks, jobs, MIN_ESTIMATES_FOR_WORKERS,
                            "re-estimating sessions against their reference")
        for (rec, ref), got in zip(asks, found):
            if got is not None:
                self._memo[(id(rec), ref)] = (rec, got)
