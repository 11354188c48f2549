"""Data-parallel fidelity under torchrun: which process this is, which blocks it evaluates, and how its rows
reach rank 0, the only process that writes the session.

torchrun (torch.distributed.run) starts the processes and sets RANK, WORLD_SIZE and LOCAL_RANK; softbench
launches nothing of its own. Without those variables the run is one process (rank 0 of 1) and nothing here
opens a process group.

Shards. The blocks still to do (a resumed session's complete blocks are left out first, whatever the world size
that made them) are dealt round-robin: the k-th block to do goes to rank k % world. The ranks then work in
rounds, one block each per round, and rank 0 gathers every round's rows before the next one starts. Round-robin
rather than contiguous ranges because the blocks all have the same length (the same cost), so a round costs
about one block's time, and because it keeps what is finished a prefix of the block order: a run that stops
after k rounds holds blocks 0 .. k*world-1 (less the block a dead rank was on), not the heads of `world`
separate ranges.

What a dead rank costs ("nothing lost"): rank 0 appends its own block to the session before the round's
gather, and every other rank's rows once gathered; a rank that dies loses only the block it was evaluating, and
the other ranks lose only their block of that round. The gather then fails (or torchrun terminates the
group), rank 0 writes the partial session, and `--resume` evaluates what is missing with any number of ranks.

The rows travel as Python objects over gloo: on CPUs the only backend, on GPUs a CPU-side gloo group beside
NCCL (fidelity exchanges a few hundred bytes per block; nothing on a GPU is communicated)."""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass
from datetime import timedelta

from softbench.core.errors import MeasurementError, UsageError

# Fault injection for the tests of a dying rank: "R:N" makes rank R exit, as a crashed process would, when it
# is about to start its (N+1)-th block. Unset in normal use.
FAULT_ENV = "SOFTBENCH_FAULT_RANK_AFTER_BLOCKS"
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
    """The blocks to do, one per rank per round: round k's r-th entry is rank r's block (todo[k*world + r])."""
    return [todo[k:k + world] for k in range(0, len(todo), world)]


def shard(todo: list[int], rank: int, world: int) -> list[int]:
    """The blocks one rank evaluates, in the order it evaluates them."""
    return todo[rank::world]


def rank_device(device: str, ranks: Ranks) -> str:
    """Each rank's own GPU (LOCAL_RANK) in a launch of several; the CPU and one-process runs are unchanged."""
    if device == "cuda" and ranks.world > 1:
        return f"cuda:{ranks.local_rank}"
    return device


def fault_check(ranks: Ranks, blocks_done: int) -> None:
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    rank, _, after = spec.partition(":")
    if int(rank) == ranks.rank and blocks_done >= int(after):
        os._exit(17)


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

        # the project's rule for every process it starts: no NVLink multicast (NVLS) buffers
        os.environ["NCCL_NVLS_ENABLE"] = "0"
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
