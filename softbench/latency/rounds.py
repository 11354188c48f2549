"""The paper's rounds protocol (Appendix B.3), unchanged: per round, each kernel's process runs its warm-up
calls and then its windows, the order alternating between rounds (A0A1, A1A0, A0A1, ...). It mixes the
speed-up at equal clock with the sustained one (each process starts from the clock the other left), which is
why it is kept only for reproducing the paper."""

from __future__ import annotations

from softbench.core.session import Session
from softbench.core.shapes import Shape
from softbench.core.utc import utc_iso
from softbench.latency.summary import summarize_latency
from softbench.runtime.kernels import prepare_all
from softbench.runtime.session_runner import session_run

WINDOWS_FILE = "windows.jsonl"


def run_rounds(opts, shape: Shape, workers: dict, env: dict, progress) -> Session:
    from softbench.latency.engine import protocol_record, session_env, session_tag

    base_label, var_label = opts.labels()
    p = opts.protocol
    order = p.round_order(base_label, var_label)
    state: dict = {"windows": [], "smoke": {}}

    def finish(session: Session, complete: bool, reason: str | None) -> None:
        _finish(session, opts, shape, state["windows"], state["smoke"], order, complete, reason)

    with session_run(opts.out_dir, "latency", session_tag(opts, shape),
                     env=session_env(opts, env, workers),
                     protocol={**protocol_record(opts, shape, workers), "order": [list(o) for o in order]},
                     finish=finish, workers=lambda: workers.values()) as session:
        state["smoke"] = prepare_all(workers, shape, p.seed, progress.message)
        session.write_json("smoke.json", state["smoke"])
        for r, pair in enumerate(order):
            for pos, label in enumerate(pair):
                w = workers[label]
                progress.message(f"{shape.tag()}: round {r + 1}/{p.rounds}, {label}")

                def on_window(msg: dict, r=r, pos=pos, label=label, w=w) -> None:
                    rec = {"round": r, "position": pos, "label": label, "variant": w.variant, "pid": w.pid,
                           "utc": utc_iso(), **msg["window"]}
                    session.append(WINDOWS_FILE, rec)
                    state["windows"].append(rec)
                    progress.window(label, rec)

                w.request("round", on_stream=on_window, round=r, warmup=p.warmup, windows=p.windows, calls=p.calls)
    return session


def _finish(session: Session, opts, shape: Shape, windows: list[dict], smoke: dict, order: list, complete: bool,
            reason: str | None = None) -> None:
    from softbench.latency.engine import write_summary

    base_label, var_label = opts.labels()
    summary = summarize_latency(windows, base_label, var_label, shape.flops)
    write_summary(session, opts, shape, summary, complete, reason, order=[list(o) for o in order], smoke=smoke,
                  protocol_kind="paper", quantity=opts.protocol.quantity)
