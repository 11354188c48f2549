"""The sustained protocol's engine (softbench.core.protocol.SustainedProtocol): each kernel in blocks long
enough for its own power and clock equilibrium, `cycles` blocks per kernel in the balanced order. A block is
one `block` request to that kernel's worker, which settles (softbench.runtime.settle) and then measures with
the energy counter around the measured windows; its windows are streamed and recorded as they come."""

from __future__ import annotations

from typing import Callable

import numpy as np

from softbench.core.protocol import SustainedProtocol
from softbench.latency.schedule import cycle_order


def block_summary(label: str, cycle: int, position: int, windows: list[dict], result: dict) -> dict:
    """One block's numbers from its measured windows and the worker's reply."""
    measured = [w for w in windows if w.get("phase") == "measure"]
    ms = [w["ms_per_call"] for w in measured]

    def mean_of(key):
        vals = [w[key] for w in measured if w.get(key) is not None]
        return float(np.mean(vals)) if vals else None

    forwards = result.get("forwards") or 0
    energy = result.get("energy_j")
    return {
        "label": label, "cycle": cycle, "position": position, "windows": len(measured),
        "settle_windows": len(windows) - len(measured),
        "median_ms": float(np.median(ms)) if ms else None,
        "power_w_mean": mean_of("gpu_power_w"), "sm_clock_mhz_mean": mean_of("gpu_sm_clock_mhz"),
        "throttled_windows": sum(bool(w.get("gpu_throttled")) for w in measured),
        "energy_j": energy, "forwards": forwards,
        "energy_per_forward_mj": (1e3 * energy / forwards) if (energy is not None and forwards) else None,
        "settle": result.get("settle"), "measure_s": result.get("measure_s"),
    }


def measure_sustained(proto: SustainedProtocol, workers: dict, record: Callable[[dict], None],
                      record_block: Callable[[dict], None], progress) -> dict:
    labels = list(workers)
    settle = proto.settle_rule()
    blocks = []
    for cycle in range(proto.cycles):
        for pos, label in enumerate(cycle_order(labels, cycle)):
            progress.message(f"block {len(blocks) + 1}/{proto.cycles * len(labels)}: {label} "
                             f"(settle {proto.settle_min_s:g}-{proto.settle_max_s:g} s, then {proto.measure_s:g} s)")
            windows: list[dict] = []

            def on_window(msg: dict, label=label, cycle=cycle, pos=pos, windows=windows) -> None:
                rec = {"label": label, "variant": workers[label].variant, "round": 0, "cycle": cycle,
                       "position": pos, **msg["window"]}
                windows.append(rec)
                record(rec)
                progress.window(label, rec)

            result = workers[label].request("block", on_stream=on_window, calls=proto.calls,
                                            measure_s=proto.measure_s, settle=settle)["result"]
            blocks.append(block_summary(label, cycle, pos, windows, result))
            record_block(blocks[-1])
    return {"blocks": len(blocks)}
