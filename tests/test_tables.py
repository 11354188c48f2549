"""softbench.core.tables: the printers' one number formatter and Markdown helpers."""

import pytest

from softbench.core.tables import NO_INTERVAL, fmt, fmt_estimate, fmt_interval, fmt_rate, md_heading, md_table


def test_fmt_formats_numbers_and_passes_the_rest_through():
    assert fmt(1.23456) == "1.2346"
    assert fmt(2.5, "+.1f") == "+2.5"
    assert fmt(None) == "-" and fmt(None, none="n/a") == "n/a"
    assert fmt(True, ".2f") == "True"  # a flag is not the number 1.00
    assert fmt("pending", ".2f") == "pending"
    # a count read as a float (ncu's registers per thread) prints as the count; a fraction under "d" does not fit
    # the spec and prints as it is
    assert fmt(7, "d") == "7" and fmt(7.0, "d") == "7" and fmt(7.5, "d") == "7.5"
    # a JSON integer past a float's range prints as it is under a float's spec (format() raised OverflowError)
    assert fmt(10 ** 400, ".2f") == "1" + "0" * 400


def test_fmt_rate_keeps_three_significant_digits_of_a_small_rate():
    """The CPU simulation's rates are thousandths of a TFLOP/s: printed to one decimal they read as 0.0, as if the
    kernel did no work; a GPU's hundreds keep the caller's format."""
    assert fmt_rate(0.0053421) == "0.00534" and fmt_rate(12.345) == "12.3"
    assert fmt_rate(784.34) == "784.3" and fmt_rate(784.34, ".0f") == "784"
    assert fmt_rate(0) == "0.0" and fmt_rate(None) == "-" and fmt_rate(float("nan")) == "nan"


def test_md_table_escapes_bars_in_cells_only():
    assert md_table(["a|b", "c"], [["x|y", "z"]], bar="/") == ["| a|b | c |", "| --- | --- |", "| x/y | z |"]
    assert md_table(["a"], []) == ["| a |", "| --- |"]


def test_md_heading_warns_of_a_partial_session():
    assert md_heading("T", {"complete": True}) == ["# T", ""]
    partial = md_heading("T", {"complete": False, "incomplete_reason": "worker crashed"})
    assert partial == ["# T", "", "**PARTIAL SESSION**: worker crashed", ""]
    assert md_heading("T", {})[2] == "**PARTIAL SESSION**: not finished"
    assert md_heading("T", {}, complete_if_unsaid=True) == ["# T", ""]


def test_fmt_interval_prints_two_finite_bounds_or_says_there_are_none():
    assert fmt_interval([-0.3, 0.53]) == "[-0.30, +0.53]"
    assert fmt_interval((0.00012, 0.00368), "+.5f") == "[+0.00012, +0.00368]"
    assert fmt_interval([float("nan"), float("nan")]) == "none (too few pairs)"
    assert fmt_interval([1.0, float("nan")], none="") == ""
    assert fmt_interval(None, none="-") == "-"


def test_fmt_estimate_prints_an_estimate_with_its_interval_where_it_has_one():
    assert fmt_estimate(5.714, [5.29, 6.12]) == "+5.71 [+5.29, +6.12]"
    assert fmt_estimate(0.21, [-0.3, 0.53], unit="%") == "+0.21% [-0.30, +0.53]"
    assert fmt_estimate(0.21, [float("nan")] * 2) == "+0.21"  # too few pairs: the estimate alone
    assert fmt_estimate(0.21, None, no_interval=NO_INTERVAL) == "+0.21 none (too few pairs)"
    assert fmt_estimate(None, [1, 2]) == "-" and fmt_estimate(None, None, missing="n/a") == "n/a"


@pytest.mark.parametrize("estimate", ["abc", [1], True, {"a": 1}])
def test_fmt_estimate_refuses_an_estimate_that_is_no_number(estimate):
    """A flag once printed as the speed-up +1.00; text, lists and mappings raise as before, so that the report
    leaves the session out rather than print them where a measurement belongs."""
    with pytest.raises(TypeError, match="is not a number"):
        fmt_estimate(estimate, None)


def test_fmt_rate_keeps_three_significant_digits_below_a_hundred_whatever_the_format():
    assert fmt_rate(50.0) == "50" and fmt_rate(12.345, ".2f") == "12.3"
