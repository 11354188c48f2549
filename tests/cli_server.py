"""The tests' way to run `python -m softbench ...` cheaply: a Python process that has imported the heavy
third-party libraries once and forks a child for each command line (conftest.run_cli talks to it).

Why: a fresh interpreter spends about 3 s of CPU importing torch before softbench can refuse a bad option, and the
tests run the command line over a hundred times (tests/test_bad_input.py alone eighty), on two cores.

What stays as a user would have it: each command line runs in its own process, with its own argv, working
directory, environment, stdin (empty), stdout, stderr and exit code, and imports softbench itself afresh (this
process never imports it, so import-time reads of the environment happen in the child). Only the libraries in
PRELOAD are already in memory; none of them reads at import time the environment that tests give run_cli (triton,
which reads TRITON_INTERPRET, is left out on purpose). One that they do read then is OMP_NUM_THREADS (torch's
OpenMP runtime starts with torch): a test that sets it runs its command with subprocess itself.

Protocol: one JSON request per line on stdin ({"module", "args", "cwd", "env", "stdout", "stderr", "timeout"}: the
child runs `python -m MODULE ARGS`, softbench unless named, its output going to the two files), one JSON reply per
line on stdout ({"returncode"} or {"timed_out": true}). End of stdin ends the server."""

from __future__ import annotations

import importlib
import json
import os
import runpy
import signal
import sys
import time
import traceback

PRELOAD = ("torch", "numpy", "pandas", "yaml", "click", "rich.console")


def _exit_code(e: SystemExit) -> int:
    """What the interpreter makes of a SystemExit that reaches it: None is 0, a number itself, anything else is
    printed on stderr and is 1."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def _child(req: dict) -> None:
    """In the forked child: become `python -m MODULE ARGS` run in req's folder with req's environment."""
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    # `python -m` puts the working directory first on sys.path, then PYTHONPATH's entries
    extra = [p for p in req["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [os.getcwd()] + extra + [p for p in sys.path[1:] if p not in extra]
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, req["stdout"], os.O_WRONLY | os.O_TRUNC),
                            (2, req["stderr"], os.O_WRONLY | os.O_TRUNC)):
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    module = req.get("module") or "softbench"
    sys.argv = [module, *req["args"]]
    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = _exit_code(e)
    except BaseException:  # as the interpreter reports an uncaught exception
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _run(req: dict) -> dict:
    sys.stdout.flush()  # nothing of this process's own output may reach the child's files
    pid = os.fork()
    if pid == 0:
        try:
            _child(req)
        finally:
            os._exit(70)  # not reached unless _child itself failed before running the command
    deadline = time.monotonic() + float(req.get("timeout") or 300)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return {"returncode": os.waitstatus_to_exitcode(status)}
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return {"timed_out": True}
        time.sleep(0.005)


def main() -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        print(json.dumps(_run(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
