"""`softbench fidelity --gpus N`: the same command under torchrun, one rank per GPU.

softbench starts `python -m torch.distributed.run --standalone --nproc-per-node N -m softbench fidelity ...`
and waits for it; torchrun does the rest (rendezvous, LOCAL_RANK, tearing the group down when a rank dies).
Each rank takes the GPU of its LOCAL_RANK (softbench.fidelity.distributed.rank_device)."""

from __future__ import annotations

import os
import subprocess
import sys

from softbench.core.errors import MeasurementError, UnsupportedError, UsageError


class RanksFailed(MeasurementError):
    """torchrun exited non-zero: the ranks have printed their own errors; the CLI returns torchrun's status."""

    def __init__(self, returncode: int):
        super().__init__(f"torchrun exited with status {returncode} (the ranks' errors are above)",
                         hint="a partial session continues with softbench fidelity --gpus N --resume SESSION_DIR")
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


def torchrun_argv(n: int, args: list[str]) -> list[str]:
    # --standalone: a rendezvous on a free local port, so two launches on one host do not collide
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
            "-m", "softbench", "fidelity", *strip_gpus(args)]


def torchrun_env(environ=None) -> dict:
    env = dict(os.environ if environ is None else environ)
    env["NCCL_NVLS_ENABLE"] = "0"  # no NVLink multicast buffers, in every process softbench starts
    return env


def check_gpus(n: int, device: str | None, visible: int, in_launch: bool) -> None:
    if in_launch:
        raise UsageError("--gpus starts torchrun itself; under torchrun (WORLD_SIZE is set) drop --gpus")
    if device == "cpu":
        raise UsageError("--gpus runs one rank per GPU; it does not go with --device cpu")
    if visible == 0:
        raise UnsupportedError("--gpus needs CUDA GPUs and none is visible here",
                               hint="on CPUs: torchrun --nproc-per-node N -m softbench fidelity ... (gloo)")
    if n > visible:
        raise UnsupportedError(f"--gpus {n}: only {visible} CUDA GPU(s) are visible here")


def launch(n: int, device: str | None, args: list[str]) -> None:
    """Run the command on `n` GPUs under torchrun and wait for it; RanksFailed when it fails."""
    import torch

    check_gpus(n, device, torch.cuda.device_count(), "WORLD_SIZE" in os.environ)
    rc = subprocess.run(torchrun_argv(n, args), env=torchrun_env()).returncode
    if rc:
        raise RanksFailed(rc)
