"""`softbench fidelity --gpus N`: fidelity's rules for N, then the shared torchrun launcher
(softbench.runtime.launch). Each rank takes the GPU of its LOCAL_RANK (softbench.runtime.distributed.rank_device)."""

from __future__ import annotations

import os

from softbench.core.errors import UnsupportedError, UsageError
from softbench.runtime import launch as torchrun

RESUME_HINT = "a partial session continues with softbench fidelity --gpus N --resume SESSION_DIR"


def check_gpus(n: int, device: str | None, visible: int, in_launch: bool) -> None:
    torchrun.refuse_in_launch(in_launch)
    if device == "cpu":
        raise UsageError("--gpus runs one rank per GPU; it does not go with --device cpu")
    if visible == 0:
        raise UnsupportedError("--gpus needs CUDA GPUs and none is visible here",
                               hint="on CPUs: torchrun --nproc-per-node N -m softbench fidelity ... (gloo)")
    if n > visible:
        raise UnsupportedError(f"--gpus {n}: only {visible} CUDA GPU(s) are visible here")


def launch(n: int, device: str | None, args: list[str]) -> None:
    """Run the fidelity command (its arguments `args`) on `n` GPUs under torchrun and wait for it."""
    import torch

    check_gpus(n, device, torch.cuda.device_count(), "WORLD_SIZE" in os.environ)
    torchrun.launch(n, "fidelity", args, hint=RESUME_HINT)
