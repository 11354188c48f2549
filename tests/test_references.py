"""The exact reference kernels (softbench.kernels.references): what each can run, on devices described by hand, and
how --reference picks them. FA3's presence is set per test (find_spec answers as where it is installed), also for
tests/test_latency.py's FA4 reference test."""

import importlib.util

import pytest

from softbench.core.errors import UnsupportedError, UsageError
from softbench.core.shapes import Shape
from softbench.kernels import references
from test_capability import B200, CPU, H200  # the devices described by hand, in one place


def pretend_installed(monkeypatch, *names):
    """find_spec finds exactly `names` among FA3's modules and FA4's package; other modules as they are here."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name in names
                        else None if name in references.FA3_MODULES + ("flash_attn",) else find_spec(name, *a))


def test_fa3_is_hopper_only_and_takes_its_own_head_dims(monkeypatch):
    pretend_installed(monkeypatch, "fa3_fwd_interface")
    assert references.fa3_unsupported_reason(Shape(), B200) == (
        "FlashAttention-3's forward is for Hopper (sm_90); this device is sm_100")
    for d in references.FA3_HEAD_DIMS:
        assert references.fa3_unsupported_reason(Shape(head_dim=d), H200) is None
    assert references.FA3_HEAD_DIMS == (64, 96, 128, 192, 256)
    assert references.fa3_unsupported_reason(Shape(head_dim=80), H200) == (
        "FlashAttention-3 takes head dims 64, 96, 128, 192, 256, not 80")


def test_fa3_prefers_the_pypi_build(monkeypatch):
    pretend_installed(monkeypatch, "fa3_fwd_interface", "flash_attn_interface")
    assert references.fa3_module_name() == "fa3_fwd_interface"
    pretend_installed(monkeypatch, "flash_attn_interface")
    assert references.fa3_module_name() == "flash_attn_interface"
    pretend_installed(monkeypatch)
    assert "not installed" in references.fa3_unsupported_reason(Shape(), H200)


def test_sdpa_takes_both_16_bit_dtypes_only():
    assert references.sdpa_unsupported_reason(Shape(dtype="fp16"), H200) is None
    assert references.sdpa_unsupported_reason(Shape(dtype="bf16"), H200) is None
    assert references.sdpa_unsupported_reason(Shape(dtype="fp8"), H200) == (
        "torch's scaled_dot_product_attention has no fp8 path")


def test_fa4_as_a_reference_never_offers_the_simulation(monkeypatch):
    pretend_installed(monkeypatch, "flash_attn")
    reason = references.reference_reason("fa4", Shape(), CPU)
    assert reason.startswith("FA4 needs a CUDA GPU") and "--backend sim" not in reason


def test_reference_kernels_load_the_exact_exponential_only():
    sdpa = references.SdpaBackend()
    assert sdpa.load("A0") == {"backend": "sdpa", "variant": "A0"}
    with pytest.raises(UnsupportedError, match="only the exact exponential \\(A0\\), not A1"):
        sdpa.load("A1")


def test_auto_picks_fa3_on_hopper_else_sdpa_and_says_why(monkeypatch):
    bf16 = [Shape(seq=256), Shape(seq=512)]
    pretend_installed(monkeypatch)  # no FA3
    names, skipped = references.resolve_references("auto", bf16, "triton", H200)
    assert names == ("sdpa",) and list(skipped) == ["fa3"] and "not installed" in skipped["fa3"]
    pretend_installed(monkeypatch, "fa3_fwd_interface")
    assert references.resolve_references(" AUTO ", bf16, "triton", H200) == (("fa3",), {})
    # one shape FA3 cannot run is enough to leave it out, whichever comes first
    names, skipped = references.resolve_references("auto", [Shape(head_dim=128), Shape(head_dim=80)], "fa4", H200)
    assert names == ("sdpa",) and skipped["fa3"].endswith("not 80")
    # none for the simulation, and none without a GPU, on any backend
    for backend, device in (("sim", H200), ("triton", CPU), ("fa4", CPU)):
        assert references.resolve_references("auto", bf16, backend, device) == (
            (), {"auto": "no reference kernel for the simulation or without a GPU"})


def test_named_references_are_deduplicated_and_refused_where_they_cannot_run(monkeypatch):
    pretend_installed(monkeypatch)
    assert references.resolve_references(" None ", [Shape()], "triton", H200) == ((), {})
    assert references.resolve_references(None, [Shape()], "triton", H200) == ((), {})
    assert references.resolve_references("sdpa, SDPA", [Shape()], "triton", H200) == (("sdpa",), {})
    with pytest.raises(UsageError, match="unknown reference kernel fa5 \\(known: fa3, fa4, sdpa, auto, none\\)"):
        references.resolve_references("sdpa,fa5", [Shape()], "triton", H200)
    with pytest.raises(UnsupportedError, match="--reference sdpa cannot run fp8-8K-causal-b1h16d128: torch's"):
        references.resolve_references("sdpa", [Shape(), Shape(dtype="fp8")], "triton", H200)
