"""The bounds that every protocol setting and the options giving it share (core.protocol.LIMITS, core.options'
Finite, SECONDS), the shape of a file (core.shapes.shape_from_mapping) and the sampling interval's unit. The command
lines that meet them are cases of tests/test_bad_input.py."""

from __future__ import annotations

import click
import pytest

from softbench.core.errors import UsageError
from softbench.core.options import SECONDS, Finite
from softbench.core.protocol import (MAX_SEED, MAX_WINDOW_CALLS, EnergyProtocol, InterleavedProtocol,
                                     LatencyProtocol, SustainedProtocol, energy_protocol_from_mapping,
                                     latency_plan_from_mapping)
from softbench.core.shapes import Shape, shape_from_mapping


@pytest.mark.parametrize("make, says", [
    (lambda: InterleavedProtocol(budget_s=1e12), "budget_s must be at most 86,400 s (a day), got 1000000000000.0"),
    (lambda: InterleavedProtocol(rounds=10**20), "rounds must be at most 1,000, got"),
    (lambda: LatencyProtocol(windows=1001), "windows must be at most 1,000, got 1001"),
    (lambda: LatencyProtocol(warmup=10**20), "warmup must be at most 100,000 calls"),
    (lambda: SustainedProtocol(cycles=10**6), "cycles must be at most 1,000"),
    (lambda: SustainedProtocol(measure_s=86_401), "measure_s must be at most 86,400 s"),
    (lambda: EnergyProtocol(seconds=1e12), "seconds must be at most 86,400 s"),
    (lambda: EnergyProtocol(chunk=10**9), "chunk must be at most 100,000 calls"),
])
def test_a_protocol_refuses_a_value_past_its_bound(make, says):
    """A run no one wants (a day's budget per round and more, 10^20 rounds) ran until killed."""
    with pytest.raises(UsageError, match=says.replace("(", r"\(").replace(")", r"\)")):
        make()


def test_the_bounds_themselves_are_taken():
    assert InterleavedProtocol(budget_s=86_400, rounds=1000).rounds == 1000
    assert SustainedProtocol(cycles=1000, measure_s=86_400).cycles == 1000


def test_the_largest_window_and_seed_are_taken():
    p = LatencyProtocol(calls=MAX_WINDOW_CALLS, seed=MAX_SEED)
    assert (p.calls, p.seed) == (MAX_WINDOW_CALLS, MAX_SEED)


def test_a_range_whose_two_ends_are_equal_is_taken():
    """A warm-up window of one length, a fixed pair count, a window as long as the whole budget: each end of each
    range is a value the user may give."""
    p = InterleavedProtocol(warmup_min_s=5.0, warmup_max_s=5.0, min_pairs=50, max_pairs=50, window_ms=1000.0,
                            budget_s=1.0)
    assert (p.warmup_max_s, p.max_pairs, p.budget_s) == (5.0, 50, 1.0)


@pytest.mark.parametrize("make, says", [
    (lambda: LatencyProtocol(windows=0), "windows must be a positive integer, got 0"),
    (lambda: InterleavedProtocol(target_pp=0), "target_pp must be a finite positive number, got 0"),
])
def test_zero_is_refused_where_a_positive_value_is_needed(make, says):
    with pytest.raises(UsageError, match=says):
        make()


def test_the_sampling_interval_is_refused_in_milliseconds():
    """It read "at least 1 ms, got 0.0005 s": the bound in one unit and the value in another."""
    with pytest.raises(UsageError, match=r"at least 1 ms, got 0\.5 ms$"):
        EnergyProtocol(interval_s=0.0005)


def test_the_energy_protocols_closed_bounds_are_taken():
    """A sampling interval of exactly 1 ms (as seconds, and as a file's interval_ms) and a ramp fraction of 1."""
    assert EnergyProtocol(interval_s=1e-3, ramp_fraction=1.0).interval_s == 1e-3
    assert energy_protocol_from_mapping({"interval_ms": 1}, "e.yaml").interval_s == 1e-3


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_finite_refuses_what_click_float_range_takes(value):
    """click's FloatRange takes nan (it fails no comparison with a bound) and, without a maximum, inf."""
    assert click.FloatRange(min=0, min_open=True).convert(value, None, None) != 0  # click's own takes it
    with pytest.raises(click.BadParameter, match="is not a finite number"):
        SECONDS.convert(value, None, None)


def test_finite_names_its_unit_in_the_range():
    with pytest.raises(click.BadParameter, match=r"0\.5 is not in the range x>=1 ms"):
        Finite(1, unit="ms").convert("0.5", None, None)
    assert SECONDS.convert("86400", None, None) == 86_400.0


def test_a_shape_must_be_a_mapping_of_its_fields():
    with pytest.raises(UsageError, match=r"^f\.yaml: shape must be a mapping of the shape's fields \(dtype, seq, "
                                         r"causal, batch, heads, kv_heads, head_dim\), not 'abc'$"):
        shape_from_mapping("abc", "f.yaml: shape")
    with pytest.raises(UsageError, match=r"^f\.yaml: shape: heads \(3\) must be a multiple of kv-heads \(2\)$"):
        shape_from_mapping({"heads": 3, "kv_heads": 2}, "f.yaml: shape")
    assert shape_from_mapping({"seq": "8K"}, "f.yaml: shape") == Shape(seq=8192)


def test_a_protocol_file_cell_names_itself_in_the_shape_refusal():
    with pytest.raises(UsageError, match="protocol cell 2: head-dim must be a multiple of 8"):
        latency_plan_from_mapping({"protocol": {}, "cells": [{"seq": 128}, {"seq": 128, "head_dim": 12}]})
