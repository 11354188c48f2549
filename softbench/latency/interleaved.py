"""The interleaved protocol's engine (softbench.core.protocol.InterleavedProtocol): the speed-up at equal clock.

Phases: warm-up (windows of every kernel in the measuring order until the board's power and SM clock settle,
softbench.runtime.settle), then per round: cycles of one window per kernel in a fresh random order (or the
carry-over circuit; softbench.latency.schedule), until every gated comparison's paired interval is narrow enough, the time budget is spent, or the pair limit is reached. Each window is handed to
`record` as soon as it is measured, with its predecessor.

The engine speaks to its workers only through `request(op, **fields)`, and reads time only through `clock`, so
that the tests drive it with a fake worker and a fake clock."""

from __future__ import annotations

import secrets
import time
from typing import Callable

import numpy as np

from softbench.core.protocol import MAX_WINDOW_CALLS, InterleavedProtocol
from softbench.latency.schedule import carryover_circuit, circuit_cycle, random_cycle
from softbench.latency.summary import paired_estimate
from softbench.runtime.settle import SettleRule, Settler


# calls in the sizing window: enough that one call's launch and the synchronisation do not dominate it
SIZING_CALLS = 5


def size_windows(proto: InterleavedProtocol, baseline_worker, record: Callable[[dict], None]) -> dict:
    """How many calls a window holds: `proto.calls` when fixed, else as many of the baseline's calls as fill
    `proto.window_ms`, from one window of SIZING_CALLS calls (recorded with phase "sizing", never paired)."""
    if proto.calls is not None:
        return {"calls": proto.calls, "rule": "fixed by the protocol"}
    rec = baseline_worker.request("window", calls=SIZING_CALLS, untimed=proto.untimed)["result"]
    record({"label": baseline_worker.label, "variant": baseline_worker.variant, "predecessor": None,
            "phase": "sizing", "round": -1, "cycle": -1, **rec})
    calls = int(min(MAX_WINDOW_CALLS, max(1, round(proto.window_ms / rec["ms_per_call"]))))
    return {"calls": calls, "window_ms_target": proto.window_ms, "sized_from_ms_per_call": rec["ms_per_call"],
            "rule": f"as many of the baseline's calls as fill {proto.window_ms:g} ms (one window of "
                    f"{SIZING_CALLS} calls before the warm-up)"}


def measure_interleaved(proto: InterleavedProtocol, workers: dict, baseline: str, gated: list[str],
                        record: Callable[[dict], None], progress, clock: Callable[[], float] = time.monotonic) -> dict:
    """Returns what happened: the warm-up's verdict and, per round, its cycles, pairs, time and stopping reason.
    `gated`: the labels whose paired interval against `baseline` must reach the target (the variants and the
    null; reference kernels are measured alongside but do not hold the run up)."""
    labels = list(workers)
    circuit = carryover_circuit(labels) if proto.order == "circuit" else None
    order_seed = proto.order_seed if proto.order_seed is not None else secrets.randbits(32)
    rng = np.random.default_rng(order_seed)
    slot = "predecessor" if circuit else None

    def cycle_windows(cycle: int) -> list[str]:
        return circuit_cycle(circuit, cycle) if circuit else random_cycle(labels, rng)

    last: list[str] = []
    sizing = size_windows(proto, workers[baseline], record)
    window_fields = {"calls": sizing["calls"], "untimed": proto.untimed}

    def one_window(label: str, extra: dict) -> dict:
        rec = workers[label].request("window", **window_fields)["result"]
        rec = {"label": label, "variant": workers[label].variant, "predecessor": last[-1] if last else None,
               **extra, **rec, "t_parent_s": clock()}
        last[:] = [label]
        record(rec)
        progress.window(label, rec)
        return rec

    # --- warm-up: the same mix of kernels the measurement runs, until power and clock settle ---------------
    progress.message(f"warm-up: at least {proto.warmup_min_s:g} s, until power and SM clock settle")
    settler = Settler(SettleRule(min_s=proto.warmup_min_s, max_s=proto.warmup_max_s), clock())
    cycle = 0
    while True:
        for label in cycle_windows(cycle):
            rec = one_window(label, {"phase": "warmup", "round": -1, "cycle": cycle})
            settler.add(clock(), rec.get("gpu_power_w"), rec.get("gpu_sm_clock_mhz"))
        cycle += 1
        verdict = settler.verdict()
        if verdict.done:
            break
    run = {"window": sizing, "warmup": {**verdict.to_dict(), "cycles": cycle, "rule": settler.rule.to_dict()},
           "rounds": [],
           "order": {"kind": proto.order, "circuit": circuit, "seed": order_seed,
                     "seed_rule": "fixed by the protocol" if proto.order_seed is not None else "drawn for this run",
                     "pairing": "windows with the same predecessor, per cycle" if circuit else "one pair per cycle"}}

    # --- rounds: cycles until the stopping rule says so -----------------------------------------------------
    for rnd in range(proto.rounds):
        measured: list[dict] = []
        t0 = clock()
        cycle, reason, widths = 0, None, {}
        while reason is None:
            for pos, label in enumerate(cycle_windows(cycle)):
                measured.append(one_window(label, {"phase": "measure", "round": rnd, "cycle": cycle,
                                                   "position": pos}))
            cycle += 1
            n_pairs = cycle * len(labels) if circuit else cycle  # circuit: one pair per predecessor per cycle
            elapsed = clock() - t0
            if n_pairs >= proto.min_pairs and (cycle % proto.check_every == 0 or elapsed >= proto.budget_s):
                # the summary's own estimator and bootstrap seed (its default, not the inputs' --seed), so that
                # the run stops on the interval it will report
                estimates = {g: paired_estimate(measured, baseline, g, "interleaved", "ms_per_call", slot)
                             for g in gated}
                widths = {g: e["half_width_pp"] if e else float("nan") for g, e in estimates.items()}
                if all(w <= proto.target_pp for w in widths.values()):
                    reason = f"target reached: every 95% half-width <= {proto.target_pp} pp"
                    break
            if elapsed >= proto.budget_s:
                reason = f"time budget of {proto.budget_s:g} s spent"
            elif n_pairs >= proto.max_pairs:
                reason = f"pair limit of {proto.max_pairs} reached"
            progress.message(f"round {rnd + 1}/{proto.rounds}: {n_pairs} pairs, {elapsed:.1f} s"
                             + (", half-widths " + ", ".join(f"{g} {w:.2f} pp" for g, w in widths.items())
                                if widths else ""))
        run["rounds"].append({"round": rnd, "cycles": cycle, "pairs": n_pairs, "measure_s": clock() - t0,
                              "stop_reason": reason,
                              "half_width_pp_at_stop": widths})
    return run
