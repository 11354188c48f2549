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
