"""Rich console output shared by the commands: one console on stderr for progress, tables on stdout."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)
from rich.table import Table

# soft_wrap: a line longer than the terminal (a session path) is left to the terminal to wrap, so that copying it
# gives the path back whole; rich would otherwise break it into lines at its own width
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


class RichProgress:
    """softbench.latency.engine.Progress backed by a rich progress bar."""

    def __init__(self, console: Console | None = None, eta: bool = False):
        columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
        if eta:
            columns.append(TimeRemainingColumn())
        self.console = console or err
        self.bar = Progress(*columns, console=self.console, transient=False)
        self.task = None
        self._shown = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._shown:
            self.bar.stop()
        return False

    def add_task(self, description: str, **fields):
        """The bar's one task; the bar is shown from here on, not on entering: a command refused before its first
        step would otherwise leave an empty bar's line (a blank line) on stderr before its error."""
        if not self._shown:
            self.bar.start()
            self._shown = True
        self.task = self.bar.add_task(description, **fields)
        return self.task

    def start(self, total_windows: int) -> None:
        self.add_task("starting", total=total_windows)

    def message(self, text: str) -> None:
        if self.task is not None:
            self.bar.update(self.task, description=text)

    def advance(self) -> None:
        """One step of the bar's task done."""
        self.bar.advance(self.task)

    def window(self, label: str, record: dict) -> None:
        self.advance()


def table(title: str, columns: list[str], rows: list[list[str]], width: int | None = None) -> Table:
    """A rich table for `out`. Where its columns cannot show every header and cell word whole at the console's
    width (`width`, default out's) but the table turned on its side can, it is printed turned: one row per column,
    one column per row, headed by the rows' first cells (a static SASS table of 20 instruction families and two
    variants would otherwise be cut into columns one letter wide at 80 columns)."""
    width = out.width if width is None else width
    if _words_width(columns, rows) > width:
        turned_columns, turned_rows = turned(columns, rows)
        if _words_width(turned_columns, turned_rows) <= width:
            columns, rows = turned_columns, turned_rows
    # a short name in the first column (a session's start stamp, a kernel's label) names its row and is kept
    # whole, so that it can be copied, where rich would otherwise squeeze it with the rest
    name = _longest_word([r[0] for r in rows if r])
    t = Table(title=title)
    for j, c in enumerate(columns):
        # fold: a long session name continues on the next line instead of being cut to "sess..."
        t.add_column(c, overflow="fold", min_width=name if j == 0 and name <= _NAME_MAX else None)
    for r in rows:
        t.add_row(*r)
    return t


def fits(columns: list[str], rows: list[list[str]], width: int | None = None) -> bool:
    """Whether table() shows every header and cell word whole at `width` (default out's), as it stands or turned."""
    width = out.width if width is None else width
    return _words_width(columns, rows) <= width or _words_width(*turned(columns, rows)) <= width


def turned(columns: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """The table on its side: the first column's header and each row's first cell head the columns, and every other
    column becomes a row led by its header."""
    return ([columns[0]] + [r[0] for r in rows],
            [[c] + [r[j] if j < len(r) else "" for r in rows] for j, c in enumerate(columns) if j > 0])


_NAME_MAX = 24  # the longest first-column word kept whole: a start stamp is 16 characters


def _longest_word(cells: list[str]) -> int:
    return max((len(w) for cell in cells for w in str(cell).split()), default=0)


def _words_width(columns: list[str], rows: list[list[str]]) -> int:
    """The narrowest width at which rich's default box shows every word of every header and cell whole: each
    column as wide as its longest word, plus a padding of one on each side and one border per column and one more."""
    words = [_longest_word([c] + [r[j] for r in rows if j < len(r)]) for j, c in enumerate(columns)]
    return sum(words) + 3 * len(columns) + 1
