"""Which reader turns an `.ncu-rep` report into the counter table (softbench.audit.counters), and running it.

Readers, best first:
- `ncu-report`: NVIDIA's reader from PyPI (the `ncu_report` package);
- `host`: the same module as an Nsight Compute install ships it (`extras/python/ncu_report.py`), found from
  the ncu executable, for a machine without the package or a report the package cannot read;
- `csv`: `ncu --import R --csv --page raw --print-units base` and softbench's own parser (softbench.audit.ncu),
  for a machine with neither.

The two ncu_report readers run in their own process (softbench.audit.read_report): both modules are named
`ncu_report`, so one process cannot hold both for the cross-check, and a fault in the native reader then ends
that process with an error the session records instead of ending the audit."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from softbench.audit import counters
from softbench.audit import ncu as ncu_mod
from softbench.core.errors import MeasurementError, UnsupportedError

READERS = ("ncu-report", "host", "csv")
CHOICES = ("auto",) + READERS
PACKAGE_PIN = "ncu-report==2025.3.1"  # the release of the H200 host's Nsight Compute (2025.3.1)
NCU_INSTALL_GLOBS = ("/opt/nvidia/nsight-compute/*", "/usr/local/cuda*/nsight-compute*")


@dataclass(frozen=True)
class Reader:
    name: str  # one of READERS
    version: str | None
    location: str | None  # module folder, or the ncu executable for csv

    def describe(self) -> str:
        what = {"ncu-report": "the ncu-report package", "host": "Nsight Compute's own ncu_report module",
                "csv": "softbench's parser of ncu's CSV"}[self.name]
        return f"{what}" + (f" {self.version}" if self.version else "") + (f" ({self.location})" if self.location else "")

    def record(self) -> dict:
        return {"name": self.name, "version": self.version, "location": self.location}


@dataclass
class Reading:
    reader: Reader
    frame: object  # pandas DataFrame, counters.COLUMNS
    kernels: list  # list[ncu.KernelMetrics]
    artifact: str  # session-relative file holding what the reader read


def package_reader() -> Reader | None:
    try:
        version = importlib.metadata.version("ncu-report")
    except importlib.metadata.PackageNotFoundError:
        return None
    spec = importlib.util.find_spec("ncu_report")
    if spec is None or not spec.origin:
        return None
    return Reader("ncu-report", version, str(Path(spec.origin).parent))


def host_module_dirs(ncu: str) -> list[Path]:
    """Folders that may hold the ncu_report module of the Nsight Compute that `ncu` runs: its install folder
    (ncu resolved through links), the nsight-compute folders beside a CUDA toolkit's bin/ (where bin/ncu is a
    launcher script), and the usual install places."""
    real = Path(os.path.realpath(ncu)).parent
    dirs = [real, *sorted(real.parent.glob("nsight-compute*"), reverse=True)]
    for pattern in NCU_INSTALL_GLOBS:
        root, _, tail = pattern.rpartition("/")
        dirs += sorted(Path(root).glob(tail), reverse=True) if Path(root).is_dir() else []
    return [d / "extras" / "python" for d in dict.fromkeys(dirs)]


def host_reader(ncu: str | None, ncu_version: str | None = None) -> Reader | None:
    """The install's module; of several installs, the one whose folder names ncu's own version."""
    if not ncu:
        return None
    found = [d for d in host_module_dirs(ncu) if (d / "ncu_report.py").is_file()]
    if not found:
        return None
    number = _version_number(ncu_version)
    best = next((d for d in found if number and number in str(d)), None)
    # an install folder that does not name the version (ncu's own folder) is ncu's install: its version
    return Reader("host", number, str(best or found[0]))


def _version_number(text: str | None) -> str | None:
    """'Version 2025.3.1.0 (build 36398880) (public-release)' -> '2025.3.1'."""
    m = re.search(r"(\d{4})\.(\d+)\.(\d+)", text or "")
    return ".".join(m.groups()) if m else None


def available(ncu: str | None, ncu_version: str | None = None) -> list[Reader]:
    found = [package_reader(), host_reader(ncu, ncu_version)]
    if ncu:
        found.append(Reader("csv", _version_number(ncu_version), ncu))
    return [r for r in found if r is not None]


def choose(requested: str, found: list[Reader]) -> list[Reader]:
    """The readers to run, the primary first: for `auto` every reader found, best first (the first that
    reads the report is primary, the rest check it); for a named one, that one first. A named reader that is
    not here is refused with what was looked for."""
    if requested == "auto":
        return list(found)
    pick = [r for r in found if r.name == requested]
    if not pick:
        hint = {"ncu-report": f"pip install {PACKAGE_PIN}",
                "host": "point --ncu-path at an Nsight Compute install that has extras/python/ncu_report.py",
                "csv": "put ncu on PATH or pass --ncu-path"}[requested]
        have = ", ".join(r.name for r in found) or "none"
        raise UnsupportedError(f"--counter-reader {requested}: {requested} is not available here "
                               f"(readers found: {have})", hint=hint + ", or --counter-reader auto")
    return pick + [r for r in found if r.name != requested]


def read(reader: Reader, report: Path, session_dir: Path, stem: str, timeout: float = 300) -> Reading:
    """Read `report` with `reader`; the table (or ncu's CSV) is written beside the report as `<stem>.<reader>.csv`
    (`<stem>.csv` for ncu's own CSV). MeasurementError says why a reader could not."""
    out_dir = report.parent
    if reader.name == "csv":
        text = _import_csv(reader.location, report, timeout)
        (out_dir / f"{stem}.csv").write_text(text)
        kernels = ncu_mod.parse_csv(text)
        return Reading(reader, counters.frame_from_kernels(kernels), kernels,
                       str((out_dir / f"{stem}.csv").relative_to(session_dir)))
    out = out_dir / f"{stem}.{reader.name}.csv"
    argv = [sys.executable, "-m", "softbench.audit.read_report",
            reader.location if reader.name == "host" else "-", str(report), str(out)]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=_child_env())
    except subprocess.TimeoutExpired:
        raise MeasurementError(f"{reader.describe()} did not read {report.name} within {timeout:.0f} s") from None
    if p.returncode != 0 or not out.is_file():
        why = (p.stderr.strip().splitlines() or [f"exit code {p.returncode}"])[-1]
        raise MeasurementError(f"{reader.describe()} could not read {report.name}: {why}")
    frame = load_frame(out)
    return Reading(reader, frame, counters.kernels_from_frame(frame), str(out.relative_to(session_dir)))


def _import_csv(ncu: str, report: Path, timeout: float) -> str:
    argv = ncu_mod.import_command(ncu, str(report))
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:  # an older ncu without --print-units: units as ncu chooses them (the parser converts)
        p = subprocess.run(argv[:-2], capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise MeasurementError(f"ncu --import failed: {(p.stdout + p.stderr).strip()[:400]}")
    return p.stdout


def _child_env() -> dict:
    """The reader process finds softbench where this process found it (the GPU host runs from a checkout)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def load_frame(path: Path):
    import pandas as pd  # heavy import, deferred

    return pd.read_csv(path, dtype={"kernel": str, "metric": str, "unit": str, "text": str},
                       keep_default_na=False, na_values={"value": [""]})


def write_frame(frame, path: Path) -> None:
    """pandas writes floats in their shortest round-trip form, so the file holds the reader's exact values."""
    frame.to_csv(path, index=False)
