"""The bounds that every protocol setting and the options giving it share (core.protocol.LIMITS, core.options'
Finite, SECONDS), the shape of a file (core.shapes.shape_from_mapping) and the sampling interval's unit. The command
lines that meet them are cases of tests/test_bad_input.py."""

from __future__ import annotations

import re

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


def test_zero_is_taken_where_it_means_none():
    """--idle-s 0 (no idle sampling), --pre-s/--post-s 0 and --warmup 0 are documented values, not typos."""
    from softbench.core.options import SECONDS_OR_ZERO, WARMUP_CALLS

    assert SECONDS_OR_ZERO.convert("0", None, None) == 0.0
    assert WARMUP_CALLS.convert("0", None, None) == 0
    with pytest.raises(click.BadParameter):
        SECONDS.convert("0", None, None)  # a loop or a budget of no time is refused: the open end is SECONDS' own


@pytest.mark.parametrize("args, says, hint", [
    (["--protocol", ""], "--protocol", "give --protocol a value, e.g. --protocol sustained"),
    (["A0", ""], "an argument of run", "e.g. run sustained"),
])
def test_an_empty_value_is_refused_with_an_example_of_a_value(args, says, hint):
    """core.options.nonempty names the option (or the command, for an argument) and offers its example."""
    from softbench.core.options import nonempty

    cmd = click.Command("run", callback=lambda **_: None, params=[
        click.Option(["--protocol"], callback=nonempty("sustained")),
        click.Argument(["names"], nargs=-1, callback=nonempty("sustained"))])
    with pytest.raises(UsageError, match=says) as e:
        cmd.make_context("run", args)
    assert e.value.hint == hint


def test_a_list_of_variants_is_read_without_its_spaces_and_none_at_all_is_refused_as_such():
    """'A1, noexp' is two names (a space after the comma is no part of a name); a list of none, from the command line
    or a protocol file's empty list, is refused as naming no variant rather than as an empty item."""
    from softbench.core.options import split_names

    assert split_names("A1, noexp ,A0") == ("A1", "noexp", "A0")
    assert split_names((" A1", "A0 ")) == ("A1", "A0")
    for nothing in ("", " ", ()):
        with pytest.raises(UsageError, match="^--variants names no variant$"):
            split_names(nothing)


def test_a_kernel_named_twice_is_refused_with_a_hint_for_where_it_was_named():
    # an option gets an example of its own to type; a file (no option to retype) gets the rule
    from softbench.core.options import refuse_repeats

    with pytest.raises(UsageError, match="^--variants names A1 more than once$") as e:
        refuse_repeats(("A1", "noexp", "A1"), "--variants")
    assert e.value.hint == "e.g. --variants A0,A1"
    with pytest.raises(UsageError, match="^the sweep file s.yaml names A1 more than once$") as e:
        refuse_repeats(("A1", "A1"), "the sweep file s.yaml")
    assert "--" not in e.value.hint and "e.g." not in e.value.hint


def test_a_group_given_no_command_while_completing_is_not_refused():
    """Shell completion reads a partial command line resiliently: `softbench sweep <TAB>` has no subcommand yet,
    and the refusal that a run gets ('needs a command') would leave the completion with nothing."""
    from softbench.sweep.command import command as sweep

    with pytest.raises(UsageError, match="^sweep needs a command: emulation or variants$"):
        sweep.make_context("sweep", [])
    assert sweep.make_context("sweep", [], resilient_parsing=True).command is sweep


def test_finite_refuses_text_that_is_no_number_as_click_does():
    # float('abc') raises ValueError, which would reach the user as a traceback instead of a usage error
    with pytest.raises(click.BadParameter, match="'abc' is not a valid float"):
        SECONDS.convert("abc", None, None)

# --- cases a hand mutation of core/protocol.py survived ------------------------------------------------------------

PROTOCOLS = (InterleavedProtocol, SustainedProtocol, LatencyProtocol, EnergyProtocol)


def _durations():
    """(protocol, field) for every duration in seconds a protocol has, found from its fields rather than from
    LIMITS, so that a duration missing from LIMITS shows. The sampling interval has a bound of its own (at least
    1 ms) and is left out."""
    from dataclasses import fields

    return [(cls, f.name) for cls in PROTOCOLS for f in fields(cls) if f.name.endswith("_s") and f.name != "interval_s"]


@pytest.mark.parametrize("cls, name", _durations(), ids=lambda v: getattr(v, "__name__", v))
def test_every_duration_of_every_protocol_is_bounded_by_a_day(cls, name):
    """A warm-up, settle, idle, pre or post time past a day is a typo that held the GPU until killed, as a budget
    did. The other end of a window is raised with it where needed, so that only the bound can refuse."""
    partner = {"warmup_min_s": "warmup_max_s", "settle_min_s": "settle_max_s"}
    over = {name: 86_401, **({partner[name]: 86_401} if name in partner else {})}
    with pytest.raises(UsageError, match=rf"{name} must be at most 86,400 s \(a day\), got 86401"):
        cls(**over)
    at = {name: 86_400, **({partner[name]: 86_400} if name in partner else {})}
    assert getattr(cls(**at), name) == 86_400


@pytest.mark.parametrize("make, says", [
    # a count is an integer: neither a flag (True is an int to Python) nor a fraction
    (lambda: LatencyProtocol(rounds=True), "rounds must be a positive integer, got True"),
    (lambda: LatencyProtocol(windows=2.5), "windows must be a positive integer, got 2.5"),
    (lambda: LatencyProtocol(calls=0), "calls must be a positive integer, got 0"),
    (lambda: InterleavedProtocol(calls=0), "calls must be a positive integer, got 0"),
    (lambda: InterleavedProtocol(min_pairs=0), "min_pairs must be a positive integer, got 0"),
    (lambda: InterleavedProtocol(max_pairs="5000"), "max_pairs must be a positive integer, got '5000'"),
    (lambda: InterleavedProtocol(check_every=0), "check_every must be a positive integer, got 0"),
    (lambda: SustainedProtocol(calls="100"), "calls must be a positive integer, got '100'"),
    (lambda: SustainedProtocol(calls=MAX_WINDOW_CALLS + 1), "calls must be at most 100,000 calls per window"),
    (lambda: LatencyProtocol(warmup=-1), "warmup must be a non-negative integer, got -1"),
    (lambda: InterleavedProtocol(untimed=-1), "untimed must be a non-negative integer, got -1"),
    (lambda: LatencyProtocol(warmup=False), "warmup must be a non-negative integer, got False"),
    (lambda: LatencyProtocol(seed=-1), "seed must be a non-negative integer, got -1"),
    (lambda: SustainedProtocol(seed="7"), "seed must be a non-negative integer, got '7'"),
    (lambda: InterleavedProtocol(order_seed=-1), "order_seed must be a non-negative integer, got -1"),
    # a number of seconds or percentage points is finite: inf passes `> 0` and then never ends
    (lambda: InterleavedProtocol(target_pp=float("inf")), "target_pp must be a finite positive number, got inf"),
    (lambda: InterleavedProtocol(window_ms=0), "window_ms must be a finite positive number, got 0"),
    (lambda: InterleavedProtocol(target_pp="0.25"), "target_pp must be a finite positive number, got '0.25'"),
    (lambda: InterleavedProtocol(warmup_min_s=None), "warmup_min_s must be a finite non-negative number, got None"),
    (lambda: SustainedProtocol(settle_max_s="soon"), "settle_max_s must be a finite non-negative number"),
    (lambda: EnergyProtocol(idle_s=float("nan")), "idle_s must be a finite non-negative number, got nan"),
    (lambda: EnergyProtocol(pre_s=-1.0), "pre_s must be a finite non-negative number, got -1.0"),
])
def test_a_protocol_refuses_a_value_of_the_wrong_kind_in_one_sentence(make, says):
    """Each of these once passed, or left as a TypeError from a comparison instead of the sentence."""
    with pytest.raises(UsageError, match=re.escape(says)):
        make()


@pytest.mark.parametrize("cls", [InterleavedProtocol, SustainedProtocol, LatencyProtocol, EnergyProtocol])
def test_every_protocol_takes_a_seed_up_to_a_signed_64_bit_integer_and_no_more(cls):
    """torch's seed is a signed 64-bit integer: 2**63 - 1 is the largest seed every consumer takes."""
    assert cls(seed=2**63 - 1).seed == 2**63 - 1
    with pytest.raises(UsageError, match=r"seed must be at most 9223372036854775807, got 9223372036854775808"):
        cls(seed=2**63)


@pytest.mark.parametrize("make", [
    lambda: InterleavedProtocol(warmup_min_s=10.0, warmup_max_s=5.0),
    lambda: SustainedProtocol(settle_min_s=10.0, settle_max_s=5.0),
    lambda: EnergyProtocol(settle_min_s=10.0, settle_max_s=5.0),
])
def test_a_window_whose_least_time_exceeds_its_most_is_refused(make):
    with pytest.raises(UsageError, match=r"need 0 <= \w+_min_s <= \w+_max_s, got 10.0, 5.0"):
        make()


@pytest.mark.parametrize("make, says", [
    (lambda: InterleavedProtocol(min_pairs=50, max_pairs=10), "min_pairs (50) exceeds max_pairs (10)"),
    # the paper protocol's orders are not the interleaved protocol's
    (lambda: InterleavedProtocol(order="alternate"), "the interleaved order must be 'random' or 'circuit'"),
    # the budget is checked between windows: a window longer than it would run on past it
    (lambda: InterleavedProtocol(window_ms=1001.0, budget_s=1.0), "a window of 1001 ms is longer than the measuring "
                                                                   "budget of 1 s"),
    (lambda: LatencyProtocol(order="random"), "order must be 'alternate' or 'fixed'"),
])
def test_a_protocol_refuses_settings_that_contradict_each_other(make, says):
    with pytest.raises(UsageError, match=re.escape(says)):
        make()
