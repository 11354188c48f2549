"""Backends build a zero-argument forward for (variant, shape, inputs). They run inside a worker process.

torch is imported only where a backend is made, not with this module: the commands look backends up here to
check their options, and a refused option should not wait seconds for torch to load."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol

from softbench.core.errors import UnsupportedError
from softbench.kernels.capability import Device, detect_device
from softbench.core.registry import Registry
from softbench.core.shapes import Shape

if TYPE_CHECKING:  # torch is imported by the worker that builds a kernel, not by a command listing the backends
    import torch

    from softbench.kernels.inputs import Inputs


class Backend(Protocol):
    name: str
    device: Device

    def load(self, variant: str) -> dict: ...

    def build(self, shape: Shape, inputs: Inputs) -> Callable[[], torch.Tensor]: ...


class SimBackend:
    """The pure-torch semantic simulation (softbench.kernels.sim), on CUDA when present, else on the CPU."""

    name = "sim"

    def __init__(self, rescale_threshold: float = 0.0, tile: int = 128, device: str | None = None):
        self.rescale_threshold = rescale_threshold
        self.tile = tile
        self.device = detect_device(prefer_cuda=device != "cpu")
        self.weight_fn = None
        self.variant = None

    def load(self, variant: str) -> dict:
        from softbench.kernels import sim_weights

        self.variant = variant
        self.weight_fn = sim_weights.weight_fn(variant)
        return {"backend": "sim", "variant": variant, "rescale_threshold": self.rescale_threshold, "tile": self.tile}

    def build(self, shape: Shape, inputs: Inputs):
        from softbench.kernels.sim import sim_attention

        def forward():
            return sim_attention(inputs.q, inputs.k, inputs.v, shape.causal, self.weight_fn, tile=self.tile,
                                 rescale_threshold=self.rescale_threshold, descale=inputs.descale)

        return forward


def _fa4_backend(**kw):
    from softbench.kernels.fa4 import FA4Backend

    return FA4Backend(**kw)


def _triton_backend(**kw):
    from softbench.kernels.triton_backend import TritonBackend

    return TritonBackend(**kw)


BACKENDS: Registry[Callable[..., Backend]] = Registry("backend")
BACKENDS.register("fa4", _fa4_backend)
BACKENDS.register("triton", _triton_backend)
BACKENDS.register("sim", SimBackend)


def _reference(name: str):
    def factory(**kw):
        from softbench.kernels import references

        if kw:
            raise UnsupportedError(f"the {name} reference kernel takes no options, got {sorted(kw)}")
        return {"fa3": references.FA3Backend, "sdpa": references.SdpaBackend,
                "fa4": references.fa4_reference_backend}[name]()

    return factory


# exact kernels timed beside the baseline (--reference); their workers are named ref-<name>
REFERENCE_BACKENDS: Registry[Callable[..., Backend]] = Registry("reference kernel")
for _name in ("fa3", "fa4", "sdpa"):
    REFERENCE_BACKENDS.register(_name, _reference(_name))


def make_backend(name: str, **options) -> Backend:
    """A measured backend by name, or a reference kernel as `ref-<name>` (e.g. ref-fa3)."""
    factory = REFERENCE_BACKENDS.get(name[4:]) if name.startswith("ref-") else BACKENDS.get(name)
    try:
        return factory(**options)
    except TypeError as e:
        raise UnsupportedError(f"backend {name} does not take options {sorted(options)}: {e}") from None
