"""What a device and backend can do, answered with a reason instead of an assert.

FA4 on sm_90 (Hopper) has BF16/FP16 only; FP8 and FA4's exp2 polynomial emulation exist only in its sm_100
path. Head dims: sm_90 8..256 (multiple of 8), sm_100 8..128, (192, 128) or 256."""

from __future__ import annotations

from dataclasses import dataclass

from softbench.core.shapes import Shape

# the head dims softbench's Triton-language forward (triton_attn.HEAD_DIMS) and its Gluon kernel (gluon_attn) are
# written for, here so that the reasons below are given without importing triton
TRITON_HEAD_DIMS = (64, 128, 256)
GLUON_HEAD_DIMS = (64, 128)

# the GPU families (compute capability // 10) whose FA4 forward is flash_fwd_sm100.py: the B200 (sm_100, sm_103) and
# sm_110. FP8 through FA4 and its exp2 emulation exist only there
SM100_FAMILIES = (10, 11)
# Hopper's family (sm_90): FA3's forward and softbench's Gluon kernels are for it alone
HOPPER_FAMILY = 9


def arch_family(arch: int | None) -> int:
    """The GPU family of a compute capability (90 -> 9, 103 -> 10); 0 where there is none (the CPU)."""
    return (arch or 0) // 10


def dims_text(dims) -> str:
    """(64, 128, 256) as "64, 128 and 256", for refusals that name the head dims a kernel takes."""
    *rest, last = (str(d) for d in dims)
    return f"{', '.join(rest)} and {last}" if rest else last


@dataclass(frozen=True)
class Device:
    kind: str  # "cuda" or "cpu"
    name: str
    arch: int | None  # e.g. 90, 100; None on the CPU
    # False: a GPU that kernels are compiled for and never run on, here (softbench audit --arch sm_100a)
    present: bool = True

    @property
    def family(self) -> int:
        return arch_family(self.arch)

    @property
    def arch_label(self) -> str:
        return f"sm_{self.arch}" if self.arch is not None else "cpu"


def detect_device(prefer_cuda: bool = True) -> Device:
    import torch  # heavy import, deferred

    if prefer_cuda and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return Device("cuda", torch.cuda.get_device_name(), major * 10 + minor)
    return Device("cpu", "cpu", None)


def fa4_fp8_on_hopper(shape: Shape, device: Device) -> bool:
    """FP8 through FA4 on an sm_90 GPU: FA4's FP8 forward exists only in its sm_100 path."""
    return shape.dtype == "fp8" and device.kind == "cuda" and device.family == HOPPER_FAMILY


def fa4_unsupported_reason(shape: Shape, device: Device, offer_sim: bool = True) -> str | None:
    """None when FA4 can run `shape` on `device`, else a sentence that says why not and what to do. offer_sim:
    whether the simulation is a way out (not for audit, which reads compiled kernels)."""
    if device.kind != "cuda":
        return "FA4 needs a CUDA GPU and none is visible here" + (
            "; use --backend sim (pure torch, runs on the CPU)" if offer_sim else "")
    family = device.family
    if family not in (HOPPER_FAMILY, *SM100_FAMILIES):
        return f"FA4's forward is measured here on sm_90 and sm_100 only; this GPU is {device.arch_label}"
    if fa4_fp8_on_hopper(shape, device):
        return ("FP8 through FA4 exists only in its sm_100 path; this GPU is sm_90 (Hopper). "
                "Use --backend triton (softbench's own FP8 forward for Hopper) or --dtype bf16/fp16"
                + (", or --backend sim for the FP8 semantics" if offer_sim else ""))
    d = shape.head_dim
    if family == HOPPER_FAMILY and not (8 <= d <= 256 and d % 8 == 0):
        return f"FA4 on sm_90 takes head dims 8..256 in multiples of 8, not {d}"
    if family in SM100_FAMILIES and not ((8 <= d <= 128 and d % 8 == 0) or d == 256):
        return f"FA4 on sm_100 takes head dims 8..128 (multiples of 8) or 256, not {d}"
    return None


def fa4_emulation_reason(device: Device) -> str | None:
    """FA4's exp2 polynomial emulation (ex2_emu_*) exists only in the sm_100 forward."""
    if device.family not in SM100_FAMILIES:
        return (f"FA4 has no exp2 emulation on {device.arch_label}: its ex2_emu_freq/start_frg/res settings "
                "exist only in the sm_100 forward")
    return None



def triton_unsupported_reason(shape: Shape, device: Device, offer_sim: bool = True) -> str | None:
    """None when softbench's Triton forward (softbench.kernels.triton_attn) can run `shape` on `device`.

    It needs a CUDA GPU of sm_80 or newer (sm_89 or newer for FP8 matrix instructions), or the CPU interpreter
    (TRITON_INTERPRET=1, slow: small shapes only); head dims 64, 128 and 256 (TRITON_HEAD_DIMS)."""
    import os

    if device.kind != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        return ("the Triton forward needs a CUDA GPU and none is visible here; set TRITON_INTERPRET=1 to run it "
                "through Triton's CPU interpreter (slow, small shapes)" + (", or use --backend sim" if offer_sim else ""))
    if device.kind == "cuda":
        arch = device.arch or 0
        if arch < 80:
            return f"the Triton forward needs sm_80 or newer; this GPU is {device.arch_label}"
        if shape.dtype == "fp8" and arch < 89:
            return f"FP8 (e4m3) matrix instructions need sm_89 or newer; this GPU is {device.arch_label}"
    if shape.head_dim not in TRITON_HEAD_DIMS:
        return f"the Triton forward is written for head dims {dims_text(TRITON_HEAD_DIMS)}, not {shape.head_dim}"
    return None


BACKEND_NAMES = ("fa4", "triton", "sim")


def unsupported_reason(backend: str, shape: Shape, device: Device, offer_sim: bool = True) -> str | None:
    """One question for every command: can `backend` run `shape` here? The simulation runs anywhere, and the
    answer names it as a way out unless offer_sim is False (a command that does not take --backend sim)."""
    if backend == "fa4":
        return fa4_unsupported_reason(shape, device, offer_sim)
    if backend == "triton":
        return triton_unsupported_reason(shape, device, offer_sim)
    return None
