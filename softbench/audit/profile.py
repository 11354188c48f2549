"""The audit's counters: how they are collected (softbench's own ncu command line, or nsight-python) and how the
report is read (every reader found, the primary's quantities kept, the others compared with it)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from softbench.audit import collectors, counters, readers
from softbench.audit import ncu as ncu_mod
from softbench.audit.tools import Tools, read_result, run_tool
from softbench.core.errors import MeasurementError
from softbench.core.session import Session

if TYPE_CHECKING:
    from softbench.audit.engine import AuditEntry, AuditOptions


@dataclass(frozen=True)
class CounterSetup:
    """How counters are collected and read in this audit, settled before the first session is made."""

    collector: dict  # collectors.check_collector's record
    readers: tuple[readers.Reader, ...] = ()  # the primary first (readers.choose)
    found: tuple[readers.Reader, ...] = ()


def counter_setup(opts: AuditOptions, tools: Tools, ncu_version: str | None) -> CounterSetup:
    """Refuses, before anything runs, a collector or a named reader this machine cannot provide."""
    if not opts.use_ncu:
        return CounterSetup(collector={"name": None})
    collector = collectors.check_collector(opts.collector, tools.ncu, ncu_version)
    found = tuple(readers.available(tools.ncu, ncu_version))
    chain = tuple(readers.choose(opts.counter_reader, list(found))) if tools.ncu else ()
    return CounterSetup(collector=collector, readers=chain, found=found)


def profile_ncu(session: Session, opts: AuditOptions, entry: AuditEntry, ncu: str, target: list[str], env: dict,
                rec: dict) -> Path | None:
    """Run the driver under ncu; retry without metrics ncu refuses. The report path, or None (error recorded)."""
    variant = entry.label
    out = session.path / "ncu"
    out.mkdir(exist_ok=True)
    stem = out / variant  # ncu appends .ncu-rep to an export name without it
    metrics = ncu_mod.ALL_METRICS
    notes: list[str] = []
    for attempt in range(3):
        log = out / f"{variant}-attempt{attempt + 1}.log"
        argv = ncu_mod.profile_command(ncu, entry.kernel_regex, opts.launch_skip, str(stem), str(log), metrics,
                                       target, name_base=entry.name_base, sections=opts.ncu_sections)
        Path(target[-1]).unlink(missing_ok=True)
        for old in _report_candidates(stem):
            old.unlink(missing_ok=True)
        code, text = run_tool(argv, env, opts.timeout_s, log=session.path / "driver" / f"{variant}.log")
        log_text = log.read_text(errors="replace") if log.exists() else text
        report = next((p for p in _report_candidates(stem) if p.is_file()), None)
        if report is not None and code == 0:
            break
        bad = ncu_mod.rejected_metrics(log_text, metrics)
        if bad:
            notes.append(f"ncu refused {', '.join(bad)}: asked again without them")
            metrics = tuple(m for m in metrics if m not in bad)
            continue
        if attempt == 0 and "metric" in log_text.lower() and "ERR_NVGPUCTRPERM" not in log_text \
                and metrics != ncu_mod.CORE_METRICS:
            notes.append("ncu failed on a metric it did not name: asked again for the core metrics only")
            metrics = ncu_mod.CORE_METRICS
            continue
        if report is not None:  # ncu complained but wrote a report: read what it has
            notes.append(f"ncu exited with code {code}; its report is read anyway")
            break
        reason, hint = ncu_mod.classify_failure(log_text, code)
        rec["errors"]["ncu"] = reason + (f" (hint: {hint})" if hint else "")
        rec["ncu_notes"] = notes
        return None
    else:
        rec["errors"]["ncu"] = "ncu kept refusing metrics: " + "; ".join(notes)
        rec["ncu_notes"] = notes
        return None
    rec["ncu_notes"] = notes
    rec["ncu_metrics_asked"] = list(metrics)
    return report


def export_source_stalls(session: Session, opts: AuditOptions, variant: str, ncu: str, report: Path,
                         rec: dict) -> None:
    """--source-stalls: the report's SASS page with its per-instruction stall samples, kept gzipped beside the
    report (ncu/<variant>-sass.csv.gz), and its summary in rec["source_stalls"]; what fails is recorded in
    rec["errors"]["source_stalls"], and the rest of the audit goes on."""
    from softbench.audit import source_stalls

    code, text = run_tool(source_stalls.export_command(ncu, str(report)), None, opts.timeout_s)
    if code != 0:
        rec["errors"]["source_stalls"] = f"ncu --import --page source exited with code {code}: {text.strip()[-300:]}"
        return
    try:
        df = source_stalls.read(text)
    except ValueError as e:
        rec["errors"]["source_stalls"] = str(e)
        return
    page = source_stalls.write_page(text, session.path / "ncu" / f"{variant}-sass.csv.gz")
    rec["source_stalls"] = {"page": page.relative_to(session.path).as_posix(), **source_stalls.summarize(df)}


def _report_candidates(stem: Path) -> tuple[Path, ...]:
    return (stem.with_name(stem.name + ".ncu-rep"), stem)


def profile_nsight(session: Session, opts: AuditOptions, variant: str, ncu: str, request: dict, env: dict,
                    rec: dict) -> tuple[Path | None, Path | None]:
    """Profile through nsight-python (softbench.audit.nsight_driver); the report and nsight-python's own
    DataFrame, moved into ncu/ under the names the ncu collector uses."""
    out = session.path / "ncu"
    out.mkdir(exist_ok=True)
    drv = session.path / "driver"
    req = {**request, "metrics": list(ncu_mod.ALL_METRICS), "output_prefix": str(out / f"{variant}-nsight-")}
    req_path, res_path = drv / f"{variant}-request.json", drv / f"{variant}-result.json"
    req_path.write_text(json.dumps(req, indent=2))
    res_path.unlink(missing_ok=True)
    # nsight-python starts `ncu` by name and runs this package's file as a script
    env = {**env, "PATH": os.pathsep.join([str(Path(ncu).parent), env.get("PATH", "")]),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2])] +
                                         [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])}
    argv = [sys.executable, "-m", "softbench.audit.nsight_driver", str(req_path), str(res_path)]
    code, text = run_tool(argv, env, opts.timeout_s, log=drv / f"{variant}.log")
    result = read_result(res_path)
    rec["nsight_python"] = {k: result.get(k) for k in ("nsight_python", "nsight_error")}
    if result.get("nsight_error"):
        rec.setdefault("ncu_notes", []).append(f"nsight-python: {result['nsight_error']}")
    report = Path(result["report"]) if result.get("report") else None
    if report is None or not report.is_file():
        rec["errors"]["ncu"] = ("nsight-python wrote no report: " + (result.get("error") or text or
                                f"exit code {code}") + f"; log: driver/{variant}.log")
        return None, None
    final = out / f"{variant}.ncu-rep"
    os.replace(report, final)
    frame = Path(result["nsight_frame"]) if result.get("nsight_frame") else None
    if frame is not None and frame.is_file():
        os.replace(frame, out / f"{variant}.nsight-python.csv")
        frame = out / f"{variant}.nsight-python.csv"
    rec["ncu_metrics_asked"] = list(ncu_mod.ALL_METRICS)
    return final, frame


def read_counters(session: Session, opts: AuditOptions, entry: AuditEntry, setup: CounterSetup, report: Path,
                  rec: dict, nsight_frame: Path | None = None) -> None:
    """Read the report with every reader of the setup. The primary (the first that reads it; the named one
    alone when --counter-reader names one) gives the quantities; each other reader's table, and
    nsight-python's DataFrame where it made one, is compared with the primary's on the metrics asked."""
    variant = entry.label
    readings: dict[str, readers.Reading] = {}
    failures: dict[str, str] = {}
    for reader in setup.readers:
        try:
            readings[reader.name] = readers.read(reader, report, session.path, variant)
        except MeasurementError as e:
            failures[reader.name] = str(e)
    if not setup.readers:
        raise MeasurementError("no counter reader: neither ncu-report, nor ncu_report in an Nsight Compute "
                               "install, nor ncu for its CSV", hint=f"pip install {readers.PACKAGE_PIN}")
    primary_name = setup.readers[0].name if opts.counter_reader != "auto" else next(
        (r.name for r in setup.readers if r.name in readings), None)
    rec["counter_reader_failures"] = failures
    if primary_name not in readings:
        raise MeasurementError("no reader could read the report: " + "; ".join(failures.values()))
    primary = readings[primary_name]
    try:
        kernel = ncu_mod.pick_kernel(primary.kernels, entry.launch_regex)
    except MeasurementError as e:
        logs = "".join(p.read_text(errors="replace") for p in sorted((session.path / "ncu").glob(f"{variant}-*.log")))
        reason, hint = ncu_mod.classify_failure(logs)
        raise MeasurementError(f"{e}; ncu says: {reason}" + (f" (hint: {hint})" if hint else "")) from None
    values, notes = ncu_mod.quantities(kernel)
    rec["ncu"] = values
    rec.setdefault("ncu_notes", []).extend(notes)
    rec["counter_reader"] = {**primary.reader.record(), "table": primary.artifact}
    asked = rec.get("ncu_metrics_asked") or list(ncu_mod.ALL_METRICS)
    checks = {name: {**counters.compare(primary.frame, r.frame, asked), "table": r.artifact}
              for name, r in readings.items() if name != primary_name}
    if nsight_frame is not None:
        launch = primary.frame[primary.frame["launch"] == int(kernel.identity.get("ID", 0))]
        import pandas as pd  # heavy import, deferred

        checks["nsight-python"] = {**counters.compare(launch, counters.frame_from_nsight(pd.read_csv(nsight_frame),
                                                                                          primary.frame), asked),
                                   "table": str(nsight_frame.relative_to(session.path))}
    rec["counter_check"] = checks
