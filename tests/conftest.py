import atexit
import importlib.metadata
import io
import json
import locale
import os
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLI_SERVER = Path(__file__).resolve().parent / "cli_server.py"
# SOFTBENCH_TESTS_FRESH_CLI=1: every command line in a fresh interpreter, as before cli_server existed (slower)
FRESH_CLI = os.environ.get("SOFTBENCH_TESTS_FRESH_CLI") == "1"

# Triton's interpreter for every test module, whichever runs first: Triton reads TRITON_INTERPRET when it is first
# imported, and the interpreter test modules (test_emulated_exp2, test_folded_kernel, ...) set it at their top, so a
# run that imported a module which imports triton before them (pytest tests/test_gluon_attn.py
# tests/test_emulated_exp2.py) failed in their kernels. The cross-compile tests run triton_compile in a process of
# their own with TRITON_INTERPRET taken out of its environment.
os.environ.setdefault("TRITON_INTERPRET", "1")

# Under pytest-xdist (`make test` runs one worker per core) each worker and every process it starts (cli_server,
# the commands' workers, torchrun's ranks) runs torch and OpenBLAS on one thread, unless OMP_NUM_THREADS was set:
# left at their default of one thread per core, two workers keep four busy threads on two cores (measured on the
# interpreter kernel and fidelity tests: a third more CPU time, and as much more wall time). Set here, before any
# test module imports torch; a test that gives OMP_NUM_THREADS to its command itself still wins.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if "torch" in sys.modules:  # not so far: no plugin imports it before this file
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def fa4_installed() -> bool:
    try:
        return importlib.metadata.version("flash-attn-4") == "4.0.0b36"
    except importlib.metadata.PackageNotFoundError:
        return False


class _CliServer:
    """One tests/cli_server.py process: it forks a child per command line, one at a time."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, str(CLI_SERVER)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd=ROOT)
        self._reply()  # {"ready": true} once the libraries are imported

    def _reply(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"tests/cli_server.py exited (code {self.proc.wait()})")
        return json.loads(line)

    def run(self, module, args, cwd, env, timeout) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="softbench-cli-") as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            out.touch()
            err.touch()
            self.proc.stdin.write(json.dumps({"module": module, "args": list(args), "cwd": str(cwd), "env": env,
                                              "stdout": str(out), "stderr": str(err), "timeout": timeout}) + "\n")
            self.proc.stdin.flush()
            reply = self._reply()
            cmd = [sys.executable, "-m", module, *args]
            stdout, stderr = _text(out.read_bytes()), _text(err.read_bytes())
        if reply.get("timed_out"):
            raise subprocess.TimeoutExpired(cmd, timeout, stdout, stderr)
        return subprocess.CompletedProcess(cmd, reply["returncode"], stdout, stderr)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _text(data: bytes) -> str:
    """As subprocess.run(text=True) decodes: the locale's encoding, universal newlines."""
    return io.TextIOWrapper(io.BytesIO(data), encoding=locale.getpreferredencoding(False)).read()


class _CliPool:
    """Up to one server per core, started when first needed; a caller takes a free one (the bad-input cases run
    from a thread pool)."""

    def __init__(self, size: int):
        self.size, self.started, self.starting = size, [], 0
        self.free: queue.Queue = queue.Queue()
        self.lock = threading.Lock()
        atexit.register(self.close)

    def take(self) -> _CliServer:
        with self.lock:
            start = self.free.empty() and self.starting < self.size
            self.starting += start
        if not start:
            return self.free.get()
        server = _CliServer()  # outside the lock: two callers start their servers at once
        self.started.append(server)
        return server

    def give(self, server: _CliServer) -> None:
        self.free.put(server)

    def close(self) -> None:
        for s in self.started:
            s.close()


_POOL = _CliPool(max(2, os.cpu_count() or 2))


def run_module(module: str, *args, cwd=None, env=None, timeout=300) -> subprocess.CompletedProcess:
    """Run `python -m MODULE ...` in a process of its own, as a user (or softbench itself) would: a child forked
    from tests/cli_server.py, whose only difference from a fresh interpreter is that torch and a few other
    libraries are already imported (that module says why that is safe). `env` is added to this process's
    environment; a name given None is removed from it."""
    full_env = {k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None}
    if FRESH_CLI:
        return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                              cwd=cwd or ROOT, env=full_env, timeout=timeout)
    server = _POOL.take()
    try:
        return server.run(module, args, cwd or ROOT, full_env, timeout)
    finally:
        _POOL.give(server)


def run_cli(*args, cwd=None, env=None, timeout=300) -> subprocess.CompletedProcess:
    """`python -m softbench ...` in a process of its own (run_module)."""
    return run_module("softbench", *args, cwd=cwd, env=env, timeout=timeout)


@pytest.fixture
def cli():
    return run_cli


def interrupt_when(args: list[str], cwd, ready, what: str, timeout: float = 120.0) -> tuple[int, str]:
    """Start `args`, send it SIGINT (a Ctrl-C) once `ready()` holds, and return (exit code, stderr).

    The process starts with SIGINT at its default, as a terminal starts it: a shell without job control starts
    background jobs with SIGINT ignored, and Python keeps an inherited SIG_IGN instead of raising
    KeyboardInterrupt (as `nohup softbench ... &` wants), so the command would never see this Ctrl-C."""
    import signal
    import time

    proc = subprocess.Popen(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + timeout
    while not ready():
        if time.time() > deadline:
            proc.kill()
            pytest.fail(f"{what} within {timeout:g} s")
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err
