"""Nsight Compute as data: the metrics softbench asks for, the command lines, the reduction of one launch to
named quantities, and a parser for `ncu --csv` output. Pure functions; softbench.audit.profile runs the tool.

The counters are read from the binary report through NVIDIA's own reader (softbench.audit.readers); this
parser is the fallback for a machine with neither the ncu-report package nor an Nsight Compute install that
ships ncu_report, and the cross-check of every audit (the CSV of the same report, at the precision it prints).

CSV layouts read (ncu 2023-2025):
- raw page (`ncu --import R --csv --page raw`): one header row (`"ID","Process ID",...,"Kernel Name",...,
  <metric names>`), then a units row (identity columns empty, metric columns hold units such as `nsecond`,
  `%`, `register/thread`), then one row per profiled kernel launch.
- details page (`--page details`, the default): long format, one row per metric, with the columns
  `Metric Name`, `Metric Unit`, `Metric Value`.
Values may be quoted and carry thousands separators (`"130,123,456"`); lines that ncu itself prints
(`==PROF==`, `==WARNING==`, `==ERROR==`) may precede the table when the log and the CSV share a stream."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field

from softbench.core.errors import MeasurementError

# The warp stall reasons Nsight Compute reports on sm_90 (smsp__average_warps_issue_stalled_<reason>_...): what a
# warp that could not issue was waiting for. "selected" is the issuing warp itself.
STALL_REASONS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle",
                 "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction",
                 "not_selected", "selected", "short_scoreboard", "sleeping", "tex_throttle", "wait")

# The audit's quantities: name -> metric names to try, best first. The first of them present in the CSV wins.
QUANTITIES: dict[str, tuple[str, ...]] = {
    "duration_us": ("gpu__time_duration.sum",),
    "mufu_pipe_pct": ("sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",),
    "fma_pipe_pct": ("sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",),
    "alu_pipe_pct": ("sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active",),
    "fma_cycles_pct": ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",),
    "alu_cycles_pct": ("sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",),
    "issue_active_pct": ("sm__issue_active.avg.pct_of_peak_sustained_active",
                         "smsp__issue_active.avg.pct_of_peak_sustained_active"),
    "instructions": ("smsp__inst_executed.sum",),
    "xu_instructions": ("sm__inst_executed_pipe_xu.sum",),
    "fma_instructions": ("sm__inst_executed_pipe_fma.sum",),
    "alu_instructions": ("sm__inst_executed_pipe_alu.sum",),
    "registers_per_thread": ("launch__registers_per_thread",),
    "achieved_occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "theoretical_occupancy_pct": ("sm__maximum_warps_per_active_cycle_pct",),
    "local_load_bytes": ("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",),
    "local_store_bytes": ("l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",),
    "stack_bytes": ("launch__stack_size",),
    "sm_clock_mhz": ("sm__cycles_elapsed.avg.per_second",),
    # where the operands come from: the share of L2 sector lookups that hit, and what was read from DRAM (which
    # program order keeps a head's keys resident while the programs that share them run)
    "l2_hit_rate_pct": ("lts__t_sector_hit_rate.pct",),
    "dram_read_bytes": ("dram__bytes_read.sum",),
    # how evenly the SMs were kept busy: a schedule that fixes each SM's share of the work in advance (a persistent
    # grid) ends when its slowest SM does, where the hardware's dispatch of one program per block evens it out
    "sm_active_cycles_mean": ("sm__cycles_active.avg",),
    "sm_active_cycles_max": ("sm__cycles_active.max",),
    # how busy the tensor core was: the share of the SMs' active cycles in which the warpgroup MMA (wgmma) pipe
    # worked, and the wgmma instructions issued. The generic tensor-pipe counter stands in where an ncu has no
    # gmma one; on sm_90 both count the same work for these kernels, which issue no other tensor instruction.
    "tensor_active_pct": ("sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
                          "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"),
    "tensor_instructions": ("sm__inst_executed_pipe_tensor_op_gmma.sum",),
    # where the warps wait: Nsight Compute's warp-state breakdown (its WarpStateStats section), as warps stalled
    # for each reason per issued instruction, averaged over the SM sub-partitions
    **{f"stall_{reason}": (f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio",)
       for reason in STALL_REASONS},
}

# Metric names that appear in Nsight Compute's own sm_90 section files and scripts written against them;
# a run asks for these first. The rest are asked for too, and dropped (with a note) if ncu refuses them.
CORE_METRICS: tuple[str, ...] = (
    "gpu__time_duration.sum",
    "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "smsp__inst_executed.sum",
    "launch__registers_per_thread",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
)
ALL_METRICS: tuple[str, ...] = CORE_METRICS + tuple(
    m for names in QUANTITIES.values() for m in names if m not in CORE_METRICS)

# unit conversions to the unit in the quantity's name
_TIME_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
            "second": 1e6, "s": 1e6}
_FREQ_MHZ = {"cycle/second": 1e-6, "hz": 1e-6, "cycle/usecond": 1.0, "mhz": 1.0, "cycle/nsecond": 1e3,
             "ghz": 1e3, "cycle/msecond": 1e-3, "khz": 1e-3}
_BYTES = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "kibyte": 1024.0, "mibyte": 1024.0 ** 2}

PERMISSION_HINT = ("let this user read GPU performance counters: run as root, or load the driver with "
                   "NVreg_RestrictProfilingToAdminUsers=0 (https://developer.nvidia.com/ERR_NVGPUCTRPERM); "
                   "or pass --no-ncu for the SASS audit alone")


def profile_command(ncu: str, kernel_regex: str, launch_skip: int, export: str, log_file: str,
                    metrics: tuple[str, ...], target: list[str], name_base: str = "function",
                    sections: tuple[str, ...] = ()) -> list[str]:
    """Profile one launch of the kernel matching `kernel_regex` after skipping `launch_skip` matching launches.
    `--clock-control none` keeps the clocks the GPU chooses (ncu would otherwise lock them to base). name_base:
    what the regex is matched against, the function's name ("function") or its whole demangled signature
    ("demangled": a CUTLASS kernel's function is `device_kernel`, its name is in the template argument).
    sections: ncu sections collected beside the metrics (SourceCounters: the per-instruction stall samples of
    softbench.audit.source_stalls)."""
    return [ncu, "--clock-control", "none", "--target-processes", "all",
            "--kernel-name-base", name_base, "--kernel-name", f"regex:{kernel_regex}",
            "--launch-skip", str(launch_skip), "--launch-count", "1",
            "--metrics", ",".join(metrics), *(a for name in sections for a in ("--section", name)),
            "--export", export, "--force-overwrite", "--log-file", log_file, *target]


def import_command(ncu: str, report: str) -> list[str]:
    return [ncu, "--import", report, "--csv", "--page", "raw", "--print-units", "base"]


# --- failures -------------------------------------------------------------------------------------------

def classify_failure(log: str, returncode: int | None = None) -> tuple[str, str | None]:
    """(reason, hint) for a failed or empty ncu run, from ncu's own log text."""
    if "ERR_NVGPUCTRPERM" in log:
        return ("ncu has no permission to read the GPU performance counters (ERR_NVGPUCTRPERM)", PERMISSION_HINT)
    bad = rejected_metrics(log, ALL_METRICS)
    if bad:
        return (f"ncu refused metric(s): {', '.join(bad)}", "they are dropped and the run is repeated")
    if re.search(r"No kernels were profiled", log, re.I):
        return ("ncu profiled no kernel: the kernel-name regex matched no launch, or the program ended first",
                "check --kernel-regex against the function names in counts.json")
    errors = [ln.strip() for ln in log.splitlines() if "==ERROR==" in ln]
    if errors:
        return ("; ".join(errors[:3]), None)
    return (f"ncu exited with code {returncode}" if returncode else "ncu produced no result", None)


def rejected_metrics(log: str, asked: tuple[str, ...]) -> list[str]:
    """Metric names from `asked` that ncu's error lines mention (unknown or unavailable metrics)."""
    lines = [ln for ln in log.splitlines() if "==ERROR==" in ln and "metric" in ln.lower()]
    return [m for m in asked if any(m in ln for ln in lines)]


# --- CSV ------------------------------------------------------------------------------------------------

_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d+)?$")


def to_number(text) -> float | None:
    """'130,123,456' -> 130123456.0; '40.31' -> 40.31; '', 'n/a', '(!) ...' -> None."""
    if text is None:
        return None
    if isinstance(text, (int, float)):
        return float(text)
    t = str(text).strip().strip('"').strip()
    if _THOUSANDS.match(t):
        t = t.replace(",", "")
    try:
        return float(t)
    except ValueError:
        return None


def _table_text(text: str) -> str:
    """The CSV table alone: from the header row (first line starting with "ID" or ID) to the end, without
    ncu's own log lines."""
    lines = text.splitlines()
    start = next((k for k, ln in enumerate(lines) if ln.lstrip().startswith(('"ID"', "ID,"))), None)
    if start is None:
        raise MeasurementError("no ncu CSV table found (no header row starting with \"ID\")")
    keep = [ln for ln in lines[start:] if ln.strip() and not ln.lstrip().startswith("==")]
    return "\n".join(keep) + "\n"


@dataclass
class KernelMetrics:
    """One profiled kernel launch: identity columns and metric name -> (value, unit); `printed` holds the
    CSV's cell text where the launch came from a CSV (the comparison reads its precision)."""

    kernel_name: str
    identity: dict
    metrics: dict[str, tuple[float | None, str]]
    printed: dict[str, str] = field(default_factory=dict)

    def raw(self, name: str) -> float | None:
        return self.metrics.get(name, (None, ""))[0]


def parse_csv(text: str) -> list[KernelMetrics]:
    """Every kernel launch in an `ncu --csv` export, raw (wide) or details (long) layout."""
    import pandas as pd  # heavy import, deferred

    df = pd.read_csv(io.StringIO(_table_text(text)), dtype=str, keep_default_na=False)
    if "Metric Name" in df.columns and "Metric Value" in df.columns:
        return _parse_long(df)
    return _parse_wide(df)


_IDENTITY = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
             "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value",
             "Kernel Time", "Function Name", "Demangled Name")


def _parse_wide(df) -> list[KernelMetrics]:
    metric_cols = [c for c in df.columns if c not in _IDENTITY]
    units = {c: "" for c in metric_cols}
    rows = list(df.to_dict("records"))
    if rows and not str(rows[0].get("ID", "")).strip() and not str(rows[0].get("Kernel Name", "")).strip():
        units = {c: str(rows[0][c]).strip() for c in metric_cols}
        rows = rows[1:]
    out = []
    for r in rows:
        ident = {k: r[k] for k in df.columns if k in _IDENTITY}
        out.append(KernelMetrics(kernel_name=str(r.get("Kernel Name", "")), identity=ident,
                                 metrics={c: (to_number(r[c]), units[c]) for c in metric_cols},
                                 printed={c: str(r[c]) for c in metric_cols}))
    return out


def _parse_long(df) -> list[KernelMetrics]:
    out: dict[str, KernelMetrics] = {}
    for r in df.to_dict("records"):
        key = str(r.get("ID", ""))
        km = out.get(key)
        if km is None:
            ident = {k: r[k] for k in df.columns if k in _IDENTITY and not k.startswith("Metric")
                     and k != "Section Name"}
            km = out[key] = KernelMetrics(kernel_name=str(r.get("Kernel Name", "")), identity=ident, metrics={})
        km.metrics[str(r["Metric Name"])] = (to_number(r["Metric Value"]), str(r.get("Metric Unit", "")).strip())
        km.printed[str(r["Metric Name"])] = str(r["Metric Value"])
    return list(out.values())


def pick_kernel(kernels: list[KernelMetrics], pattern: str) -> KernelMetrics:
    """The launch whose name matches `pattern`; of several, the longest one (the attention forward dominates)."""
    if not kernels:
        raise MeasurementError("the ncu CSV holds no kernel launch")
    rx = re.compile(pattern)
    matching = [k for k in kernels if rx.search(k.kernel_name)]
    if not matching:
        names = ", ".join(sorted({k.kernel_name[:80] for k in kernels}))
        raise MeasurementError(f"no profiled kernel matches /{pattern}/ (profiled: {names})")
    return max(matching, key=lambda k: k.raw("gpu__time_duration.sum") or 0.0)


def _convert(quantity: str, value: float, unit: str) -> tuple[float | None, str | None]:
    """Value in the unit the quantity's name promises, or (None, reason) for a unit softbench cannot read."""
    u = unit.strip().lower()
    if quantity.endswith("_us"):
        f = _TIME_US.get(u)
    elif quantity.endswith("_mhz"):
        f = _FREQ_MHZ.get(u)
    elif quantity.endswith("_bytes"):
        f = _BYTES.get(u)
    elif quantity.endswith("_pct"):
        f = 1.0 if u in ("%", "") else None
    else:  # counts: instructions, registers, ...
        f = 1.0
    if f is None:
        return None, f"{quantity}: unit {unit!r} is not one softbench converts"
    return value * f, None


def quantities(k: KernelMetrics) -> tuple[dict, list[str]]:
    """The audit's named quantities from one launch (None where no candidate metric is present), and notes."""
    out: dict = {}
    notes: list[str] = []
    for q, names in QUANTITIES.items():
        out[q] = None
        for name in names:
            if name in k.metrics and k.metrics[name][0] is not None:
                value, unit = k.metrics[name]
                converted, why = _convert(q, value, unit)
                if why:
                    notes.append(why)
                    continue
                out[q] = converted
                break
    mean, most = out["sm_active_cycles_mean"], out["sm_active_cycles_max"]
    out["sm_active_max_over_mean"] = most / mean if mean and most is not None else None
    # the time the mean SM's tensor pipe worked: kernels that issue the same matrix products need the same, so
    # duration_us / tensor_busy_us is how far each one stands from running its tensor core without a gap
    busy, clock = out["tensor_active_pct"], out["sm_clock_mhz"]
    out["tensor_busy_us"] = (busy / 100.0 * mean / clock if busy is not None and mean is not None and clock
                             else None)
    out["kernel_name"] = k.kernel_name
    for key in ("Block Size", "Grid Size", "ID"):
        if key in k.identity:
            out[key.lower().replace(" ", "_")] = k.identity[key]
    return out, notes

