"""softbench.core.utc: every time softbench writes or reads back is UTC, whatever offset or zone it meets."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from softbench.core.utc import folder_time, parse_utc, utc_iso, utc_stamp

PLUS_TWO = dt.timezone(dt.timedelta(hours=2))


def test_a_time_with_another_offset_is_stamped_and_written_in_utc():
    t = dt.datetime(2026, 12, 6, 10, 0, 0, 123456, tzinfo=PLUS_TWO)
    assert utc_stamp(t) == "20261206T080000Z"
    assert utc_iso(t) == "2026-12-06T08:00:00.123+00:00"
    assert folder_time(utc_stamp(t)) == t.replace(microsecond=0)


@pytest.mark.parametrize("text, expected", [
    ("2026-12-06T10:00:00+02:00", "2026-12-06T08:00:00+00:00"),
    ("2026-12-06T08:00:00Z", "2026-12-06T08:00:00+00:00"),
    ("2026-12-06T08:00:00", "2026-12-06T08:00:00+00:00"),  # softbench writes no time without an offset: UTC
    ("2026-02-30T08:00:00Z", None),  # no such day
    ("0001-01-01T00:00:00+01:00", None),  # in UTC it falls before the first year a datetime holds
    ("soon", None),
    (None, None),
])
def test_times_read_back_from_a_file(text, expected):
    t = parse_utc(text)
    assert (t.isoformat() if t else None) == expected


def test_the_matrix_index_reads_a_time_without_an_offset_as_utc_in_any_local_zone(monkeypatch):
    """The measuring spans of a matrix run once took a time without an offset in the machine's local zone."""
    from softbench.latency.matrix_index import _seconds

    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    try:
        assert _seconds("2026-01-01T00:00:00") == dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc).timestamp()
    finally:
        monkeypatch.undo()
        time.tzset()
