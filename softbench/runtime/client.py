"""Parent side of a worker process (softbench.runtime.worker): start it, send requests, read replies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from softbench.core import errors
from softbench.core.errors import MeasurementError
from softbench.runtime.launch import NO_NVLS

_ERROR_TYPES = {name: getattr(errors, name) for name in
                ("UsageError", "UnsupportedError", "PatchError", "MeasurementError", "SoftbenchError")}


class WorkerProcess:
    """One kernel variant in its own Python process."""

    def __init__(self, label: str, backend: str, variant: str, options: dict | None = None,
                 wrap: list[str] | None = None, env: dict | None = None,
                 module: str = "softbench.runtime.worker", log_path: Path | None = None):
        """`module` is the worker's request loop (the measuring worker, or fidelity's model worker); its
        stderr goes to `log_path`, or to a temporary file that `copy_log` puts into a session."""
        self.label = label
        self.backend = backend
        self.variant = variant
        self.options = options or {}
        self.log = Path(log_path) if log_path else Path(
            tempfile.mkstemp(prefix=f"softbench-worker-{label}-", suffix=".log")[1])
        cmd = (wrap or []) + [sys.executable, "-m", module]
        self._stderr = open(self.log, "a")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     text=True, bufsize=1, env={**os.environ, **NO_NVLS, **(env or {})})
        self.info: dict = {}

    @property
    def name(self) -> str:
        return f"worker {self.label}" + (f" ({self.variant})" if self.variant else "")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def _send(self, req: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
        except OSError:  # a broken pipe, or any other write that a dead worker's pipe refuses
            self._crashed()

    def _crashed(self):
        try:
            code = self.proc.wait(timeout=10)  # the pipe closes just before the process is reaped
        except subprocess.TimeoutExpired:
            code = None
        raise MeasurementError(f"{self.name} exited (code {code}); its log ({self.log}) ends:\n{self.log_tail()}")

    def _reply(self, on_stream: Callable[[dict], None] | None = None) -> dict:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self._crashed()
            msg = json.loads(line)
            if "ok" not in msg:
                if on_stream is None:
                    raise MeasurementError(f"{self.name}: unexpected message {msg}")
                on_stream(msg)
                continue
            if not msg["ok"]:
                cls = _ERROR_TYPES.get(msg.get("type"), MeasurementError)
                raise cls(f"{self.name}: {msg.get('error')}", hint=msg.get("hint"))
            return msg

    def request(self, op: str, on_stream: Callable[[dict], None] | None = None, **fields) -> dict:
        self._send({"op": op, **fields})
        return self._reply(on_stream)

    def load(self) -> dict:
        self.info = self.request("load", backend=self.backend, variant=self.variant, options=self.options)["result"]
        return self.info

    def _send_load(self) -> None:
        self._send({"op": "load", "backend": self.backend, "variant": self.variant, "options": self.options})


    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self._send({"op": "exit"})
                self.proc.wait(timeout=30)
            except Exception:
                self.proc.kill()
        self._stderr.close()

    def copy_log(self, dest: Path) -> None:
        try:
            dest.write_text(self.log.read_text(errors="replace"))
        except OSError:
            pass


def load_all(workers) -> None:
    """Load every worker's kernel at once: the imports (FA4: about 9 s each) run concurrently, the replies are
    read in turn."""
    workers = list(workers)
    for w in workers:
        w._send_load()
    for w in workers:
        w.info = w._reply()["result"]
