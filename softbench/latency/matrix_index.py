"""The index of a latency matrix run across GPUs (softbench.latency.matrix): every rank reports its sessions,
rank 0 writes one `matrix` session folder holding index.json and index.md, which list every session of the run
with its cell, rank, GPU (index, CUDA_VISIBLE_DEVICES, UUID), state, estimates, median SM clock and power, and
name every cell or control run that has no session. The cells' own sessions stay where each rank wrote them."""

from __future__ import annotations

from softbench.core.session import Session
from softbench.core.stats import change_pct
from softbench.core.utc import parse_utc, utc_iso
from softbench.latency.summary import median_or_none

COMMAND = "matrix"
PHASES = (None, "together", "alone")


def session_entry(cell: int, phase: str | None, session: Session) -> dict:
    """One session as the index lists it: read back from its files, so a partial session is listed as well."""
    summary = session.read_json("summary.json") if session.has("summary.json") else {}
    place = summary.get("placement") or {}
    status = session.status()
    windows = [w for w in session.read_records("windows.jsonl") if w.get("phase") in ("measure", None)]
    utc = sorted(w["utc"] for w in windows if w.get("utc"))
    return {
        "cell": cell, "phase": phase, "session": session.path.name, "shape_tag": summary.get("shape_tag"),
        "complete": bool(status.get("complete")), "state": status.get("state"),
        **{k: place.get(k) for k in ("rank", "gpu", "cuda_visible_devices", "gpu_uuid")},
        "speedup_pct": summary.get("speedup_pct"),
        "speedup_ci95_pct": summary.get("speedup_ci95_pct") or summary.get("bootstrap_ci95_pct"),
        "null_pct": summary.get("null_pct"), "null_ci95_pct": summary.get("null_ci95_pct"),
        "baseline_ms": (summary.get("median_ms") or {}).get(summary.get("baseline")),
        # over every measured window of every kernel: the board's state while this session measured
        "sm_clock_mhz_median": median_or_none(w.get("gpu_sm_clock_mhz") for w in windows),
        "power_w_median": median_or_none(w.get("gpu_power_w") for w in windows),
        "measured_from_utc": utc[0] if utc else None, "measured_to_utc": utc[-1] if utc else None,
    }


def rank_report(ranks, pin, done: list, error) -> dict:
    """What a rank sends rank 0: where it ran, its sessions (complete or partial), and why it stopped if it did."""
    return {"rank": ranks.rank, **pin.to_dict(), "error": None if error is None else str(error),
            "sessions": [session_entry(step.cell, step.phase, s) for step, s in done]}


def expected_runs(n_cells: int, world: int, control: bool) -> list[tuple[int, str | None, int]]:
    """(cell, phase, rank) of every session the run should make."""
    if control:
        return [(0, phase, r) for phase in ("together", "alone") for r in range(world)]
    return [(i, None, i % world) for i in range(n_cells)]


def aa_estimate(entry: dict) -> tuple[float | None, list | None]:
    """The A/A estimate of a control session: the interleaved/sustained null, else (paper rounds) the speed-up
    of the baseline's second process over the first."""
    if entry.get("null_pct") is not None:
        return entry["null_pct"], entry.get("null_ci95_pct")
    return entry.get("speedup_pct"), entry.get("speedup_ci95_pct")


def _seconds(utc: str) -> float:
    return parse_utc(utc).timestamp()  # one recorded without an offset is UTC, not this machine's local time


def control_comparison(sessions: list[dict]) -> dict:
    """Per GPU: the A/A estimate and the baseline's time per call with every GPU busy and alone; and how long
    all the 'together' sessions were measuring at the same time."""
    by = {(e["phase"], e["rank"]): e for e in sessions}
    gpus = []
    for rank in sorted({e["rank"] for e in sessions if e["rank"] is not None}):
        t, a = by.get(("together", rank), {}), by.get(("alone", rank), {})
        t_ms, a_ms = t.get("baseline_ms"), a.get("baseline_ms")
        (t_aa, t_ci), (a_aa, a_ci) = aa_estimate(t), aa_estimate(a)
        gpus.append({"rank": rank, "gpu": (t or a).get("gpu"), "gpu_uuid": (t or a).get("gpu_uuid"),
                     "together_aa": t_aa, "together_aa_ci95": t_ci, "alone_aa": a_aa, "alone_aa_ci95": a_ci,
                     "together_baseline_ms": t_ms, "alone_baseline_ms": a_ms,
                     # above 0: the baseline ran slower while the neighbours ran
                     "together_vs_alone_pct": change_pct(t_ms, a_ms),
                     "together_sm_clock_mhz": t.get("sm_clock_mhz_median"),
                     "alone_sm_clock_mhz": a.get("sm_clock_mhz_median")})
    spans = [(_seconds(e["measured_from_utc"]), _seconds(e["measured_to_utc"])) for e in sessions
             if e["phase"] == "together" and e.get("measured_from_utc")]
    overlap = max(0.0, min(b for _, b in spans) - max(a for a, _ in spans)) if spans else None
    return {"gpus": gpus, "together_overlap_s": overlap,
            "together_spans_s": [round(b - a, 3) for a, b in spans]}


def write_index(opts, world: int, control: bool, reports: list[dict], source: str, command_line: str) -> Session:
    """Rank 0: the index session of the run; complete when every expected session is there and complete."""
    from softbench.latency.render import matrix_markdown

    sessions = sorted((e for r in reports for e in r["sessions"]),
                      key=lambda e: (e["cell"], PHASES.index(e["phase"]), e["rank"] if e["rank"] is not None else -1))
    have = {(e["cell"], e["phase"], e["rank"]) for e in sessions}
    reported = {r["rank"] for r in reports}
    missing = [{"cell": c, "phase": p, "rank": r} for c, p, r in expected_runs(len(opts.shapes), world, control)
               if (c, p, r) not in have]
    index = {
        "command": COMMAND, "kind": "control" if control else "cells", "created_utc": utc_iso(),
        "command_line": command_line, "protocol_source": source, "protocol": opts.protocol.to_dict(),
        "backend": opts.backend, "baseline": opts.baseline, "variant": opts.variant, "world_size": world,
        "cells": [{"cell": i, "shape_tag": s.tag(), "rank": None if control else i % world}
                  for i, s in enumerate(opts.shapes[:1] if control else opts.shapes)],
        "ranks": [{k: r.get(k) for k in ("rank", "gpu", "cuda_visible_devices", "launch_cuda_visible_devices",
                                         "error")} for r in reports]
                 + [{"rank": r, "error": "no report (the rank stopped before the end)"}
                    for r in range(world) if r not in reported],
        "sessions": sessions, "missing": missing,
    }
    if control:
        index["control"] = control_comparison(sessions)
    index["complete"] = not missing and all(e["complete"] for e in sessions) and not any(
        r.get("error") for r in index["ranks"])
    if not index["complete"]:
        index["incomplete_reason"] = "sessions missing or partial, or a rank stopped"
    tag = f"control-{opts.shapes[0].tag()}" if control else (source.rsplit("/", 1)[-1].removesuffix(".yaml"))
    session = Session.create(opts.out_dir, COMMAND, f"{tag}-{world}gpus")
    session.write_json("index.json", index)
    session.write_text("index.md", matrix_markdown(index, session.path.name))
    session.set_status(complete=index["complete"], state="complete" if index["complete"] else "partial",
                       reason=index.get("incomplete_reason"))
    return session
