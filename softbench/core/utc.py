"""Times as softbench writes and reads them: always UTC. A session folder starts with a stamp to the second
(20261202T114756Z), and every file inside records ISO 8601 times with their offset, to the millisecond."""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

STAMP_FORMAT = "%Y%m%dT%H%M%SZ"
STAMP_PATTERN = re.compile(r"^(\d{8}T\d{6}Z)")  # what starts a session folder's name


def utc_stamp(now: _dt.datetime | None = None) -> str:
    """A folder's stamp; `now` with another offset is converted first (strftime would print its local hour)."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    if now.tzinfo is not None:
        now = now.astimezone(_dt.timezone.utc)
    return now.strftime(STAMP_FORMAT)


def utc_iso(t: _dt.datetime | None = None) -> str:
    """An ISO 8601 time in UTC to the millisecond, now unless `t` is given."""
    t = t or _dt.datetime.now(_dt.timezone.utc)
    return t.astimezone(_dt.timezone.utc).isoformat(timespec="milliseconds")


def parse_utc(text: Any) -> _dt.datetime | None:
    """An ISO 8601 time read back from a file, in UTC (one without an offset is taken as UTC, as softbench writes
    none such); None where it is no time or none a datetime holds."""
    if not isinstance(text, str):
        return None
    try:
        t = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        # in UTC from here on, so that no later comparison or print meets an offset at the calendar's edge
        return (t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)).astimezone(_dt.timezone.utc)
    except (ValueError, OverflowError):
        return None


def folder_time(name: str) -> _dt.datetime | None:
    """The UTC time stamp that starts a session folder's name (Session.create: 20261202T114756Z-...), or None."""
    m = STAMP_PATTERN.match(name)
    if not m:
        return None
    try:
        return _dt.datetime.strptime(m.group(1), STAMP_FORMAT).replace(tzinfo=_dt.timezone.utc)
    except ValueError:  # the shape of a stamp, not a date (20261205T193888Z): the folder tells no time
        return None
