"""What counts as a number in a value read back from a file (a session's JSON, a trace export, a protocol file).

Two Python facts make the obvious test wrong: a bool is an int, though JSON keeps true apart from 1; and JSON's
integers have no bound, so one past a float's range passes `isinstance(v, (int, float))` and then raises
OverflowError in math.isfinite, float(), numpy or a format spec, far from the file that held it."""

from __future__ import annotations

import math
from typing import Any


def is_real(value: Any) -> bool:
    """An int or a float, finite or not, and not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def finite(value: Any) -> float | None:
    """`value` as a finite float, or None where it is none: not a number, a bool, NaN, an infinity, or an integer
    past a float's range."""
    if not is_real(value):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def finite_interval(ci: Any) -> tuple[float, float] | None:
    """A recorded interval [low, high] as two finite floats, or None where there is none: absent, bounds of NaN (a
    session with too few pairs records those), or a value of another kind."""
    if not isinstance(ci, (list, tuple)) or len(ci) != 2:
        return None
    low, high = finite(ci[0]), finite(ci[1])
    return None if low is None or high is None else (low, high)
