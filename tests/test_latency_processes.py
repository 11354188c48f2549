"""Several processes per kernel (--processes, softbench.runtime.replicas): the windows rotate over a kernel's
processes, and the summary gives each comparison across its pairs of processes. On a fake board whose processes
run at fixed offsets (the H200's A/A nulls scattered by 0.25 pp across runs, 2026-12-02), the within-run
bootstrap excludes 0 for a null made of offset processes, while the interval across pairs of processes holds it;
and for real, through the CLI on the simulation."""

from __future__ import annotations

import json

import pytest

from softbench.core.protocol import InterleavedProtocol
from softbench.latency.interleaved import measure_interleaved
from softbench.latency.summary import process_pairs, summarize_paired
from softbench.runtime.replicas import KernelProcesses

from test_latency_protocols import FAST, FakeBoard, FakeClock, FakeWorker, PreparedFakeWorker, Quiet
from test_vocabulary import assert_covered


def _kernel(board, label, variant, base_ms, role, offsets):
    procs = [FakeWorker(board, label, variant, base_ms * f, role) for f in offsets]
    for i, p in enumerate(procs):
        p.pid = 2000 + 10 * len(label) + i
    return KernelProcesses(procs)


def test_windows_rotate_over_the_processes_and_everything_else_reaches_all_of_them():
    clock = FakeClock()
    board = FakeBoard(clock)
    k = _kernel(board, "A0", "A0", 1.0, "baseline", (1.0, 1.0, 1.0))
    replicas = [k.request("window", calls=2)["result"]["replica"] for _ in range(7)]
    assert replicas == [0, 1, 2, 0, 1, 2, 0] and k.pid == k.processes[0].pid
    assert [len(p.requests) for p in k.processes] == [3, 2, 2]
    with pytest.raises(AssertionError, match="unexpected op"):  # a non-window op goes to every process
        k.request("prepare")
    assert k.processes[0].requests[-1] == "prepare"
    assert [p["pid"] for p in k.info["processes"]] == [p.pid for p in k.processes]


class LoggedProcess(PreparedFakeWorker):
    """One process of a kernel with a log file and a close that is recorded."""

    def __init__(self, board, pid, log):
        super().__init__(board, "A0", "A0", 1.0, "baseline")
        self.pid, self.log, self.closed = pid, log, False

    def close(self):
        self.closed = True


def test_the_last_windows_process_is_the_kernels_pid_and_prepare_close_and_logs_reach_every_process(tmp_path):
    board = FakeBoard(FakeClock())
    (tmp_path / "r0.log").write_text("zero")
    (tmp_path / "r1.log").write_text("one")
    procs = [LoggedProcess(board, 7 + i, tmp_path / f"r{i}.log") for i in range(3)]  # replica 2 wrote no log
    k = KernelProcesses(procs)
    k.request("window", calls=2)
    k.request("window", calls=2)
    assert k.pid == 8  # replica 1 answered the last window: its records name its pid
    smoke = k.request("prepare")["result"]
    assert smoke["rel_error_vs_fp32"] == 0.0 and len(smoke["replicas"]) == 3  # the first's, and each one's
    k.close()
    assert all(p.closed for p in procs)
    k.copy_log(tmp_path / "all.log")
    assert (tmp_path / "all.log").read_text() == ("=== replica 0 (pid 7) ===\nzero\n=== replica 1 (pid 8) ===\none\n"
                                                  "=== replica 2 (pid 9) ===\n")
    with pytest.raises(ValueError, match="at least one process"):
        KernelProcesses([])


def test_offsets_between_processes_show_across_pairs_and_not_in_the_window_bootstrap():
    # A0 and its twin run the same kernel; their processes sit 0.3-0.4% apart, pair by pair of either sign
    clock = FakeClock()
    board = FakeBoard(clock, noise=0.001, seed=3)
    base = (1.003, 0.998, 1.000)
    twin = (1.000, 1.002, 0.996)
    ws = {"A0": _kernel(board, "A0", "A0", 1.0, "baseline", base),
          "A0'": _kernel(board, "A0'", "A0", 1.0, "null", twin)}
    proto = InterleavedProtocol(**{**FAST, "min_pairs": 300, "target_pp": 0.01, "budget_s": 20.0})
    records = []
    measure_interleaved(proto, ws, "A0", ["A0'"], records.append, Quiet(), clock=clock)
    measured = [r for r in records if r["phase"] == "measure"]
    meta = {"A0": {"role": "baseline", "variant": "A0", "backend": "fake"},
            "A0'": {"role": "null", "variant": "A0", "backend": "fake"}}
    pooled = summarize_paired(measured, meta, "A0", 1e12, "interleaved", "ms_per_call")["comparisons"]["A0'"]
    lo, hi = pooled["paired"]["ci95_pct"]
    assert lo > 0.0  # the window bootstrap calls this null of offset processes a resolved +0.25%

    pp = process_pairs(measured, "A0", ["A0'"], 3)["comparisons"]["A0'"]
    pairs = pp["pairs_of_processes"]
    assert len(pairs) == 3 and sum(p["n_pairs"] for p in pairs) == pooled["paired"]["n_pairs"]
    for p in pairs:  # each pair of processes reads its own offset
        expected = 100 * (base[p["baseline_replica"]] / twin[p["replica"]] - 1)
        assert p["median_pct"] == pytest.approx(expected, abs=0.05)
    alo, ahi = pp["across"]["ci95_pct"]
    assert alo <= 0.0 <= ahi and (ahi - alo) > 3 * (hi - lo)
    assert pp["sd_between_pp"] == pytest.approx(0.40, abs=0.1)


def test_one_process_pair_has_no_interval_across_pairs():
    windows = [{"label": lbl, "cycle": c, "ms_per_call": ms, "replica": 0}
               for c in range(5) for lbl, ms in (("A0", 1.0), ("v", 0.9))]
    (c,) = process_pairs(windows, "A0", ["v"], 1)["comparisons"].values()
    assert c["pairs_of_processes"][0]["median_pct"] == pytest.approx(100 * (1 / 0.9 - 1))
    assert c["sd_between_pp"] is None and c["across"]["ci95_pct"][0] != c["across"]["ci95_pct"][0]  # nan


QUICK = ("protocol:\n  kind: interleaved\n  calls: 2\n  untimed: 0\n  min_pairs: 10\n  check_every: 5\n"
         "  budget_s: 1\n  warmup_min_s: 0.2\n  warmup_max_s: 1\n")


def test_latency_with_two_processes_per_kernel_on_the_simulation(tmp_path, cli):
    proto = tmp_path / "quick.yaml"
    proto.write_text(QUICK)
    r = cli("latency", "--backend", "sim", "--seq", "128", "--heads", "1", "--head-dim", "64", "--variant",
            "h15-sat", "--null", "--processes", "2", "--protocol", str(proto), "--out", str(tmp_path / "s"))
    assert r.returncode == 0, r.stderr
    (session,) = (tmp_path / "s").iterdir()
    windows = [json.loads(line) for line in (session / "windows.jsonl").read_text().splitlines()]
    measured = [w for w in windows if w["phase"] == "measure"]
    env = json.loads((session / "env.json").read_text())
    for label in ("A0", "h15-sat", "A0'"):
        pids = [p["pid"] for p in env["workers"][label]["processes"]]
        assert len(set(pids)) == 2
        used = {(w["replica"], w["pid"]) for w in measured if w["label"] == label}
        assert used == {(0, pids[0]), (1, pids[1])}  # each window names the process that ran it
    summary = json.loads((session / "summary.json").read_text())
    assert summary["process_pairs"]["processes_per_kernel"] == 2
    smoke = json.loads((session / "smoke.json").read_text())
    assert [r["finite"] for r in smoke["h15-sat"]["replicas"]] == [True, True]  # each process's own smoke check
    assert len(summary["process_pairs"]["comparisons"]["h15-sat"]["pairs_of_processes"]) == 2
    assert "across 2 pairs of processes (2 per kernel" in r.stdout
    assert "across 2 pairs of processes" in (session / "summary.md").read_text()
    protocol = (session / "protocol.yaml").read_text()
    assert "processes_per_kernel: 2" in protocol
    assert_covered(session)  # what it records is in the vocabulary that seal checks


def test_processes_need_the_interleaved_protocol(tmp_path, cli):
    r = cli("latency", "--backend", "sim", "--seq", "128", "--heads", "1", "--head-dim", "64", "--processes", "2",
            "--protocol", "sustained", "--out", str(tmp_path / "s"))
    assert r.returncode == 2
    assert "--processes 2 needs the interleaved protocol" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())
