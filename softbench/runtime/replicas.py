"""One kernel in several worker processes, behind the interface of one (softbench.runtime.client.WorkerProcess).

Why: two processes that run the same kernel on the same inputs settle at speeds that differ by a few tenths of a
percent, an offset that lasts the whole run and has either sign (13 interleavings on the H200, 2026-12-02: the
A/A nulls scattered by 0.25 pp where their own intervals implied 0.12; docs/protocols.md). A run of one process
per kernel measures one draw of that offset and its interval cannot see it. With N processes per kernel the
windows rotate over them, so a run holds N pairs of processes, and the summary can say how far the speed-up moves
between them (softbench.latency.summary.process_pairs). pyperf spreads its runs over worker processes for the
same reason.

Windows go to the processes in turn, one per request; everything else (prepare, info) goes to all of them, and a
prepare that fails in one fails the kernel."""

from __future__ import annotations

from pathlib import Path

from softbench.runtime.client import WorkerProcess


class KernelProcesses:
    """N loaded WorkerProcess objects of one kernel (same label, backend, variant and options)."""

    def __init__(self, processes: list[WorkerProcess]):
        if not processes:
            raise ValueError("a kernel needs at least one process")
        self.processes = processes
        self.label = processes[0].label
        self.backend = processes[0].backend
        self.variant = processes[0].variant
        self.options = getattr(processes[0], "options", {})
        self._next = 0
        self._last = 0

    @property
    def name(self) -> str:
        return f"{self.processes[0].name} in {len(self.processes)} processes"

    @property
    def info(self) -> dict:
        """The first process's load record, with every process's pid and device (env.json)."""
        first = dict(self.processes[0].info)
        first["processes"] = [{"replica": i, "pid": p.pid, "device": p.info.get("device")}
                              for i, p in enumerate(self.processes)]
        return first

    @property
    def pid(self) -> int:
        """The process that answered the last window (what a window record names)."""
        return self.processes[self._last].pid

    def request(self, op: str, on_stream=None, **fields) -> dict:
        if op == "window":
            i = self._next
            self._next = (i + 1) % len(self.processes)
            self._last = i
            reply = self.processes[i].request(op, on_stream, **fields)
            return {**reply, "result": {**reply["result"], "replica": i}}
        replies = [p.request(op, on_stream, **fields) for p in self.processes]
        first = replies[0]
        if isinstance(first.get("result"), dict):  # the first process's answer, and every process's beside it
            return {**first, "result": {**first["result"], "replicas": [r["result"] for r in replies]}}
        return first

    def close(self) -> None:
        for p in self.processes:
            p.close()

    def copy_log(self, dest: Path) -> None:
        """Every process's log, one after another, each under a line naming its replica and pid."""
        parts = []
        for i, p in enumerate(self.processes):
            try:
                text = p.log.read_text(errors="replace")
            except OSError:
                text = ""
            parts.append(f"=== replica {i} (pid {p.pid}) ===\n{text}")
        try:
            dest.write_text("\n".join(parts))
        except OSError:
            pass
