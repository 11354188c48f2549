"""Drawing a report's planned figures, in this process or in several: over hundreds of sessions the figures drawn
one per session take nearly all of a report's time (about 0.4 s each), and each is independent of the others.

A figure is planned as a module-level plotting function and its arguments, not a closure, so that it can be sent
to a worker process. Each figure gives back an Outcome, never an exception: what a damaged session does to one
figure is the same sentence whether it was drawn here or in a worker, and the report goes on."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from softbench.core.errors import UsageError
from softbench.core.workers import ordered_map
from softbench.predictions.sessions import SessionRecord
from softbench.report.readable import DATA_ERRORS
from softbench.report.records import marked_name

# Below this many figures the workers' start-up (each imports matplotlib, about a second) outweighs what they save.
MIN_FIGURES_FOR_WORKERS = 16


@dataclass(frozen=True)
class PlannedFigure:
    """One figure to draw: plot(*args, path) returns the path written, or None where there was nothing to draw."""
    plot: Callable[..., Path | None]
    args: tuple
    path: Path
    rec: SessionRecord | None = None  # the session a per-session figure draws
    what: str = ""  # the records the figure reads, for the reason it was not drawn


@dataclass(frozen=True)
class Outcome:
    """What drawing one figure gave: the path written, or why the figure is not in the report (and whose it is)."""
    path: Path | None = None
    who: str = ""  # the session (or, for a figure across sessions, the file) the reason is about
    why: str = ""

    @property
    def drawn(self) -> bool:
        return self.path is not None


def draw_one(fig: PlannedFigure) -> Outcome:
    """Draw one figure. A damaged records file, or a field of a kind the figure cannot draw, becomes the reason."""
    who = marked_name(fig.rec) if fig.rec else fig.path.name
    try:
        done = fig.plot(*fig.args, fig.path)
    except UsageError as e:  # a damaged records file: say so and carry on with the other sessions
        return Outcome(who=who, why=f"{fig.what}: {e}")
    except DATA_ERRORS as e:  # a field only a figure reads, of a kind it cannot draw (readable.py)
        return Outcome(who=who, why=(f"figure {fig.path.name}: " if fig.rec else "") + "a session holds a value of a "
                       f"kind this figure cannot draw ({type(e).__name__}: {e})")
    if done is not None:
        return Outcome(path=done)
    if fig.rec is not None:
        return Outcome(who=who, why=f"{fig.what}: nothing to draw")
    return Outcome()  # a figure across sessions with nothing to draw is simply not there


def draw_all(planned: list[PlannedFigure], jobs: int) -> Iterator[Outcome]:
    """Each planned figure's outcome, in the planned order, as it becomes known. With jobs > 1 and enough figures
    they are drawn in that many worker processes; the order, and so the report, is the same either way."""
    return ordered_map(draw_one, planned, jobs, MIN_FIGURES_FOR_WORKERS, "drawing the report's figures")
