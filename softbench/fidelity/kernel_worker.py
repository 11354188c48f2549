"""One FA4 variant (A0 stock or A1 Rowmax-H15) evaluating the model, in its own process.

A process can import only one `flash_attn`, so the kernel path runs each variant in a worker that imports FA4
from its private patched tree (softbench.kernels.fa4.FA4Backend) before transformers is imported, loads the model
with every attention layer routed to that FA4, and then answers JSON requests on stdin, one per line:
  load  {variant, model, dtype, patch_cache}      -> FA4 patch record, model geometry
  gate  {tokens}                                  -> NLL through FA4 and softbench's head vs the model's SDPA loss
  block {index, tokens, save_hidden, baseline_hidden}
        -> the block's NLL; save_hidden writes the final hidden states for the other variant; with
           baseline_hidden it also returns the vocabulary-output divergences against those states
  exit
Replies go to the protocol pipe (the original stdout); everything the libraries print goes to stderr."""

from __future__ import annotations

import os
import sys
import time

from softbench.errors import UsageError

STAND_IN_ENV = "SOFTBENCH_FIDELITY_FA4_STAND_IN"


class KernelWorker:
    def __init__(self):
        self.model = None
        self.head = None
        self.variant = None
        self.device = "cuda"

    def _fa4(self, req: dict):
        from softbench.kernels.fa4 import FA4Backend

        backend = FA4Backend(patch_cache=req.get("patch_cache"))
        t0 = time.monotonic()
        info = backend.load(self.variant)  # imports flash_attn.cute from the private tree, before transformers
        info["fa4_load_s"] = round(time.monotonic() - t0, 3)
        from softbench.fidelity import attention

        return attention.FA4Attention(backend.fa, self.variant), info

    def _stand_in(self):
        """Tests only (SOFTBENCH_FIDELITY_FA4_STAND_IN=sim): the CPU simulation of each variant's semantics
        (A0 exact exp2, A1 Rowmax-H15) in place of FA4, so the two-process protocol runs without a GPU."""
        from softbench.fidelity import attention
        from softbench.fidelity.operators_zoo import parse_operator

        op = {"A0": "exp2", "A1": "rowmax-h15"}[self.variant]
        return attention.SimAttention(parse_operator(op)), {"backend": "sim stand-in for FA4", "variant": self.variant}

    def load(self, req: dict) -> dict:
        from softbench.fidelity.models import ModelSource, load_model, offline_environment

        offline_environment()
        self.variant = req["variant"]
        stand_in = os.environ.get(STAND_IN_ENV) == "sim"
        impl, info = self._stand_in() if stand_in else self._fa4(req)
        self.device = "cpu" if stand_in else "cuda"

        from softbench.fidelity import attention
        from softbench.fidelity.nll import FP32Head

        name = attention.register()
        attention.ROUTER.use(impl)
        t0 = time.monotonic()
        self.model = load_model(ModelSource.from_dict(req["model"]), req["dtype"], self.device, name)
        self.head = FP32Head(self.model)
        info["model_load_s"] = round(time.monotonic() - t0, 3)
        info["pid"] = os.getpid()
        return info

    def _ids(self, tokens):
        import torch

        return torch.as_tensor(tokens, dtype=torch.long, device=self.device).view(1, -1)

    def gate(self, req: dict) -> dict:
        import torch

        from softbench.fidelity import attention
        from softbench.fidelity.nll import decoder_hidden, score_block

        ids = self._ids(req["tokens"])
        fa4 = attention.ROUTER.impl
        with torch.inference_mode():
            attention.ROUTER.use(attention.SdpaAttention())
            try:
                native = float(self.model(input_ids=ids, labels=ids, use_cache=False).loss)
            finally:
                attention.ROUTER.use(fa4)
            ours = score_block(self.head, decoder_hidden(self.model, ids)[:-1], ids[0, 1:]).to_row()["nll"]
        return {"native_sdpa_loss": native, "softbench_baseline_nll": ours, "difference": ours - native}

    def block(self, req: dict) -> dict:
        import torch

        from softbench.fidelity.nll import decoder_hidden, score_block

        if self.model is None:
            raise UsageError("block before load")
        ids = self._ids(req["tokens"])
        t0 = time.perf_counter()
        with torch.inference_mode():
            hidden = decoder_hidden(self.model, ids)[:-1]
            base = None
            if req.get("baseline_hidden"):
                base = torch.load(req["baseline_hidden"], map_location=self.device)
            score = score_block(self.head, hidden, ids[0, 1:], baseline_hidden=base)
            if req.get("save_hidden"):
                torch.save(hidden.cpu(), req["save_hidden"])
        if self.device == "cuda":
            torch.cuda.synchronize()
        return {"block": req["index"], **score.to_row(), "seconds": round(time.perf_counter() - t0, 3)}


def main() -> int:
    from softbench.measure.pipe import serve

    worker = KernelWorker()

    def handle(op: str, req: dict, send) -> dict:
        if op not in ("load", "gate", "block"):
            raise UsageError(f"unknown op {op!r}")
        return {"result": getattr(worker, op)(req)}

    return serve(handle)


if __name__ == "__main__":
    sys.exit(main())
