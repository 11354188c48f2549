"""The worker runtime without kernels: the serve loop (softbench.runtime.pipe) and the parent's side
(softbench.runtime.client.WorkerProcess), both against tests/workers/fake_worker.py."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from softbench.core.errors import MeasurementError, UnsupportedError, UsageError
from softbench.runtime.client import WorkerProcess

FAKE = str(Path(__file__).parent / "workers" / "fake_worker.py")
ROOT = Path(__file__).resolve().parents[1]


def serve_lines(*requests) -> tuple[list[dict], subprocess.CompletedProcess]:
    """Send the requests, one JSON line each, to a fresh serve loop; its replies, in order, and the process."""
    text = "".join(json.dumps(r) + "\n" for r in requests)
    r = subprocess.run([sys.executable, FAKE], input=text, capture_output=True, text=True, timeout=60, cwd=ROOT)
    return [json.loads(line) for line in r.stdout.splitlines()], r


def test_serve_answers_each_request_in_order_and_stops_at_exit():
    replies, r = serve_lines({"op": "echo", "value": 7}, {"op": "exit"}, {"op": "echo", "value": 8})
    assert replies == [{"ok": True, "result": 7}, {"ok": True}]  # nothing after exit is answered
    assert r.returncode == 0
    assert "library chatter on stdout" in r.stderr  # what the handler prints goes to the log


def test_serve_turns_errors_into_replies_with_their_type_and_hint():
    replies, _ = serve_lines({"op": "refuse"}, {"op": "nope"}, {"op": "raise"}, {"op": "echo", "value": 1})
    refuse, unknown, bug, still = replies
    assert refuse == {"ok": False, "error": "not on this machine", "hint": "use another one",
                      "type": "UnsupportedError"}
    assert unknown["type"] == "UsageError" and "unknown op 'nope'" in unknown["error"]
    assert bug == {"ok": False, "error": "ValueError: a bug", "type": "MeasurementError"}
    assert still == {"ok": True, "result": 1}  # the loop survives every error


def test_serve_streams_messages_before_the_reply_and_ends_with_its_input():
    replies, r = serve_lines({"op": "stream", "n": 2})
    assert replies == [{"progress": 0}, {"progress": 1}, {"ok": True, "result": "streamed"}]
    assert r.returncode == 0  # end of input without exit: a clean end too


@pytest.fixture
def worker():
    w = WorkerProcess("A0", "sim", "A0", options={"tile": 64}, wrap=[sys.executable, FAKE])
    yield w
    w.close()


def test_client_loads_and_gets_replies(worker):
    assert worker.load() == {"variant": "A0", "backend": "sim"}
    assert worker.info == {"variant": "A0", "backend": "sim"}
    assert worker.request("echo", value=[1, 2])["result"] == [1, 2]


def test_client_hands_streamed_messages_to_the_callback(worker):
    seen = []
    assert worker.request("stream", on_stream=seen.append, n=3)["result"] == "streamed"
    assert seen == [{"progress": 0}, {"progress": 1}, {"progress": 2}]
    with pytest.raises(MeasurementError, match="unexpected message"):
        worker.request("stream", n=1)  # a streamed message nobody asked for


def test_client_raises_the_workers_error_type_with_its_hint(worker):
    with pytest.raises(UnsupportedError, match="worker A0 \\(A0\\): not on this machine") as e:
        worker.request("refuse")
    assert e.value.hint == "use another one"
    with pytest.raises(UsageError, match="unknown op"):
        worker.request("nope")


def test_a_crash_is_a_measurement_error_with_the_log_tail(worker, tmp_path):
    worker.load()
    with pytest.raises(MeasurementError, match="exited \\(code 3\\)") as e:
        worker.request("crash")
    assert "last words before the crash" in str(e.value)
    with pytest.raises(MeasurementError, match="exited"):
        worker.request("echo", value=1)  # the next request meets the dead process too
    worker.copy_log(tmp_path / "worker.log")
    assert "last words" in (tmp_path / "worker.log").read_text()


def test_close_ends_the_process(worker):
    worker.load()
    worker.close()
    assert worker.proc.poll() == 0
