"""Who runs Nsight Compute for the audit: softbench itself (`ncu`: one launch picked by kernel name and launch
count) or NVIDIA's nsight-python (`nsight-python`: the profiled forward inside an NVTX range that
nsight-python's own `ncu` command line selects). This module answers whether nsight-python can drive the
Nsight Compute at hand; softbench.audit.nsight_driver is the process it profiles.

nsight-python's releases and the Nsight Compute each needs (read from their wheels):
- 0.9.4 to 0.9.6 start `ncu ... --nvtx --nvtx-include regex:nsight-python@.+/ python SCRIPT` and declare no
  minimum: they drive Nsight Compute 2025.3.1;
- 1.0.0 and later attach through Nsight Compute's in-process injection library (nvInjBeginProfiling) and refuse
  ncu older than their MIN_NCU_VERSION, 2026.2.1."""

from __future__ import annotations

import importlib.metadata
import re

from softbench.core.errors import UnsupportedError

COLLECTORS = ("ncu", "nsight-python")
# The newest release that drives the H200 host's ncu 2025.3.1, and the ncu-report it was read against there.
NSIGHT_PYTHON_PIN = "0.9.6"
INJECTION_SINCE = (1, 0, 0)  # nsight-python releases from here on need MIN_NCU_VERSION
MIN_NCU_FOR_INJECTION = (2026, 2, 1)


def _numbers(text: str | None, n: int) -> tuple[int, ...] | None:
    m = re.search(r"(\d+)\.(\d+)\.(\d+)", text or "")
    return tuple(int(x) for x in m.groups())[:n] if m else None


def installed_nsight_python() -> str | None:
    try:
        return importlib.metadata.version("nsight-python")
    except importlib.metadata.PackageNotFoundError:
        return None


def nsight_python_refusal(nsight_version: str | None, ncu_version_text: str | None) -> str | None:
    """None when this nsight-python can drive this ncu, else the sentence that says which versions do not fit."""
    pin = f"pip install nsight-python=={NSIGHT_PYTHON_PIN}"
    if nsight_version is None:
        return f"--collector nsight-python: nsight-python is not installed in this Python ({pin}, with ncu-report)"
    ncu = _numbers(ncu_version_text, 3)
    if ncu is None:
        return (f"--collector nsight-python: the Nsight Compute version is unknown (ncu --version said "
                f"{(ncu_version_text or 'nothing')!r}), and nsight-python {nsight_version} depends on it")
    ours = _numbers(nsight_version, 3)
    if ours is not None and ours >= INJECTION_SINCE and ncu < MIN_NCU_FOR_INJECTION:
        need = ".".join(map(str, MIN_NCU_FOR_INJECTION))
        have = ".".join(map(str, ncu))
        return (f"--collector nsight-python: nsight-python {nsight_version} needs Nsight Compute {need} or newer "
                f"(its MIN_NCU_VERSION) and this ncu is {have}; nsight-python {NSIGHT_PYTHON_PIN} is the newest "
                f"release that drives ncu {have} ({pin}), or use --collector ncu")
    return None


def check_collector(collector: str, ncu_path: str | None, ncu_version_text: str | None) -> dict:
    """What the session records about the collector; UnsupportedError when it cannot run here."""
    if collector == "ncu":
        return {"name": "ncu", "ncu": ncu_path, "ncu_version": ncu_version_text}
    if ncu_path is None:
        raise UnsupportedError("--collector nsight-python: ncu was not found, and nsight-python runs it",
                               hint="put ncu on PATH or pass --ncu-path")
    version = installed_nsight_python()
    why = nsight_python_refusal(version, ncu_version_text)
    if why:
        raise UnsupportedError(why)
    return {"name": "nsight-python", "version": version, "ncu": ncu_path, "ncu_version": ncu_version_text}
