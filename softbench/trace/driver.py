"""One traced point: one kernel variant at one shape, in its own process (run under Nsight Systems, or alone).

    python -m softbench.trace.driver --backend fa4 --variant A0 --shape '{"seq": 8192, ...}' --out DIR
        [--backend-options '{"kernel": "gluon", ...}']

Steps: load the variant, fixed-seed inputs, one call that compiles, then, inside a CUDA profiler range (which
`nsys --capture-range=cudaProfilerApi` records): with --settle, chunks of calls until the board's power and SM
clock level off (softbench.runtime.settle), so the timed calls run at this kernel's own equilibrium under the power
cap instead of inside the ramp from idle; `warmup` calls, timed; and `calls` timed calls between two CUDA events
(by default as many as fill --window-s at the warm-up's time per call). The host call latency (event time /
calls) goes to DIR/latency.json. With --torch-profiler, a further `calls` calls run under torch.profiler (CUPTI)
and their kernels go to DIR/torch_trace.json: the fallback when Nsight Systems is missing. Library output goes to
stderr; stdout stays quiet."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="softbench.trace.driver")
    ap.add_argument("--backend", required=True)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--shape", required=True, help="Shape as JSON")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--calls", type=int, default=None, help="timed calls (default: as many as fill --window-s)")
    ap.add_argument("--window-s", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--torch-profiler", action="store_true")
    ap.add_argument("--settle", default=None, help="settle first, by this SettleRule (JSON keywords)")
    ap.add_argument("--backend-options", default="{}", help="the backend's keyword arguments as JSON "
                    "(TraceOptions.backend_options: --triton-config's configuration)")
    args = ap.parse_args(argv)

    import torch

    from softbench.kernels.backends import make_backend
    from softbench.kernels.inputs import make_inputs
    from softbench.runtime.worker import Timer
    from softbench.core.nvml import Nvml
    from softbench.core.shapes import Shape

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shape = Shape(**json.loads(args.shape))
    backend = make_backend(args.backend, **json.loads(args.backend_options))
    t0 = time.monotonic()
    info = backend.load(args.variant)
    load_s = time.monotonic() - t0
    cuda = backend.device.kind == "cuda"
    inputs = make_inputs(shape, args.seed, "cuda" if cuda else "cpu")
    forward = backend.build(shape, inputs)
    timer = Timer(backend.device.kind)
    nvml = Nvml.try_open() if cuda else None
    with torch.inference_mode():
        t0 = time.monotonic()
        forward()  # compiles; outside the profiler range so the trace holds only the measured calls
        timer.sync()
        compile_s = time.monotonic() - t0
        if cuda:
            torch.cuda.profiler.start()
        # inside the profiler range: Nsight Systems pauses the process when its capture starts, long enough for
        # the board to cool, and a kernel settled before that pause was traced speeding up and slowing again
        # (an H100, 2026-12-07: +8% to +13% between the halves of the timed calls)
        settled = _settle(forward, timer, nvml, json.loads(args.settle)) if args.settle is not None else None
        warmup_ms = timer.window_ms(forward, args.warmup) if args.warmup else None
        calls, sized_by = window_calls(args.calls, args.window_s, warmup_ms, args.warmup)
        window_ms = timer.window_ms(forward, calls)
        if cuda:
            torch.cuda.profiler.stop()
        reading = nvml.read().to_dict() if nvml else {}
        profiled = None
        if args.torch_profiler:
            profiled = _torch_profile(forward, timer, calls, out / "torch_trace.json", cuda)
    settle_calls = (settled or {}).get("calls", 0)
    record = {
        "backend": args.backend, "variant": args.variant, "shape": shape.to_dict(), "pid": os.getpid(),
        "device": {"kind": backend.device.kind, "name": backend.device.name, "arch": backend.device.arch},
        "info": info, "load_s": load_s, "compile_s": compile_s,
        "warmup": args.warmup, "calls": calls, "calls_sized_by": sized_by, "window_ms": window_ms,
        "call_latency_us": window_ms / calls * 1e3,
        "settle": settled, "settle_calls": settle_calls,
        "gpu_after_window": {k: v for k, v in reading.items() if k != "time_s"},
        "profiler_range": (f"cudaProfilerStart/Stop around the {traced_phases(settle_calls, args.warmup)}"
                           if cuda else None),
        "torch_profiler_calls": profiled,
    }
    (out / "latency.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    return 0


def traced_phases(settle_calls: int, warmup: int) -> str:
    """The calls inside the profiler range, by phase: settling only where it ran calls (--no-settle, or no board to
    read, runs none), the warm-up only where it has calls; the timed window always."""
    phases = [name for name, n in (("settle", settle_calls), ("warm-up", warmup)) if n]
    return ", ".join(phases) + (" and timed calls" if phases else "timed calls")


MIN_WINDOW_CALLS = 200  # the paper's traces time 200 calls; a sized window is never shorter


def window_calls(calls: int | None, window_s: float, warmup_ms: float | None, warmup: int) -> tuple[int, str]:
    """How many timed calls, and why: the number given, else as many as fill `window_s` at the warm-up's time per
    call (at least MIN_WINDOW_CALLS, at most MAX_WINDOW_CALLS). A power controller swings the clock within a tenth
    of a second, so a window of 200 calls at 8K mixes clocks (an H100, 2026-12-07); one of seconds averages them."""
    from softbench.core.protocol import MAX_WINDOW_CALLS

    if calls is not None:
        return calls, "given"
    if not warmup_ms or warmup_ms <= 0:
        return MIN_WINDOW_CALLS, "no warm-up to time: the minimum"
    per_call_ms = warmup_ms / warmup
    n = min(MAX_WINDOW_CALLS, max(MIN_WINDOW_CALLS, math.ceil(window_s * 1e3 / per_call_ms)))
    return n, f"{window_s:g} s at the warm-up's {per_call_ms:.4g} ms per call"


SETTLE_CHUNK = 20  # calls between readings: 8 ms at FP8 8K, well under the rule's span of a second


def _settle(forward, timer, nvml, rule: dict) -> dict:
    """Chunks of calls until the readings settle; the verdict as a dict. No board to read (a CPU, or NVML missing)
    means nothing to settle: said so, and no calls spent."""
    from softbench.runtime.settle import SettleRule, run_until_settled

    if nvml is None:
        return {"settled": False, "reason": "no NVML readings: not settled"}
    calls = 0

    def chunk() -> tuple:
        nonlocal calls
        for _ in range(SETTLE_CHUNK):
            forward()
        timer.sync()
        calls += SETTLE_CHUNK
        r = nvml.read()
        return r.time_s, r.power_w, r.sm_clock_mhz

    # the readings' own clock from the start
    verdict = run_until_settled(SettleRule(**rule), chunk, nvml.read().time_s)
    return {**verdict.to_dict(), "calls": calls}


def _torch_profile(forward, timer, calls: int, dest: Path, cuda: bool) -> int:
    """Kernels of `calls` further calls through torch.profiler (CUPTI), as a Chrome trace."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(calls):
            forward()
        timer.sync()
    prof.export_chrome_trace(str(dest))
    return calls


if __name__ == "__main__":
    from softbench.cli import print_error
    from softbench.core.errors import SoftbenchError

    # keep stdout free: whatever FA4 or CuTe DSL prints goes to stderr
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        sys.exit(main())
    except SoftbenchError as e:  # the parent shows the end of this process's log
        sys.exit(print_error(str(e), e.hint, e.exit_code))
