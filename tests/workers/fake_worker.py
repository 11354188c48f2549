"""A stand-in worker for tests/test_runtime.py: softbench.runtime.pipe.serve with a handful of ops, no kernels.
Started by WorkerProcess through its `wrap` prefix; the arguments that follow (the real worker's) are ignored."""

import os
import sys
import time

from softbench.core.errors import UnsupportedError, UsageError
from softbench.runtime.pipe import serve


def handle(op, req, send):
    if op == "load":
        return {"result": {"variant": req["variant"], "backend": req["backend"]}}
    if op == "echo":
        print("library chatter on stdout")  # must land in the log, not in the protocol
        return {"result": req.get("value")}
    if op == "stream":
        for i in range(req["n"]):
            send({"progress": i})
        return {"result": "streamed"}
    if op == "refuse":
        raise UnsupportedError("not on this machine", hint="use another one")
    if op == "raise":
        raise ValueError("a bug")
    if op == "hang_up":  # the reply pipe closes before the process ends, as when a worker is being torn down
        os.closerange(3, 256)
        time.sleep(0.5)
        os._exit(5)
    if op == "crash":
        print("last words before the crash", file=sys.stderr, flush=True)
        os._exit(3)
    raise UsageError(f"unknown op {op!r}")


if __name__ == "__main__":
    sys.exit(serve(handle))
