"""The kernels of one measurement, each in its own worker process: which ones (KernelSpec), starting them all
at once, and the one "make inputs, build, compile, check" step every measuring command runs before timing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from softbench.core.shapes import Shape
from softbench.runtime.client import WorkerProcess, load_all

ROLES = ("baseline", "variant", "null", "reference")


@dataclass(frozen=True)
class KernelSpec:
    label: str  # unique within a measurement: A0, h15-sat, A0' (the null's second baseline process), ref-fa3
    backend: str  # a backend name, or ref-<name> for a reference kernel
    variant: str
    role: str
    options: dict = field(default_factory=dict)
    # the label of the kernel whose process runs this one on its second input slot (softbench.runtime.twin);
    # None: a process of its own
    shares_process: str | None = None

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"role {self.role!r} is not one of {ROLES}")


def start_workers(specs: Iterable[KernelSpec], factory: Callable[..., WorkerProcess] = WorkerProcess,
                  processes: int = 1) -> dict:
    """Start `processes` processes per kernel and load them all concurrently (FA4's import is about 9 s each); a
    failure closes every process already started. With more than one per kernel, each kernel's processes stand
    behind one KernelProcesses (softbench.runtime.replicas), which hands its windows to them in turn. The
    processes start spec by spec, each kernel's replicas one after another."""
    specs = list(specs)
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        raise ValueError(f"kernel labels repeat: {labels}")
    if processes < 1:
        raise ValueError(f"processes per kernel must be at least 1, not {processes}")
    twins = [s for s in specs if s.shares_process]
    started: dict[str, list[WorkerProcess]] = {}
    try:
        for s in (s for s in specs if not s.shares_process):
            group = started.setdefault(s.label, [])
            for _ in range(processes):
                group.append(factory(s.label, s.backend, s.variant, s.options))
        load_all(w for group in started.values() for w in group)
    except BaseException:
        close_all(w for group in started.values() for w in group)
        raise
    if processes == 1:
        workers = {label: group[0] for label, group in started.items()}
    else:
        from softbench.runtime.replicas import KernelProcesses

        workers = {label: KernelProcesses(group) for label, group in started.items()}
    if twins:
        from softbench.runtime.twin import InputTwin

        workers.update({s.label: InputTwin(s.label, workers[s.shares_process]) for s in twins})
    return workers


def prepare_all(workers: dict[str, WorkerProcess], shape: Shape, seed: int,
                progress_message: Callable[[str], None] = lambda _m: None) -> dict[str, dict]:
    """Fixed-seed inputs, build, first (compiling) call and the smoke check against FP32 attention, per kernel."""
    smoke = {}
    for label, w in workers.items():
        progress_message(f"{shape.tag()}: preparing {label} (inputs, compile, smoke check)")
        smoke[label] = w.request("prepare", shape=shape.to_dict(), seed=seed)["result"]
    return smoke


def close_all(workers: Iterable[WorkerProcess]) -> None:
    for w in workers:
        w.close()
