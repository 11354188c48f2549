"""The trace engine (paper B.3 "Kernel duration", Table B4): each variant and length in its own process under
Nsight Systems, then `nsys stats` (cuda_gpu_kern_sum CSV) and `nsys export` (SQLite) read back into the
attention kernel's median duration, beside the host call latency the same process timed.

Without Nsight Systems the driver records kernels with torch.profiler (CUPTI) over a separate pass of calls;
those points say `source: torch.profiler`."""

from __future__ import annotations

import glob
import json
import math
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from softbench.core.envinfo import collect_env
from softbench.core.errors import MeasurementError, UsageError
from softbench.core.runoptions import RunOptions
from softbench.trace.driver import traced_phases
from softbench.trace.ingest import KernelTable, read_chrome_trace, read_kern_sum_csv, read_kernels_sqlite
from softbench.trace.summary import CLOCK_DRIFT_PCT, b4_rows, halves_drift, kernels_beside, non_kernel_pct
from softbench.core.session import Session
from softbench.core.shapes import Shape, mask_tag, seq_label
from softbench.core.utc import utc_iso
from softbench.runtime.session_runner import describe_failure
from softbench.runtime.settle import SettleRule

POINTS_FILE = "points.jsonl"
# where Nsight Systems lives when it is not on PATH (newest version first after sorting)
NSYS_GLOBS = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
    "/usr/local/cuda/bin/nsys",
)
KEEP_BYTES = 16 * 2**20  # raw reports and SQLite exports above this are deleted (a note says so)


def _version_key(path: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path)]


def find_nsys(which: Callable[[str], str | None] = shutil.which, globber: Callable[[str], list] = glob.glob) -> str | None:
    """PATH first, then the usual install folders (the newest version of each)."""
    found = which("nsys")
    if found:
        return found
    for pattern in NSYS_GLOBS:
        hits = sorted((h for h in globber(pattern) if os.access(h, os.X_OK)), key=_version_key, reverse=True)
        if hits:
            return hits[0]
    return None


def nsys_version(nsys: str) -> str | None:
    try:
        r = subprocess.run([nsys, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (r.stdout or r.stderr).strip() or None


@dataclass(frozen=True)
class TraceOptions(RunOptions):
    shapes: tuple[Shape, ...]
    variants: tuple[str, ...] = ("A0", "A1")
    backend: str = "fa4"
    warmup: int = 50
    calls: int | None = None  # None: as many as fill window_s (trace.driver.window_calls)
    window_s: float = 2.0
    seed: int = 0
    nsys: str | None = None  # None: torch.profiler fallback
    keep_bytes: int = KEEP_BYTES
    timeout_s: float = 900.0
    # before its traced calls each process runs until the board's power and clock settle (None: the paper's
    # warm-up alone, so a kernel may be traced inside the ramp from idle to the power cap)
    settle: dict | None = field(default_factory=lambda: SettleRule().to_dict())

    def __post_init__(self):
        if not self.shapes:
            raise UsageError("no lengths to trace")
        if not self.variants:
            raise UsageError("no variants to trace")
        if (self.calls is not None and self.calls < 1) or self.warmup < 0 or not 0 < self.window_s < math.inf:
            raise UsageError("calls and the window's length must be positive (the window finite) and warm-up "
                             "non-negative")
        if self.settle is not None:
            # the rule as the driver will run it, its defaults filled in, so that the session records (and its
            # summary describes) the rule that ran: an empty mapping is the default rule, not "no settling"
            try:
                rule = SettleRule.from_mapping(self.settle)
            except ValueError as e:
                raise UsageError(str(e)) from None
            object.__setattr__(self, "settle", rule.to_dict())

    def to_dict(self) -> dict:
        """Every field, as protocol.yaml records them, in the order the sessions list them (asdict would put
        RunOptions' fields first)."""
        return {"shapes": [s.to_dict() for s in self.shapes], "variants": self.variants, "backend": self.backend,
                "warmup": self.warmup, "calls": self.calls, "window_s": self.window_s, "seed": self.seed,
                "settle": self.settle, "nsys": self.nsys,
                "out_dir": str(self.out_dir), "keep_bytes": self.keep_bytes, "timeout_s": self.timeout_s,
                "backend_options": self.backend_options, "command_line": self.command_line}


class Progress:
    def start(self, total_points: int) -> None: ...
    def message(self, text: str) -> None: ...
    def window(self, label: str, record: dict) -> None: ...


def run_trace(opts: TraceOptions, progress: Progress | None = None) -> Session:
    progress = progress or Progress()
    progress.start(len(opts.shapes) * len(opts.variants))
    first = opts.shapes[0]
    mask = mask_tag(first.causal)
    lengths = "-".join(seq_label(s.seq) for s in opts.shapes)
    session = Session.create(opts.out_dir, "trace", f"{first.dtype}-{mask}-{lengths}-{opts.backend}-{'-'.join(opts.variants)}")
    tool = {"source": "nsys", "nsys": opts.nsys, "nsys_version": nsys_version(opts.nsys)} if opts.nsys else \
        {"source": "torch.profiler", "nsys": None, "note": "Nsight Systems not found; kernels from torch.profiler (CUPTI)"}
    session.write_json("env.json", {**collect_env(gpu=True), "trace_tool": tool})
    session.write_yaml("protocol.yaml", {"command": "trace", "command_line": opts.command_line,
                                         "started_utc": utc_iso(), "tool": tool, **opts.to_dict()})
    points: list[dict] = []
    try:
        for shape in opts.shapes:
            for variant in opts.variants:
                progress.message(f"{shape.tag()}: {variant} ({tool['source']})")
                point = run_point(opts, shape, variant, session.path / "points" / f"{shape.tag()}-{variant}")
                session.append(POINTS_FILE, point)
                points.append(point)
                progress.window(variant, point)
    except BaseException as exc:
        _finish(session, opts, points, tool, complete=False, reason=describe_failure(exc))
        raise
    _finish(session, opts, points, tool, complete=True)
    return session


def _run(cmd: list[str], log: Path, timeout_s: float, what: str) -> None:
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        try:
            r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise MeasurementError(f"{what} did not finish in {timeout_s:.0f} s; see {log}") from None
    if r.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise MeasurementError(f"{what} failed (exit code {r.returncode}); {log} ends:\n{tail}")


def run_point(opts: TraceOptions, shape: Shape, variant: str, pdir: Path) -> dict:
    """Trace one variant at one shape in a fresh process; returns the point record."""
    pdir.mkdir(parents=True, exist_ok=True)
    log = pdir / "driver.log"
    driver = [sys.executable, "-m", "softbench.trace.driver", "--backend", opts.backend, "--variant", variant,
              "--shape", json.dumps(shape.to_dict()), "--warmup", str(opts.warmup), "--window-s", str(opts.window_s),
              "--seed", str(opts.seed), "--out", str(pdir), "--backend-options", json.dumps(opts.backend_options)]
    if opts.calls is not None:
        driver += ["--calls", str(opts.calls)]
    if opts.settle is not None:
        driver += ["--settle", json.dumps(opts.settle)]
    notes: list[str] = []
    if opts.nsys:
        rep = pdir / "trace"
        _run([opts.nsys, "profile", "--trace=cuda", "--sample=none", "--cpuctxsw=none",
              "--capture-range=cudaProfilerApi", "--capture-range-end=stop", "--force-overwrite=true",
              "-o", str(rep), *driver], log, opts.timeout_s, f"nsys profile of {variant} at {shape.tag()}")
        report = rep.with_suffix(".nsys-rep")
        if not report.exists():
            raise MeasurementError(f"nsys wrote no report {report}; see {log}")
        _run([opts.nsys, "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv", "-o", str(pdir / "kern"),
              str(report)], log, opts.timeout_s, "nsys stats")
        csvs = sorted(pdir.glob("kern*.csv"))
        if not csvs:
            raise MeasurementError(f"nsys stats wrote no CSV into {pdir}; see {log}")
        table = read_kern_sum_csv(csvs[0])
        sqlite = rep.with_suffix(".sqlite")
        if not sqlite.exists():  # recent nsys exports it during stats already
            try:
                _run([opts.nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(sqlite),
                      str(report)], log, opts.timeout_s, "nsys export")
            except MeasurementError as e:
                notes.append(f"SQLite export failed: {e}")
        detail = read_kernels_sqlite(sqlite) if sqlite.exists() else None
        source = "nsys"
    else:
        _run(driver + ["--torch-profiler"], log, opts.timeout_s, f"trace driver for {variant} at {shape.tag()}")
        table = read_chrome_trace(pdir / "torch_trace.json")
        detail = table
        source = "torch.profiler"
    latency = json.loads((pdir / "latency.json").read_text())
    point = _point_record(opts, shape, variant, source, table, detail, latency, notes)
    point["files"] = _keep_small(pdir, opts.keep_bytes, notes)
    return point


def _point_record(opts: TraceOptions, shape: Shape, variant: str, source: str, table: KernelTable,
                  detail: KernelTable | None, latency: dict, notes: list[str]) -> dict:
    k = table.dominant()
    kernel_us = k.median_ns / 1e3
    # nsys traces the whole profiler range: the settle step's calls, the warm-up and the timed calls, in that order
    calls = latency["calls"]  # the driver's count: sized to the window unless --calls gave it
    settle_calls = latency.get("settle_calls", 0)
    expected = settle_calls + opts.warmup + calls if source == "nsys" else calls
    timed_us = halves = None
    if detail is not None:
        dk = detail.dominant()
        if dk.name != k.name and source == "nsys":
            notes.append(f"the SQLite export's largest kernel ({dk.name[:60]}) differs from the CSV's ({k.name[:60]})")
        if len(dk.durations_ns) == expected:
            timed = [d / 1e3 for d in dk.durations_ns[-calls:]]  # the timed calls come last
            if source == "nsys":
                timed_us = float(np.median(timed))
            halves = halves_drift(timed)
            moved = (halves or {}).get("change_pct")  # None where the first half's median is 0 ns: no percent
            if moved is not None and abs(moved) > CLOCK_DRIFT_PCT:
                notes.append(f"the attention kernel's median moved by {moved:+.1f}% from the first "
                             f"half of the timed calls to the second ({halves['first_half']:.3f} us, then "
                             f"{halves['second_half']:.3f} us): the clock moved inside the window, so this point's "
                             "medians mix clocks; a longer window (--window-s) averages over the power "
                             "controller's swings, and `softbench latency` compares kernels at equal clock")
        elif source == "nsys":
            notes.append(f"{len(dk.durations_ns)} instances of the attention kernel, expected {expected}: "
                         "no timed-calls-only median")
    if k.instances != expected:
        notes.append(f"attention kernel ran {k.instances} times in the trace, expected {expected}")
    others = kernels_beside([(r.name, r.total_ns) for r in table.rows], k.name)
    if others:
        names = ", ".join(f"{name[:40]} ({pct:.1f}%)" for name, pct in others)
        notes.append(f"besides the attention kernel, {variant}'s calls ran {names} of the trace's GPU time: the "
                     "kernel-only columns leave that out, the call latency includes it")
    call_us = latency["call_latency_us"]
    return {
        "seq": shape.seq, "causal": shape.causal, "shape": shape.to_dict(), "shape_tag": shape.tag(),
        "variant": variant, "source": source, "table_source": table.source,
        "kernel_name": k.name, "kernel_instances": k.instances, "kernels_in_trace": len(table.rows),
        "kernel_median_us": kernel_us,
        "kernel_median_scope": (f"all traced calls ({traced_phases(settle_calls, opts.warmup)})" if source == "nsys"
                                else f"{calls} profiled calls after the timed window"),
        "kernel_median_timed_us": timed_us,
        # the timed calls' first and second halves (medians, us): a change beyond CLOCK_DRIFT_PCT is noted
        "kernel_timed_halves_us": halves,
        "kernel_share_of_gpu_time_pct": k.time_pct,
        "call_latency_us": call_us, "warmup": latency["warmup"], "calls": calls,
        "calls_sized_by": latency.get("calls_sized_by"),
        "non_kernel_pct": non_kernel_pct(kernel_us, call_us),
        "settle": latency.get("settle"),
        "gpu_after_window": latency.get("gpu_after_window"), "compile_s": latency.get("compile_s"),
        "load_s": latency.get("load_s"), "pid": latency.get("pid"),
        "kernels": [r.to_dict() for r in table.by_total()[:10]],
        "notes": notes,
    }


def _keep_small(pdir: Path, limit: int, notes: list[str]) -> list[str]:
    """Delete raw files above `limit` bytes (CSV and JSON records are always kept); list what stays."""
    for f in sorted(pdir.iterdir()):
        if f.suffix in (".nsys-rep", ".sqlite", ".qdstrm") or f.name == "torch_trace.json":
            size = f.stat().st_size
            if size > limit:
                f.unlink()
                notes.append(f"{f.name} ({size / 2**20:.1f} MiB) not kept: over {limit / 2**20:.0f} MiB")
    return sorted(p.name for p in pdir.iterdir())


def _finish(session: Session, opts: TraceOptions, points: list[dict], tool: dict, complete: bool,
            reason: str | None = None) -> None:
    from softbench.trace.render import trace_markdown

    summary = {
        "command": "trace", "backend": opts.backend, "source": tool["source"], "tool": tool,
        "variants": list(opts.variants), "baseline": opts.variants[0], "warmup": opts.warmup, "calls": opts.calls,
        "window_s": opts.window_s, "settle": opts.settle,
        "shapes": [s.to_dict() for s in opts.shapes], "points": points,
        "table": b4_rows(points, opts.variants[0]), "complete": complete, "finished_utc": utc_iso(),
    }
    if reason:
        summary["incomplete_reason"] = reason
    session.write_json("summary.json", summary)
    session.write_text("summary.md", trace_markdown(summary, session.path.name))
    session.set_status(complete=complete, state="complete" if complete else "partial", reason=reason)
