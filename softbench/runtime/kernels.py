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

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"role {self.role!r} is not one of {ROLES}")


def start_workers(specs: Iterable[KernelSpec], factory: Callable[..., WorkerProcess] = WorkerProcess
                  ) -> dict[str, WorkerProcess]:
    """Start one process per kernel and load them concurrently (FA4's import is about 9 s each); a failure closes
    every process already started."""
    specs = list(specs)
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        raise ValueError(f"kernel labels repeat: {labels}")
    workers: dict[str, WorkerProcess] = {}
    try:
        for s in specs:
            workers[s.label] = factory(s.label, s.backend, s.variant, s.options)
        load_all(workers.values())
    except BaseException:
        close_all(workers.values())
        raise
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
