"""The baseline a second time inside its own process, on a separately allocated copy of the same inputs (input
slot 1 of softbench.runtime.worker), behind the interface of a worker: the A/A null of `latency
--null-in-process`.

Why: two processes of one kernel settle a few tenths of a percent apart for a whole run (docs/protocols.md). A
null between two allocations in one process shares the process (its CUDA context, its compiled kernel, its
place in the GPU's time slicing) and differs only in where the inputs lie in memory, so beside the usual null it
tells an offset of the process from one of the allocation."""

from __future__ import annotations

from pathlib import Path

SLOT = 1


class InputTwin:
    """Requests of `label` answered by `host`'s process on input slot 1."""

    def __init__(self, label: str, host):
        self.label = label
        self.host = host
        self.backend = host.backend
        self.variant = host.variant
        self.options = getattr(host, "options", {})

    @property
    def name(self) -> str:
        return f"worker {self.label} (input slot {SLOT} of {self.host.label}'s process)"

    @property
    def pid(self) -> int:
        return self.host.pid

    @property
    def info(self) -> dict:
        return {**self.host.info, "input_slot": SLOT, "process_of": self.host.label}

    def request(self, op: str, on_stream=None, **fields) -> dict:
        if op not in ("prepare", "window"):
            raise ValueError(f"{self.name} answers prepare and window only, not {op}")
        return self.host.request(op, on_stream, slot=SLOT, **fields)

    def close(self) -> None:
        """The host's process closes with the host."""

    def copy_log(self, dest: Path) -> None:
        """The host's log holds this kernel's lines too."""
