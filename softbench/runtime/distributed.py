"""torch.distributed for the commands that run under torchrun: which process this is, how independent work is
dealt to the ranks, and a gloo group for the few Python objects the ranks exchange.

torchrun (torch.distributed.run) starts the processes and sets RANK, WORLD_SIZE and LOCAL_RANK; softbench
launches nothing of its own (softbench.runtime.launch starts torchrun for `--gpus`). Without those variables the
run is one process (rank 0 of 1) and nothing here opens a process group.

Work is dealt statically, round-robin: the k-th item to do goes to rank k % world (`shard`, `rounds`). No
scheduler: the items of one command cost about the same (fidelity's blocks all have one length; a latency
matrix's cells differ, but by a cell's time at most per rank), and a static deal keeps which rank did what
decidable from the world size alone. Fidelity deals blocks and gathers each round's rows to rank 0
(softbench.fidelity.engine); latency deals the cells of a protocol file, one set of kernel workers per GPU
(softbench.latency.matrix).

Only Python objects travel, over gloo: on CPUs the only backend, on GPUs a CPU-side group (beside NCCL where a
command asks for one); nothing on a GPU is communicated."""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass
from datetime import timedelta

from softbench.core.errors import MeasurementError, UsageError
from softbench.runtime.launch import NO_NVLS

# A round waits for its slowest rank; a block of a large model at a long context takes minutes on a GPU and
# far longer on a CPU, so the collective timeout is generous (a dead peer is detected by its closed socket).
TIMEOUT = timedelta(hours=2)


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


def _int_env(environ, name: str) -> int:
    value = environ.get(name, "")
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"{name}={value!r} is not an integer (torchrun sets it; so should any other launcher)")


def from_env(environ=None) -> Ranks:
    """This process's place in a torchrun launch; rank 0 of 1 where WORLD_SIZE is not set."""
    environ = os.environ if environ is None else environ
    if "WORLD_SIZE" not in environ:
        return Ranks()
    ranks = Ranks(_int_env(environ, "RANK"), _int_env(environ, "WORLD_SIZE"),
                  _int_env(environ, "LOCAL_RANK") if "LOCAL_RANK" in environ else 0)
    if not 0 <= ranks.rank < ranks.world:
        raise UsageError(f"RANK={ranks.rank} is outside WORLD_SIZE={ranks.world}")
    return ranks


def rounds(todo: list[int], world: int) -> list[list[int]]:
    """The items to do, one per rank per round: round k's r-th entry is rank r's item (todo[k*world + r])."""
    return [todo[k:k + world] for k in range(0, len(todo), world)]


def shard(todo: list[int], rank: int, world: int) -> list[int]:
    """The items one rank does, in the order it does them."""
    return todo[rank::world]


def rank_device(device: str, ranks: Ranks) -> str:
    """Each rank's own GPU (LOCAL_RANK) in a launch of several; the CPU and one-process runs are unchanged."""
    if device == "cuda" and ranks.world > 1:
        return f"cuda:{ranks.local_rank}"
    return device


class Group:
    """The process group of a torchrun launch of several processes; for one process, the identity on the same
    calls (no group is opened, so a plain run needs no rendezvous)."""

    def __init__(self, ranks: Ranks, device: str):
        self.ranks = ranks
        self.backend = None
        if ranks.world == 1:
            return
        import torch
        import torch.distributed as dist

        os.environ.update(NO_NVLS)  # also when torchrun was started by hand rather than by --gpus
        if device.startswith("cuda"):
            torch.cuda.set_device(device)
            self.backend = "cpu:gloo,cuda:nccl"
        else:
            self.backend = "gloo"
        dist.init_process_group(self.backend, timeout=TIMEOUT)
        self.dist = dist

    def _collective(self, fn, *args, **kw):
        try:
            return fn(*args, **kw)
        except RuntimeError as e:  # gloo: "Connection closed by peer" when a rank has died
            raise MeasurementError(f"rank {self.ranks.rank}: another rank of the launch stopped (its own log says "
                                   f"why): {str(e).splitlines()[0][:200]}") from e

    def describe(self, device: str) -> dict:
        return {**asdict(self.ranks), "device": device, "host": platform.node(), "pid": os.getpid()}

    def all_gather(self, obj) -> list:
        if self.ranks.world == 1:
            return [obj]
        out = [None] * self.ranks.world
        self._collective(self.dist.all_gather_object, out, obj)
        return out

    def gather(self, obj) -> list | None:
        """Every rank's `obj` in rank order on rank 0; None on the others."""
        if self.ranks.world == 1:
            return [obj]
        out = [None] * self.ranks.world if self.ranks.main else None
        self._collective(self.dist.gather_object, obj, out, dst=0)
        return out

    def barrier(self) -> None:
        """Return once every rank has arrived (latency's control starts its phases together)."""
        if self.ranks.world > 1:
            self._collective(self.dist.barrier)

    def broadcast(self, obj):
        """Rank 0's `obj` on every rank."""
        if self.ranks.world == 1:
            return obj
        box = [obj]
        self._collective(self.dist.broadcast_object_list, box, src=0)
        return box[0]

    def close(self) -> None:
        if self.backend is not None and self.dist.is_initialized():
            self.dist.destroy_process_group()
