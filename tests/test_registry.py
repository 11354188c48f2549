"""softbench.core.registry: named things, duplicates refused, unknown names answered with the close ones."""

import pytest

from softbench.core.errors import UsageError
from softbench.core.registry import Registry


def make():
    r = Registry("widget")
    for name in ("alpha", "beta", "gamma"):
        r.register(name, name.upper())
    return r


def test_registered_items_come_back_in_order():
    r = make()
    assert r.get("beta") == "BETA"
    assert "gamma" in r and "delta" not in r
    assert list(r) == ["alpha", "beta", "gamma"]
    assert dict(r.items()) == {"alpha": "ALPHA", "beta": "BETA", "gamma": "GAMMA"}


def test_register_returns_the_item_and_refuses_a_second_one_under_a_name():
    r = make()
    assert r.register("delta", 4) == 4
    with pytest.raises(ValueError, match="widget 'alpha' is already registered"):
        r.register("alpha", "again")
    assert r.get("alpha") == "ALPHA"  # the first stays


def test_an_unknown_name_lists_the_known_ones_and_suggests_the_closest():
    with pytest.raises(UsageError, match=r"unknown widget 'betta' \(known: alpha, beta, gamma\)") as e:
        make().get("betta")
    assert e.value.hint == "did you mean beta?"


def test_no_suggestion_when_nothing_is_close():
    with pytest.raises(UsageError) as e:
        make().get("zzzzzz")
    assert e.value.hint is None
