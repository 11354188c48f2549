"""The audit engine: what the compiled kernels of each variant contain (SASS) and what they do on the chip
(Nsight Compute counters), recorded as one session per shape.

Per variant, in its own process (softbench.audit.driver), under `ncu` when it is wanted and found:
1. run: import the variant's private FA4 tree, compile the forward for the shape, run 1 + warmup + calls
   forwards;
2. cubin: CuTe DSL writes the cubin it compiled into `cubin/<variant>/` (CUTE_DSL_KEEP=cubin with
   CUTE_DSL_DUMP_DIR), and the driver copies `__cubin__` from FA4's compile cache beside it;
3. sass: `cuobjdump --dump-sass` and `--dump-resource-usage` on each cubin (nvdisasm when cuobjdump is
   missing); the attention kernel is the largest function matching the kernel regex; static counts by
   opcode family, registers, spills, dependency depth (softbench.audit.disassembly, softbench.audit.sass);
4. ncu: one launch of the kernel after 1 + warmup launches (`--clock-control none`), exported to
   `ncu/<variant>.ncu-rep` by softbench's own ncu command line (`--collector ncu`) or by nsight-python's
   (`--collector nsight-python`, softbench.audit.nsight_driver); the report is read through NVIDIA's
   ncu_report (softbench.audit.readers: the ncu-report package, else the Nsight Compute install's module, else
   ncu's CSV), reduced to named quantities (softbench.audit.ncu), and read again by every other reader found,
   ncu's CSV of the same report included (`ncu/<variant>.csv`): the session records which reader gave the
   numbers and whether the others agree.
Each step records its own error in the session and the next step still runs: no ncu, no counter permission
or no cuobjdump leave the other parts standing.

With a target architecture (`arch`, e.g. sm_100a: softbench.audit.cross) step 1 compiles for that GPU on fake
tensors and runs nothing, so there is no step 4; the session records the target (arch, compiled_only,
target_sms) and summary.json a nominal per-score issue budget for it (softbench.audit.budget).

Why this way of getting the cubin: CuTe DSL's own keep switch writes the cubin from the same compile that
runs, made by its embedded ptxas. FA4's `cute_dsl_ptxas` hook (CUTE_DSL_PTXAS_PATH, with
CUTE_DSL_KEEP_CUBIN) compiles with the system ptxas instead, a different compiler than the one timed
elsewhere, so the audit removes CUTE_DSL_PTXAS_PATH from its processes and records that it did. FA4's
persistent compile cache holds host objects from `export_to_c` whose device-code layout is undocumented, and a
cache hit skips the compile, so the audit turns that cache off in its processes
(FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=0, CUTE_DSL_DISABLE_FILE_CACHING=1)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from softbench.core.envinfo import collect_env
from softbench.core.errors import MeasurementError, UsageError
from softbench.core.options import refuse_repeats
from softbench.core.runoptions import RunOptions
from softbench.audit import collectors, cross, readers
from softbench.audit import ncu as ncu_mod
from softbench.audit.disassembly import sass_step
from softbench.audit import source_stalls
from softbench.audit.profile import (CounterSetup, counter_setup, export_source_stalls, profile_ncu, profile_nsight,
                                     read_counters)
from softbench.audit.summary import summarize_audit
from softbench.audit.tools import Tools, locate_tools, read_result, run_tool
from softbench.core.session import Session
from softbench.core.shapes import Shape
from softbench.core.utc import utc_iso
from softbench.runtime.session_runner import describe_failure

# FA4's forward kernels are CuTe DSL kernels named after their class (FlashAttentionForwardSm80/90/100/120);
# the combine kernel of split-KV (FlashAttentionForwardCombine) does not match.
DEFAULT_KERNEL_REGEX = {"fa4": "FlashAttentionForwardSm",
                        # softbench's Triton-language (_attn_fwd) and Gluon (_attn_fwd_ws) forwards
                        "triton": "_attn_fwd"}
VARIANTS_FILE = "variants.jsonl"
NCU_WITH_TARGET = ("--ncu cannot be used with --arch {arch}: the kernels are compiled for a GPU that is not here "
                   "and never run, so Nsight Compute has no launch to profile")
# Exact reference kernels profiled beside the variants (--reference): how ncu finds each one's launch. FA3's forward
# is a CUTLASS kernel, `cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<...>>>`: its
# function name is device_kernel (which FA3's split-KV combine kernel shares), so ncu matches the demangled name;
# a report reader may name the launch either way. Its cubin sits inside FA3's library: no SASS step.
REFERENCE_KERNELS = {"fa3": {"kernel_regex": "FlashAttnFwdSm90", "name_base": "demangled",
                             "report_regex": "FlashAttnFwdSm90|device_kernel"}}


@dataclass(frozen=True)
class AuditEntry:
    """One row of an audit: a variant of the audited backend, or an exact reference kernel (ref-<name>)."""

    label: str
    backend: str
    variant: str
    kernel_regex: str  # ncu's --kernel-name and the SASS step's pick
    options: dict
    name_base: str = "function"  # what ncu matches kernel_regex against (ncu.profile_command)
    report_regex: str | None = None  # the profiled launch's name in the report, where it reads otherwise
    sass: bool = True  # False: the cubin is not the audit's to disassemble

    @property
    def launch_regex(self) -> str:
        return self.report_regex or self.kernel_regex


@dataclass(frozen=True)
class AuditOptions(RunOptions):
    shapes: tuple[Shape, ...]
    backend: str = "fa4"
    variants: tuple[str, ...] = ("A0", "A1", "noexp")
    use_ncu: bool = True
    ncu_path: str | None = None
    cuobjdump_path: str | None = None
    tool_dirs: tuple[str, ...] | None = None  # None: PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, Nsight Compute
    kernel_regex: str = DEFAULT_KERNEL_REGEX["fa4"]
    kernel_regex_given: bool = False  # --kernel-regex named: no fallback to the largest function where none matches
    warmup: int = 3
    calls: int = 2
    seed: int = 0
    timeout_s: float = 600.0
    driver_module: str = "softbench.audit.driver"
    collector: str = "ncu"  # collectors.COLLECTORS
    counter_reader: str = "auto"  # readers.CHOICES
    arch: str = cross.NATIVE  # cross.ARCH_CHOICES: native, or a GPU to compile for and not run on
    references: tuple[str, ...] = ()  # REFERENCE_KERNELS profiled beside the variants (native runs only)
    source_stalls: bool = False  # ncu's per-instruction stall samples too (softbench.audit.source_stalls)

    def __post_init__(self):
        if self.target is not None and self.use_ncu:
            raise UsageError(NCU_WITH_TARGET.format(arch=self.arch))
        unknown = [r for r in self.references if r not in REFERENCE_KERNELS]
        if unknown:
            raise UsageError(f"the audit profiles reference kernels {', '.join(REFERENCE_KERNELS)}, not "
                             f"{', '.join(unknown)}")
        if self.references and self.target is not None:
            raise UsageError(f"--reference runs a kernel, and --arch {self.arch} runs nothing")
        if self.references and not self.use_ncu:
            raise UsageError("--reference profiles the reference kernels' counters (their SASS is not the "
                             "audit's to read), and --no-ncu reads none")
        if self.source_stalls and (self.target is not None or not self.use_ncu or self.collector != "ncu"):
            raise UsageError("--source-stalls samples the launch under softbench's own ncu command line: it needs a "
                             "native run with ncu, not --arch sm_..., --no-ncu or --collector nsight-python")
        if self.collector not in collectors.COLLECTORS:
            raise UsageError(f"unknown collector {self.collector!r}; one of {', '.join(collectors.COLLECTORS)}")
        if self.counter_reader not in readers.CHOICES:
            raise UsageError(f"unknown counter reader {self.counter_reader!r}; one of {', '.join(readers.CHOICES)}")
        if not self.variants:
            raise UsageError("no variants to audit")
        refuse_repeats(tuple(self.variants), "--variants", "A0,A1,noexp")
        if self.warmup < 0 or self.calls < 1:
            raise UsageError("--warmup must be >= 0 and --calls >= 1 (ncu profiles the launch after the warm-up)")

    @property
    def target(self) -> cross.Target | None:
        return cross.target_for(self.arch)

    @property
    def ncu_sections(self) -> tuple[str, ...]:
        """The ncu sections collected beside the metrics: the per-instruction stall samples with --source-stalls."""
        return (source_stalls.SECTION, ) if self.source_stalls else ()

    @property
    def launch_skip(self) -> int:
        return 1 + self.warmup  # the compiling forward, then the warm-up forwards

    def entries(self) -> list[AuditEntry]:
        """The variants, then the reference kernels, in the order they are audited."""
        rows = [AuditEntry(v, self.backend, v, self.kernel_regex, dict(self.backend_options)) for v in self.variants]
        return rows + [AuditEntry(f"ref-{r}", f"ref-{r}", "A0", options={}, sass=False, **REFERENCE_KERNELS[r])
                       for r in self.references]


class Progress:
    """What the engine tells the outside world; the CLI passes a rich-backed implementation."""

    def start(self, total_windows: int) -> None: ...
    def message(self, text: str) -> None: ...
    def window(self, label: str, record: dict) -> None: ...


# --- the run --------------------------------------------------------------------------------------------

def driver_env(dump_dir: Path, base: dict | None = None, target: cross.Target | None = None) -> tuple[dict, dict]:
    """Environment of an audit process, and the variables removed from it (recorded in the session). A target's
    variables (softbench.audit.cross) are set here: FA4 and CuTe DSL read them at import."""
    env = dict(os.environ if base is None else base)
    # TRITON_INTERPRET: a compile for sm_90a needs Triton's compiler, which the interpreter replaces
    dropped = ("CUTE_DSL_PTXAS_PATH",) + (("TRITON_INTERPRET",) if target and cross.TARGET_BACKENDS.get(
        target.arch) == "triton" else ())
    removed = {k: env.pop(k) for k in dropped if k in env}
    keep = {t.strip() for t in env.get("CUTE_DSL_KEEP", "").split(",") if t.strip()} | {"cubin"}
    env.update({
        "CUTE_DSL_KEEP": ",".join(sorted(keep)),
        "CUTE_DSL_KEEP_CUBIN": "1",  # the switch CuTe DSL releases before CUTE_DSL_KEEP read
        "CUTE_DSL_DUMP_DIR": str(dump_dir),
        "CUTE_DSL_DISABLE_FILE_CACHING": "1",
        "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED": "0",
        **(target.env() if target else {}),
    })
    return env, removed


def run_audit(opts: AuditOptions, progress: Progress | None = None,
              render_markdown: Callable[[dict, str], str] | None = None) -> list[Session]:
    progress = progress or Progress()
    if not opts.shapes:
        raise UsageError("no shapes to audit")
    tools = locate_tools(opts)
    versions = tools.versions()
    setup = counter_setup(opts, tools, versions["ncu"]["version"])
    progress.start(len(opts.shapes) * len(opts.entries()))
    env_record = {**collect_env(gpu=opts.backend != "sim"), "tools": versions, "collector": setup.collector,
                  "counter_readers_found": [r.record() for r in setup.found], **cross.target_record(opts.arch)}
    return [_run_shape(opts, shape, tools, setup, env_record, progress, render_markdown) for shape in opts.shapes]


def _run_shape(opts: AuditOptions, shape: Shape, tools: Tools, setup: CounterSetup, env_record: dict,
               progress: Progress, render_markdown) -> Session:
    # a cross-compile's target in the name too: its session sits beside the native ones of the same shape
    target = f"-{opts.arch}" if opts.target else ""
    session = Session.create(opts.out_dir, "audit", f"{shape.tag()}-{opts.backend}{target}")
    _, removed = driver_env(session.path)
    session.write_json("env.json", {**env_record, "audit_env_removed": removed})
    session.write_yaml("protocol.yaml", {
        "command": "audit", "command_line": opts.command_line, "backend": opts.backend,
        "backend_options": opts.backend_options, "variants": list(opts.variants),
        "references": list(opts.references), "shape": shape.to_dict(),
        "kernel_regex": opts.kernel_regex, "warmup": opts.warmup, "calls": opts.calls, "seed": opts.seed,
        "launch_skip": opts.launch_skip, "ncu": opts.use_ncu, "ncu_metrics": list(ncu_mod.ALL_METRICS),
        "ncu_sections": list(opts.ncu_sections),
        "collector": opts.collector if opts.use_ncu else None,
        "counter_reader": opts.counter_reader if opts.use_ncu else None,
        "counter_readers": [r.name for r in setup.readers], **cross.target_record(opts.arch), "started_utc": utc_iso(),
    })
    records: dict[str, dict] = {}
    try:
        for entry in opts.entries():
            v = entry.label
            progress.message(f"{shape.tag()}: {v} (compile for {opts.arch}, SASS; nothing runs)" if opts.target else
                             f"{shape.tag()}: {v} (compile, run{', ncu' if opts.use_ncu else ''}"
                             f"{', SASS' if entry.sass else ''})")
            rec = _audit_variant(session, opts, shape, entry, tools, setup, progress)
            records[v] = rec
            session.append(VARIANTS_FILE, {k: val for k, val in rec.items() if k != "functions"})
            progress.window(v, rec)
    except BaseException as exc:
        _finish(session, opts, shape, records, tools, render_markdown, complete=False, reason=describe_failure(exc))
        raise
    failed = unmeasured(opts, records)
    _finish(session, opts, shape, records, tools, render_markdown, complete=not failed,
            reason=f"nothing was measured of {', '.join(failed)} (see summary.md)" if failed else None)
    return session


def unmeasured(opts: AuditOptions, records: dict) -> list[str]:
    """The variants of which the audit measured nothing: the kernel neither compiled nor ran (no cubin), or, for a
    cross-compile, whose SASS, the only thing it measures, could not be read. A missing ncu or cuobjdump on a
    native run leaves the other step standing, as documented, and is not counted here."""
    return [v for v, r in records.items()
            if "run" in r.get("errors", {}) or (opts.target is not None and "sass" in r.get("errors", {}))]


def raise_for_failures(sessions: list[Session]) -> None:
    """After the tables are printed: an audit that measured nothing of some variant ends with an error exit, its
    session kept and marked partial."""
    for s in sessions:
        status = s.status()
        if not status.get("complete"):
            raise MeasurementError(f"{s.path.name}: {status.get('reason') or 'incomplete'}",
                                   hint=f"the errors are in {s.path / 'summary.md'} and {s.path / 'driver'}")


def _finish(session: Session, opts: AuditOptions, shape: Shape, records: dict, tools: Tools, render_markdown,
            complete: bool, reason: str | None = None) -> None:
    session.write_json("counts.json", {v: {k: r.get(k) for k in ("kernel", "kernel_choice", "families",
                                                                  "opcodes", "resources", "functions",
                                                                  "dependency_depth", "cubins", "triton")}
                                       for v, r in records.items()})
    summary = summarize_audit(records, opts, shape, tools)
    summary.update(complete=complete, finished_utc=utc_iso())
    if reason:
        summary["incomplete_reason"] = reason
    session.write_json("summary.json", summary)
    if render_markdown is not None:
        session.write_text("summary.md", render_markdown(summary, session.path.name))
    session.set_status(complete=complete, state="complete" if complete else "partial", reason=reason)


def _audit_variant(session: Session, opts: AuditOptions, shape: Shape, entry: AuditEntry, tools: Tools,
                   setup: CounterSetup, progress: Progress) -> dict:
    variant = entry.label
    rec: dict = {"variant": variant, "errors": {}, "utc": utc_iso()}
    if entry.backend != opts.backend:
        rec["reference"] = {"backend": entry.backend, "kernel_regex": entry.kernel_regex, "name_base": entry.name_base}
    dump = session.path / "cubin" / variant
    drv = session.path / "driver"
    for d in (dump, drv):
        d.mkdir(parents=True, exist_ok=True)
    request = {"backend": entry.backend, "variant": entry.variant, "shape": shape.to_dict(), "seed": opts.seed,
               "warmup": opts.warmup, "calls": opts.calls, "options": entry.options,
               "target": opts.target.to_dict() if opts.target else None}
    req_path = drv / f"{variant}-request.json"
    req_path.write_text(json.dumps(request, indent=2))
    env, _ = driver_env(dump, target=opts.target)
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
            ncu_report, nsight_frame = profile_nsight(session, opts, variant, tools.ncu, request, env, rec)
        else:
            progress.message(f"{shape.tag()}: {variant} under ncu")
            ncu_report = profile_ncu(session, opts, entry, tools.ncu, target, env, rec)
    result = read_result(result_path)
    if not result.get("ok"):
        # no run under ncu, or it failed there: run the variant on its own for the compile and the cubin
        progress.message(f"{shape.tag()}: {variant} (compile{'' if opts.target else ' and run'})")
        result_path.unlink(missing_ok=True)
        code, text = run_tool(target, env, opts.timeout_s, log=drv / f"{variant}.log")
        result = read_result(result_path)
        if not result.get("ok"):
            rec["errors"]["run"] = (result.get("error") or text or f"the driver exited with code {code}") + \
                (f" (hint: {result['hint']})" if result.get("hint") else "") + f"; log: driver/{variant}.log"
    rec["run"] = {k: result.get(k) for k in ("ok", "load_s", "compile_s", "forwards", "device", "pid",
                                             "compiled_only", "target_arch", "target_sms", "hardware_info_stand_in")}
    rec["patch"] = (result.get("load") or {}).get("patch", {}).get("patch") if result.get("ok") else None
    if result.get("triton"):  # --backend triton: the configuration compiled and its key loop's instruction mix
        rec["triton"] = result["triton"]

    if entry.sass:
        try:
            sass_step(session, opts, variant, dump, tools, rec)
        except MeasurementError as e:
            rec["errors"]["sass"] = str(e)
    if ncu_report is not None:
        try:
            read_counters(session, opts, entry, setup, ncu_report, rec, nsight_frame)
        except MeasurementError as e:
            rec["errors"].setdefault("ncu", str(e))
        if opts.source_stalls:
            export_source_stalls(session, opts, variant, tools.ncu, ncu_report, rec)
    return rec

