"""The session runner every measuring command uses: it creates the session, writes env.json and protocol.yaml,
turns SIGTERM into the same path as Ctrl-C (the session is kept and marked partial, with the reason), restores
the signal handlers it replaced, copies the worker logs into a session that did not complete, and lets the
command write its summary once, complete or partial, through one `finish` callback."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator

from softbench.core.session import Session, file_label
from softbench.core.utc import utc_iso


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered as an interrupt so that every `except KeyboardInterrupt` path treats it alike."""


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return

    def handler(signum, frame):
        raise Terminated("terminated (SIGTERM)")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def sigterm_deferred() -> Iterator[None]:
    """Hold SIGTERM off while a partial session is written: under torchrun it follows a dead rank's error at
    once, and would otherwise cut the status and the summary short. The exception being handled still
    propagates afterwards, so the process ends as it would have."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def describe_failure(exc: BaseException) -> str:
    if isinstance(exc, Terminated):
        return "terminated (SIGTERM)"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted by the user"
    return f"{type(exc).__name__}: {exc}"


Finish = Callable[[Session, bool, "str | None"], None]


@contextmanager
def session_run(out_dir: Path, command: str, tag: str, *, env: dict, protocol: dict, finish: Finish,
                workers: Callable[[], Iterable] = tuple) -> Iterator[Session]:
    """`with session_run(...) as session:` measure, appending raw records to `session` as they come.
    `finish(session, complete, reason)` writes the summary and the status; it runs exactly once. `workers()`
    names the worker processes whose logs a partial session keeps. The exception still propagates, carrying
    the session's path as `partial_session` for the CLI's message."""
    session = Session.create(out_dir, command, tag)
    with sigterm_as_interrupt():
        try:
            session.write_json("env.json", env)
            session.write_yaml("protocol.yaml", {**protocol, "started_utc": utc_iso()})
            yield session
        except BaseException as exc:
            reason = describe_failure(exc)
            try:
                finish(session, False, reason)
            except Exception as inner:  # the summary could not be written: the status still says partial
                session.set_status(complete=False, state="partial", reason=f"{reason}; summary failed: {inner}")
            for w in workers():
                w.copy_log(session.path / f"worker-{file_label(w.label)}.log")
            try:
                exc.partial_session = str(session.path)
            except AttributeError:
                pass
            raise
        try:
            finish(session, True, None)
        except BaseException as exc:  # measured in full, but the summary failed: say so rather than "running"
            session.set_status(complete=False, state="partial", reason=f"summary failed: {describe_failure(exc)}")
            raise
