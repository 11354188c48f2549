"""Exact reference kernels timed beside the baseline and the variant: a speed-up is only as strong as the
baseline it beats, so every latency summary on a GPU also gives A0 and the variant against the fastest exact
kernel the machine has.

- `fa3`: FlashAttention-3's Hopper forward, from PyPI `fa3-fwd` (`import fa3_fwd_interface`) or from a user's own
  build of flash-attention's `hopper/` folder (`import flash_attn_interface`). BF16/FP16 and FP8 (e4m3 with
  per-(batch, kv-head) float32 descales).
- `fa4`: stock FlashAttention-4 (softbench.kernels.fa4, variant A0); BF16/FP16 on sm_90.
- `sdpa`: torch's scaled_dot_product_attention (flash or cuDNN backend, whichever torch picks); BF16/FP16.

Each is a backend like the others (`load`, `build`) and runs in its own worker process. Only the exact
exponential exists for them: asking one for another variant is refused."""

from __future__ import annotations

import importlib
import importlib.util

from softbench.core.errors import UnsupportedError
from softbench.core.shapes import Shape
from softbench.kernels.capability import (HOPPER_FAMILY, Device, detect_device, fa4_fp8_on_hopper,
                                          fa4_unsupported_reason)

REFERENCE_NAMES = ("fa3", "fa4", "sdpa")
# FA3's own module names: the PyPI build first, then flash-attention's hopper/ build
FA3_MODULES = ("fa3_fwd_interface", "flash_attn_interface")
FA3_HEAD_DIMS = (64, 96, 128, 192, 256)


def fa3_module_name() -> str | None:
    for name in FA3_MODULES:
        if importlib.util.find_spec(name) is not None:
            return name
    return None


def fa3_unsupported_reason(shape: Shape, device: Device) -> str | None:
    if device.kind != "cuda" or device.family != HOPPER_FAMILY:
        return f"FlashAttention-3's forward is for Hopper (sm_90); this device is {device.arch_label}"
    if fa3_module_name() is None:
        return ("FlashAttention-3 is not installed (neither fa3_fwd_interface from PyPI fa3-fwd nor "
                "flash_attn_interface from flash-attention's hopper/ build)")
    if shape.head_dim not in FA3_HEAD_DIMS:
        return f"FlashAttention-3 takes head dims {', '.join(map(str, FA3_HEAD_DIMS))}, not {shape.head_dim}"
    return None


def sdpa_unsupported_reason(shape: Shape, device: Device) -> str | None:
    if shape.dtype not in ("bf16", "fp16"):
        return f"torch's scaled_dot_product_attention has no {shape.dtype} path"
    return None


def fa4_reference_reason(shape: Shape, device: Device) -> str | None:
    if importlib.util.find_spec("flash_attn") is None:
        return "FlashAttention-4 is not installed (pip install flash-attn-4==4.0.0b36)"
    if fa4_fp8_on_hopper(shape, device):
        # the backend's sentence sends the user to --backend triton, which a Hopper FP8 run already is
        return ("FA4 has no FP8 forward on sm_90 (its FP8 path is sm_100's); FA3's is the exact FP8 kernel on "
                "Hopper: use --reference fa3")
    return fa4_unsupported_reason(shape, device, offer_sim=False)  # a reference kernel cannot be the simulation


REASONS = {"fa3": fa3_unsupported_reason, "fa4": fa4_reference_reason, "sdpa": sdpa_unsupported_reason}


def reference_reason(name: str, shape: Shape, device: Device) -> str | None:
    """None when reference kernel `name` can run `shape` on `device`, else why not."""
    return REASONS[name](shape, device)


class _ExactOnly:
    device: Device

    def load(self, variant: str) -> dict:
        if variant != "A0":
            raise UnsupportedError(f"the {self.name} reference kernel has only the exact exponential (A0), "
                                   f"not {variant}")
        return {"backend": self.name, "variant": variant, **self._describe()}

    def _describe(self) -> dict:
        return {}


class FA3Backend(_ExactOnly):
    name = "fa3"

    def __init__(self):
        self.device = detect_device()
        self.module_name = fa3_module_name()
        self.fa3 = None

    def _describe(self) -> dict:
        if self.module_name is None:
            raise UnsupportedError(fa3_unsupported_reason(Shape(), self.device) or "FlashAttention-3 is missing")
        self.fa3 = importlib.import_module(self.module_name)
        from importlib import metadata

        dist = {"fa3_fwd_interface": "fa3-fwd", "flash_attn_interface": "flash-attn-3"}[self.module_name]
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            version = None
        return {"module": self.module_name, "module_file": getattr(self.fa3, "__file__", None), "version": version}

    def build(self, shape: Shape, inputs):
        import torch

        reason = fa3_unsupported_reason(shape, self.device)
        if reason:
            raise UnsupportedError(reason)
        fa3 = self.fa3
        kwargs = {"causal": shape.causal}
        if shape.dtype == "fp8":
            # FA3 takes one float32 descale per (batch, kv head); the inputs carry one scalar per tensor
            ones = torch.ones(shape.batch, shape.n_kv_heads, dtype=torch.float32, device=inputs.q.device)
            kwargs.update(q_descale=ones * inputs.descale[0], k_descale=ones * inputs.descale[1],
                          v_descale=ones * inputs.descale[2])

        def forward():
            out = fa3.flash_attn_func(inputs.q, inputs.k, inputs.v, **kwargs)
            return out[0] if isinstance(out, tuple) else out  # some builds also return the log-sum-exp

        return forward


class SdpaBackend(_ExactOnly):
    name = "sdpa"

    def __init__(self):
        self.device = detect_device()

    def build(self, shape: Shape, inputs):
        import torch.nn.functional as F

        reason = sdpa_unsupported_reason(shape, self.device)
        if reason:
            raise UnsupportedError(reason)
        # SDPA wants (batch, heads, seq, dim); the transposes are views, made once outside the timed call
        q, k, v = (x.transpose(1, 2) for x in (inputs.q, inputs.k, inputs.v))
        gqa = shape.n_kv_heads != shape.heads

        def forward():
            return F.scaled_dot_product_attention(q, k, v, is_causal=shape.causal, enable_gqa=gqa).transpose(1, 2)

        return forward


def fa4_reference_backend():
    from softbench.kernels.fa4 import FA4Backend

    return FA4Backend()


def resolve_references(spec: str, shapes, backend: str, device: Device) -> tuple[tuple[str, ...], dict[str, str]]:
    """--reference LIST as reference kernel names, and the kernels left out with the reason. 'auto' picks the
    fastest exact kernel the machine has for every shape (FlashAttention-3 on Hopper, else SDPA) and none for the
    simulation, whose timings are not kernel timings; a name given explicitly that cannot run is refused."""
    from softbench.core.errors import UsageError

    spec = (spec or "none").strip().lower()
    if spec == "none":
        return (), {}
    if spec == "auto":
        if backend == "sim" or device.kind != "cuda":
            return (), {"auto": "no reference kernel for the simulation or without a GPU"}
        skipped = {}
        for name in ("fa3", "sdpa"):
            reasons = [reference_reason(name, s, device) for s in shapes]
            reason = next((r for r in reasons if r), None)
            if reason is None:
                return (name,), skipped
            skipped[name] = reason
        return (), skipped
    names = tuple(dict.fromkeys(n.strip() for n in spec.split(",") if n.strip()))
    if not names:  # "," or "" would otherwise run without a reference as silently as 'none' says it
        raise UsageError(f"--reference {spec!r} names no reference kernel",
                         hint=f"name some of {', '.join(REFERENCE_NAMES)}, or auto, or none")
    unknown = [n for n in names if n not in REFERENCE_NAMES]
    if unknown:
        raise UsageError(f"unknown reference kernel {', '.join(unknown)} (known: {', '.join(REFERENCE_NAMES)}, "
                         f"auto, none)")
    for name in names:
        for s in shapes:
            reason = reference_reason(name, s, device)
            if reason:
                raise UnsupportedError(f"--reference {name} cannot run {s.tag()}: {reason}",
                                       hint="leave it out, or use --reference auto")
    return names, {}
