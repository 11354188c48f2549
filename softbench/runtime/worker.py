"""The per-process timing loop. One worker process serves one kernel variant for a whole command: the parent
sends it JSON requests on stdin (load, prepare, window, block, round, energy_loop, probabilities, exit) and reads JSON replies on the protocol pipe.
Keeping the worker alive across rounds keeps the alternation of variants without paying FA4's import (about
9 s) and compile every round.

Everything the libraries print goes to stderr; stdout carries only the protocol."""

from __future__ import annotations

import os
import sys
import time
from typing import Callable

from softbench.core.errors import SoftbenchError, UsageError


class Timer:
    """Times back-to-back calls: CUDA events around the window on a GPU, the monotonic clock on the CPU."""

    def __init__(self, device_kind: str):
        self.cuda = device_kind == "cuda"
        if self.cuda:
            import torch

            self.torch = torch

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def window_ms(self, fn: Callable[[], object], calls: int) -> float:
        if self.cuda:
            start = self.torch.cuda.Event(enable_timing=True)
            end = self.torch.cuda.Event(enable_timing=True)
            self.torch.cuda.synchronize()
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end))
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        return (time.perf_counter_ns() - t0) / 1e6


# Fault injection for the tests of partial sessions: the worker dies after this many windows, as a crashed
# kernel would. Unset in normal use.
_FAULT_AFTER = int(os.environ.get("SOFTBENCH_FAULT_AFTER_WINDOWS", "0") or 0)


class WorkerState:
    def __init__(self):
        self.windows_done = 0
        self.backend = None
        self.variant = None
        self.shape = None
        self.inputs = None
        self.forward = None
        # slot 1: a second, separately allocated copy of the same inputs with its own forward, for the A/A null
        # inside this process (latency --null-in-process); slot 0 is inputs/forward above
        self.twin_inputs = None
        self.twin_forward = None
        self.timer = None
        self.nvml = None

    # --- requests ------------------------------------------------------------------------------------
    def load(self, req: dict) -> dict:
        from softbench.kernels.backends import make_backend
        from softbench.core.nvml import Nvml

        self.backend = make_backend(req["backend"], **req.get("options", {}))
        self.variant = req["variant"]
        t0 = time.monotonic()
        info = self.backend.load(self.variant)
        info["load_s"] = round(time.monotonic() - t0, 3)
        info["pid"] = os.getpid()
        info["device"] = {"kind": self.backend.device.kind, "name": self.backend.device.name,
                          "arch": self.backend.device.arch}
        self.timer = Timer(self.backend.device.kind)
        self.nvml = Nvml.try_open() if self.backend.device.kind == "cuda" else None
        # which board this worker reads (its UUID) and the GPUs it was given: under latency --gpus every rank's
        # workers have their own
        info["gpu"] = self.nvml.describe() if self.nvml else None
        info["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
        return info

    def prepare(self, req: dict) -> dict:
        import torch

        from softbench.kernels.inputs import make_inputs
        from softbench.kernels.refs import check_rows, reference_rows, relative_error
        from softbench.core.shapes import Shape

        shape = Shape(**req["shape"])
        slot = int(req.get("slot", 0))
        if slot not in (0, 1):
            raise SoftbenchError(f"input slot {slot}: a worker holds slots 0 and 1")
        device = "cuda" if self.backend.device.kind == "cuda" else "cpu"
        if slot == 0:
            self.shape, self.forward = shape, None
            inputs = self.inputs = make_inputs(shape, req.get("seed", 0), device)
            forward = self.forward = self.backend.build(shape, inputs)
        else:  # the same values again, in memory of their own
            self.twin_forward = None
            inputs = self.twin_inputs = make_inputs(shape, req.get("seed", 0), device)
            forward = self.twin_forward = self.backend.build(shape, inputs)
        t0 = time.monotonic()
        with torch.inference_mode():
            out = forward()  # first call compiles
            self.timer.sync()
            compile_s = time.monotonic() - t0
            rows = check_rows(shape.seq, req.get("check_rows", 64))
            ref = reference_rows(inputs.q, inputs.k, inputs.v, shape.causal, rows, descale=inputs.descale)
            got = out[:, rows.to(out.device)]
            finite = bool(torch.isfinite(out).all())
            return {
                "slot": slot,
                "compile_s": round(compile_s, 3),
                "rel_error_vs_fp32": relative_error(got, ref),
                "activation_mean": float(out.float().mean()),
                "finite": finite,
                "check_rows": int(rows.numel()),
                "out_dtype": str(out.dtype).replace("torch.", ""),
                # what the backend actually built (e.g. the Triton tile configuration, or why it fell back)
                "build_info": getattr(forward, "info", None),
            }

    def round(self, req: dict, emit: Callable[[dict], None]) -> dict:
        import torch

        if self.forward is None:
            raise SoftbenchError("round requested before prepare")
        calls, windows = int(req["calls"]), int(req["windows"])
        with torch.inference_mode():
            for _ in range(int(req["warmup"])):
                self.forward()
            self.timer.sync()
            for w in range(windows):
                emit({"window": {"window": w, **self._timed_window(calls)}})
        return {"windows": windows}

    def _reading(self) -> dict:
        reading = self.nvml.read().to_dict() if self.nvml else {}
        return {f"gpu_{k}": v for k, v in reading.items() if k != "time_s"}

    def _timed_window(self, calls: int, forward: Callable[[], object] | None = None) -> dict:
        ms = self.timer.window_ms(forward or self.forward, calls)
        self.windows_done += 1
        if _FAULT_AFTER and self.windows_done >= _FAULT_AFTER:
            os._exit(17)
        return {"calls": calls, "window_ms": ms, "ms_per_call": ms / calls, "t_s": time.monotonic(),
                **self._reading()}

    def window(self, req: dict) -> dict:
        """One window of the interleaved protocol: `untimed` calls first (the kernel's caches and the clock have
        just served another process), then `calls` timed back to back."""
        import torch

        forward = self.twin_forward if int(req.get("slot", 0)) == 1 else self.forward
        if forward is None:
            raise SoftbenchError(f"window requested before prepare (slot {int(req.get('slot', 0))})")
        with torch.inference_mode():
            for _ in range(int(req.get("untimed", 0))):
                forward()
            return self._timed_window(int(req["calls"]), forward)

    def _settle(self, rule: dict, step: Callable[[], tuple]):
        """Run `step` (one unit of work returning its time, power and SM clock) until the readings settle by
        softbench.runtime.settle's rule; the verdict says when and why."""
        from softbench.runtime.settle import SettleRule, run_until_settled

        return run_until_settled(SettleRule(**rule), step, time.monotonic())

    def block(self, req: dict, emit: Callable[[dict], None]) -> dict:
        """One block of the sustained protocol: windows back to back until this kernel's own power and clock
        equilibrium (softbench.runtime.settle), then `measure_s` seconds of windows bracketed by the energy
        counter. Every window is streamed with its phase."""
        import torch

        if self.forward is None:
            raise SoftbenchError("block requested before prepare")
        calls, measure_s = int(req["calls"]), float(req["measure_s"])
        counter = self.nvml is not None and self.nvml.has_energy_counter()

        def settle_window():
            rec = self._timed_window(calls)
            emit({"window": {**rec, "phase": "settle"}})
            return rec["t_s"], rec.get("gpu_power_w"), rec.get("gpu_sm_clock_mhz")

        with torch.inference_mode():
            verdict = self._settle(req.get("settle", {}), settle_window)
            energy_start_j = self.nvml.total_energy_j() if counter else None
            t0 = time.monotonic()
            forwards = 0
            while time.monotonic() - t0 < measure_s:
                rec = self._timed_window(calls)
                forwards += calls
                emit({"window": {**rec, "phase": "measure"}})
            t1 = time.monotonic()
            energy_end_j = self.nvml.total_energy_j() if counter else None
        return {"settle": verdict.to_dict(), "measure_s": t1 - t0, "forwards": forwards,
                "energy_j": (energy_end_j - energy_start_j) if counter else None}

    def energy_loop(self, req: dict) -> dict:
        """Sustained loop for energy: warm-up, then chunks of `chunk` calls each followed by a synchronize, for
        `seconds`; the board's NVML energy counter is read right after the warm-up's synchronize and right after
        the last chunk's, so the counter brackets exactly the timed loop."""
        import torch

        if self.forward is None:
            raise SoftbenchError("energy_loop requested before prepare")
        chunk, seconds = int(req.get("chunk", 50)), float(req["seconds"])
        counter = self.nvml is not None and self.nvml.has_energy_counter()
        verdict = None

        def settle_chunk():
            for _ in range(chunk):
                self.forward()
            self.timer.sync()
            r = self._reading()
            return time.monotonic(), r.get("gpu_power_w"), r.get("gpu_sm_clock_mhz")

        with torch.inference_mode():
            for _ in range(int(req.get("warmup", 30))):
                self.forward()
            self.timer.sync()
            if req.get("settle") is not None:  # chunks until this kernel's power and clock settle
                verdict = self._settle(req["settle"], settle_chunk)
            energy_start_j = self.nvml.total_energy_j() if counter else None
            t_start = time.monotonic()
            forwards = 0
            while time.monotonic() - t_start < seconds:
                for _ in range(chunk):
                    self.forward()
                self.timer.sync()
                forwards += chunk
            t_end = time.monotonic()
            energy_end_j = self.nvml.total_energy_j() if counter else None
        return {"forwards": forwards, "loop_s": t_end - t_start, "t_start": t_start, "t_end": t_end,
                "chunk": chunk, "energy_start_j": energy_start_j, "energy_end_j": energy_end_j,
                "settle": verdict.to_dict() if verdict else None}

    def probabilities(self, req: dict) -> dict:
        """The kernel's probabilities read back through one-hot V blocks and saved to req["path"] with the q and k
        they came from (for `softbench gates`, which builds its references in the parent)."""
        from softbench.gates.readback import write_readback

        return write_readback(self.backend, req)


_RESULT_OPS = ("load", "prepare", "window", "energy_loop", "probabilities")


def main() -> int:
    from softbench.runtime.pipe import serve

    state = WorkerState()

    def handle(op: str, req: dict, send) -> dict:
        if op == "round":
            return state.round(req, send)
        if op == "block":
            return {"result": state.block(req, send)}
        if op in _RESULT_OPS:
            return {"result": getattr(state, op)(req)}
        raise UsageError(f"unknown op {op!r}")

    return serve(handle)


if __name__ == "__main__":
    sys.exit(main())
