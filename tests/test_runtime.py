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


def test_serve_skips_blank_lines_between_requests():
    text = "\n" + json.dumps({"op": "echo", "value": 7}) + "\n   \n" + json.dumps({"op": "exit"}) + "\n"
    r = subprocess.run([sys.executable, FAKE], input=text, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert [json.loads(line) for line in r.stdout.splitlines()] == [{"ok": True, "result": 7}, {"ok": True}]


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


def test_any_failed_write_to_a_dead_worker_is_a_measurement_error(worker):
    worker.load()
    with pytest.raises(MeasurementError):
        worker.request("crash")
    # /dev/full refuses every write with ENOSPC: an OSError that is not a broken pipe must be reported the same way
    worker.proc.stdin = open("/dev/full", "w")
    with pytest.raises(MeasurementError, match="exited \\(code 3\\)"):
        worker.request("echo", value=1)


def test_load_all_keeps_each_workers_load_record(worker):
    from softbench.runtime.client import load_all

    load_all([worker])
    assert worker.info == {"variant": "A0", "backend": "sim"}  # the reply's result, as load() keeps it


def test_the_log_tail_is_the_last_n_lines(worker):
    worker.log.write_text("".join(f"line {i}\n" for i in range(10)))
    assert worker.log_tail(3) == "line 7\nline 8\nline 9"


def test_a_worker_whose_pipe_closes_before_it_exits_is_waited_for_to_report_its_code(worker):
    worker.load()
    with pytest.raises(MeasurementError, match="exited \\(code 5\\)"):  # not "code None"
        worker.request("hang_up")


def test_close_ends_the_process(worker):
    worker.load()
    worker.close()
    assert worker.proc.poll() == 0


# --- the worker's own timing loop (softbench.runtime.worker.WorkerState), in this process on the simulation ------
def _counting_worker():
    """A sim worker prepared on a small shape in both input slots, its two forwards replaced by counters that call
    the real ones: what each request runs can be counted."""
    from softbench.core.shapes import Shape
    from softbench.runtime.worker import WorkerState

    w = WorkerState()
    w.load({"backend": "sim", "variant": "A0"})
    shape = Shape(dtype="bf16", seq=64, heads=1, head_dim=64).to_dict()
    w.prepare({"shape": shape, "seed": 1})
    w.prepare({"shape": shape, "seed": 1, "slot": 1})
    calls = {"main": 0, "twin": 0}

    def counted(name, fn):
        def call():
            calls[name] += 1
            return fn()
        return call

    w.forward, w.twin_forward = counted("main", w.forward), counted("twin", w.twin_forward)
    return w, calls


def test_a_window_runs_its_untimed_calls_then_its_timed_ones_on_the_slot_asked():
    """An interleaved window: 2 untimed calls (caches and clock after another process) and then 3 timed ones, all
    on the slot asked for; the per-call time is the window's divided by the 3 timed calls."""
    w, calls = _counting_worker()
    rec = w.window({"calls": 3, "untimed": 2})
    assert calls == {"main": 5, "twin": 0}
    assert rec["calls"] == 3 and rec["ms_per_call"] == pytest.approx(rec["window_ms"] / 3)
    w.window({"calls": 3, "untimed": 2, "slot": 1})  # the in-process null times its own copy
    assert calls == {"main": 5, "twin": 5}


def test_a_round_runs_its_warmup_then_streams_each_window():
    """The paper's round: 4 warm-up calls, then 3 windows of 2 calls each, each window streamed with its index."""
    w, calls = _counting_worker()
    seen = []
    assert w.round({"calls": 2, "windows": 3, "warmup": 4}, seen.append) == {"windows": 3}
    assert calls["main"] == 4 + 3 * 2
    assert [m["window"]["window"] for m in seen] == [0, 1, 2]
    assert all(m["window"]["calls"] == 2 for m in seen)


def test_a_sustained_block_counts_the_forwards_of_its_measured_windows():
    """A block's `forwards` is every call of its measured windows (calls per window times windows), which the
    energy per forward is divided by; the settling windows are not counted."""
    w, calls = _counting_worker()
    seen = []
    res = w.block({"calls": 2, "measure_s": 0.05, "settle": {"min_s": 0.0, "max_s": 0.0}}, seen.append)
    measured = [m["window"] for m in seen if m["window"]["phase"] == "measure"]
    assert measured and res["forwards"] == 2 * len(measured)
    assert calls["main"] == 2 * len(seen)
    assert res["energy_j"] is None  # no board counter on the CPU


def test_the_cpu_timer_reports_milliseconds():
    """Two calls of a 20 ms sleep: a window of at least 40 ms, not 0.04 (seconds) or 40000 (microseconds)."""
    import time

    from softbench.runtime.worker import Timer

    ms = Timer("cpu").window_ms(lambda: time.sleep(0.02), 2)
    assert 40 <= ms < 1000


def test_an_energy_loop_runs_its_warmup_then_whole_chunks():
    """energy's loop: 3 warm-up calls, then chunks of 2 until the time is up; `forwards` counts the timed calls
    only, so the calls made are the warm-up's plus `forwards`."""
    w, calls = _counting_worker()
    res = w.energy_loop({"seconds": 0.02, "warmup": 3, "chunk": 2})
    assert res["forwards"] > 0 and res["forwards"] % 2 == 0 and res["chunk"] == 2
    assert calls["main"] == 3 + res["forwards"]
    assert res["settle"] is None and res["energy_start_j"] is None  # no settle asked; no board counter on the CPU


class _Board:
    """A board whose energy counter reads 100.0 J and then 112.5 J, and whose readings never change."""

    def __init__(self):
        self.energy = iter([100.0, 112.5])

    def has_energy_counter(self):
        return True

    def total_energy_j(self):
        return next(self.energy)

    def read(self):
        import time

        from softbench.core.nvml import GpuReading

        return GpuReading(time.monotonic(), 1500, 2600, 40, 300.0, 0)


def test_a_sustained_block_gives_the_energy_its_counter_rose_by():
    """The counter read after settling (100.0 J) and after the measured windows (112.5 J): the block used 12.5 J."""
    w, _ = _counting_worker()
    w.nvml = _Board()
    res = w.block({"calls": 1, "measure_s": 0.02, "settle": {"min_s": 0.0, "max_s": 0.0}}, lambda m: None)
    assert res["energy_j"] == 12.5


def test_a_worker_on_the_cpu_reads_no_board(monkeypatch):
    """A kernel on the CPU does not run on the GPU board: even where NVML opens, its windows carry no board
    readings that would be taken for the kernel's."""
    from softbench.core.nvml import Nvml
    from softbench.runtime.worker import WorkerState

    monkeypatch.setattr(Nvml, "try_open", classmethod(lambda cls, index=None: _Board()))
    w = WorkerState()
    info = w.load({"backend": "sim", "variant": "A0"})
    assert info["device"]["kind"] == "cpu" and w.nvml is None and info["gpu"] is None
