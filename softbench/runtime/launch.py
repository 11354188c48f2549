"""`--gpus`: a command run again under torchrun, one rank per GPU.

softbench starts `python -m torch.distributed.run --standalone --nproc-per-node N -m softbench COMMAND ...` and
waits for it; torchrun does the rest (rendezvous, RANK and LOCAL_RANK, tearing the group down when a rank dies).
Each command decides what a rank does with its LOCAL_RANK (fidelity: the device cuda:LOCAL_RANK; latency: the
GPU pinned by CUDA_VISIBLE_DEVICES) and checks its own --gpus value before calling `launch`."""

from __future__ import annotations

import os
import subprocess
import sys

from softbench.core.errors import MeasurementError, UsageError

# NVLink multicast off, in NCCL, PyTorch's symmetric memory and NVSHMEM, in every process softbench starts: on the
# shared multi-GPU hosts a program that uses it can put the host's GPUs out of service (the device hosts' notes
# name these three variables). softbench exchanges only a few Python objects between ranks and needs none.
NO_NVLS = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


class RanksFailed(MeasurementError):
    """torchrun exited non-zero: the ranks have printed their own errors; the CLI returns torchrun's status."""

    def __init__(self, returncode: int, hint: str | None = None):
        super().__init__(f"torchrun exited with status {returncode} (the ranks' errors are above)", hint=hint)
        self.exit_code = returncode


def strip_gpus(args: list[str]) -> list[str]:
    """The command's arguments without --gpus (as `--gpus N` or `--gpus=N`): each rank runs the rest."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "--gpus":
            skip = True
        elif not a.startswith("--gpus="):
            out.append(a)
    return out


def command_args(argv: list[str], command: str) -> list[str]:
    """The arguments after the command's name in `softbench ... COMMAND ARGS`: what every rank is given."""
    return argv[argv.index(command) + 1:] if command in argv else argv


def torchrun_argv(n: int, command: str, args: list[str]) -> list[str]:
    # --standalone: a rendezvous on a free local port, so two launches on one host do not collide
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
            "-m", "softbench", command, *strip_gpus(args)]


def torchrun_env(environ=None, extra: dict | None = None) -> dict:
    return {**(os.environ if environ is None else environ), **NO_NVLS, **(extra or {})}


def refuse_in_launch(in_launch: bool | None = None) -> None:
    """--gpus inside a torchrun launch (by default: WORLD_SIZE is set) would start torchrun in every rank."""
    if "WORLD_SIZE" in os.environ if in_launch is None else in_launch:
        raise UsageError("--gpus starts torchrun itself; under torchrun (WORLD_SIZE is set) drop --gpus")


def launch(n: int, command: str, args: list[str], hint: str | None = None, extra_env: dict | None = None) -> None:
    """Run `softbench COMMAND ARGS` (less --gpus) on `n` ranks under torchrun and wait; RanksFailed when it fails."""
    rc = subprocess.run(torchrun_argv(n, command, args), env=torchrun_env(extra=extra_env)).returncode
    if rc:
        raise RanksFailed(rc, hint)
