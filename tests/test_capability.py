"""What a device and backend can do (softbench.kernels.capability): each refusal at its bounds, on devices described
by hand, so that no GPU is needed to check what a Hopper, a Blackwell or an Ada card is told."""

import pytest

from softbench.core.shapes import Shape
from softbench.kernels import capability
from softbench.kernels.capability import (Device, dims_text, fa4_emulation_reason, fa4_fp8_on_hopper,
                                          fa4_unsupported_reason, triton_unsupported_reason, unsupported_reason)

CPU = Device("cpu", "cpu", None)
H200 = Device("cuda", "NVIDIA H200", 90)
B200 = Device("cuda", "NVIDIA B200", 100)
THOR = Device("cuda", "NVIDIA Thor", 110)
RTX = Device("cuda", "NVIDIA RTX 5090", 120)
L40S = Device("cuda", "NVIDIA L40S", 89)


def test_dims_text_joins_the_last_with_and():
    assert dims_text((64, 128, 256)) == "64, 128 and 256"
    assert dims_text((64, 128)) == "64 and 128"
    assert dims_text((64,)) == "64"


def test_arch_label_names_the_cpu():
    assert CPU.arch_label == "cpu" and H200.arch_label == "sm_90"


def test_detect_device_reads_major_and_minor_and_can_be_kept_off_the_gpu(monkeypatch):
    import torch

    # no GPU here: torch.cuda answers as on an sm_90 card
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 9))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA L40S")
    assert capability.detect_device() == L40S
    assert capability.detect_device(prefer_cuda=False) == CPU


def test_fa4_fp8_on_hopper_is_fp8_alone():
    assert fa4_fp8_on_hopper(Shape(dtype="fp8"), H200)
    assert not fa4_fp8_on_hopper(Shape(dtype="fp16"), H200) and not fa4_fp8_on_hopper(Shape(dtype="fp8"), B200)
    assert fa4_unsupported_reason(Shape(dtype="fp16"), H200) is None


def test_fa4_without_a_gpu_offers_the_simulation_only_when_asked():
    assert "--backend sim" in fa4_unsupported_reason(Shape(), CPU)
    reason = fa4_unsupported_reason(Shape(), CPU, offer_sim=False)
    assert reason.startswith("FA4 needs a CUDA GPU") and "--backend sim" not in reason
    assert "--backend sim" not in unsupported_reason("fa4", Shape(), CPU, offer_sim=False)


def test_fa4_runs_on_the_hopper_and_blackwell_families_only():
    assert fa4_unsupported_reason(Shape(), THOR) is None  # sm_110 takes sm_100's path
    for device in (RTX, L40S):
        assert fa4_unsupported_reason(Shape(), device) == (
            f"FA4's forward is measured here on sm_90 and sm_100 only; this GPU is {device.arch_label}")


def test_fa4_head_dims_at_their_bounds():
    assert fa4_unsupported_reason(Shape(head_dim=256), H200) is None
    assert "not 264" in fa4_unsupported_reason(Shape(head_dim=264), H200)
    assert fa4_unsupported_reason(Shape(head_dim=256), B200) is None
    assert fa4_unsupported_reason(Shape(head_dim=128), B200) is None
    assert fa4_unsupported_reason(Shape(head_dim=192), B200) == (
        "FA4 on sm_100 takes head dims 8..128 (multiples of 8) or 256, not 192")


def test_fa4_emulation_exists_on_sm_100_and_sm_110_only():
    assert fa4_emulation_reason(B200) is None and fa4_emulation_reason(THOR) is None
    assert fa4_emulation_reason(H200).startswith("FA4 has no exp2 emulation on sm_90")
    assert fa4_emulation_reason(CPU).startswith("FA4 has no exp2 emulation on cpu")


def test_triton_fp8_needs_sm_89_and_offers_the_simulation_only_when_asked(monkeypatch):
    assert triton_unsupported_reason(Shape(dtype="fp8"), L40S) is None
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert "--backend sim" in triton_unsupported_reason(Shape(), CPU)
    assert "--backend sim" not in triton_unsupported_reason(Shape(), CPU, offer_sim=False)
    assert unsupported_reason("sim", Shape(), CPU) is None
