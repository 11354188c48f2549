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


def test_a_suggestion_needs_six_tenths_of_the_name_in_common():
    # difflib's ratio: 'gamut' and 'gamma' share 'gam', 2*3/10 = 0.6, enough; 'bat' and 'beta' share 'b' and 't',
    # 2*2/7 = 0.57, not enough
    for name, hint in (("gamut", "did you mean gamma?"), ("bat", None)):
        with pytest.raises(UsageError) as e:
            make().get(name)
        assert e.value.hint == hint, name


def test_names_are_compared_whatever_their_case_and_listed_sorted():
    r = Registry("variant")
    for name in ("noexp", "A1", "A0"):
        r.register(name, name)
    for typed, hint in (("a1", "did you mean A1?"), ("NOXP", "did you mean noexp?")):
        with pytest.raises(UsageError, match=r"\(known: A0, A1, noexp\)") as e:
            r.get(typed)
        assert e.value.hint == hint, typed
