"""The audit engine: what the compiled kernels of each variant contain (SASS) and what they do on the chip
(Nsight Compute counters), recorded as one session per shape.

Per variant, in its own process (softbench.audit.driver), under `ncu` when it is wanted and found:
1. run: import the variant's private FA4 tree, compile the forward for the shape, run 1 + warmup + calls
   forwards;
2. cubin: CuTe DSL writes the cubin it compiled into `cubin/<variant>/` (CUTE_DSL_KEEP=cubin with
   CUTE_DSL_DUMP_DIR), and the driver copies `__cubin__` from FA4's compile cache beside it;
3. sass: `cuobjdump --dump-sass` and `--dump-resource-usage` on each cubin (nvdisasm when cuobjdump is
   missing); the attention kernel is the largest function matching the kernel regex; static counts by
   opcode family, registers, spills, dependency depth (softbench.audit.sass);
4. ncu: one launch of the kernel after 1 + warmup launches (`--clock-control none`), exported to
   `ncu/<variant>.ncu-rep` by softbench's own ncu command line (`--collector ncu`) or by nsight-python's
   (`--collector nsight-python`, softbench.audit.nsight_driver); the report is read through NVIDIA's
   ncu_report (softbench.audit.readers: the ncu-report package, else the Nsight Compute install's module, else
   ncu's CSV), reduced to named quantities (softbench.audit.ncu), and read again by every other reader found,
   ncu's CSV of the same report included (`ncu/<variant>.csv`): the session records which reader gave the
   numbers and whether the others agree.
Each step records its own error in the session and the next step still runs: no ncu, no counter permission
or no cuobjdump leave the other parts standing.

Why this way of getting the cubin: CuTe DSL's own keep switch writes the cubin from the same compile that
runs, made by its embedded ptxas. FA4's `cute_dsl_ptxas` hook (CUTE_DSL_PTXAS_PATH, with
CUTE_DSL_KEEP_CUBIN) compiles with the system ptxas instead, a different compiler than the one timed
elsewhere, so the audit removes CUTE_DSL_PTXAS_PATH from its processes and records that it did. FA4's
persistent compile cache holds host objects from `export_to_c` whose device-code layout is undocumented, and a
cache hit skips the compile, so the audit turns that cache off in its processes
(FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=0, CUTE_DSL_DISABLE_FILE_CACHING=1)."""

from __future__ import annotations

import glob
import gzip
import hashlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from softbench.core.envinfo import collect_env
from softbench.core.errors import MeasurementError, UsageError
from softbench.audit import collectors, counters, readers
from softbench.audit import ncu as ncu_mod
from softbench.audit import sass as sass_mod
from softbench.core.session import Session, utc_iso
from softbench.core.shapes import Shape

# FA4's forward kernels are CuTe DSL kernels named after their class (FlashAttentionForwardSm80/90/100/120);
# the combine kernel of split-KV (FlashAttentionForwardCombine) does not match.
DEFAULT_KERNEL_REGEX = "FlashAttentionForwardSm"
VARIANTS_FILE = "variants.jsonl"
SASS_GZIP_ABOVE_BYTES = 1 << 20
CUDA_TOOL_DIRS = ("/usr/local/cuda/bin",)


@dataclass(frozen=True)
class AuditOptions:
    shapes: tuple[Shape, ...]
    backend: str = "fa4"
    variants: tuple[str, ...] = ("A0", "A1", "noexp")
    use_ncu: bool = True
    ncu_path: str | None = None
    cuobjdump_path: str | None = None
    tool_dirs: tuple[str, ...] | None = None  # None: PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, Nsight Compute
    kernel_regex: str = DEFAULT_KERNEL_REGEX
    warmup: int = 3
    calls: int = 2
    seed: int = 0
    timeout_s: float = 600.0
    out_dir: Path = Path("sessions")
    backend_options: dict = field(default_factory=dict)
    driver_module: str = "softbench.audit.driver"
    command_line: str = ""
    collector: str = "ncu"  # collectors.COLLECTORS
    counter_reader: str = "auto"  # readers.CHOICES

    def __post_init__(self):
        if self.collector not in collectors.COLLECTORS:
            raise UsageError(f"unknown collector {self.collector!r}; one of {', '.join(collectors.COLLECTORS)}")
        if self.counter_reader not in readers.CHOICES:
            raise UsageError(f"unknown counter reader {self.counter_reader!r}; one of {', '.join(readers.CHOICES)}")
        if not self.variants:
            raise UsageError("no variants to audit")
        if len(set(self.variants)) != len(self.variants):
            raise UsageError(f"a variant is named twice in {', '.join(self.variants)}")
        if self.warmup < 0 or self.calls < 1:
            raise UsageError("--warmup must be >= 0 and --calls >= 1 (ncu profiles the launch after the warm-up)")

    @property
    def launch_skip(self) -> int:
        return 1 + self.warmup  # the compiling forward, then the warm-up forwards


class Progress:
    """What the engine tells the outside world; the CLI passes a rich-backed implementation."""

    def start(self, total_windows: int) -> None: ...
    def message(self, text: str) -> None: ...
    def window(self, label: str, record: dict) -> None: ...


# --- tools ----------------------------------------------------------------------------------------------

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


def _run(argv: list[str], env: dict | None, timeout: float, log: Path | None = None) -> tuple[int, str]:
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
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.communicate()
        return -1, f"timed out after {timeout:.0f} s: {' '.join(argv[:3])} ..."
    finally:
        if sink:
            sink.close()
    if sink is not None:
        return p.returncode, ""
    return p.returncode, out if p.returncode == 0 else (out or "") + (err or "")


# --- the run --------------------------------------------------------------------------------------------

def driver_env(dump_dir: Path, base: dict | None = None) -> tuple[dict, dict]:
    """Environment of an audit process, and the variables removed from it (recorded in the session)."""
    env = dict(os.environ if base is None else base)
    removed = {k: env.pop(k) for k in ("CUTE_DSL_PTXAS_PATH",) if k in env}
    keep = {t.strip() for t in env.get("CUTE_DSL_KEEP", "").split(",") if t.strip()} | {"cubin"}
    env.update({
        "CUTE_DSL_KEEP": ",".join(sorted(keep)),
        "CUTE_DSL_KEEP_CUBIN": "1",  # the switch CuTe DSL releases before CUTE_DSL_KEEP read
        "CUTE_DSL_DUMP_DIR": str(dump_dir),
        "CUTE_DSL_DISABLE_FILE_CACHING": "1",
        "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED": "0",
    })
    return env, removed


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


def run_audit(opts: AuditOptions, progress: Progress | None = None,
              render_markdown: Callable[[dict, str], str] | None = None) -> list[Session]:
    progress = progress or Progress()
    if not opts.shapes:
        raise UsageError("no shapes to audit")
    tools = locate_tools(opts)
    versions = tools.versions()
    setup = counter_setup(opts, tools, versions["ncu"]["version"])
    progress.start(len(opts.shapes) * len(opts.variants))
    env_record = {**collect_env(gpu=opts.backend != "sim"), "tools": versions, "collector": setup.collector,
                  "counter_readers_found": [r.record() for r in setup.found]}
    return [_run_shape(opts, shape, tools, setup, env_record, progress, render_markdown) for shape in opts.shapes]


def _run_shape(opts: AuditOptions, shape: Shape, tools: Tools, setup: CounterSetup, env_record: dict,
               progress: Progress, render_markdown) -> Session:
    session = Session.create(opts.out_dir, "audit", f"{shape.tag()}-{opts.backend}")
    _, removed = driver_env(session.path)
    session.write_json("env.json", {**env_record, "audit_env_removed": removed})
    session.write_yaml("protocol.yaml", {
        "command": "audit", "command_line": opts.command_line, "backend": opts.backend,
        "backend_options": opts.backend_options, "variants": list(opts.variants), "shape": shape.to_dict(),
        "kernel_regex": opts.kernel_regex, "warmup": opts.warmup, "calls": opts.calls, "seed": opts.seed,
        "launch_skip": opts.launch_skip, "ncu": opts.use_ncu, "ncu_metrics": list(ncu_mod.ALL_METRICS),
        "collector": opts.collector if opts.use_ncu else None,
        "counter_reader": opts.counter_reader if opts.use_ncu else None,
        "counter_readers": [r.name for r in setup.readers], "started_utc": utc_iso(),
    })
    records: dict[str, dict] = {}
    try:
        for v in opts.variants:
            progress.message(f"{shape.tag()}: {v} (compile, run{', ncu' if opts.use_ncu else ''}, SASS)")
            rec = _audit_variant(session, opts, shape, v, tools, setup, progress)
            records[v] = rec
            session.append(VARIANTS_FILE, {k: val for k, val in rec.items() if k != "functions"})
            progress.window(v, rec)
    except BaseException as exc:
        reason = "interrupted by the user" if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}: {exc}"
        _finish(session, opts, shape, records, tools, render_markdown, complete=False, reason=reason)
        raise
    _finish(session, opts, shape, records, tools, render_markdown, complete=True)
    return session


def _finish(session: Session, opts: AuditOptions, shape: Shape, records: dict, tools: Tools, render_markdown,
            complete: bool, reason: str | None = None) -> None:
    session.write_json("counts.json", {v: {k: r.get(k) for k in ("kernel", "kernel_choice", "families",
                                                                  "opcodes", "resources", "functions",
                                                                  "dependency_depth", "cubins")}
                                       for v, r in records.items()})
    summary = summarize_audit(records, opts, shape, tools)
    summary.update(complete=complete, finished_utc=utc_iso())
    if reason:
        summary["incomplete_reason"] = reason
    session.write_json("summary.json", summary)
    if render_markdown is not None:
        session.write_text("summary.md", render_markdown(summary, session.path.name))
    session.set_status(complete=complete, state="complete" if complete else "partial", reason=reason)


def _audit_variant(session: Session, opts: AuditOptions, shape: Shape, variant: str, tools: Tools,
                   setup: CounterSetup, progress: Progress) -> dict:
    rec: dict = {"variant": variant, "errors": {}, "utc": utc_iso()}
    dump = session.path / "cubin" / variant
    drv = session.path / "driver"
    for d in (dump, drv):
        d.mkdir(parents=True, exist_ok=True)
    request = {"backend": opts.backend, "variant": variant, "shape": shape.to_dict(), "seed": opts.seed,
               "warmup": opts.warmup, "calls": opts.calls, "options": opts.backend_options}
    req_path = drv / f"{variant}-request.json"
    req_path.write_text(json.dumps(request, indent=2))
    env, _ = driver_env(dump)
    result_path = drv / f"{variant}-result.json"
    target = [sys.executable, "-m", opts.driver_module, str(req_path), str(result_path)]

    ncu_report: Path | None = None
    nsight_frame: Path | None = None
    if opts.use_ncu:
        if tools.ncu is None:
            rec["errors"]["ncu"] = (f"ncu was not found (looked in {', '.join(tools.looked) or 'nothing'}); "
                                    "put it on PATH or pass --ncu-path PATH, or --no-ncu for the SASS audit alone")
        elif opts.collector == "nsight-python":
            progress.message(f"{shape.tag()}: {variant} through nsight-python")
            ncu_report, nsight_frame = _profile_nsight(session, opts, variant, tools.ncu, request, env, rec)
        else:
            progress.message(f"{shape.tag()}: {variant} under ncu")
            ncu_report = _profile(session, opts, variant, tools.ncu, target, env, rec)
    result = _read_result(result_path)
    if not result.get("ok"):
        # no run under ncu, or it failed there: run the variant on its own for the compile and the cubin
        progress.message(f"{shape.tag()}: {variant} (compile and run)")
        result_path.unlink(missing_ok=True)
        code, text = _run(target, env, opts.timeout_s, log=drv / f"{variant}.log")
        result = _read_result(result_path)
        if not result.get("ok"):
            rec["errors"]["run"] = (result.get("error") or text or f"the driver exited with code {code}") + \
                (f" (hint: {result['hint']})" if result.get("hint") else "") + f"; log: driver/{variant}.log"
    rec["run"] = {k: result.get(k) for k in ("ok", "load_s", "compile_s", "forwards", "device", "pid")}
    rec["patch"] = (result.get("load") or {}).get("patch", {}).get("patch") if result.get("ok") else None

    try:
        _sass_step(session, opts, variant, dump, tools, rec)
    except MeasurementError as e:
        rec["errors"]["sass"] = str(e)
    if ncu_report is not None:
        try:
            _ncu_read(session, opts, variant, setup, ncu_report, rec, nsight_frame)
        except MeasurementError as e:
            rec["errors"].setdefault("ncu", str(e))
    return rec


def _read_result(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def _cubins(dump: Path) -> list[Path]:
    """Cubins in the dump folder, one per distinct content (the keep file and the harvested copy agree)."""
    seen: dict[str, Path] = {}
    for p in sorted(dump.glob("*.cubin")):
        seen.setdefault(hashlib.sha256(p.read_bytes()).hexdigest(), p)
    return list(seen.values())


# --- ncu ------------------------------------------------------------------------------------------------

def _profile(session: Session, opts: AuditOptions, variant: str, ncu: str, target: list[str], env: dict,
             rec: dict) -> Path | None:
    """Run the driver under ncu; retry without metrics ncu refuses. The report path, or None (error recorded)."""
    out = session.path / "ncu"
    out.mkdir(exist_ok=True)
    stem = out / variant  # ncu appends .ncu-rep to an export name without it
    metrics = ncu_mod.ALL_METRICS
    notes: list[str] = []
    for attempt in range(3):
        log = out / f"{variant}-attempt{attempt + 1}.log"
        argv = ncu_mod.profile_command(ncu, opts.kernel_regex, opts.launch_skip, str(stem), str(log), metrics,
                                       target)
        Path(target[-1]).unlink(missing_ok=True)
        for old in _report_candidates(stem):
            old.unlink(missing_ok=True)
        code, text = _run(argv, env, opts.timeout_s, log=session.path / "driver" / f"{variant}.log")
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


def _report_candidates(stem: Path) -> tuple[Path, ...]:
    return (stem.with_name(stem.name + ".ncu-rep"), stem)


def _profile_nsight(session: Session, opts: AuditOptions, variant: str, ncu: str, request: dict, env: dict,
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
    code, text = _run(argv, env, opts.timeout_s, log=drv / f"{variant}.log")
    result = _read_result(res_path)
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


def _ncu_read(session: Session, opts: AuditOptions, variant: str, setup: CounterSetup, report: Path, rec: dict,
              nsight_frame: Path | None = None) -> None:
    """Read the report with every reader of the setup. The primary (the first that reads it; the named one
    alone when --counter-reader names one) gives the quantities; each other reader's table, and
    nsight-python's DataFrame where it made one, is compared with the primary's on the metrics asked."""
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
        kernel = ncu_mod.pick_kernel(primary.kernels, opts.kernel_regex)
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


# --- SASS -----------------------------------------------------------------------------------------------

def _sass_step(session: Session, opts: AuditOptions, variant: str, dump: Path, tools: Tools, rec: dict) -> None:
    cubins = _cubins(dump)
    rec["cubins"] = [p.name for p in cubins]
    if not cubins:
        raise MeasurementError(f"no cubin in {dump}: the compile kept none (CUTE_DSL_KEEP=cubin had no effect, "
                               "or the variant did not compile)")
    if tools.cuobjdump is None and tools.nvdisasm is None:
        raise MeasurementError(f"neither cuobjdump nor nvdisasm was found (looked in {', '.join(tools.looked)})")
    functions: list[tuple[sass_mod.SassFunction, Path]] = []
    dumps: dict[Path, str] = {}
    resources: dict[str, dict] = {}
    for cubin in cubins:
        if tools.cuobjdump:
            code, text = _run([tools.cuobjdump, "--dump-sass", str(cubin)], None, 300)
        else:
            code, text = _run([tools.nvdisasm, str(cubin)], None, 300)
        if code != 0:
            raise MeasurementError(f"disassembling {cubin.name} failed: {text.strip()[:400]}")
        dumps[cubin] = text
        functions += [(f, cubin) for f in sass_mod.parse_sass(text)]
        if tools.cuobjdump:
            code, text = _run([tools.cuobjdump, "--dump-resource-usage", str(cubin)], None, 300)
            if code == 0:
                resources.update(sass_mod.parse_resource_usage(text))
            else:
                rec["errors"]["resources"] = f"cuobjdump --dump-resource-usage failed: {text.strip()[:300]}"
    fn, how = sass_mod.pick_kernel([f for f, _ in functions], opts.kernel_regex)
    rec["functions"] = [{"name": f.name, "instructions": len(f), "cubin": c.name} for f, c in functions]
    if fn is None:
        raise MeasurementError(f"no function found in the SASS of {', '.join(p.name for p in cubins)}")
    cubin = next(c for f, c in functions if f is fn)
    _write_sass(session, variant, dumps[cubin])
    rec.update(kernel=fn.name, kernel_choice=how, kernel_cubin=cubin.name,
               families=sass_mod.count_families(fn), opcodes=sass_mod.count_opcodes(fn),
               resources=resources.get(fn.name), dependency_depth=sass_mod.dependency_depth(fn))
    if fn.name not in resources and tools.cuobjdump:
        rec["errors"].setdefault("resources", f"no resource-usage line for {fn.name}")


def _write_sass(session: Session, variant: str, text: str) -> None:
    (session.path / "sass").mkdir(exist_ok=True)
    data = text.encode()
    if len(data) > SASS_GZIP_ABOVE_BYTES:
        tmp = session.path / "sass" / f".{variant}.sass.gz.tmp"
        with gzip.open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, session.path / "sass" / f"{variant}.sass.gz")
    else:
        session.write_text(f"sass/{variant}.sass", text)


# --- summary (pure) -------------------------------------------------------------------------------------

SPILLS_METHOD = ("static count of local-memory instructions (LDL + STL) in the attention kernel; "
                 "local_bytes is cuobjdump's LOCAL (bytes of local memory per thread)")


def summarize_audit(records: dict[str, dict], opts: AuditOptions, shape: Shape, tools: Tools | None = None) -> dict:
    """summary.json: per-variant blocks under dotted-path keys the predictions evaluator addresses
    (ncu.<v>.mufu_pipe_pct, registers.<v>, spills.<v>, sass.<v>.<family>, per_element.<v>, ...)."""
    fams = {v: r["families"] for v, r in records.items() if r.get("families")}
    ncu_vals = {v: r["ncu"] for v, r in records.items() if r.get("ncu")}
    pe = sass_mod.per_element_costs(fams)
    dyn = sass_mod.per_element_dynamic(ncu_vals)
    registers, reg_source, spills, local_bytes, stack_bytes = {}, {}, {}, {}, {}
    for v, r in records.items():
        res = r.get("resources") or {}
        if "REG" in res:
            registers[v], reg_source[v] = res["REG"], "cuobjdump"
        elif (r.get("ncu") or {}).get("registers_per_thread") is not None:
            registers[v], reg_source[v] = r["ncu"]["registers_per_thread"], "ncu"
        if r.get("families"):
            spills[v] = r["families"]["LDL"] + r["families"]["STL"]
        if "LOCAL" in res:
            local_bytes[v] = res["LOCAL"]
        if "STACK" in res:
            stack_bytes[v] = res["STACK"]
    evidence = [k for k, present in (("sass", fams), ("ncu", ncu_vals)) if present]
    return {
        "command": "audit", "backend": opts.backend, "shape": shape.to_dict(), "shape_tag": shape.tag(),
        "variants": list(records), "kernel_regex": opts.kernel_regex, "evidence": evidence,
        "kernel": {v: r.get("kernel") for v, r in records.items()},
        "sass": fams,
        "registers": registers, "registers_source": reg_source,
        "spills": spills, "spills_method": SPILLS_METHOD, "local_bytes": local_bytes, "stack_bytes": stack_bytes,
        "per_element": pe["per_element"], "per_element_method": pe["method"],
        "per_element_reference": pe.get("reference"), "per_element_elements_static": pe.get("elements_static"),
        "per_element_by_family": pe["by_family"], "per_element_notes": pe["notes"],
        "per_element_dynamic": dyn["per_element"], "per_element_dynamic_notes": dyn["notes"],
        "dependency_depth": {v: r["dependency_depth"] for v, r in records.items() if r.get("dependency_depth")},
        "ncu": ncu_vals,
        "ncu_notes": {v: r["ncu_notes"] for v, r in records.items() if r.get("ncu_notes")},
        "collector": opts.collector if opts.use_ncu else None,
        "counter_reader": {v: r["counter_reader"] for v, r in records.items() if r.get("counter_reader")},
        "counter_check": {v: {name: {k: c[k] for k in ("equal", "compared", "differences")}
                              for name, c in r["counter_check"].items()}
                          for v, r in records.items() if r.get("counter_check") is not None},
        "counter_reader_failures": {v: r["counter_reader_failures"] for v, r in records.items()
                                    if r.get("counter_reader_failures")},
        "errors": {v: r["errors"] for v, r in records.items() if r.get("errors")},
        "tools": {"ncu": tools.ncu, "cuobjdump": tools.cuobjdump, "nvdisasm": tools.nvdisasm} if tools else None,
    }
