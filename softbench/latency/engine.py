"""The latency engine: which kernels run (baseline, variants, the null's second baseline process, exact
reference kernels), one worker process each, and one session per shape measured under one of three protocols
(softbench.core.protocol): interleaved (at equal clock), sustained, or the paper's rounds.

Phases per shape: check (before any worker starts), prepare (fixed-seed inputs, compile, smoke check against
FP32 attention), measure (the protocol's engine; every window is appended to the session as it is measured),
summarize (also for a partial session)."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

from softbench.core.envinfo import collect_env
from softbench.core.errors import UsageError
from softbench.core.options import MAX_PROCESSES, refuse_baseline_after_first, refuse_repeats
from softbench.core.protocol import AnyProtocol, InterleavedProtocol
from softbench.core.runoptions import RunOptions
from softbench.core.session import Session, null_label, pair_labels
from softbench.core.shapes import Shape
from softbench.core.utc import utc_iso
from softbench.runtime.client import WorkerProcess
from softbench.runtime.kernels import KernelSpec, close_all, prepare_all, start_workers
from softbench.runtime.session_runner import session_run

WINDOWS_FILE = "windows.jsonl"
BLOCKS_FILE = "blocks.jsonl"


@dataclass(frozen=True)
class LatencyOptions(RunOptions):
    shapes: tuple[Shape, ...]
    protocol: AnyProtocol = InterleavedProtocol()
    backend: str = "sim"
    baseline: str = "A0"
    variant: str = "A1"
    null: bool = False  # a second process of the baseline, interleaved with the others: the A/A null in the same run
    references: tuple[str, ...] = ()  # exact reference kernels timed alongside (fa3, fa4, sdpa)
    more_variants: tuple[str, ...] = ()  # further variants in the same interleaving (sweep variants)
    # where the sessions ran when a matrix runs across GPUs (softbench.latency.matrix): rank, GPU, the
    # CUDA_VISIBLE_DEVICES given, cell, control phase; recorded in env.json and summary.json, and in the tag
    placement: dict = field(default_factory=dict)
    # listed: the processes start (and allocate their inputs) in kernel_specs' order; shuffled: in a fresh random
    # order per run. In interleavings of four or more kernels the null's baseline process (started first) ran
    # 0.14 pp slower than its twin on average on the H200 (2026-12-01): shuffling tells role from place
    start_order: str = "listed"
    # processes per kernel (interleaved only): the windows rotate over them, so that the summary can give the
    # speed-up across pairs of processes, whose offsets a run of one process per kernel cannot see
    processes: int = 1
    # the baseline again inside its own process, on a second allocation of the same inputs (label baseline~): a
    # null that shares the process, beside --null's, which does not (softbench.runtime.twin)
    null_in_process: bool = False
    # the variants' backend options when they run another configuration than the baseline's (--variant-config):
    # {} runs every kernel in backend_options. The null always runs the baseline's, or it would be no A/A null
    variant_options: dict = field(default_factory=dict)

    def labels(self) -> tuple[str, str]:
        # the A/A null runs one variant in two processes: give them distinct labels
        return pair_labels(self.baseline, self.variant)

    def kernel_specs(self) -> list[KernelSpec]:
        base_label, var_label = self.labels()
        # more than one variant comes from sweep's --variants alone (latency takes one --variant)
        refuse_repeats((self.variant, *self.more_variants), "--variants", "A1,noexp")
        refuse_baseline_after_first(self.baseline, (self.variant, *self.more_variants))
        if self.variant_options and self.variant == self.baseline:
            raise UsageError("--variant-config runs the variant in another configuration than the baseline; with "
                             "--variant equal to the baseline that would time two configurations, not an A/A null",
                             hint="give the configuration to --triton-config, or name a --variant")
        var_options = self.variant_options or self.backend_options
        specs = [KernelSpec(base_label, self.backend, self.baseline, "baseline", self.backend_options)]
        role = "null" if self.variant == self.baseline else "variant"
        specs.append(KernelSpec(var_label, self.backend, self.variant, role, var_options))
        specs += [KernelSpec(v, self.backend, v, "variant", var_options) for v in self.more_variants]
        if self.null:
            if self.variant == self.baseline:
                raise UsageError("--null adds a second process of the baseline; with --variant equal to the "
                                 "baseline the run is already the A/A null")
            if self.protocol.kind == "paper":
                raise UsageError("--null needs the interleaved or sustained protocol (the paper's rounds pair "
                                 "exactly two kernels; run --variant A0 for its null)")
            specs.append(KernelSpec(null_label(self.baseline), self.backend, self.baseline, "null",
                                    self.backend_options))
        if not 1 <= self.processes <= MAX_PROCESSES:
            raise UsageError(f"--processes {self.processes}: each kernel runs in 1 to {MAX_PROCESSES} processes")
        if self.processes > 1 and self.protocol.kind != "interleaved":
            raise UsageError(f"--processes {self.processes} needs the interleaved protocol, whose windows rotate "
                             f"over a kernel's processes; the {self.protocol.kind} protocol runs each kernel in one")
        if self.null_in_process:
            if self.protocol.kind != "interleaved":
                raise UsageError("--null-in-process needs the interleaved protocol (its windows run on either input "
                                 f"slot of the baseline's process); the {self.protocol.kind} protocol has none")
            if self.processes > 1:
                raise UsageError("--null-in-process runs in the baseline's one process; it does not combine with "
                                 f"--processes {self.processes}")
            specs.append(KernelSpec(self.baseline + "~", self.backend, self.baseline, "null", self.backend_options,
                                    shares_process=base_label))
        if self.references and self.protocol.kind == "paper":
            raise UsageError("--reference needs the interleaved or sustained protocol (the paper's rounds pair "
                             "exactly two kernels)")
        specs += [KernelSpec(f"ref-{r}", f"ref-{r}", "A0", "reference") for r in self.references]
        return specs

    def roles(self) -> dict[str, str]:
        """label -> role (baseline, variant, null, reference), as the kernel specs give them: what a kernel is
        for belongs to the measurement, not to the process that runs it (a sweep reuses one baseline process)."""
        return {s.label: s.role for s in self.kernel_specs()}


class Progress:
    """What the engine tells the outside world; the CLI passes a rich-backed implementation."""

    def start(self, total_windows: int | None) -> None: ...
    def message(self, text: str) -> None: ...
    def window(self, label: str, record: dict) -> None: ...


def run_latency(opts: LatencyOptions, progress: Progress | None = None,
                check: Callable[[Shape], None] | None = None,
                worker_factory: Callable[..., WorkerProcess] = WorkerProcess,
                clock: Callable[[], float] = time.monotonic) -> list[Session]:
    progress = progress or Progress()
    if not opts.shapes:
        raise UsageError("no shapes to measure")
    opts.kernel_specs()  # its refusals (a repeated variant, --null with the paper's rounds) come first
    for shape in opts.shapes:
        if check:
            check(shape)
    progress.start(window_total(opts, len(opts.shapes)))
    with loaded_workers(opts, progress, worker_factory) as (workers, env):
        return [run_shape(opts, shape, workers, env, progress, clock=clock) for shape in opts.shapes]


def window_total(opts: LatencyOptions, n_shapes: int) -> int | None:
    """The progress bar's length: known in advance under the paper's rounds only (the others stop by their rule)."""
    p = opts.protocol
    return n_shapes * p.rounds * 2 * p.windows if p.kind == "paper" else None


def ordered_specs(opts: LatencyOptions, seed: int | None = None) -> tuple[list, dict]:
    """The kernel specs in the order their processes start, and the record of that order (env.json)."""
    specs = opts.kernel_specs()
    if opts.start_order == "listed":
        return specs, {"rule": "listed", "labels": [s.label for s in specs]}
    if opts.start_order != "shuffled":
        raise UsageError(f"--start-order {opts.start_order!r}: listed or shuffled")
    import secrets

    import numpy as np

    seed = secrets.randbits(32) if seed is None else seed
    specs = [specs[i] for i in np.random.default_rng(seed).permutation(len(specs))]
    return specs, {"rule": "shuffled", "seed": seed, "labels": [s.label for s in specs]}


@contextmanager
def loaded_workers(opts: LatencyOptions, progress: Progress,
                   worker_factory: Callable[..., WorkerProcess] = WorkerProcess) -> Iterator[tuple[dict, dict]]:
    """(workers, env): one loaded process per kernel of `opts` and this machine's environment, for as many
    shapes as the caller runs through run_shape; every process is closed on the way out."""
    specs, order = ordered_specs(opts)
    progress.message(f"loading {opts.backend} {', '.join(s.label for s in specs)}: "
                     f"{len(specs) * opts.processes} processes")
    workers = start_workers(specs, worker_factory, opts.processes)
    try:
        yield workers, {**collect_env(gpu=True), "start_order": order}
    finally:
        close_all(workers.values())


def session_tag(opts: LatencyOptions, shape: Shape) -> str:
    extra = f"+{len(opts.more_variants)}" if opts.more_variants else ""
    # across GPUs: the GPU in the name, so that the control's sessions of one cell (one per GPU) tell apart
    where = f"-gpu{opts.placement['gpu']}" if "gpu" in opts.placement else ""
    phase = f"-{opts.placement['phase']}" if opts.placement.get("phase") else ""
    return f"{shape.tag()}-{opts.backend}-{opts.baseline}-vs-{opts.variant}{extra}-{opts.protocol.kind}{where}{phase}"


def protocol_record(opts: LatencyOptions, shape: Shape, workers: dict) -> dict:
    return {
        "command": "latency", "command_line": opts.command_line, "backend": opts.backend,
        "backend_options": opts.backend_options, "baseline": opts.baseline, "variant": opts.variant,
        "labels": list(workers), "roles": {k: opts.roles()[k] for k in workers},
        "null": opts.null, "references": list(opts.references), "processes_per_kernel": opts.processes,
        **({"variant_backend_options": opts.variant_options} if opts.variant_options else {}),
        "shape": shape.to_dict(),
        "protocol": opts.protocol.to_dict(),
    }


def run_shape(opts: LatencyOptions, shape: Shape, workers: dict[str, WorkerProcess], env: dict,
              progress: Progress, clock: Callable[[], float] = time.monotonic) -> Session:
    """One shape's session with workers that are already loaded (the sweeps reuse one baseline process)."""
    if opts.protocol.kind == "paper":
        from softbench.latency.rounds import run_rounds

        return run_rounds(opts, shape, workers, env, progress)
    from softbench.latency.interleaved import measure_interleaved
    from softbench.latency.summary import process_pairs, summarize_paired
    from softbench.latency.sustained import measure_sustained

    p = opts.protocol
    roles = opts.roles()
    kernels = {label: {"role": roles[label], "variant": w.variant, "backend": w.backend,
                       **({"process_of": w.info["process_of"]} if "process_of" in w.info else {})}
               for label, w in workers.items()}
    base_label = opts.labels()[0]
    gated = [lbl for lbl, k in kernels.items() if k["role"] in ("variant", "null")]
    device_kind = next(iter(workers.values())).info.get("device", {}).get("kind")
    state: dict = {"windows": [], "blocks": [], "smoke": {}, "run": {}}

    def finish(session: Session, complete: bool, reason: str | None) -> None:
        measured = [w for w in state["windows"] if w.get("phase") in ("measure", None)]
        if p.kind == "interleaved":
            slot = "predecessor" if p.order == "circuit" else None
            summary = summarize_paired(measured, kernels, base_label, shape.flops, p.kind, "ms_per_call", slot=slot)
            if opts.processes > 1:
                summary["process_pairs"] = process_pairs(measured, base_label, gated, opts.processes, slot)
        else:
            summary = summarize_paired(state["blocks"], kernels, base_label, shape.flops, p.kind, "median_ms",
                                       windows=measured)
        write_summary(session, opts, shape, summary, complete, reason, smoke=state["smoke"], run=state["run"],
                      timings_are=timings_are(opts.backend, device_kind))

    with session_run(opts.out_dir, "latency", session_tag(opts, shape), env=session_env(opts, env, workers),
                     protocol=protocol_record(opts, shape, workers), finish=finish,
                     workers=lambda: workers.values()) as session:
        state["smoke"] = prepare_all(workers, shape, p.seed, progress.message)
        session.write_json("smoke.json", state["smoke"])

        def record(rec: dict) -> None:
            rec = {**rec, "pid": workers[rec["label"]].pid, "utc": utc_iso()}
            session.append(WINDOWS_FILE, rec)
            state["windows"].append(rec)

        if p.kind == "interleaved":
            state["run"] = measure_interleaved(p, workers, base_label, gated, record, progress, clock=clock)
        else:
            def record_block(block: dict) -> None:
                session.append(BLOCKS_FILE, block)
                state["blocks"].append(block)

            state["run"] = measure_sustained(p, workers, record, record_block, progress)
    return session


def session_env(opts: LatencyOptions, env: dict, workers: dict[str, WorkerProcess]) -> dict:
    """env.json of a session: the machine, each worker's load record (its board among them), and where the
    session ran when a matrix runs across GPUs."""
    return {**env, "workers": {k: w.info for k, w in workers.items()},
            **({"placement": opts.placement} if opts.placement else {})}


def timings_are(backend: str, device_kind: str | None) -> str:
    if backend == "sim":
        where = "CPU wall-clock" if device_kind != "cuda" else "CUDA event"
        return f"{where} timings of the pure-torch simulation, not kernel timings"
    return "CUDA event timings of the kernel calls"


def write_summary(session: Session, opts: LatencyOptions, shape: Shape, summary: dict, complete: bool,
                  reason: str | None, **extra) -> None:
    """The one way a latency session's summary is finished, under any protocol: the shape, backend and protocol,
    `extra` (smoke checks, the run's record, the paper's order), completeness; then summary.json, summary.md
    and the status, complete or partial."""
    from softbench.latency.exactness import exactness
    from softbench.latency.render import latency_markdown

    summary.update({
        "command": "latency", "backend": opts.backend, "shape": shape.to_dict(), "shape_tag": shape.tag(),
        "protocol": opts.protocol.to_dict(), **extra, "complete": complete, "finished_utc": utc_iso(),
        **({"placement": opts.placement} if opts.placement else {}),
    })
    # the baseline's accuracy beside the exact references' (smoke checks on the same inputs)
    summary["exactness"] = exactness(extra.get("smoke") or {}, opts.roles())
    if reason:
        summary["incomplete_reason"] = reason
    session.write_json("summary.json", summary)
    session.write_text("summary.md", latency_markdown(summary, session.path.name))
    session.set_status(complete=complete, state="complete" if complete else "partial", reason=reason)
