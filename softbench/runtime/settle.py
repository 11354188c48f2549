"""When has the board settled? A pure rule over (time, power, SM clock) readings, used by the interleaved
protocol's warm-up (the mix of kernels), the sustained protocol's blocks (one kernel's own equilibrium under the
power cap), energy's loops and each traced process.

On a power-capped GPU the controller moves the SM clock over about a second after the load changes (the H200's
700 W cap: idle to cap in about 1 s, then an overshoot). A fixed warm-up in calls is 0.3 s at FP8 8K, so it ends
inside the ramp. The rule here compares the means of the two most recent spans of `span_s` seconds: settled
when power moved by at most `power_rel` of its value and the SM clock by at most `clock_mhz` between them, and at
least `min_s` has passed. Without readings (a CPU, or NVML missing) the warm-up is `min_s` of calls and says so."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class SettleRule:
    min_s: float = 2.0
    max_s: float = 15.0
    span_s: float = 1.0
    power_rel: float = 0.02
    clock_mhz: float = 15.0

    def __post_init__(self):
        if not (0 <= self.min_s <= self.max_s):
            raise ValueError(f"settle: need 0 <= min_s <= max_s, got {self.min_s}, {self.max_s}")
        if self.span_s <= 0 or self.power_rel <= 0 or self.clock_mhz <= 0:
            raise ValueError("settle: span_s, power_rel and clock_mhz must be positive")

    @classmethod
    def from_mapping(cls, mapping: dict) -> "SettleRule":
        """The rule a mapping of its keywords describes, defaults filled in; ValueError names an unknown key."""
        known = set(asdict(cls()))
        unknown = sorted(set(mapping) - known)
        if unknown:
            raise ValueError(f"settle rule: unknown key {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        return cls(**mapping)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SettleVerdict:
    settled: bool
    reason: str  # "settled", "time limit", "no readings: fixed warm-up", or "" while still waiting
    elapsed_s: float
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    power_change_rel: float | None = None
    clock_change_mhz: float | None = None

    @property
    def done(self) -> bool:
        return bool(self.reason)

    def to_dict(self) -> dict:
        return asdict(self)


class Settler:
    """Feed it readings as they come; `verdict()` says whether the warm-up may end, and why."""

    def __init__(self, rule: SettleRule, start_s: float):
        self.rule = rule
        self.start_s = start_s
        self.t: list[float] = []
        self.power: list[float] = []
        self.clock: list[float] = []
        self.last_s = start_s

    def add(self, time_s: float, power_w: float | None, sm_clock_mhz: float | None) -> None:
        self.last_s = time_s
        if power_w is None or sm_clock_mhz is None:
            return
        self.t.append(time_s)
        self.power.append(float(power_w))
        self.clock.append(float(sm_clock_mhz))

    def verdict(self) -> SettleVerdict:
        r = self.rule
        elapsed = self.last_s - self.start_s
        if elapsed < r.min_s:
            return SettleVerdict(False, "", elapsed)
        if not self.t:
            return SettleVerdict(True, "no readings: fixed warm-up", elapsed)
        t = np.asarray(self.t)
        recent = t > self.last_s - r.span_s
        before = (t > self.last_s - 2 * r.span_s) & ~recent
        p = np.asarray(self.power)
        c = np.asarray(self.clock)
        if recent.sum() >= 2 and before.sum() >= 2:
            p_now, c_now = float(p[recent].mean()), float(c[recent].mean())
            dp = abs(p_now - float(p[before].mean())) / max(p_now, 1e-9)
            dc = abs(c_now - float(c[before].mean()))
            if dp <= r.power_rel and dc <= r.clock_mhz:
                return SettleVerdict(True, "settled", elapsed, p_now, c_now, dp, dc)
        else:
            p_now, c_now, dp, dc = float(p[-1]), float(c[-1]), None, None
        if elapsed >= r.max_s:
            return SettleVerdict(True, "time limit", elapsed, p_now, c_now, dp, dc)
        return SettleVerdict(False, "", elapsed, p_now, c_now, dp, dc)


def run_until_settled(rule: SettleRule, step: Callable[[], tuple], start_s: float) -> SettleVerdict:
    """Run `step` (one unit of work, returning its reading's time, power and SM clock) until `rule` says the
    readings settled or its time limit passed; `start_s` is when the load began, on the readings' clock."""
    settler = Settler(rule, start_s)
    while True:
        settler.add(*step())
        verdict = settler.verdict()
        if verdict.done:
            return verdict
