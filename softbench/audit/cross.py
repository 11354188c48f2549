"""The compile-only audit (`softbench audit --arch sm_100a`): FA4's forward compiled for a GPU that is not here,
on a machine with another GPU or none (no libcuda needed), nothing run; the kept cubin is audited as usual.
`--backend triton --arch sm_90a` does the same for softbench's own Hopper kernels: the configuration an H200
would run (the Gluon kernel at head dims 64 and 128), compiled by Triton's bundled ptxas
(softbench.kernels.triton_compile.audit_compile), whose key-loop instruction mix the session keeps beside the
counts.

Why each piece is there:
- FLASH_ATTENTION_ARCH=sm_100a: FA4 picks its kernel class (FlashAttentionForwardSm100) from this instead of
  asking torch.cuda for the device's capability;
- CUTE_DSL_ARCH=sm_100a: CuTe DSL's compile target (without it, it probes the driver and falls back to plain
  sm_100, which lacks the arch-specific 'a' features FA4's Blackwell kernel uses);
- FLASH_ATTENTION_NUM_SMS=148: the B200's SM count, for FA4's kernel-selection heuristics instead of a device query;
  all three are read at import or first use, so the parent sets them in the child's environment (driver_env);
- fake tensors (torch's FakeTensorMode) of device "cuda": FA4's forward sees fake mode, builds its CuTe tensors
  from their metadata, compiles (cute.compile: MLIR -> PTX -> CuTe DSL's embedded ptxas, all in-process) and skips
  the launch. The call is the FA4 backend's own forward (softbench.kernels.fa4), on the variant's patched tree,
  so what is audited is the compile a GPU run makes;
- a HardwareInfo stand-in: FA4's persistent tile scheduler (non-causal) asks cutlass.utils.HardwareInfo, a driver
  query, for the SM count to size the host-side grid. Here it would fail (no libcuda) or, on a Hopper host,
  describe the wrong GPU, so in cross mode it is always replaced by the target's numbers and the record says so.
  The device code does not depend on it."""

from __future__ import annotations

import importlib.util
import os
import time
from dataclasses import asdict, dataclass

from softbench.core.errors import UnsupportedError, UsageError
from softbench.kernels.capability import HOPPER_FAMILY, Device

NATIVE = "native"
# what the compile imports (module -> the package that provides it), the versions `make setup` installs
STACK = (("cutlass", "nvidia-cutlass-dsl==4.8.1"), ("quack", "quack-kernels==0.6.5"),
         ("tvm_ffi", "apache-tvm-ffi==0.1.15.post2"), ("einops", "einops"))
INSTALL_HINT = ("pip install nvidia-cutlass-dsl==4.8.1 quack-kernels==0.6.5 apache-tvm-ffi==0.1.15.post2 "
                "torch-c-dlpack-ext==0.1.5, and flash-attn-4==4.0.0b36 with --no-deps (make setup installs them)")


@dataclass(frozen=True)
class Target:
    """A GPU compiled for and not run on."""

    arch: str  # FA4's and CuTe DSL's arch string
    capability: int  # e.g. 100
    num_sms: int  # the SM count the host side assumes (grid size, heuristics)
    gpu: str

    def env(self) -> dict[str, str]:
        return {"FLASH_ATTENTION_ARCH": self.arch, "CUTE_DSL_ARCH": self.arch,
                "FLASH_ATTENTION_NUM_SMS": str(self.num_sms)}

    def device(self) -> Device:
        return Device("cuda", f"{self.gpu} ({self.arch}, compile target, not present)", self.capability,
                      present=False)

    def to_dict(self) -> dict:
        return asdict(self)


# B200: 148 SMs, the multiprocessor count a B200 reports (FA4's prepare_scheduler.py comments on the same
# 148/128); the feasibility experiment compiled with FLASH_ATTENTION_NUM_SMS=148
# H200: 132 SMs (what the GPU host reports); only the triton backend compiles for it here (FA4's Hopper forward is
# audited natively, on the H200 itself)
TARGETS = {"sm_100a": Target(arch="sm_100a", capability=100, num_sms=148, gpu="NVIDIA B200"),
           "sm_90a": Target(arch="sm_90a", capability=90, num_sms=132, gpu="NVIDIA H200")}
ARCH_CHOICES = (NATIVE, *TARGETS)
# which backend each target compiles
TARGET_BACKENDS = {"sm_100a": "fa4", "sm_90a": "triton"}
TRITON_INSTALL_HINT = "pip install triton==3.6.0 (make setup installs it)"


def check_target(backend: str, arch: str) -> None:
    """Refuse an --arch this backend is not compiled for here."""
    if arch == NATIVE:
        return
    if TARGET_BACKENDS.get(arch) != backend:
        raise UsageError(f"--arch {arch} compiles --backend {TARGET_BACKENDS.get(arch)}, not {backend}")


def check_native(backend: str, device) -> None:
    """--backend triton without --arch runs softbench's Hopper kernels on this machine's GPU (under Nsight Compute
    where it is wanted): refused, with the compile for the H200 as the way out, where there is no sm_90 GPU."""
    if backend == "triton" and (device.kind != "cuda" or device.family != HOPPER_FAMILY):
        has = "no CUDA GPU" if device.kind != "cuda" else f"an {device.arch_label} GPU"
        raise UnsupportedError("softbench audit --backend triton runs softbench's Hopper kernels on this machine's "
                               f"sm_90 GPU, and this machine has {has}",
                               hint="add --arch sm_90a: the kernels compiled here for the H200 and their SASS "
                                    "audited, nothing run")


def target_for(arch: str) -> Target | None:
    """--arch's value -> the target, None for native."""
    if arch == NATIVE:
        return None
    if arch not in TARGETS:
        raise UsageError(f"unknown --arch {arch!r}; one of {', '.join(ARCH_CHOICES)}")
    return TARGETS[arch]


def target_record(arch: str) -> dict:
    """What env.json, protocol.yaml and summary.json say about the architecture compiled for."""
    t = target_for(arch)
    return {"arch": arch, "compiled_only": t is not None, "target_sms": t.num_sms if t else None,
            "target": t.to_dict() if t else None}


def missing_stack(backend: str = "fa4") -> str | None:
    """None when the cross-compile's packages are installed, else one sentence naming what is missing (found
    without importing them: CuTe DSL alone takes seconds to import)."""
    if backend == "triton":
        if _absent("triton") or _absent("triton.experimental.gluon"):
            return "--arch sm_90a compiles with Triton (3.6, with Gluon) in this process's Python, and it is not " \
                   "installed here"
        return None
    from softbench.kernels.patch import installed_fa4

    missing = [pkg for mod, pkg in STACK if _absent(mod)]
    try:
        installed_fa4()
    except UnsupportedError:
        missing.append("flash-attn-4==4.0.0b36 (flash_attn.cute)")
    if not missing:
        return None
    return (f"--arch compiles FA4 with CuTe DSL in this process's Python, and {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed here")


def _absent(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):  # a parent package that fails, or a module without a spec
        return True


def compile_only(req: dict) -> dict:
    """In the audit's child: load the request's variant for the target, compile its forward on fake tensors of
    the request's shape, run nothing. The result is the driver's, with compiled_only and the target's facts."""
    target = Target(**req["target"])
    if req["backend"] == "triton":
        return _triton_compile_only(req, target)
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from softbench.core.shapes import Shape
    from softbench.kernels.backends import make_backend

    unset = {k: v for k, v in target.env().items() if os.environ.get(k) != v}
    if unset:  # read at import: they must come with the process's environment (engine.driver_env)
        raise UsageError(f"the cross-compile child needs {', '.join(f'{k}={v}' for k, v in unset.items())} in its "
                         "environment before FA4 is imported")
    t0 = time.monotonic()
    backend = make_backend(req["backend"], target=target.device(), **req.get("options", {}))
    try:
        info = backend.load(req["variant"])
    except ImportError as e:
        raise UnsupportedError(f"the cross-compile cannot import {e.name or 'a module'} ({e})",
                               hint=INSTALL_HINT) from None
    stand_in = install_hardware_info_stand_in(target.num_sms)
    load_s = time.monotonic() - t0
    shape = Shape(**req["shape"])
    with FakeTensorMode(), torch.inference_mode():
        forward = backend.build(shape, fake_inputs(shape))
        t1 = time.monotonic()
        forward()  # compiles; FA4 skips the launch in fake mode
        compile_s = time.monotonic() - t1
    return _compiled_only_result(req, target, info, load_s, compile_s, hardware_info_stand_in=stand_in)


def _compiled_only_result(req: dict, target: Target, load: dict, load_s: float, compile_s: float, **extra) -> dict:
    """The driver's result for a compile that ran nothing: what was loaded and compiled, for which target."""
    device = target.device()
    return {"ok": True, "backend": req["backend"], "variant": req["variant"], "load": load,
            "load_s": round(load_s, 3), "compile_s": round(compile_s, 3), "forwards": 0,
            "device": {"kind": "cuda", "name": device.name, "arch": device.arch, "present": False},
            "pid": os.getpid(), "compiled_only": True, "target_arch": target.arch, "target_sms": target.num_sms,
            **extra}


def _triton_compile_only(req: dict, target: Target) -> dict:
    """compile_only for --backend triton: the kernel compiled by Triton for the target, its cubin left in the
    audit's dump folder (CUTE_DSL_DUMP_DIR, the folder every audit child writes its cubins to)."""
    from pathlib import Path

    from softbench.core.shapes import Shape
    from softbench.kernels.catalog import check
    from softbench.kernels.triton_compile import audit_compile

    check("triton", req["variant"])
    t0 = time.monotonic()
    # resolve_config keeps the default wherever an option is None
    compiled = audit_compile(Shape(**req["shape"]), req["variant"], req.get("options") or {}, target.capability,
                             Path(os.environ.get("CUTE_DSL_DUMP_DIR", ".")))
    return _compiled_only_result(req, target, {"config": compiled["config"]}, 0.0, time.monotonic() - t0,
                                 triton=compiled)


def fake_inputs(shape):
    """q, k, v as make_inputs lays them out (batch, seq, heads, head_dim; the same dtypes), as fake "cuda" tensors:
    metadata only, no values (a compile reads none), created on the fake device since nothing can be copied to it.
    Call inside FakeTensorMode."""
    import torch

    from softbench.kernels.inputs import TORCH_DTYPES, Inputs

    def empty(heads: int):
        return torch.empty(shape.batch, shape.seq, heads, shape.head_dim, dtype=TORCH_DTYPES[shape.dtype],
                           device="cuda")

    return Inputs(empty(shape.heads), empty(shape.n_kv_heads), empty(shape.n_kv_heads))


def install_hardware_info_stand_in(num_sms: int) -> dict:
    """Replace cutlass.utils.HardwareInfo, where FA4 reaches it, with the target's numbers. Returns the record of
    what was replaced and what it answers."""
    import cutlass.utils
    import cutlass.utils.hardware_info as hw
    import flash_attn.cute.tile_scheduler as ts  # the variant's private tree: already imported by load()

    class TargetHardwareInfo:
        """What FA4 asks of the hardware on the host side, answered for the target instead of a driver query."""

        def __init__(self, device_id: int = 0):
            self.device_id = device_id

        def get_device_multiprocessor_count(self) -> int:
            return num_sms

        def get_max_active_clusters(self, cluster_size: int) -> int:
            return num_sms // cluster_size  # one CTA per SM, clusters packed without GPC limits (assumed)

        def get_l2_cache_size_in_bytes(self) -> int:
            raise UnsupportedError("the cross-compile's HardwareInfo stand-in knows the target's SM count only, "
                                   "and FA4 asked for its L2 size")

    replaced = []
    for mod in (cutlass.utils, hw, ts):
        if getattr(mod, "HardwareInfo", None) is not None:
            mod.HardwareInfo = TargetHardwareInfo
            replaced.append(f"{mod.__name__}.HardwareInfo")
    return {"used": True, "replaced": replaced, "multiprocessor_count": num_sms,
            "max_active_clusters": f"{num_sms} // cluster_size"}
