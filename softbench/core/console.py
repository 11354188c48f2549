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

    def __enter__(self):
        self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        return self.bar.__exit__(*exc)

    def start(self, total_windows: int) -> None:
        self.task = self.bar.add_task("starting", total=total_windows)

    def message(self, text: str) -> None:
        if self.task is not None:
            self.bar.update(self.task, description=text)

    def window(self, label: str, record: dict) -> None:
        self.bar.advance(self.task)


def table(title: str, columns: list[str], rows: list[list[str]]) -> Table:
    t = Table(title=title)
    for c in columns:
        # fold: a long session name continues on the next line instead of being cut to "sess..."
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*r)
    return t
