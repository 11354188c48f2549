"""The energy engine (paper B.3, Table B5f): sustained forward loops, board power sampled through NVML, energy
per forward by the sampled-power and the energy-counter methods.

Phases: check (NVML present, the kernels run on that GPU), prepare (one worker per variant, kept alive for all
its loops: inputs, compile, smoke check), loops in the given order, summarize. Per loop:
1. idle: `idle_s` seconds of power samples with no kernel running (every loop, so the idle level's drift is
   on record; it is reported beside the energies, never subtracted);
2. the sampler starts, `pre_s` seconds pass, the worker runs `warmup` calls and then the timed loop (chunks of
   `chunk` calls, each followed by a synchronize, for `seconds`), reading the NVML energy counter right before
   and after the timed loop; `post_s` seconds later the sampler stops.
Samples and loop records are appended to the session as soon as each loop ends."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from softbench.core.envinfo import collect_env
from softbench.core.errors import UnsupportedError
from softbench.core.protocol import EnergyProtocol
from softbench.runtime.client import WorkerProcess, load_all
from softbench.energy.summary import summarize_energy, summarize_loop
from softbench.core.nvml import GpuReading, PowerSampler
from softbench.core.runoptions import RunOptions
from softbench.core.session import Session
from softbench.core.shapes import Shape
from softbench.core.utc import utc_iso
from softbench.kernels.capability import SM100_FAMILIES
from softbench.runtime.session_runner import describe_failure

SAMPLES_FILE = "samples.jsonl"
LOOPS_FILE = "loops.jsonl"


@dataclass(frozen=True)
class EnergyOptions(RunOptions):
    """One energy run: the shape, the protocol its loops follow (softbench.core.protocol.EnergyProtocol: their
    settings, defaults and checks live there) and what it measures with, where it writes."""

    shape: Shape
    protocol: EnergyProtocol = EnergyProtocol()
    backend: str = "fa4"
    dtype_note: str = ""
    require_gpu: bool = True  # False only in tests: a CPU worker with a replayed power source

    def __post_init__(self):
        self.protocol.check_trim()

    def to_dict(self) -> dict:
        """The run as its session records it: the loops' settings beside the shape and the backend, in one
        mapping (summary.json's `protocol`, protocol.yaml)."""
        return {"shape": self.shape.to_dict(), **self.protocol.loop_settings(), "order": list(self.protocol.order),
                "backend": self.backend, "out_dir": str(self.out_dir), "backend_options": self.backend_options,
                "dtype_note": self.dtype_note, "command_line": self.command_line}


class Progress:
    def start(self, total_loops: int) -> None: ...
    def message(self, text: str) -> None: ...
    def window(self, label: str, record: dict) -> None: ...


def open_power_source(index: int = 0):
    """NVML on GPU `index`, or an UnsupportedError that says why the energy command cannot run without it."""
    from softbench.core.nvml import Nvml

    try:
        return Nvml.open(index)
    except UnsupportedError as e:
        raise UnsupportedError(f"softbench energy needs NVML to read the GPU board's power: {e}",
                               hint="run it on a machine with an NVIDIA driver (nvidia-smi works there); "
                                    "`softbench latency --backend sim` needs no GPU") from None


def refuse_cpu_backend(device_kind: str, backend: str) -> None:
    if device_kind != "cuda":
        raise UnsupportedError(f"the {backend} backend runs on the CPU here, so the GPU board's energy would not "
                               "measure it", hint="energy needs the kernel on the GPU: --backend fa4, or sim on a CUDA machine")


def default_dtype(backend: str, device) -> tuple[str, str]:
    """FP8 where the backend has it (FA4: sm_100 family; softbench's Triton forward: sm_89 and newer), else BF16;
    with the sentence that says why."""
    if backend == "fa4" and device.family in SM100_FAMILIES:
        return "fp8", f"default on {device.arch_label}: FP8 through FA4"
    if backend == "triton" and device.arch is not None and device.arch >= 89:
        return "fp8", f"default on {device.arch_label}: FP8 through softbench's Triton forward"
    if backend == "fa4":
        return "bf16", f"default: BF16, FA4 has no FP8 on {device.arch_label}"
    return "bf16", "default: BF16 for the sim backend"


def _sample(source: Callable[[], GpuReading], seconds: float, interval_s: float) -> list[GpuReading]:
    sampler = PowerSampler(source, interval_s)
    sampler.start()
    try:
        time.sleep(seconds)
    finally:
        readings = sampler.stop()
    return readings


def run_energy(opts: EnergyOptions, power, progress: Progress | None = None,
               worker_factory: Callable[..., WorkerProcess] = WorkerProcess) -> Session:
    """`power`: an object with read() -> GpuReading, has_energy_counter() and describe() (softbench.core.nvml.Nvml,
    or a replay in tests)."""
    progress = progress or Progress()
    progress.start(len(opts.protocol.order))
    workers = {v: worker_factory(v, opts.backend, v, opts.backend_options) for v in opts.protocol.variants}
    session = None
    try:
        progress.message(f"loading {', '.join(workers)} ({opts.backend}) in {len(workers)} processes")
        load_all(workers.values())
        for w in workers.values():
            if opts.require_gpu:
                refuse_cpu_backend(w.info["device"]["kind"], opts.backend)
        smoke = {}
        for label, w in workers.items():
            progress.message(f"{opts.shape.tag()}: preparing {label} (inputs, compile, smoke check)")
            smoke[label] = w.request("prepare", shape=opts.shape.to_dict(), seed=opts.protocol.seed)["result"]
        tag = f"{opts.shape.tag()}-{opts.backend}-{'-'.join(opts.protocol.order)}"
        session = Session.create(opts.out_dir, "energy", tag)
        session.write_json("env.json", {**collect_env(gpu=True), "power_source": power.describe(),
                                        "workers": {k: w.info for k, w in workers.items()}})
        session.write_yaml("protocol.yaml", {"command": "energy", "command_line": opts.command_line,
                                             "started_utc": utc_iso(), **opts.to_dict()})
        session.write_json("smoke.json", smoke)
        loops = _run_loops(opts, power, workers, session, progress)
    except BaseException as exc:
        if session is not None:
            reason = describe_failure(exc)
            _finish(session, opts, session.read_records(LOOPS_FILE), complete=False, reason=reason)
            for label, w in workers.items():
                w.copy_log(session.path / f"worker-{label}.log")
        raise
    finally:
        for w in workers.values():
            w.close()
    _finish(session, opts, loops, complete=True)
    return session


def _phase(t: float, loop: dict) -> str:
    if t < loop["t_start"]:
        return "pre"
    return "loop" if t <= loop["t_end"] else "post"


def _run_loops(opts: EnergyOptions, power, workers: dict[str, WorkerProcess], session: Session,
               progress: Progress) -> list[dict]:
    p = opts.protocol
    loops = []
    for i, variant in enumerate(p.order):
        w = workers[variant]
        progress.message(f"loop {i + 1}/{len(p.order)}: {variant} (idle {p.idle_s:g} s, loop {p.seconds:g} s)")
        idle = _sample(power.read, p.idle_s, p.interval_s) if p.idle_s > 0 else []
        idle_w = [r.power_w for r in idle if r.power_w is not None]
        sampler = PowerSampler(power.read, p.interval_s)
        sampler.start()
        try:
            time.sleep(p.pre_s)
            res = w.request("energy_loop", seconds=p.seconds, warmup=p.warmup, chunk=p.chunk,
                            settle=p.settle_rule())["result"]
            time.sleep(p.post_s)
        finally:
            readings = sampler.stop()
        loop = {"loop": i, "variant": variant, "pid": w.pid, "utc": utc_iso(), **res,
                "idle_power_w": sum(idle_w) / len(idle_w) if idle_w else None, "idle_samples": len(idle)}
        for r in idle:
            session.append(SAMPLES_FILE, _sample_record(r, i, variant, loop, "idle"))
        records = [_sample_record(r, i, variant, loop, _phase(r.time_s, loop)) for r in readings]
        for rec in records:
            session.append(SAMPLES_FILE, rec)
        stream = [{**rec, "time_s": rec["time_s"] + loop["t_start"]} for rec in records]
        loop.update(summarize_loop(stream, loop, p.trim_start, p.trim_end, p.ramp_fraction))
        session.append(LOOPS_FILE, loop)
        loops.append(loop)
        progress.window(variant, loop)
    return loops


def _sample_record(r: GpuReading, i: int, variant: str, loop: dict, phase: str) -> dict:
    d = r.to_dict()
    d["time_s"] = r.time_s - loop["t_start"]  # relative to the timed loop's start
    return {"loop": i, "variant": variant, "phase": phase, **d}


def _finish(session: Session, opts: EnergyOptions, loops: list[dict], complete: bool,
            reason: str | None = None) -> None:
    from softbench.energy.render import energy_markdown

    summary = {
        "command": "energy", "backend": opts.backend, "shape": opts.shape.to_dict(), "shape_tag": opts.shape.tag(),
        "dtype": opts.shape.dtype, "dtype_note": opts.dtype_note, "order": list(opts.protocol.order),
        "protocol": opts.to_dict(), "loops": loops, "complete": complete, "finished_utc": utc_iso(),
        **summarize_energy(loops, opts.protocol.order[0]),
    }
    if reason:
        summary["incomplete_reason"] = reason
    session.write_json("summary.json", summary)
    session.write_text("summary.md", energy_markdown(summary, session.path.name))
    if loops:
        try:
            plot_power(session.path / SAMPLES_FILE, session.path / "power.png", loops)
        except Exception as e:  # a plot must never lose the measurement; say that it is missing
            summary["plot_error"] = f"{type(e).__name__}: {e}"
            session.write_json("summary.json", summary)
    session.set_status(complete=complete, state="complete" if complete else "partial", reason=reason)


def plot_power(samples_path: Path, dest: Path, loops: list[dict]) -> None:
    """Power against time from the loop's start, one line per loop; the loop's span shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from softbench.core.session import read_jsonl

    rows = [r for r in read_jsonl(samples_path) if r.get("phase") != "idle" and r.get("power_w") is not None]
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=120)
    for loop in loops:
        pts = [(r["time_s"], r["power_w"]) for r in rows if r["loop"] == loop["loop"]]
        if pts:
            xs, ys = zip(*pts)
            ax.plot(xs, ys, lw=1, label=f"loop {loop['loop']}: {loop['variant']}")
    longest = max(loop["loop_s"] for loop in loops)
    ax.axvspan(0, longest, color="0.92", zorder=0, label="timed loop")
    ax.set_xlabel("time from the loop's start (s)")
    ax.set_ylabel("board power (W, NVML)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(dest)
    plt.close(fig)
