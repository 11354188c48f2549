"""The kernel path from the parent's side: A0 and A1 workers (softbench.fidelity.kernel_worker) of one backend
(fa4 or triton), driven block by block. For each block A0 runs first and writes its final hidden states to a
scratch file; A1 then runs the same tokens and reads them to compute the vocabulary-output divergences. The
pairing of per-block NLLs happens in the parent, like every other condition."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

import softbench
from softbench.core.errors import MeasurementError
from softbench.runtime.client import WorkerProcess
from softbench.fidelity.conditions import KERNEL_LABELS, Condition

class WorkerClient:
    """Fidelity's model worker (softbench.fidelity.kernel_worker) through the one worker client
    (softbench.runtime.client.WorkerProcess): the same pipe, reply shape and error types as the measuring workers."""

    def __init__(self, label: str, log_path: Path):
        self.label = label  # e.g. "FA4 A1", "Triton A0": how errors name the worker
        # the worker imports this very softbench, wherever the parent was started from
        root = str(Path(softbench.__file__).resolve().parents[1])
        env = {"PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        self.proc = WorkerProcess(label, "", "", env=env, module="softbench.fidelity.kernel_worker",
                                  log_path=log_path)

    def request(self, op: str, **fields) -> dict:
        return self.proc.request(op, **fields).get("result", {})

    def close(self) -> None:
        self.proc.close()


class KernelEvaluator:
    def __init__(self, conditions: list[Condition], model_source: dict, dtype: str, session_dir: Path,
                 patch_cache: str | None = None, backend: str = "fa4", device: str = "cuda"):
        if len(conditions) != 2 or not conditions[0].is_baseline:
            raise MeasurementError("the kernel path compares exactly the stock kernel and one patched variant")
        self.backend = backend
        self.conditions = conditions
        shm = Path("/dev/shm")
        self.scratch = Path(tempfile.mkdtemp(prefix="softbench-fidelity-", dir=shm if shm.is_dir() else None))
        self.workers: list[WorkerClient] = []
        self.info: dict = {}
        try:
            for cond in conditions:
                w = WorkerClient(f"{KERNEL_LABELS.get(backend, backend)} {cond.variant}",
                                 session_dir / f"worker-{cond.variant}.log")
                self.workers.append(w)
                self.info[cond.variant] = w.request("load", variant=cond.variant, model=model_source, dtype=dtype,
                                                    patch_cache=patch_cache, backend=backend, device=device)
        except BaseException:
            self.close()
            raise

    def gate(self, tokens: np.ndarray) -> dict:
        return self.workers[0].request("gate", tokens=[int(t) for t in tokens])

    def evaluate(self, index: int, tokens: np.ndarray) -> list[dict]:
        toks = [int(t) for t in tokens]
        hidden = self.scratch / f"block{index}-A0.pt"
        rows = []
        try:
            base, cand = self.workers
            r0 = base.request("block", index=index, tokens=toks, save_hidden=str(hidden))
            rows.append({**r0, "condition": self.conditions[0].name})
            r1 = cand.request("block", index=index, tokens=toks, baseline_hidden=str(hidden))
            rows.append({**r1, "condition": self.conditions[1].name})
        finally:
            if hidden.exists():
                os.unlink(hidden)
        return rows

    def close(self) -> None:
        for w in self.workers:
            w.close()
        shutil.rmtree(self.scratch, ignore_errors=True)
