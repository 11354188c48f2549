"""softbench.core.workers: results in the order asked, from worker processes only when worth starting them."""

from __future__ import annotations

import os
import time

import pytest

from softbench.core.errors import MeasurementError
from softbench.core.workers import available_cpus, ordered_map


def pid_after(pause_s: float) -> int:
    """The id of the process that ran it, after a pause (module level, so that a worker can be sent it)."""
    time.sleep(pause_s)
    return os.getpid()


def index_after(item: tuple[int, float]) -> int:
    index, pause_s = item
    time.sleep(pause_s)
    return index


# set by a test in this process; a worker started fresh (spawn) imports this module anew and sees None
_SET_IN_PARENT = None


def parent_mark(_item) -> object:
    return _SET_IN_PARENT


def exit_at_once(_item) -> None:
    os._exit(1)  # a worker killed mid-item, as the kernel's out-of-memory killer would


def test_results_come_back_in_the_order_asked_whichever_worker_finishes_first():
    # the first item takes longest, so that the other worker finishes the later ones first
    items = [(i, 1.0 if i == 0 else 0.0) for i in range(16)]
    assert list(ordered_map(index_after, items, jobs=2, min_items=4, what="pausing")) == list(range(16))


def test_work_stays_in_this_process_for_one_job_or_few_items():
    assert set(ordered_map(pid_after, [0.0] * 8, jobs=1, min_items=4, what="pausing")) == {os.getpid()}
    assert set(ordered_map(pid_after, [0.0] * 3, jobs=2, min_items=4, what="pausing")) == {os.getpid()}
    assert os.getpid() not in set(ordered_map(pid_after, [0.0] * 4, jobs=2, min_items=4, what="pausing"))


def test_a_worker_that_dies_is_one_sentence_naming_the_work():
    with pytest.raises(MeasurementError, match=r"^a process drawing the report's figures stopped before it finished") \
            as caught:
        list(ordered_map(exit_at_once, range(8), jobs=2, min_items=4, what="drawing the report's figures"))
    assert "--jobs 1" in caught.value.hint


def test_the_cpus_available_are_those_of_the_affinity_mask():
    assert available_cpus() == len(os.sched_getaffinity(0))


def test_the_work_is_spread_over_as_many_workers_as_jobs():
    """jobs=2 over 4 items of half a second each: two worker processes share them (one would take twice as long)."""
    pids = list(ordered_map(pid_after, [0.5] * 4, jobs=2, min_items=4, what="pausing"))
    assert len(set(pids)) == 2 and os.getpid() not in pids


def test_workers_are_started_fresh_not_forked_from_this_process(monkeypatch):
    """A fork copies the parent's state, locks held by its other threads included (rich's refresh thread under a
    progress bar): a forked worker could wait on such a lock forever. A fresh worker sees none of this process's
    state: a module global set here reads as its default there."""
    monkeypatch.setattr(f"{__name__}._SET_IN_PARENT", "set in the parent")
    assert parent_mark(0) == "set in the parent"
    assert set(ordered_map(parent_mark, range(4), jobs=2, min_items=4, what="reading a mark")) == {None}


def test_the_cpus_available_follow_a_narrower_affinity_mask(monkeypatch):
    """Under taskset or a cgroup's cpuset this process may use fewer CPUs than the machine has: one CPU in the
    mask is one CPU available, whatever os.cpu_count() says."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert available_cpus() == 1
