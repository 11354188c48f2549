"""One kernel variant (A0 exact exp2 or A1 Rowmax-H15) evaluating the model, in its own process.

backend fa4: a process can import only one `flash_attn`, so each variant runs in a worker that imports FA4 from
its private patched tree (softbench.kernels.fa4.FA4Backend) before transformers is imported.
backend triton: softbench's Triton forward (softbench.kernels.triton_attn), the variant a constexpr of one
kernel; it runs in the same two-worker protocol so that both backends produce sessions of one shape. On a machine
without CUDA it runs only through Triton's CPU interpreter (TRITON_INTERPRET=1 in the environment: tests).
The worker loads the model with every attention layer routed to that kernel, and then answers JSON requests on
stdin, one per line:
  load  {variant, model, dtype, patch_cache, backend, device}
        -> what runs (FA4's patch record, or the Triton version and kernel configuration), load times
  gate  {tokens}                                  -> NLL through the kernel and softbench's head vs the model's own loss
  block {index, tokens, save_hidden, baseline_hidden}
        -> the block's NLL; save_hidden writes the final hidden states for the other variant; with
           baseline_hidden it also returns the vocabulary-output divergences against those states
  exit
Replies go to the protocol pipe (the original stdout); everything the libraries print goes to stderr."""

from __future__ import annotations

import os
import sys
import time

from softbench.core.errors import UnsupportedError, UsageError

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

    def _triton(self, dtype: str):
        interpreter = os.environ.get("TRITON_INTERPRET") == "1"
        if self.device != "cuda" and not interpreter:
            raise UnsupportedError("softbench's Triton forward needs a CUDA GPU here",
                                   hint="TRITON_INTERPRET=1 runs it through Triton's CPU interpreter (tests only)")
        try:
            import triton
        except ImportError:
            raise UnsupportedError("--backend triton needs the triton package, which is not installed here",
                                   hint="pip install triton (or pip install -e .[triton])") from None
        from softbench.fidelity import attention

        fp8 = dtype == "fp8"
        info = {"backend": "triton", "variant": self.variant, "triton_version": triton.__version__,
                "interpreter": interpreter}
        if fp8:  # the model in BF16, the attention's operands in E4M3: how they got there is part of the condition
            info["fp8_quantization"] = attention.TritonAttention.QUANTIZATION
        return attention.TritonAttention(self.variant, fp8=fp8), info

    def _stand_in(self):
        """Tests only (SOFTBENCH_FIDELITY_FA4_STAND_IN=sim): the CPU simulation of each variant's semantics
        (A0 exact exp2, A1 Rowmax-H15) in place of FA4, so the two-process protocol runs without a GPU."""
        from softbench.fidelity import attention
        from softbench.fidelity.operator_zoo import parse_operator
        from softbench.kernels.catalog import get_variant

        op = get_variant(self.variant).operator
        return attention.SimAttention(parse_operator(op)), {"backend": "sim stand-in for FA4", "variant": self.variant}

    def load(self, req: dict) -> dict:
        # the parent's environment, HF_HUB_OFFLINE included (--offline sets it before starting the workers)
        from softbench.fidelity.models import ModelSource, attention_geometry, load_model

        self.variant = req["variant"]
        backend = req.get("backend", "fa4")
        stand_in = backend == "fa4" and os.environ.get(STAND_IN_ENV) == "sim"
        self.device = "cpu" if stand_in else req.get("device", "cuda")
        if stand_in:
            impl, info = self._stand_in()
        elif backend == "triton":
            impl, info = self._triton(req["dtype"])
        elif backend == "fa4":
            impl, info = self._fa4(req)
        else:
            raise UsageError(f"unknown kernel backend {backend!r}")

        from softbench.fidelity import attention
        from softbench.fidelity.nll import FP32Head

        name = attention.register()
        attention.ROUTER.use(impl)
        t0 = time.monotonic()
        self.model = load_model(ModelSource.from_dict(req["model"]), req["dtype"], self.device, name)
        self.head = FP32Head(self.model)
        info["model_load_s"] = round(time.monotonic() - t0, 3)
        if isinstance(impl, attention.TritonAttention):  # the configuration every layer will run, on record
            from softbench.kernels.triton_backend import kernel_of

            config = impl.configure(self.model.dtype, attention_geometry(self.model.config)["head_dim"])
            info["config"] = config.to_dict()
            info["kernel"] = kernel_of(config)  # gluon on sm_90, triton elsewhere: as latency runs it
        info["device"] = self.device
        info["pid"] = os.getpid()
        return info

    def _ids(self, tokens):
        import torch

        return torch.as_tensor(tokens, dtype=torch.long, device=self.device).view(1, -1)

    def gate(self, req: dict) -> dict:
        """The wiring check: this worker's NLL through its kernel and softbench's head against the model's own loss.
        At FP8 the kernel's operands go through E4M3 (TritonAttention), which moves the NLL by more than the check's
        tolerance on a real model (0.024 nats on SmolLM2-135M), so the wiring is checked through the same kernel
        family at the model's 16-bit dtype, with the same routing and head, and the FP8 forward's own NLL on the
        block is reported beside it, not checked."""
        import torch

        from softbench.fidelity import attention
        from softbench.fidelity.nll import decoder_hidden, native_loss, score_block

        ids = self._ids(req["tokens"])

        def nll() -> float:
            return score_block(self.head, decoder_hidden(self.model, ids)[:-1], ids[0, 1:]).to_row()["nll"]

        impl = attention.ROUTER.impl
        fp8 = isinstance(impl, attention.TritonAttention) and impl.fp8
        with torch.inference_mode():
            native = native_loss(self.model, ids, attention.IMPL_NAME)
            extra = {}
            if fp8:
                extra["fp8_baseline_nll"] = nll()
                twin = attention.TritonAttention(impl.variant)
                attention.ROUTER.use(twin)
                try:
                    ours = nll()
                finally:
                    attention.ROUTER.use(impl)
                extra["wiring_dtype"] = str(self.model.dtype).removeprefix("torch.")
                extra["wiring_config"] = twin.config.label()
                extra["fp8_minus_native"] = extra["fp8_baseline_nll"] - native
            else:
                ours = nll()
        return {"native_loss": native, "native_attention": "eager", "softbench_baseline_nll": ours,
                "difference": ours - native, **extra}

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
    from softbench.runtime.pipe import serve

    worker = KernelWorker()

    def handle(op: str, req: dict, send) -> dict:
        if op not in ("load", "gate", "block"):
            raise UsageError(f"unknown op {op!r}")
        return {"result": getattr(worker, op)(req)}

    return serve(handle)


if __name__ == "__main__":
    sys.exit(main())
