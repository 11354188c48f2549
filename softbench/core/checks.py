"""Checks a command makes before it starts anything: can its output be written, do its inputs fit in memory.

Each refusal is one sentence (a UsageError, exit code 2) raised before any worker starts or any session
folder is made, so that a bad --out or an impossible --seq leaves nothing behind."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from softbench.core.errors import UsageError
from softbench.core.shapes import Shape

# bytes per element as softbench.kernels.inputs stores them (FP8: E4M3)
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1}
FP32 = 4
SIM_TILE = 128  # softbench.kernels.sim's default key tile


def _nearest_existing(path: Path) -> Path:
    """The path itself or its closest ancestor that exists: where the folder would be made."""
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return probe


def _writable(folder: Path) -> str | None:
    """None when a file can be made in `folder`, else the reason. A real file is made and removed: os.access
    says yes to root on a read-only folder and knows nothing of read-only mounts."""
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".softbench-probe-")
    except OSError as e:
        return e.strerror or type(e).__name__
    os.close(fd)
    os.unlink(tmp)
    return None


def _refuse_unwritable(shown: Path, folder: Path, option: str) -> None:
    """Refuse when `folder` (made if missing) could not hold new files; the message names `shown`."""
    base = _nearest_existing(folder)
    if not base.is_dir():
        raise UsageError(f"{option} {shown} lies under {base}, which is a file, so no folder can be made there",
                         hint=f"give {option} a path under a folder")
    why = _writable(base)
    if why:
        raise UsageError(f"{option} {shown} cannot be written: {base} refuses new files ({why})",
                         hint=f"give {option} a place you can write")


def refuse_empty(value, option: str, hint: str) -> None:
    """Refuse an empty or blank value, as an unset shell variable gives it, naming the option: taken as it is,
    Path("") is the current folder, and an empty value read as one not given at all."""
    if isinstance(value, str) and not value.strip():
        raise UsageError(f"{option} is empty", hint=hint)


def check_out_dir(path: Path | str, option: str = "--out") -> Path:
    """Refuse an output folder that cannot be made or written: a file, a path under a file, a read-only folder.
    Nothing is created (a probe file is made and removed in the nearest existing folder)."""
    refuse_empty(path, option, f"give {option} a folder path, e.g. {option} sessions")
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{option} {p} is a file, not a folder", hint=f"give {option} a folder path")
    _refuse_unwritable(p, p, option)
    return p


def check_out_file(path: Path | str, option: str) -> Path:
    """The same refusals for an output file: not empty, its folder must be writable, and the path must not be a
    folder."""
    refuse_empty(path, option, f"give {option} a file path")
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{option} {p} is a folder, not a file", hint=f"give {option} a file path")
    _refuse_unwritable(p, p.parent, option)
    return p


# --- memory -------------------------------------------------------------------------------------------------

def estimate_input_bytes(shape: Shape) -> int:
    """Host bytes that softbench.kernels.inputs.make_inputs needs for q, k and v: each stored in its dtype, each
    drawn first as FP32 on the CPU (the largest draw, q's, is the peak on top of what is kept)."""
    per_head = shape.batch * shape.seq * shape.head_dim
    kept = (shape.heads + 2 * shape.n_kv_heads) * per_head * DTYPE_BYTES[shape.dtype]
    return kept + shape.heads * per_head * FP32


def estimate_sim_bytes(shape: Shape, tile: int = SIM_TILE) -> int:
    """Bytes of softbench.kernels.sim.sim_attention's work: FP32 copies of q, k, v (k and v repeated to every
    query head) and the accumulator, and about six FP32 score tiles of seq x tile per head alive at once."""
    rows = shape.batch * shape.heads * shape.seq
    return rows * FP32 * (4 * shape.head_dim + 6 * min(tile, shape.seq))


def available_memory_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (Linux); None where it cannot be read, and then nothing is refused."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def check_memory(shape: Shape, backend: str, extra_bytes: int = 0, what: str = "",
                 available: int | None = None, hint: str = "use a shorter --seq, fewer --heads or a smaller --batch"
                 ) -> int:
    """Refuse a shape whose host memory (inputs, plus the simulation's work with --backend sim, plus
    `extra_bytes` that the caller knows of) exceeds what this machine has available. Returns the estimate.
    `what` names the shape in the message (e.g. 'the multi-tile gate'); `available` is for tests."""
    need = estimate_input_bytes(shape) + extra_bytes + (estimate_sim_bytes(shape) if backend == "sim" else 0)
    have = available_memory_bytes() if available is None else available
    if have is not None and need > have:
        parts = "inputs and the simulation's work" if backend == "sim" else "inputs"
        raise UsageError(f"{what or shape.tag()}: seq {shape.seq} needs about {format_bytes(need)} of memory for its "
                         f"{parts}, and {format_bytes(have)} is available here",
                         hint=hint)
    return need


# The simulation runs its tiles in Python: about 1.3 GFLOP/s on the 2-core CI machine (bf16, seq 256). A window
# that would take longer than this even at 5 GFLOP/s is refused with the estimate instead of running for hours.
SIM_OPTIMISTIC_FLOPS = 5e9
SIM_WINDOW_LIMIT_S = 30.0


def check_sim_time(shapes, proto) -> None:
    """Refuse a simulation run whose single window could not finish in SIM_WINDOW_LIMIT_S on this machine."""
    import torch

    if torch.cuda.is_available():
        return  # the simulation runs on the GPU there
    from softbench.latency.interleaved import SIZING_CALLS

    # a window sized in time holds at least one call, and is sized by one window of SIZING_CALLS calls
    calls = getattr(proto, "calls", 100) or SIZING_CALLS
    for s in shapes:
        est = s.flops * calls / SIM_OPTIMISTIC_FLOPS
        if est > SIM_WINDOW_LIMIT_S:
            raise UsageError(f"{s.tag()}: one window of {calls} simulated calls would take at least {est:,.0f} s on "
                             f"this CPU ({s.flops / 1e9:,.1f} GFLOP a call at no more than "
                             f"{SIM_OPTIMISTIC_FLOPS / 1e9:g} GFLOP/s)",
                             hint="use a shorter --seq, fewer --heads or fewer --calls (e.g. --seq 256 --heads 2 "
                                  "--calls 5)")
