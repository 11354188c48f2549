"""Backends by name (softbench.kernels.backends): the simulation's options reach its forward, and a reference
kernel is made as ref-<name>, with no options, by its own class."""

import pytest
import torch

from softbench.core.errors import UnsupportedError, UsageError
from softbench.core.shapes import Shape
from softbench.kernels.backends import SimBackend, make_backend
from softbench.kernels.inputs import make_inputs
from softbench.kernels.sim import sim_attention


def test_simulation_defaults_and_options_are_recorded_when_loaded():
    sim = SimBackend(device="cpu")
    assert sim.load("A0") == {"backend": "sim", "variant": "A0", "rescale_threshold": 0.0, "tile": 128}
    made = make_backend("sim", rescale_threshold=8.0, tile=64, device="cpu")
    assert made.load("h15-folded") == {"backend": "sim", "variant": "h15-folded", "rescale_threshold": 8.0,
                                       "tile": 64}


def test_simulation_asked_for_the_cpu_stays_there(monkeypatch):
    # no GPU here: torch.cuda answers as on a GPU host, where --device cpu must still keep the simulation off it
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    assert SimBackend(device="cpu").device.kind == "cpu"
    assert SimBackend().device.arch == 90


@pytest.mark.parametrize("causal", [False, True])
def test_simulation_forward_is_sim_attention_with_the_backends_options(causal):
    shape = Shape(dtype="bf16", seq=64, heads=1, head_dim=16, causal=causal)
    inputs = make_inputs(shape, seed=0, device="cpu")
    outs = {}
    for threshold in (0.0, 8.0):
        sim = SimBackend(rescale_threshold=threshold, tile=16, device="cpu")
        sim.load("h15-folded")
        out = sim.build(shape, inputs)()
        want = sim_attention(inputs.q, inputs.k, inputs.v, causal, sim.weight_fn, tile=16,
                             rescale_threshold=threshold, descale=inputs.descale)
        assert torch.equal(out, want)
        outs[threshold] = out
    assert not torch.equal(outs[0.0], outs[8.0])  # the threshold matters on these inputs


def test_reference_kernels_are_made_by_name_without_options():
    assert make_backend("ref-sdpa").name == "sdpa"
    assert make_backend("ref-fa3").name == "fa3"  # made without FA3 installed; its load says what is missing
    with pytest.raises(UnsupportedError, match="the sdpa reference kernel takes no options, got \\['tile'\\]"):
        make_backend("ref-sdpa", tile=64)
    with pytest.raises(UsageError, match="unknown backend 'refsdpa'"):
        make_backend("refsdpa")
