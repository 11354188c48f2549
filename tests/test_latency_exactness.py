"""The baseline's error against FP32 held against the exact references' (softbench.latency.exactness), on the
smoke checks of two recorded H200 runs: -lm (row sums accumulated over the row in the FP8 tensor core) and -lmt
(per tile, added in FP32), FA3 timed beside both."""

import json
from pathlib import Path

import pytest

from softbench.latency.exactness import EXACT_ERROR_FACTOR, exactness, exactness_line, exactness_warning
from softbench.latency.render import paired_headline

SESSIONS = Path(__file__).resolve().parents[1] / "sessions"
ROW_SUMS_OVER_THE_ROW = "20261202T132424Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-folded-interleaved"
ROW_SUMS_PER_TILE = "20261202T134042Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-folded-interleaved"


def _recorded(name: str) -> tuple[dict, dict]:
    summary = json.loads((SESSIONS / name / "summary.json").read_text())
    return summary, {label: k["role"] for label, k in summary["kernels"].items()}


def test_row_sums_over_the_row_are_flagged_and_per_tile_pass():
    summary, roles = _recorded(ROW_SUMS_OVER_THE_ROW)
    check = exactness(summary["smoke"], roles)
    assert check["reference"] == "ref-fa3" and not check["ok"]
    assert set(check["kernels"]) == {"A0", "A0'"} and check["kernels"]["A0"]["ratio"] > 2.0  # 1.48e-2 / 7.17e-3
    line = exactness_line(check)
    assert line.startswith("WARNING, not exact attention: A0's error against FP32 is 2.06x ref-fa3's"), line
    assert line.endswith("this run's speed-ups are not over exact attention"), line
    # the headline carries it, after the ratio to the fastest exact kernel
    lines = paired_headline({**summary, "exactness": check})
    assert lines.index(line) == 1 + next(i for i, x in enumerate(lines) if x.startswith("fastest exact kernel"))

    summary, roles = _recorded(ROW_SUMS_PER_TILE)
    check = exactness(summary["smoke"], roles)
    assert check["ok"] and check["kernels"]["A0"]["ratio"] < 1.0  # 7.10e-3 against FA3's 7.17e-3
    assert exactness_line(check).startswith("exactness: A0, A0' within 0.99x of ref-fa3's")


def test_the_variant_is_not_held_to_exactness_and_the_most_accurate_reference_is_the_yardstick():
    smoke = {"A0": {"rel_error_vs_fp32": 0.012}, "h15": {"rel_error_vs_fp32": 0.03},
             "ref-fa3": {"rel_error_vs_fp32": 0.010}, "ref-sdpa": {"rel_error_vs_fp32": 0.007}}
    roles = {"A0": "baseline", "h15": "variant", "ref-fa3": "reference", "ref-sdpa": "reference"}
    check = exactness(smoke, roles)
    assert check["reference"] == "ref-sdpa" and set(check["kernels"]) == {"A0"}
    assert check["ok"] == (0.012 / 0.007 <= EXACT_ERROR_FACTOR)  # 1.71x: not
    assert not check["ok"]


def test_an_error_exactly_at_the_allowed_factor_is_exact():
    # powers of two, so that the ratio is exactly 1.5 in floating point: 1.5 * 2**-7 against 2**-7
    ref = 2.0 ** -7
    roles = {"A0": "baseline", "ref-fa3": "reference"}
    check = exactness({"A0": {"rel_error_vs_fp32": EXACT_ERROR_FACTOR * ref}, "ref-fa3": {"rel_error_vs_fp32": ref}},
                      roles)
    assert check["kernels"]["A0"]["ratio"] == EXACT_ERROR_FACTOR and check["ok"]


def test_one_inexact_kernel_fails_the_run_and_the_line_names_every_inexact_one():
    # A0 at 1.2x passes; its null at 2x and a second null process without a finite error do not
    smoke = {"A0": {"rel_error_vs_fp32": 0.012}, "A0'": {"rel_error_vs_fp32": 0.02},
             "A0''": {"rel_error_vs_fp32": None}, "ref-fa3": {"rel_error_vs_fp32": 0.01}}
    roles = {"A0": "baseline", "A0'": "null", "A0''": "null", "ref-fa3": "reference"}
    check = exactness(smoke, roles)
    assert check["kernels"]["A0"]["ok"] and not check["ok"]
    line = exactness_line(check)
    assert line.startswith("WARNING, not exact attention: A0''s error against FP32 is 2.00x ref-fa3's"), line
    assert ", A0'' no error measured, above the 1.5x allowed" in line, line
    assert exactness_warning(check) == "WARNING: not over exact attention (A0': 2.00x ref-fa3's error against FP32)"


def test_when_every_kernel_is_exact_the_line_gives_the_worst_ratio_and_there_is_no_warning():
    smoke = {"A0": {"rel_error_vs_fp32": 0.009}, "A0'": {"rel_error_vs_fp32": 0.012},
             "ref-fa3": {"rel_error_vs_fp32": 0.01}}
    check = exactness(smoke, {"A0": "baseline", "A0'": "null", "ref-fa3": "reference"})
    assert check["ok"] and exactness_warning(check) is None
    assert exactness_warning(None) is None  # nothing checked (no reference timed): nothing to warn of
    assert exactness_line(check).startswith("exactness: A0, A0' within 1.20x of ref-fa3's"), exactness_line(check)


def test_a_kernel_without_a_smoke_check_is_not_held_to_it_and_a_zero_error_is_no_yardstick():
    # the null's smoke check is absent (not run), so only A0 is judged; a reference reporting an error of exactly
    # 0 cannot be divided by and is passed over for the next most accurate one
    smoke = {"A0": {"rel_error_vs_fp32": 0.012}, "ref-a": {"rel_error_vs_fp32": 0.0},
             "ref-b": {"rel_error_vs_fp32": 0.01}}
    check = exactness(smoke, {"A0": "baseline", "A0'": "null", "ref-a": "reference", "ref-b": "reference"})
    assert set(check["kernels"]) == {"A0"} and check["ok"]
    assert check["reference"] == "ref-b" and check["kernels"]["A0"]["ratio"] == pytest.approx(1.2)


def test_without_a_usable_reference_there_is_no_verdict():
    roles = {"A0": "baseline", "ref-fa3": "reference"}
    assert exactness({"A0": {"rel_error_vs_fp32": 0.01}}, {"A0": "baseline"}) is None
    assert exactness({"A0": {"rel_error_vs_fp32": 0.01}, "ref-fa3": {"rel_error_vs_fp32": float("nan")}}, roles) is None
    assert exactness_line(None) is None
    # a baseline whose check gave no finite error is not taken as exact
    check = exactness({"A0": {"rel_error_vs_fp32": float("nan")}, "ref-fa3": {"rel_error_vs_fp32": 0.01}}, roles)
    assert not check["ok"] and "has no error measured" in exactness_line(check)


def test_a_summary_edited_out_of_form_has_no_check_rather_than_an_error():
    """recorded_exactness reads summary.json, which report and evaluate take from any folder: an exactness, kernels
    or smoke of another form (a number, a mapping without its verdicts, a list) is no check, not an internal
    error (each once raised TypeError, KeyError or AttributeError); a recorded check reads back as it was."""
    from softbench.latency.exactness import recorded_exactness

    summary, _ = _recorded(ROW_SUMS_OVER_THE_ROW)  # recorded before summary.json carried the check: made from smoke
    check = recorded_exactness(summary)
    assert exactness_warning(check) and recorded_exactness({**summary, "exactness": check}) == check
    for edit in ({"exactness": 5}, {"exactness": {"a": "b"}}, {"exactness": {"ok": True, "kernels": {"A0": 1}}},
                 {"exactness": None, "kernels": [1, 2]}, {"exactness": None, "smoke": {"A0": 3}},
                 {"exactness": {"kernels": {"A0": {"ok": True, "ratio": 1.0}}}},  # no run verdict
                 {"exactness": None, "kernels": {"A0": 3, "ref-fa3": 4}}):  # kernels that are not mappings
        assert recorded_exactness({**summary, **edit}) is None, edit
