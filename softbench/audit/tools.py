"""The CUDA tools the audit runs (ncu, cuobjdump, nvdisasm): where they are found, their versions, and one way
to run any of them that survives a hang or a missing executable."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from softbench.core.datafile import DamagedFile, load_mapping
from softbench.core.errors import UsageError
from softbench.kernels.triton_compile import bundled_tool_dir

if TYPE_CHECKING:
    from softbench.audit.engine import AuditOptions

CUDA_TOOL_DIRS = ("/usr/local/cuda/bin",)


@dataclass(frozen=True)
class Tools:
    ncu: str | None
    cuobjdump: str | None
    nvdisasm: str | None
    looked: tuple[str, ...]

    def versions(self) -> dict:
        out = {}
        for name in ("ncu", "cuobjdump", "nvdisasm"):
            path = getattr(self, name)
            out[name] = {"path": path, "version": _tool_version(path) if path else None}
        return out


def default_tool_dirs() -> tuple[str, ...]:
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    if os.environ.get("CUDA_HOME"):
        dirs.append(os.path.join(os.environ["CUDA_HOME"], "bin"))
    dirs += list(CUDA_TOOL_DIRS)
    dirs += sorted(glob.glob("/opt/nvidia/nsight-compute/*"), reverse=True)
    # triton's bundled cuobjdump and nvdisasm, last: a machine without a CUDA toolkit (a cross-compile audit's)
    dirs += [d for d in (bundled_tool_dir(),) if d]
    return tuple(dict.fromkeys(dirs))


def locate_tools(opts: AuditOptions) -> Tools:
    dirs = opts.tool_dirs if opts.tool_dirs is not None else default_tool_dirs()

    def find(name: str, explicit: str | None) -> str | None:
        if explicit:
            p = Path(explicit)
            if not (p.is_file() and os.access(p, os.X_OK)):
                raise UsageError(f"--{name}-path {explicit}: not an executable file")
            return str(p)
        for d in dirs:
            p = Path(d) / name
            if p.is_file() and os.access(p, os.X_OK):
                return str(p)
        return None

    return Tools(ncu=find("ncu", opts.ncu_path), cuobjdump=find("cuobjdump", opts.cuobjdump_path),
                 nvdisasm=find("nvdisasm", None), looked=tuple(dirs))


def _tool_version(path: str) -> str | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return lines[-1] if lines else None


def _kill_group(p: subprocess.Popen) -> None:
    """End the tool and everything it started (its process group), and reap it."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.communicate()


def run_tool(argv: list[str], env: dict | None, timeout: float, log: Path | None = None) -> tuple[int, str]:
    """Run a tool; (exit code, stdout). With `log`, stdout and stderr go to that file instead. The tool runs in
    its own process group, so a timeout ends what it started too (ncu's target, the driver). A timeout or a
    missing executable becomes exit code -1 with the reason as text."""
    sink = open(log, "a") if log is not None else None
    try:
        if sink is not None:
            sink.write(f"$ {' '.join(argv)}\n")
            sink.flush()
        p = subprocess.Popen(argv, env=env, stdout=sink or subprocess.PIPE,
                             stderr=subprocess.STDOUT if sink else subprocess.PIPE, text=True,
                             start_new_session=True)
    except OSError as e:
        if sink:
            sink.close()
        return -1, f"cannot run {argv[0]}: {e}"
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(p)
        return -1, f"timed out after {timeout:.0f} s: {' '.join(argv[:3])} ..."
    except BaseException:
        # a Ctrl-C or SIGTERM of softbench: the tool's own session keeps it from the terminal's signal, so it
        # would run on (ncu holding the GPU, the driver writing into a session already marked partial)
        _kill_group(p)
        raise
    finally:
        if sink:
            sink.close()
    if sink is not None:
        return p.returncode, ""
    return p.returncode, out if p.returncode == 0 else (out or "") + (err or "")


def read_result(path: Path) -> dict:
    """A child's result file, or {} where it left none that reads (the caller reports the child's failure)."""
    try:
        return load_mapping(path)
    except DamagedFile:
        return {}
