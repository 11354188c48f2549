"""Reading kernel durations from Nsight Systems exports and from torch.profiler traces.

Every reader returns a `KernelTable`: one row per kernel name with instances, total/median/min/max time in
nanoseconds, and, where the source has them, each instance's duration in start order.

- `cuda_gpu_kern_sum` CSV (`nsys stats --report cuda_gpu_kern_sum --format csv`): the header is found after any
  preamble lines; names are quoted and may hold commas; nsys versions spell columns differently
  (`Time(%)` / `Time (%)`, `Avg (ns)` / `Average (ns)`, `Med (ns)` / `Median (ns)`, `Min (ns)` / `Minimum (ns)`).
- SQLite (`nsys export --type sqlite`): table CUPTI_ACTIVITY_KIND_KERNEL (start, end in ns; demangledName or
  shortName, ids into StringIds).
- torch.profiler Chrome trace JSON: events with cat "kernel" (ts, dur in microseconds)."""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from softbench.core.errors import UsageError
from softbench.core.numbers import finite


@dataclass
class KernelRow:
    name: str
    instances: int
    total_ns: float
    median_ns: float
    avg_ns: float | None = None
    min_ns: float | None = None
    max_ns: float | None = None
    std_ns: float | None = None
    time_pct: float | None = None
    durations_ns: list[float] = field(default_factory=list)  # per instance, in start order, where known

    def to_dict(self, with_durations: bool = False) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "durations_ns"}
        if with_durations:
            d["durations_ns"] = list(self.durations_ns)
        return d


@dataclass
class KernelTable:
    source: str  # "nsys cuda_gpu_kern_sum csv", "nsys sqlite", "torch.profiler"
    path: str
    rows: list[KernelRow]

    def by_total(self) -> list[KernelRow]:
        return sorted(self.rows, key=lambda r: -r.total_ns)

    def dominant(self) -> KernelRow:
        """The kernel with the largest total time: the attention kernel in a trace of attention forwards."""
        if not self.rows:
            raise UsageError(f"{self.path}: no kernels in this {self.source} export")
        return self.by_total()[0]


def _rows_from_durations(durations: dict[str, list[float]]) -> list[KernelRow]:
    total = sum(sum(d) for d in durations.values()) or 1.0
    rows = []
    for name, d in durations.items():
        a = np.asarray(d, dtype=np.float64)
        rows.append(KernelRow(name=name, instances=int(a.size), total_ns=float(a.sum()), median_ns=float(np.median(a)),
                              avg_ns=float(a.mean()), min_ns=float(a.min()), max_ns=float(a.max()),
                              std_ns=float(a.std(ddof=1)) if a.size > 1 else 0.0,
                              time_pct=100.0 * float(a.sum()) / total, durations_ns=list(d)))
    return rows


# --- cuda_gpu_kern_sum CSV -----------------------------------------------------------------------------------
def _column_key(header: str) -> str | None:
    """Map one nsys column title (any spelling seen across versions) to a field of KernelRow."""
    h = re.sub(r"\s+", "", header.strip().lower())
    h = h.replace("(ns)", "")
    table = {
        "time(%)": "time_pct", "time%": "time_pct", "time": "time_pct",
        "totaltime": "total_ns", "instances": "instances", "count": "instances",
        "avg": "avg_ns", "average": "avg_ns", "med": "median_ns", "median": "median_ns",
        "min": "min_ns", "minimum": "min_ns", "max": "max_ns", "maximum": "max_ns",
        "stddev": "std_ns", "std": "std_ns", "name": "name",
    }
    return table.get(h)


def _find_header(lines: list[str]) -> int:
    for i, line in enumerate(lines):
        try:
            cells = next(csv.reader([line]))
        except (csv.Error, StopIteration):
            continue
        keys = {_column_key(c) for c in cells}
        if {"name", "instances", "total_ns"} <= keys:
            return i
    return -1


EXPORT_AGAIN = "export it again: nsys stats --report cuda_gpu_kern_sum --format csv -o K R.nsys-rep"


def read_kern_sum_csv(path: Path | str) -> KernelTable:
    import pandas as pd

    p = Path(path)
    lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
    start = _find_header(lines)
    if start < 0:
        raise UsageError(f"{p}: no cuda_gpu_kern_sum header (Name, Instances, Total Time) found",
                         hint="make it with: nsys stats --report cuda_gpu_kern_sum --format csv -o K R.nsys-rep")
    try:
        with warnings.catch_warnings():
            # a row longer than the header: pandas would take its first cells as an index and shift the rest under
            # the wrong columns; index_col=False makes that a warning, raised here
            warnings.simplefilter("error", pd.errors.ParserWarning)
            df = pd.read_csv(io.StringIO("\n".join(lines[start:])), dtype=str, keep_default_na=False,
                             index_col=False)
    except pd.errors.ParserWarning:
        raise UsageError(f"{p}: a row of the kernel table has more cells than its header", hint=EXPORT_AGAIN) from None
    except pd.errors.ParserError as e:
        # a copy cut short (a quoted kernel name left open at EOF) or rows with stray cells: pandas can't split it
        detail = str(e).strip().splitlines()[-1].replace("Error tokenizing data. C error: ", "")
        raise UsageError(f"{p}: the kernel table is not valid CSV, perhaps a truncated file ({detail})",
                         hint=EXPORT_AGAIN) from None
    rename = {c: _column_key(c) for c in df.columns if _column_key(c)}
    title = {key: header for header, key in reversed(list(rename.items()))}  # for messages: the export's own words
    df = df.rename(columns=rename)[list(dict.fromkeys(rename.values()))]
    if "median_ns" not in df.columns:
        raise UsageError(f"{p}: the report has no median column (Med/Median)")
    rows = []
    for i, rec in enumerate(df.to_dict("records")):
        if not rec.get("name"):
            if any(str(v).strip() for v in rec.values()):
                # nsys writes the name last, so a row cut short loses it first: dropping the row would leave the
                # table without that kernel (or with none), read as if it had not run
                raise UsageError(f"{p}: line {start + 2 + i}: a row of the kernel table has no kernel name (fewer "
                                 "cells than its header, perhaps a truncated file)",
                                 hint=EXPORT_AGAIN)
            continue  # a row of separators alone

        def num(key, rec=rec, line=start + 2 + i):
            v = str(rec.get(key, "")).replace(",", "").strip()
            if v in ("", "-"):
                return None
            where = f"{p}: line {line}, column {title.get(key, key)!r}"
            hint = "a cuda_gpu_kern_sum export holds numbers in every time and count column"
            try:
                x = float(v)
            except ValueError:
                raise UsageError(f"{where}: {v!r} is not a number", hint=hint) from None
            # float() takes "nan" and "inf"; nsys never writes them, and they would crash int() or print as times
            if not np.isfinite(x):
                raise UsageError(f"{where}: {v!r} is not a finite number", hint=hint)
            # times and counts can't be negative: a negative value means a damaged export, not a fast kernel
            if x < 0:
                raise UsageError(f"{where}: {v!r} is negative", hint=hint)
            if key == "instances" and not x.is_integer():
                raise UsageError(f"{where}: {v!r} is not a whole number of instances", hint=hint)
            if key == "instances" and x == 0:  # nsys lists only kernels that ran: a row of none is damaged
                raise UsageError(f"{where}: a kernel listed with 0 instances", hint=hint)
            return x

        rows.append(KernelRow(name=rec["name"], instances=int(num("instances") or 0), total_ns=num("total_ns") or 0.0,
                              median_ns=num("median_ns"), avg_ns=num("avg_ns"), min_ns=num("min_ns"),
                              max_ns=num("max_ns"), std_ns=num("std_ns"), time_pct=num("time_pct")))
    return KernelTable("nsys cuda_gpu_kern_sum csv", str(p), rows)


# --- SQLite -------------------------------------------------------------------------------------------------
def read_kernels_sqlite(path: Path | str) -> KernelTable:
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{p} does not exist")
    con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
            raise UsageError(f"{p}: no CUPTI_ACTIVITY_KIND_KERNEL table (was the trace taken with --trace=cuda, and "
                             "did any kernel run?)")
        cols = {r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")}
        name_col = next((c for c in ("demangledName", "shortName", "mangledName") if c in cols), None)
        if name_col is None:
            raise UsageError(f"{p}: the kernel table has no name column")
        if "StringIds" in tables:
            query = (f"SELECT s.value, k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                     f"JOIN StringIds s ON s.id = k.{name_col} ORDER BY k.start")
        else:  # very old exports kept names inline
            query = f"SELECT {name_col}, start, end FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start"
        durations: dict[str, list[float]] = {}
        for name, start, end in con.execute(query):
            # SQLite columns are not typed strictly: a damaged or hand-made export can hold NULL or text here
            if not all(finite(v) is not None for v in (start, end)):
                raise UsageError(f"{p}: kernel {str(name)!r} has a start/end of {start!r}/{end!r}, "
                                 "not timestamps in nanoseconds")
            if end < start:
                raise UsageError(f"{p}: kernel {str(name)!r} ends before it starts (start {start}, end {end})")
            durations.setdefault(str(name), []).append(float(end - start))
    except sqlite3.DatabaseError as e:
        raise UsageError(f"{p}: not a readable SQLite export: {e}") from None
    finally:
        con.close()
    return KernelTable("nsys sqlite", str(p), _rows_from_durations(durations))


# --- torch.profiler Chrome trace ------------------------------------------------------------------------------
def read_chrome_trace(path: Path | str) -> KernelTable:
    from softbench.core.textfile import read_text_file

    p = Path(path)
    try:
        data = json.loads(read_text_file(p, "trace", max_bytes=None))  # a long profile's trace runs to gigabytes
    except json.JSONDecodeError as e:
        raise UsageError(f"{p}: not JSON: {e}") from None
    except RecursionError:
        raise UsageError(f"{p}: nests too deeply to be a Chrome trace") from None
    events = data.get("traceEvents", data) if isinstance(data, dict) else data
    if isinstance(events, dict):
        events = []  # a JSON object with no traceEvents: no kernels, which dominant() reports
    if not isinstance(events, list):
        raise UsageError(f"{p}: not a Chrome trace: expected a list of trace events (or an object with one under "
                         f"\"traceEvents\"), found {type(events).__name__ if events is not None else 'null'}")

    kernels = [e for e in events if isinstance(e, dict) and e.get("cat") == "kernel" and "dur" in e]
    for ev in kernels:
        # checked before sorting: one string "ts" among numbers would make the sort itself fail
        name, ts, dur = ev.get("name", "?"), ev.get("ts", 0), ev["dur"]
        if not isinstance(name, str) or not name:  # a null or numeric name would be listed as "None" or "0"
            raise UsageError(f"{p}: a kernel event at ts {ts!r} has the name {name!r}, not a kernel's name")
        if finite(ts) is None:
            raise UsageError(f"{p}: kernel event {name!r} has a start time (ts) {ts!r} that is not a number")
        if finite(dur) is None:
            raise UsageError(f"{p}: kernel event {name!r} has a duration {dur!r} that is not a number")
        if dur < 0:
            raise UsageError(f"{p}: kernel event {name!r} has a negative duration {dur!r}")
    durations: dict[str, list[float]] = {}
    for ev in sorted(kernels, key=lambda e: e.get("ts", 0)):
        durations.setdefault(str(ev.get("name", "?")), []).append(float(ev["dur"]) * 1e3)  # Chrome traces count us
    return KernelTable("torch.profiler", str(p), _rows_from_durations(durations))


def read_any(path: Path | str) -> KernelTable:
    """By file type: .csv (kern_sum), .sqlite/.db (nsys export), .json (torch.profiler Chrome trace)."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{p} does not exist")
    suffix = p.suffix.lower()
    if suffix == ".csv":
        return read_kern_sum_csv(p)
    if suffix in (".sqlite", ".db", ".sqlite3"):
        return read_kernels_sqlite(p)
    if suffix == ".json":
        return read_chrome_trace(p)
    if suffix == ".nsys-rep":
        raise UsageError(f"{p}: a raw Nsight Systems report; export it first",
                         hint=f"nsys export --type sqlite -o {p.with_suffix('.sqlite')} {p}")
    raise UsageError(f"{p}: unknown export type {suffix or '(none)'}; expected .csv, .sqlite or .json")
