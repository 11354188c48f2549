"""Every condition of the sim and row paths in this process, on one loaded model.

Per block: the baseline (exact softmax) runs first and its final hidden states are kept; each condition then
runs the same tokens with its own attention and is scored against the baseline's next-token distribution."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from softbench.core.errors import MeasurementError
from softbench.fidelity import attention
from softbench.fidelity.conditions import Condition


@dataclass(frozen=True)
class SimSettings:
    tile: int = 128
    rescale_threshold: float = 0.0
    max_offset: float = 0.0  # 8.0: FA4's FP8 path spends the E4M3 range on the probability tail
    fp8_storage: bool = False
    fp8_operands: bool = False  # Q, K and V through E4M3 as the kernel path's FP8 forward gets them


def make_impl(cond: Condition, sim: SimSettings):
    if cond.path == "exact":
        return attention.ExactAttention()
    if cond.path == "row":
        return attention.RowAttention(cond.operator)
    if cond.path == "sim":
        return attention.SimAttention(cond.operator, tile=sim.tile, rescale_threshold=sim.rescale_threshold,
                                      max_offset=sim.max_offset, fp8_storage=sim.fp8_storage,
                                      fp8_operands=sim.fp8_operands)
    raise MeasurementError(f"condition {cond.name} (path {cond.path}) cannot run in this process")


class LocalEvaluator:
    def __init__(self, model, conditions: list[Condition], sim: SimSettings, device: str):
        from softbench.fidelity.nll import FP32Head

        self.model = model
        self.conditions = conditions
        self.impls = {c.name: make_impl(c, sim) for c in conditions}
        self.head = FP32Head(model)
        # the tokens go where the embedding is: `device`, or under a device map the first layer's device
        self.device = model.get_input_embeddings().weight.device

    def _ids(self, tokens: np.ndarray):
        import torch

        return torch.as_tensor(np.asarray(tokens, dtype=np.int64), device=self.device).view(1, -1)

    def gate(self, tokens: np.ndarray) -> dict:
        """Wiring check on one block: the baseline's NLL through softbench's head and attention against the
        model's own loss with its own eager attention and head."""
        import torch

        from softbench.fidelity.nll import decoder_hidden, native_loss, score_block

        ids = self._ids(tokens)
        with torch.inference_mode():
            native = native_loss(self.model, ids, attention.IMPL_NAME)
            attention.ROUTER.use(self.impls[self.conditions[0].name])
            ours = score_block(self.head, decoder_hidden(self.model, ids)[:-1], ids[0, 1:]).to_row()["nll"]
        return {"native_loss": native, "native_attention": "eager", "softbench_baseline_nll": ours,
                "difference": ours - native}

    def evaluate(self, index: int, tokens: np.ndarray) -> list[dict]:
        import torch

        from softbench.fidelity.nll import decoder_hidden, score_block

        ids = self._ids(tokens)
        targets = ids[0, 1:]
        rows = []
        base_hidden = None
        with torch.inference_mode():
            for cond in self.conditions:
                t0 = time.perf_counter()
                attention.ROUTER.use(self.impls[cond.name])
                hidden = decoder_hidden(self.model, ids)[:-1]
                if cond.is_baseline:
                    base_hidden = hidden
                    score = score_block(self.head, hidden, targets)
                else:
                    score = score_block(self.head, hidden, targets, baseline_hidden=base_hidden)
                rows.append({"block": index, "condition": cond.name, **score.to_row(),
                             "seconds": round(time.perf_counter() - t0, 3)})
        return rows

    def close(self) -> None:
        pass
