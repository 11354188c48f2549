"""softbench's Triton forwards as one backend, BF16/FP16 and FP8 on Hopper. Two kernels:
  * triton (softbench.kernels.triton_attn): Triton's own language; every dtype and variant, head dims 64, 128 and
    256, and the one the CPU interpreter runs;
  * gluon (softbench.kernels.gluon_attn): a warp-specialized Hopper kernel (a producer warp, one or two consumer
    warpgroups), BF16/FP16/FP8 and the same variants, head dims 64 and 128. The default wherever it can run (an
    sm_90 GPU, compiled Triton, head dim 64 or 128): faster than the Triton kernel at every dtype on the H200 since
    P's FP8 operand is packed at the wgmma; its configuration per dtype is gluon_config.default_config's. Head dim 256
    runs in the Triton kernel on every machine. `--triton-config` with a label picks either.
Each variant is a constexpr of one kernel, compiled on first use; the operand layout (V key-major for FP8) is made
once in build(), outside the timed call.

build() compiles the configuration for the shape (the default's, or the one given in the options) with one
launch; if that fails to compile or launch, it says why on stderr and builds the next one (gluon: the triton
table's; then the simple fallback). The forward it returns carries `.info` (which kernel and configuration ran,
and the error that forced a fallback)."""

from __future__ import annotations

import os
import sys
from dataclasses import replace

from softbench.core.errors import MeasurementError, UnsupportedError, UsageError
from softbench.kernels.capability import GLUON_HEAD_DIMS, detect_device, triton_unsupported_reason
from softbench.kernels.inputs import Inputs
from softbench.core.shapes import Shape

# the fields of each kernel's configuration (triton_attn.KernelConfig, gluon_config.GluonConfig), which TritonBackend
# takes as options; written out here so that the backend checks its options without importing triton
CONFIG_FIELDS = ("block_m", "block_n", "num_warps", "num_stages", "v_kmajor", "tma", "warp_specialize",
                 "max_registers", "rotate", "head_group")
GLUON_FIELDS = ("block_n", "stages", "consumer_registers", "loader_registers", "head_group", "pingpong", "consumers",
                "handover", "rescale", "sync", "row_sum", "rescale_at", "schedule", "split_qk", "emulate",
                "p_round", "tile_loops", "loads", "v_stages", "grid_dependency")
KERNELS = ("triton", "gluon")


def _import_triton():
    """The triton package, or the refusal that names it: asked by load() and by resolve_config(), which the gates
    call before any worker loads the backend."""
    try:
        import triton
    except ImportError:
        raise UnsupportedError("--backend triton needs the triton package, which is not installed here",
                               hint="pip install triton (or pip install -e .[triton])") from None
    return triton


def default_kernel(torch_dtype, head_dim: int, hopper: bool | None = None) -> str:
    """gluon for BF16/FP16/FP8 at head dims 64 and 128 where it can run (sm_90, compiled Triton, not the
    interpreter), triton otherwise: head dim 256, which only the Triton kernel implements, on every machine. The
    answer depends on the dtype, the head dim and the machine only, never on the variant, so that a baseline and
    its variant always run in the same kernel. hopper: True for a compile for sm_90a made elsewhere (the kernel an
    H200 would run), None to ask this process."""
    import torch

    if torch_dtype not in (torch.bfloat16, torch.float16, torch.float8_e4m3fn) or head_dim not in GLUON_HEAD_DIMS:
        return "triton"
    try:
        from softbench.kernels import gluon_attn
    except ImportError:  # a Triton without Gluon's Hopper module
        return "triton"
    if hopper is None:
        hopper = gluon_attn.usable_here() is None
    return "gluon" if hopper else "triton"


def resolve_config(torch_dtype, head_dim: int, overrides: dict, hopper: bool | None = None):
    """The configuration that build() tries first: the default kernel's (default_kernel) for (dtype, head dim), or
    the kernel the overrides name ("kernel"), with `overrides` on top; the Gluon kernel named at a head dim it
    lacks (256) is refused. `overrides` may be a backend-options mapping: only that kernel's fields count
    (fallback, device are not configuration) and None keeps the default's value. One answer for the backend and for
    the gates, whose single-tile length is this configuration's block_n. hopper: as default_kernel's."""
    _import_triton()
    kernel = overrides.get("kernel") or default_kernel(torch_dtype, head_dim, hopper)
    if kernel not in KERNELS:
        raise UsageError(f"unknown Triton-backend kernel {kernel!r}; choose {' or '.join(KERNELS)}")
    if kernel == "gluon":
        from softbench.kernels.gluon_config import default_config as gluon_default

        base, fields = gluon_default(torch_dtype, head_dim), GLUON_FIELDS
    else:
        from softbench.kernels.triton_attn import default_config

        base, fields = default_config(torch_dtype, head_dim), CONFIG_FIELDS
    return replace(base, **{f: overrides[f] for f in fields if overrides.get(f) is not None})


def kernel_of(config) -> str:
    from softbench.kernels.triton_attn import KernelConfig

    return "triton" if isinstance(config, KernelConfig) else "gluon"


class TritonBackend:
    name = "triton"

    def __init__(self, kernel: str | None = None, fallback: bool = True, device: str | None = None, **config):
        """config: fields of either kernel's configuration (CONFIG_FIELDS, GLUON_FIELDS), None keeping the
        default's; any other name is a TypeError, which make_backend reports as an option the backend lacks."""
        unknown = sorted(set(config) - set(CONFIG_FIELDS) - set(GLUON_FIELDS))
        if unknown:
            raise TypeError(f"TritonBackend takes no configuration fields {unknown}")
        self.device = detect_device(prefer_cuda=device != "cpu")
        self.overrides = {k: v for k, v in {**config, "kernel": kernel}.items() if v is not None}
        self.fallback = fallback
        self.variant: str | None = None
        self.last_info: dict | None = None
        self._announced: set[tuple[str, str]] = set()

    def load(self, variant: str) -> dict:
        from softbench.kernels.catalog import check

        check("triton", variant)  # unknown names answered with the closest ones, others with who builds them
        triton = _import_triton()
        self.variant = variant
        return {"backend": "triton", "variant": variant, "triton_version": triton.__version__,
                "interpreter": os.environ.get("TRITON_INTERPRET") == "1", "config_overrides": self.overrides,
                "fallback_allowed": self.fallback}

    def config_for(self, shape: Shape, torch_dtype):
        return resolve_config(torch_dtype, shape.head_dim, self.overrides)

    def build(self, shape: Shape, inputs: Inputs):
        from softbench.kernels import triton_attn as ta

        if self.variant is None:
            raise UsageError("build requested before load")
        reason = triton_unsupported_reason(shape, self.device)
        if reason:
            raise UnsupportedError(f"{shape.tag()}: {reason}")
        config = self.config_for(shape, inputs.q.dtype)
        attempts = [config]
        if self.fallback:
            if kernel_of(config) == "gluon":  # then the Triton kernel's table configuration
                attempts.append(ta.default_config(inputs.q.dtype, shape.head_dim))
            simple = ta.fallback_config(inputs.q.dtype, shape.head_dim)
            if simple not in attempts:
                attempts.append(simple)
        errors: list[str] = []
        for cfg in attempts:
            try:
                forward = self._compile(shape, inputs, cfg)
            except (UsageError, UnsupportedError):
                raise
            except Exception as e:  # compile or launch failure of this configuration: reported, then the next
                errors.append(f"{cfg.label()}: {type(e).__name__}: {_first_line(e)}")
                print(f"softbench triton: configuration {cfg.label()} failed ({errors[-1]}); "
                      + ("trying the fallback" if cfg is not attempts[-1] else "no configuration left"),
                      file=sys.stderr)
                continue
            # the head group the launch really used (reduced to a divisor of batch x heads), next to the label's
            info = {"kernel": kernel_of(cfg), "config": cfg.to_dict(), "tuned_config": config.label(),
                    "fallback_used": cfg != config,
                    "effective_head_group": ta.effective_head_group(cfg, shape.batch * shape.heads), "errors": errors}
            forward.info = info
            self.last_info = info
            said = (shape.tag(), cfg.label())
            if said not in self._announced:  # once: gates rebuilds the same shape for every one-hot V block
                self._announced.add(said)
                print(f"softbench triton: {self.variant} {shape.tag()} runs configuration {cfg.label()}"
                      + (" (fallback)" if cfg != config else ""), file=sys.stderr)
            return forward
        raise MeasurementError(f"no Triton configuration compiled for {shape.tag()}: " + "; ".join(errors),
                               hint="pass smaller block_m/block_n or num_stages through the backend options")

    def _compile(self, shape: Shape, inputs: Inputs, cfg):
        """Lay the operands out for `cfg` (once) and launch once, which compiles; returns the timed call."""
        variant, causal, descale = self.variant, shape.causal, tuple(inputs.descale)
        if kernel_of(cfg) == "gluon":
            from softbench.kernels import gluon_attn as ga

            ga.check_variant(variant)  # a UsageError: refused, not replaced by a fallback running another kernel
            reason = ga.usable_here()
            if reason:
                raise UnsupportedError(f"the Gluon kernel cannot run here: {reason}",
                                       hint="pass --triton-config with a triton label (e.g. m128n64w8s2-tma-r128-hg16)")
            ops = ga.prepare_operands(inputs.q, inputs.k, inputs.v, cfg)

            def forward():
                return ga.launch(ops, causal, variant, cfg, descale=descale)
        else:
            from softbench.kernels import triton_attn as ta

            ops = ta.prepare_operands(inputs.q, inputs.k, inputs.v, cfg)

            def forward():
                return ta.launch(ops, causal, variant, cfg, descale=descale)
        forward()
        if self.device.kind == "cuda":
            import torch

            torch.cuda.synchronize()  # a launch failure surfaces here, inside the try of build()
        return forward


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else ""

