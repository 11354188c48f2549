"""softbench.core.numbers: what counts as a number in a value read back from a file."""

from __future__ import annotations

import math

import pytest

from softbench.core.numbers import finite, finite_interval, is_real


@pytest.mark.parametrize("value, real, as_finite", [
    (3, True, 3.0),
    (-0.5, True, -0.5),
    (True, False, None),  # Python's int, JSON's boolean
    (False, False, None),
    ("1.5", False, None),
    (None, False, None),
    ([1.0], False, None),
    (math.nan, True, None),
    (-math.inf, True, None),
    (10 ** 400, True, None),  # JSON's integers have no bound: float() of this raises OverflowError
    (-(10 ** 308), True, -1e308),  # the largest powers of ten a float still holds
])
def test_numbers_read_back_from_a_file(value, real, as_finite):
    assert is_real(value) is real
    assert finite(value) == as_finite
    assert finite(value) is None or type(finite(value)) is float


@pytest.mark.parametrize("ci, expected", [
    ([-1, 2.5], (-1.0, 2.5)),
    ((0.5, 0.75), (0.5, 0.75)),
    ([math.nan, math.nan], None),  # too few pairs: the sessions record NaN bounds
    ([1.0, math.nan], None),  # one bound alone is no interval (a table once printed "[+1.00, +nan]")
    ([1.0, 10 ** 400], None),
    ([True, 2.0], None),
    ([1.0], None),
    ([1.0, 2.0, 3.0], None),
    ("[1, 2]", None),
    (None, None),
])
def test_intervals_read_back_from_a_file(ci, expected):
    assert finite_interval(ci) == expected
