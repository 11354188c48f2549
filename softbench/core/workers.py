"""Independent pieces of work spread over worker processes, their results given back in the order asked.

Used where a command's time is many independent, CPU-bound pieces (a report's figures, each session's
re-estimate against FA3). The function and its items must be picklable: module-level functions, plain data."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

from softbench.core.errors import MeasurementError

T = TypeVar("T")
R = TypeVar("R")


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one, as under taskset or a cgroup)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not every OS has affinity masks
        return max(1, os.cpu_count() or 1)


def ordered_map(fn: Callable[[T], R], items: Iterable[T], jobs: int, min_items: int, what: str) -> Iterator[R]:
    """fn over items in order, as each result becomes known: in this process where jobs <= 1 or there are fewer
    than min_items (below it, starting workers, each importing its modules, costs more than it saves), else in up
    to `jobs` worker processes. `what` names the work in the one sentence said if a worker dies."""
    items = list(items)
    if jobs <= 1 or len(items) < min_items:
        yield from map(fn, items)
        return
    # spawn, not fork: the parent may run rich's refresh thread for a progress bar, and a fork taken while another
    # thread holds a lock can leave the child waiting on it forever
    context = multiprocessing.get_context("spawn")
    # a few items per message: fewer round trips, and a progress bar still moves often over hundreds of items
    chunk = max(1, min(8, len(items) // (4 * jobs)))
    try:
        with ProcessPoolExecutor(max_workers=min(jobs, len(items)), mp_context=context) as pool:
            yield from pool.map(fn, items, chunksize=chunk)
    except BrokenProcessPool as e:
        raise MeasurementError(f"a process {what} stopped before it finished (out of memory?)",
                               hint="run again with fewer --jobs, or with --jobs 1") from e
