"""The environment of a session: what ran, where, with which versions and files."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path

from softbench import __version__
from softbench.core.utc import utc_iso

PACKAGES = ("torch", "flash-attn-4", "nvidia-cutlass-dsl", "quack-kernels", "apache-tvm-ffi", "triton",
            "transformers", "nvidia-ml-py", "numpy", "pandas")


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit(path: Path | None = None) -> dict:
    where = str(path or Path(__file__).resolve().parents[1])
    try:
        commit = subprocess.run(["git", "-C", where, "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", where, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return {"commit": None, "dirty": None}
    return {"commit": commit or None, "dirty": bool(dirty) if commit else None}


def source_sha256(root: Path | None = None) -> str:
    """One sha256 over softbench's own Python sources (relative path and bytes of each, sorted): names the exact
    code that ran even when the checkout had uncommitted changes (git's dirty flag says only that it had some)."""
    root = root or Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def collect_env(gpu: bool = True) -> dict:
    """Everything about this machine that a reader needs to trust or reproduce a number. GPU facts come from
    torch and NVML when present; their absence is recorded, not hidden."""
    env = {
        "recorded_utc": utc_iso(),
        "softbench": {"version": __version__, **git_commit(), "source_sha256": source_sha256()},
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "os": platform.platform(),
        "hostname": platform.node(),
        "cpu": {"model": _cpu_model(), "count": os.cpu_count()},
        "packages": {n: _version(n) for n in PACKAGES},
        "env_vars": {k: v for k, v in os.environ.items()
                     if k.startswith(("CUDA_", "FLASH_ATTENTION", "CUTE_DSL", "FA_", "SOFTBENCH", "TRITON"))},
    }
    if gpu:
        env["gpu"] = _gpu_env()
    return env


def _gpu_env() -> dict:
    out: dict = {}
    try:
        import torch

        out["torch_cuda"] = torch.version.cuda
        out["cuda_available"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            p = torch.cuda.get_device_properties(0)
            out.update({"name": p.name, "capability": f"{p.major}.{p.minor}", "sm_count": p.multi_processor_count,
                        "memory_gib": round(p.total_memory / 2**30, 2)})
            out["cudnn"] = torch.backends.cudnn.version()
    except Exception as e:  # torch missing or broken: say so in the record
        out["torch_error"] = repr(e)
    from softbench.core.nvml import Nvml

    nv = Nvml.try_open()
    out["nvml"] = nv.describe() if nv else None
    return out
