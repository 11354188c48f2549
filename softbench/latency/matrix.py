"""A latency matrix across GPUs: every torchrun rank is one GPU with its own set of kernel workers
(softbench.latency.gpus pins it), runs its share of the cells, and writes its own sessions; rank 0 then writes
the index of the whole run (softbench.latency.matrix_index).

The cells are independent, so they are dealt statically, round-robin by cell index
(softbench.runtime.distributed.shard): no scheduler, and a cell's rank follows from the world size alone. The
ranks exchange only Python objects over gloo: the control's barriers and each rank's report for the index.

The control (--control) asks whether neighbours disturb each other: they share the host's CPUs, memory and
power delivery. It runs one A/A cell (the plan's first, the baseline against itself) on every GPU at once, then
on each GPU alone in rank order while the others wait. The barriers are the same list on every rank, so a rank
that fails still passes the ones it owes and nobody waits for it until the timeout."""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass, replace
from typing import Callable

from softbench.core.errors import SoftbenchError
from softbench.core.session import Session
from softbench.latency.engine import LatencyOptions, Progress, loaded_workers, run_shape, window_total
from softbench.latency.gpus import Pin
from softbench.runtime import distributed

BARRIER = None  # a step at which every rank waits for all the others


@dataclass(frozen=True)
class Step:
    cell: int  # the index of the cell in the plan (its position in the protocol file's cells, from 0)
    phase: str | None = None  # the control's "together" or "alone"


def matrix_steps(n_cells: int, ranks: distributed.Ranks) -> list[Step]:
    return [Step(i) for i in distributed.shard(list(range(n_cells)), ranks.rank, ranks.world)]


def control_steps(ranks: distributed.Ranks) -> list[Step | None]:
    steps: list[Step | None] = [BARRIER, Step(0, "together"), BARRIER]
    for turn in range(ranks.world):
        if turn == ranks.rank:
            steps.append(Step(0, "alone"))
        steps.append(BARRIER)
    return steps


def rank_placement(ranks: distributed.Ranks, pin: Pin, workers: dict) -> dict:
    """What every session of this rank records about where it ran; the UUID is the board the workers read
    through NVML (None without one, as on a CPU)."""
    uuids = sorted({(w.info.get("gpu") or {}).get("uuid") for w in workers.values()} - {None})
    return {"rank": ranks.rank, "world_size": ranks.world, "local_rank": ranks.local_rank,
            "host": platform.node(), **pin.to_dict(), "gpu_uuid": uuids[0] if len(uuids) == 1 else (uuids or None)}


def run_steps(opts: LatencyOptions, steps: list, group: distributed.Group, pin: Pin, progress: Progress,
              done: list[tuple[Step, Session]], clock: Callable[[], float] = time.monotonic) -> SoftbenchError | None:
    """Run this rank's steps with one set of workers; each session is appended to `done` as it ends, complete
    or partial. A failure stops this rank's measuring and is returned after the barriers it still owes."""
    runs = sum(step is not BARRIER for step in steps)
    if not runs:  # more GPUs than cells: no workers to load on this one
        return pass_barriers(steps, group)
    progress.start(window_total(opts, runs))
    todo = iter(steps)
    try:
        with loaded_workers(opts, progress) as (workers, env):
            base = rank_placement(group.ranks, pin, workers)
            for step in todo:
                if step is BARRIER:
                    group.barrier()
                    continue
                placement = {**base, "cell": step.cell, **({"phase": step.phase} if step.phase else {})}
                try:
                    done.append((step, run_shape(replace(opts, placement=placement), opts.shapes[step.cell],
                                                 workers, env, progress, clock=clock)))
                except BaseException as e:  # the partial session still belongs in the index
                    if getattr(e, "partial_session", None):
                        done.append((step, Session.open(e.partial_session)))
                    raise
    except SoftbenchError as e:
        pass_barriers(todo, group)  # the ones this rank still owes the others
        return e
    return None


def pass_barriers(steps, group: distributed.Group) -> SoftbenchError | None:
    for step in steps:
        if step is BARRIER:
            try:
                group.barrier()
            except SoftbenchError as e:  # a peer is gone: the group is broken, no barrier can pass any more
                return e
    return None


def run_matrix(opts: LatencyOptions, ranks: distributed.Ranks, pin: Pin, control: bool, source: str,
               command_line: str, progress: Progress | None = None) -> Session | None:
    """This rank's share (the matrix's cells, or the control), then rank 0's index; the index session on rank
    0, None on the others. A rank's failure is raised after the index is written."""
    from softbench.latency.matrix_index import rank_report, write_index
    from softbench.runtime.session_runner import sigterm_deferred

    progress = progress or Progress()
    steps = control_steps(ranks) if control else matrix_steps(len(opts.shapes), ranks)
    done: list[tuple[Step, Session]] = []
    group = distributed.Group(ranks, "cpu")  # gloo: the cells need no NCCL, only the barriers and the reports
    try:
        error = run_steps(opts, steps, group, pin, progress, done)
        report = rank_report(ranks, pin, done, error)
        try:
            reports = group.gather(report)
        except SoftbenchError as e:  # a peer died: rank 0 indexes what it has
            reports, error = [report], error or e
        index = write_index(opts, ranks.world, control, reports, source, command_line) if ranks.main else None
    except KeyboardInterrupt:  # torchrun's SIGTERM after a peer died, or Ctrl-C: index this rank's sessions
        if ranks.main:
            with sigterm_deferred():
                write_index(opts, ranks.world, control, [rank_report(ranks, pin, done, "interrupted")], source,
                            command_line)
        raise
    finally:
        group.close()
    if error is not None:
        raise error
    return index
