"""`softbench report`'s progress on the terminal: a spinner while sessions are read and tables made, then a bar
counting the figures, which over hundreds of sessions take minutes."""

from __future__ import annotations

from softbench.core.console import RichProgress, err
from softbench.report.build import FigureProgress


class FigureBar(FigureProgress):
    """build_report's FigureProgress on a rich bar (stderr); `status` is the spinner shown until the figures start."""

    def __init__(self, status):
        self.status = status
        self.bar = RichProgress(console=err, eta=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self.bar.__exit__(*exc)

    def planned(self, total: int) -> None:
        self.status.stop()  # two live displays cannot share the console
        if total:
            self.bar.add_task("drawing figures", total=total)

    def drawn(self) -> None:
        self.bar.advance()
