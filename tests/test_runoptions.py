"""RunOptions: the fields the measuring commands' options share, keyword-only, with one default each; and trace's
protocol.yaml keys in the order its sessions list them."""

from dataclasses import fields
from pathlib import Path

import pytest

from softbench.audit.engine import AuditOptions
from softbench.core.runoptions import RunOptions
from softbench.core.shapes import Shape
from softbench.energy.engine import EnergyOptions
from softbench.gates.options import GatesOptions
from softbench.latency.engine import LatencyOptions
from softbench.sweep.engine import SweepOptions
from softbench.trace.engine import TraceOptions

BUILT = [LatencyOptions(shapes=(Shape(),)), SweepOptions(shape=Shape(), variants=("A1",)),
         EnergyOptions(shape=Shape()), TraceOptions(shapes=(Shape(),)), AuditOptions(shapes=(Shape(),)),
         GatesOptions()]


@pytest.mark.parametrize("opts", BUILT, ids=lambda o: type(o).__name__)
def test_the_shared_fields_and_their_defaults(opts):
    assert isinstance(opts, RunOptions)
    assert (opts.backend_options, opts.out_dir, opts.command_line) == ({}, Path("sessions"), "")
    assert opts.backend_options is not type(opts)(**_required(opts)).backend_options  # a dict per run


def _required(opts) -> dict:
    return {f.name: getattr(opts, f.name) for f in fields(opts) if f.name in ("shapes", "shape", "variants")}


def test_the_shared_fields_are_keyword_only():
    with pytest.raises(TypeError):
        RunOptions({}, Path("out"))
    opts = TraceOptions((Shape(),), out_dir=Path("out"), command_line="softbench trace")
    assert opts.shapes == (Shape(),) and opts.out_dir == Path("out")


def test_trace_records_its_options_in_their_order():
    d = TraceOptions(shapes=(Shape(),), out_dir=Path("out"), backend_options={"tile": 64}).to_dict()
    assert list(d) == ["shapes", "variants", "backend", "warmup", "calls", "window_s", "seed", "settle", "nsys",
                       "out_dir", "keep_bytes", "timeout_s", "backend_options", "command_line"]
    assert d["out_dir"] == "out" and d["backend_options"] == {"tile": 64}


@pytest.mark.parametrize("tau, valid", [(0, True), (0.0, True), (8, True), (2.5, True), (-1.0, False),
                                        (float("nan"), False), (float("inf"), False), (None, False), ("0.5", False),
                                        (True, False)])
def test_the_rescale_threshold_rule_takes_finite_numbers_from_zero(tau, valid):
    """core.options.valid_tau guards the option and options.json read back by --resume: a value of another type
    is no threshold (math.isfinite raised TypeError on None, an internal error)."""
    from softbench.core.options import valid_tau

    assert valid_tau(tau) is valid


@pytest.mark.parametrize("text, says", [("abc", "'abc' is not a number"), ("-1", "'-1' is not a finite number of octaves"),
                                        ("nan", "'nan' is not a finite number of octaves")])
def test_the_rescale_threshold_option_refuses_in_its_own_words(text, says):
    """Text that is no number is refused as the option's value like the numbers valid_tau refuses (float('abc')
    raises ValueError, which click would not have turned into a usage error)."""
    import click

    from softbench.core.options import rescale_threshold_option

    cmd = rescale_threshold_option()(click.Command("latency", callback=lambda rescale_threshold: None))
    with pytest.raises(click.BadParameter, match=says):
        cmd.make_context("latency", ["--rescale-threshold", text])
    assert cmd.make_context("latency", ["--rescale-threshold", "8"]).params["rescale_threshold"] == 8.0
