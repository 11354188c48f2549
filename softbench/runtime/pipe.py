"""The request loop every worker process runs: JSON requests on stdin, JSON replies on a private copy of stdout.

stdout itself is pointed at stderr first, so whatever FA4, CuTe DSL, transformers or torch print lands in the
worker's log and never corrupts the protocol. Errors become replies ({"ok": false, "type": ...}) that the parent
(softbench.runtime.client.WorkerProcess) turns back into softbench errors; the parent decides what they mean."""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Callable

from softbench.core.errors import SoftbenchError

Send = Callable[[dict], None]


def serve(handle: Callable[[str, dict, Send], dict]) -> int:
    """Answer requests until "exit" or end of input. `handle(op, request, send)` returns the reply's fields (it may
    `send` streamed messages first) and raises UsageError for an op it does not know."""
    proto = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    def send(obj: dict) -> None:
        proto.write(json.dumps(obj, default=str) + "\n")
        proto.flush()

    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        op = req.get("op")
        if op == "exit":
            send({"ok": True})
            return 0
        try:
            send({"ok": True, **handle(op, req, send)})
        except SoftbenchError as e:
            send({"ok": False, "error": str(e), "hint": e.hint, "type": type(e).__name__})
        except Exception as e:  # reported with the traceback in this worker's log
            traceback.print_exc()
            send({"ok": False, "error": f"{type(e).__name__}: {e}", "type": "MeasurementError"})
    return 0
