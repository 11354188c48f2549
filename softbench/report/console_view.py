"""What `softbench report` prints of a table on a console too narrow for it: the columns that carry the result,
sessions named by their start stamps; report.md always has the whole table. Without this, rich squeezes a
13-column latency table into 80 columns by cutting every header and cell into strips three letters wide."""

from __future__ import annotations

import re
from dataclasses import dataclass

from softbench.core.console import fits
from softbench.report.tables import TableData

_STAMP = re.compile(r"^(\d{8}T\d{6}Z)-\S+")  # a session folder's name begins with its start stamp


@dataclass
class ConsoleView:
    columns: list[str]
    rows: list[list[str]]
    left_out: list[str]  # the columns only report.md shows
    stamps_only: bool  # session cells cut to their start stamps


def _stamp_only(cell: str) -> str:
    """A session cell as its start stamp, with the partial mark it carries; a name without a stamp as it is."""
    return _STAMP.sub(r"\1", cell, count=1)


def console_view(t: TableData, width: int) -> ConsoleView:
    """t as a console `width` columns wide shows it: whole where its words fit (as it stands or turned), else the
    columns t names as its narrow view, each session cell cut to its start stamp."""
    if fits(t.columns, t.rows, width) or not t.narrow:
        return ConsoleView(t.columns, t.rows, [], False)
    index = [t.columns.index(c) for c in t.narrow]
    rows = [[_stamp_only(r[j]) if t.columns[j] == "session" else r[j] for j in index] for r in t.rows]
    return ConsoleView(list(t.narrow), rows, [c for c in t.columns if c not in t.narrow], "session" in t.narrow)


def left_out_note(t: TableData, view: ConsoleView, markdown: str) -> str | None:
    """The line under a cut table that says what the console left out and where it is; None where nothing was."""
    parts = []
    if view.left_out:
        parts.append(f"{len(view.left_out)} more columns ({', '.join(view.left_out)})")
    if view.stamps_only:
        parts.append("the sessions' whole folder names")
    return f"{t.title}: {' and '.join(parts)} in {markdown}, too wide for this console" if parts else None
