"""The latency engine: paired baseline/variant call latency in alternating rounds, one process per kernel.

Phases per shape: check (can the backend run it?), prepare (fixed-seed inputs, compile, smoke check against
FP32 attention), rounds (warm-up, then windows of back-to-back calls, clocks read after each window), summarize.
Every window is appended to the session as soon as it is measured."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from softbench.core.envinfo import collect_env
from softbench.core.errors import MeasurementError, UsageError
from softbench.runtime.client import WorkerProcess, load_all
from softbench.latency.summary import summarize_latency
from softbench.core.protocol import LatencyProtocol
from softbench.latency.render import latency_markdown
from softbench.core.session import Session, utc_iso
from softbench.core.shapes import Shape

WINDOWS_FILE = "windows.jsonl"


@dataclass(frozen=True)
class LatencyOptions:
    shapes: tuple[Shape, ...]
    protocol: LatencyProtocol = LatencyProtocol()
    backend: str = "sim"
    baseline: str = "A0"
    variant: str = "A1"
    out_dir: Path = Path("sessions")
    backend_options: dict = field(default_factory=dict)
    command_line: str = ""

    def labels(self) -> tuple[str, str]:
        # the A/A null runs one variant in two processes: give them distinct labels
        return (self.baseline, self.variant) if self.baseline != self.variant else (self.baseline, self.variant + "'")


class Progress:
    """What the engine tells the outside world; the CLI passes a rich-backed implementation."""

    def start(self, total_windows: int) -> None: ...
    def message(self, text: str) -> None: ...
    def window(self, label: str, record: dict) -> None: ...


def run_latency(opts: LatencyOptions, progress: Progress | None = None,
                check: Callable[[Shape], None] | None = None) -> list[Session]:
    progress = progress or Progress()
    if not opts.shapes:
        raise UsageError("no shapes to measure")
    for shape in opts.shapes:
        if check:
            check(shape)
    base_label, var_label = opts.labels()
    p = opts.protocol
    progress.start(len(opts.shapes) * p.rounds * 2 * p.windows)
    workers = {
        base_label: WorkerProcess(base_label, opts.backend, opts.baseline, opts.backend_options),
        var_label: WorkerProcess(var_label, opts.backend, opts.variant, opts.backend_options),
    }
    sessions: list[Session] = []
    try:
        progress.message(f"loading {opts.backend} {opts.baseline} and {opts.variant} in two processes")
        load_all(workers.values())
        env = collect_env(gpu=True)
        for shape in opts.shapes:
            sessions.append(run_shape(opts, shape, workers, env, progress))
    finally:
        for w in workers.values():
            w.close()
    return sessions


def run_shape(opts: LatencyOptions, shape: Shape, workers: dict[str, WorkerProcess], env: dict,
              progress: Progress) -> Session:
    """One shape's session with workers that are already loaded (the sweeps reuse one baseline process)."""
    base_label, var_label = opts.labels()
    p = opts.protocol
    tag = f"{shape.tag()}-{opts.backend}-{opts.baseline}-vs-{opts.variant}"
    session = Session.create(opts.out_dir, "latency", tag)
    session.write_json("env.json", {**env, "workers": {k: w.info for k, w in workers.items()}})
    order = p.round_order(base_label, var_label)
    session.write_yaml("protocol.yaml", {
        "command": "latency", "command_line": opts.command_line, "backend": opts.backend,
        "backend_options": opts.backend_options, "baseline": opts.baseline, "variant": opts.variant,
        "labels": [base_label, var_label], "shape": shape.to_dict(), "protocol": p.to_dict(),
        "order": [list(o) for o in order], "started_utc": utc_iso(),
    })
    smoke: dict = {}
    windows: list[dict] = []
    try:
        for label, w in workers.items():
            progress.message(f"{shape.tag()}: preparing {label} (inputs, compile, smoke check)")
            smoke[label] = w.request("prepare", shape=shape.to_dict(), seed=p.seed)["result"]
        session.write_json("smoke.json", smoke)
        for r, pair in enumerate(order):
            for pos, label in enumerate(pair):
                w = workers[label]
                progress.message(f"{shape.tag()}: round {r + 1}/{p.rounds}, {label}")

                def on_window(msg: dict, r=r, pos=pos, label=label, w=w) -> None:
                    rec = {"round": r, "position": pos, "label": label, "variant": w.variant, "pid": w.pid,
                           "utc": utc_iso(), **msg["window"]}
                    session.append(WINDOWS_FILE, rec)
                    windows.append(rec)
                    progress.window(label, rec)

                w.request("round", on_stream=on_window, round=r, warmup=p.warmup, windows=p.windows, calls=p.calls)
    except BaseException as exc:
        reason = "interrupted by the user" if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}: {exc}"
        _finish(session, opts, shape, windows, smoke, order, complete=False, reason=reason)
        for label, w in workers.items():
            w.copy_log(session.path / f"worker-{label.replace(chr(39), 'b')}.log")
        raise
    _finish(session, opts, shape, windows, smoke, order, complete=True)
    return session


def _finish(session: Session, opts: LatencyOptions, shape: Shape, windows: list[dict], smoke: dict,
            order: list, complete: bool, reason: str | None = None) -> None:
    base_label, var_label = opts.labels()
    summary = summarize_latency(windows, base_label, var_label, shape.flops)
    summary.update({
        "command": "latency", "backend": opts.backend, "shape": shape.to_dict(), "shape_tag": shape.tag(),
        "order": [list(o) for o in order], "protocol": opts.protocol.to_dict(), "smoke": smoke,
        "complete": complete, "finished_utc": utc_iso(),
    })
    if reason:
        summary["incomplete_reason"] = reason
    session.write_json("summary.json", summary)
    session.write_text("summary.md", latency_markdown(summary, session.path.name))
    session.set_status(complete=complete, state="complete" if complete else "partial", reason=reason)


def fail_if_worker_missing() -> None:
    if not sys.executable:
        raise MeasurementError("cannot find the Python interpreter to start worker processes")
