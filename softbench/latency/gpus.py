"""`softbench latency --gpus 0,1,...`: which GPUs, checked before torchrun starts, and the one each rank is
pinned to.

A rank is pinned by CUDA_VISIBLE_DEVICES, set in the rank before anything touches CUDA; its kernel workers
inherit it, so each GPU has its own set of worker processes and every process of a rank sees its GPU as
device 0. The indices are CUDA's numbering of the GPUs the launch sees: where the launch itself was given
CUDA_VISIBLE_DEVICES, index i is its i-th entry. The launcher hands the list to the ranks in GPUS_ENV; under a
torchrun started by hand (no list) rank LOCAL_RANK takes GPU LOCAL_RANK."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from softbench.core.errors import UnsupportedError, UsageError
from softbench.runtime.distributed import Ranks

GPUS_ENV = "SOFTBENCH_LATENCY_GPUS"
EXAMPLE = "give GPU indices separated by commas, e.g. --gpus 0,1"


def parse_gpus(text: str) -> tuple[int, ...]:
    """The GPU indices of `--gpus`, in order; an empty, repeated, negative or non-integer entry is refused."""
    items = [t.strip() for t in str(text).split(",")]
    if not any(items):
        raise UsageError(f"--gpus names no GPU; {EXAMPLE}")
    out: list[int] = []
    for t in items:
        if not (t.isascii() and t.isdigit()):  # also refuses "", "-1", "1.5" and "²"
            raise UsageError(f"--gpus {text}: {t!r} is not a GPU index; {EXAMPLE}")
        if int(t) in out:
            raise UsageError(f"--gpus {text} names GPU {int(t)} twice; each GPU runs one set of workers")
        out.append(int(t))
    return tuple(out)


def check_gpus(gpus: tuple[int, ...], text: str, backend: str, visible: int) -> None:
    """Before torchrun starts: the GPUs exist here; without CUDA, only the simulation runs (on the CPU, each
    rank's workers then share the host's cores, which is what the CPU tests need and all they mean)."""
    if visible == 0:
        if backend != "sim":
            raise UnsupportedError(f"--gpus with --backend {backend} needs CUDA GPUs and none is visible here; "
                                   f"on a CPU only --backend sim runs under --gpus")
        return
    missing = [g for g in gpus if g >= visible]
    if missing:
        raise UsageError(f"--gpus {text}: GPU {missing[0]} does not exist here (CUDA sees {visible} GPU(s), "
                         f"indices 0 to {visible - 1})")


@dataclass(frozen=True)
class Pin:
    gpu: int  # the index as --gpus gave it (or LOCAL_RANK)
    cuda_visible_devices: str  # what the rank and its workers are given
    launch_cuda_visible_devices: str | None  # the launch's own, where it had one

    def to_dict(self) -> dict:
        return asdict(self)


def pin_for(ranks: Ranks, environ=None) -> Pin:
    environ = os.environ if environ is None else environ
    gpus = parse_gpus(environ[GPUS_ENV]) if environ.get(GPUS_ENV) else None
    if gpus is not None and ranks.local_rank >= len(gpus):
        raise UsageError(f"local rank {ranks.local_rank} has no GPU: {GPUS_ENV}={environ[GPUS_ENV]} names "
                         f"{len(gpus)} (start one rank per GPU)")
    gpu = gpus[ranks.local_rank] if gpus is not None else ranks.local_rank
    launch_visible = environ.get("CUDA_VISIBLE_DEVICES")
    if launch_visible is None:
        return Pin(gpu, str(gpu), None)
    entries = [e.strip() for e in launch_visible.split(",") if e.strip()]
    if not entries:  # the launch hides every GPU: its ranks stay hidden too (the simulation on the CPU)
        return Pin(gpu, launch_visible, launch_visible)
    if gpu >= len(entries):
        raise UsageError(f"GPU {gpu} is not among the launch's CUDA_VISIBLE_DEVICES={launch_visible}")
    return Pin(gpu, entries[gpu], launch_visible)


def pin_this_process(ranks: Ranks) -> Pin:
    """Pin this rank (and the workers it will start) to its GPU; before any CUDA call in the process."""
    pin = pin_for(ranks)
    os.environ["CUDA_VISIBLE_DEVICES"] = pin.cuda_visible_devices
    return pin
