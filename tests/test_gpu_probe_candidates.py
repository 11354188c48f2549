"""tools/gpu/triton_probe.py names its candidates by label: each must parse, say itself back, and differ from the
table's configuration (timed first anyway), or the probe fails on the GPU host after minutes of compiling."""

import importlib.util
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton")

from softbench.kernels.triton_attn import KernelConfig, default_config  # noqa: E402

PROBE = Path(__file__).resolve().parents[1] / "tools" / "gpu" / "triton_probe.py"


def load_probe():
    spec = importlib.util.spec_from_file_location("triton_probe", PROBE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("family, dtype", [("bf16", torch.bfloat16), ("fp8", torch.float8_e4m3fn)])
def test_probe_candidates_are_valid_distinct_labels(family, dtype):
    labels = load_probe().CANDIDATES[family]
    table = default_config(dtype, 128).label()
    assert labels and table not in labels and len(set(labels)) == len(labels)
    for label in labels:
        assert KernelConfig.from_label(label).label() == label
        assert KernelConfig.from_label(label).v_kmajor == (family == "fp8")  # FP8 needs V key-major to pipeline
