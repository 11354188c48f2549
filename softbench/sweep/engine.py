"""A sweep of kernel variants against one baseline: the latency engine once per variant, one baseline process
kept alive for the whole sweep, one fresh process per variant. Each variant's comparison is an ordinary latency
session; a sweep session beside them lists every result, sorted by speed-up, and is rewritten after each
variant so an interrupted sweep keeps what it measured."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from softbench.core.envinfo import collect_env
from softbench.core.errors import MeasurementError, SoftbenchError, UsageError
from softbench.core.options import refuse_repeats
from softbench.latency import engine as latency_engine
from softbench.runtime.client import WorkerProcess
from softbench.runtime.session_runner import describe_failure
from softbench.latency.engine import LatencyOptions, Progress
from softbench.core.protocol import LatencyProtocol
from softbench.core.runoptions import RunOptions
from softbench.core.session import Session
from softbench.core.shapes import Shape
from softbench.core.utc import utc_iso

RESULTS_FILE = "results.jsonl"


@dataclass(frozen=True)
class SweepOptions(RunOptions):
    shape: Shape
    variants: tuple[str, ...]
    baseline: str = "A0"
    protocol: LatencyProtocol = LatencyProtocol()
    backend: str = "sim"
    kind: str = "variants"  # names the sweep session: "variants" or "emulation"
    variant_info: dict = field(default_factory=dict)  # variant -> what the sweep knows about it (setting, beta)
    meta: dict = field(default_factory=dict)  # written into the sweep's protocol.yaml and summary
    null: bool = False  # interleaved and sustained: a second baseline process in the same run
    references: tuple[str, ...] = ()  # interleaved and sustained: exact reference kernels in the same run
    start_order: str = "listed"  # the order the processes start in (LatencyOptions.start_order)
    processes: int = 1  # processes per kernel (LatencyOptions.processes; interleaved only)
    null_in_process: bool = False  # the null inside the baseline's process (LatencyOptions.null_in_process)

    def __post_init__(self):
        if not self.variants:
            raise UsageError("no variants to sweep")
        refuse_repeats(tuple(self.variants), "--variants", "A1,noexp")


def _start(label: str, variant: str, opts: SweepOptions, factory) -> WorkerProcess:
    w = factory(label, opts.backend, variant, opts.backend_options)
    try:
        w.load()
    except BaseException:
        w.close()
        raise
    return w


def run_variant_sweep(opts: SweepOptions, progress: Progress | None = None,
                      worker_factory: Callable[..., WorkerProcess] = WorkerProcess) -> Session:
    """Measure every variant against the baseline; returns the sweep session. Under the interleaved and sustained
    protocols all variants share one latency run (one session, every kernel in the same order design); under the
    paper's rounds each variant is its own latency session against one baseline process kept alive, and a variant
    that fails is recorded with its error while the sweep goes on (`raise_for_failures` turns failures into an
    error once the results are shown)."""
    progress = progress or Progress()
    if opts.protocol.kind != "paper":
        return _run_together(opts, progress, worker_factory)
    # the paper's rounds run each variant with the baseline alone: the latency options refuse what they cannot
    # carry (--processes, --null-in-process) before any process starts
    _latency_options(opts, opts.variants[0]).kernel_specs()
    p = opts.protocol
    progress.start(len(opts.variants) * p.rounds * 2 * p.windows)
    sweep = Session.create(opts.out_dir, "sweep", f"{opts.kind}-{opts.shape.tag()}-{opts.backend}-vs-{opts.baseline}")
    sweep.write_yaml("protocol.yaml", {
        "command": "sweep", "kind": opts.kind, "command_line": opts.command_line, "backend": opts.backend,
        "backend_options": opts.backend_options, "baseline": opts.baseline, "variants": list(opts.variants),
        "shape": opts.shape.to_dict(), "protocol": p.to_dict(), "started_utc": utc_iso(), **opts.meta,
    })
    rows: list[dict] = []
    base = None
    try:
        progress.message(f"loading the baseline {opts.baseline}")
        base = _start(opts.baseline, opts.baseline, opts, worker_factory)
        env = collect_env(gpu=True)
        sweep.write_json("env.json", {**env, "baseline_worker": base.info})
        for variant in opts.variants:
            rows.append(_one_variant(opts, variant, base, env, progress, worker_factory, sweep))
            sweep.append(RESULTS_FILE, rows[-1])
            _write_summary(sweep, opts, rows, complete=False)
            if base.proc.poll() is not None:
                raise MeasurementError(f"the baseline worker {opts.baseline} exited; its log ends:\n{base.log_tail()}")
    except BaseException as exc:
        reason = describe_failure(exc)
        _write_summary(sweep, opts, rows, complete=False, reason=reason)
        if base is not None:
            base.copy_log(sweep.path / "worker-baseline.log")
        raise
    finally:
        if base is not None:
            base.close()
    _write_summary(sweep, opts, rows, complete=True)
    return sweep


def _run_together(opts: SweepOptions, progress: Progress, worker_factory) -> Session:
    """All variants in one interleaved (or sustained) latency run; the sweep session lists its comparisons."""
    from softbench.latency.engine import run_latency

    lat = replace(_latency_options(opts, opts.variants[0]), more_variants=tuple(opts.variants[1:]), null=opts.null,
                  references=opts.references, start_order=opts.start_order)
    lat.kernel_specs()  # its refusals before the sweep's session exists
    sweep = Session.create(opts.out_dir, "sweep", f"{opts.kind}-{opts.shape.tag()}-{opts.backend}-vs-{opts.baseline}")
    sweep.write_yaml("protocol.yaml", {
        "command": "sweep", "kind": opts.kind, "command_line": opts.command_line, "backend": opts.backend,
        "backend_options": opts.backend_options, "baseline": opts.baseline, "variants": list(opts.variants),
        "null": opts.null, "references": list(opts.references), "processes_per_kernel": opts.processes,
        "null_in_process": opts.null_in_process, "shape": opts.shape.to_dict(),
        "protocol": opts.protocol.to_dict(), "started_utc": utc_iso(), **opts.meta,
    })
    try:
        (session,) = run_latency(lat, progress, worker_factory=worker_factory)
    except BaseException as exc:
        reason = describe_failure(exc)
        _write_summary(sweep, opts, [], complete=False, reason=reason)
        raise
    s = session.read_json("summary.json")
    rows = []
    for label, comp in s["comparisons"].items():
        paired = comp.get("paired") or {}
        k = s["kernels"][label]
        rows.append({"variant": label, "role": comp["role"], "session": session.path.name,
                     "speedup_pct": paired.get("estimate_pct"), "ci95_pct": paired.get("ci95_pct"),
                     "n_pairs": paired.get("n_pairs"), "pooled_speedup_pct": comp.get("pooled_speedup_pct"),
                     "baseline_median_ms": s["kernels"][s["baseline"]]["median_ms"], "variant_median_ms": k["median_ms"],
                     "vs_best_exact": (s.get("vs_best_exact") or {}).get(label),
                     "quantity": s["quantity"], **_row_info(opts, label, comp["role"], k)})
    for r in rows:
        sweep.append(RESULTS_FILE, r)
    _write_summary(sweep, opts, rows, complete=bool(s.get("complete")),
                   reason=s.get("incomplete_reason"))
    return sweep


def _latency_options(opts: SweepOptions, variant: str) -> LatencyOptions:
    """The latency run of one variant against the baseline, as this sweep asks for it."""
    return LatencyOptions(shapes=(opts.shape,), protocol=opts.protocol, backend=opts.backend, baseline=opts.baseline,
                          variant=variant, out_dir=opts.out_dir, backend_options=opts.backend_options,
                          command_line=opts.command_line, processes=opts.processes,
                          null_in_process=opts.null_in_process)


def _row_info(opts: SweepOptions, label: str, role: str, kernel: dict) -> dict:
    """What the sweep's table says of a row. The null and the reference kernels run the baseline's variant name
    (A0), whose catalog description would call FlashAttention-3 'the stock kernel': say what they are instead."""
    if role == "null" and kernel.get("process_of"):
        return {"description": f"the A/A null inside {opts.baseline}'s process: a second allocation of its inputs"}
    if role == "null":
        return {"description": f"the A/A null: a second process of {opts.baseline}, interleaved with the others"}
    if role == "reference":
        return {"description": f"exact reference kernel ({kernel.get('backend', label)}), timed in the same run"}
    return opts.variant_info.get(kernel["variant"], {})


def raise_for_failures(sweep: Session) -> None:
    """After the table is printed: a sweep in which some variant failed ends with an error exit."""
    rows = sweep.read_json("summary.json")["rows"]
    failed = [r["variant"] for r in rows if r.get("error")]
    if failed:
        raise MeasurementError(f"{len(failed)} of {len(rows)} variants failed: {', '.join(failed)}",
                               hint=f"see {sweep.path / 'summary.md'} and the worker logs beside it")


def _one_variant(opts: SweepOptions, variant: str, base: WorkerProcess, env: dict, progress: Progress,
                 factory, sweep: Session) -> dict:
    lat = _latency_options(opts, variant)
    base_label, var_label = lat.labels()
    row: dict = {"variant": variant, **opts.variant_info.get(variant, {})}
    w = None
    try:
        progress.message(f"loading {variant}")
        w = _start(var_label, variant, opts, factory)
        # the latency engine's per-shape phase, given our workers: the baseline process stays alive across variants
        session = latency_engine.run_shape(lat, opts.shape, {base_label: base, var_label: w}, env, progress)
    except SoftbenchError as e:
        if w is not None:
            w.copy_log(sweep.path / f"worker-{variant}.log")
        row.update(error=f"{type(e).__name__}: {e}", hint=e.hint)
        return row
    finally:
        if w is not None:
            w.close()
    s = session.read_json("summary.json")
    row.update({
        "session": session.path.name,
        "speedup_pct": s.get("speedup_pct"),
        "per_round_speedup_pct": s.get("per_round_speedup_pct"),
        "per_round_sd_pp": s.get("per_round_sd_pp"),
        "bootstrap_ci95_pct": s.get("bootstrap_ci95_pct"),
        "baseline_median_ms": s["median_ms"].get(base_label),
        "variant_median_ms": s["median_ms"].get(var_label),
        "sm_clock_mhz_median": s.get("sm_clock_mhz_median"),
        "throttled_windows": s.get("throttled_windows"),
        "rel_error_vs_fp32": (s.get("smoke") or {}).get(var_label, {}).get("rel_error_vs_fp32"),
    })
    return row


def sorted_rows(rows: list[dict]) -> list[dict]:
    """Fastest first; failed variants last, in the order they ran."""
    ok = [r for r in rows if r.get("speedup_pct") is not None]
    rest = [r for r in rows if r.get("speedup_pct") is None]
    return sorted(ok, key=lambda r: -r["speedup_pct"]) + rest


def _write_summary(sweep: Session, opts: SweepOptions, rows: list[dict], complete: bool,
                   reason: str | None = None) -> None:
    from softbench.sweep.render import sweep_markdown

    summary = {
        "command": "sweep", "kind": opts.kind, "backend": opts.backend, "baseline": opts.baseline,
        "shape": opts.shape.to_dict(), "shape_tag": opts.shape.tag(), "protocol": opts.protocol.to_dict(),
        "variants": list(opts.variants), "rows": sorted_rows(rows), "measured": len(rows),
        "protocol_kind": opts.protocol.kind, "quantity": getattr(opts.protocol, "quantity", None),
        "complete": complete, "finished_utc": utc_iso(), **opts.meta,
    }
    if reason:
        summary["incomplete_reason"] = reason
    sweep.write_json("summary.json", summary)
    sweep.write_text("summary.md", sweep_markdown(summary, sweep.path.name))
    sweep.set_status(complete=complete, state="complete" if complete else ("partial" if reason else "running"),
                     reason=reason)
