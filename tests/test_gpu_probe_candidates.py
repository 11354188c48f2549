"""tools/gpu/triton_probe.py names its candidates by label: each must parse, say itself back, and differ from the
table's configuration (timed first anyway), or the probe fails on the GPU host after minutes of compiling."""

import pytest
import torch

pytest.importorskip("triton")

from repo_tools import load_tool  # noqa: E402
from softbench.kernels.triton_attn import KernelConfig, default_config  # noqa: E402


def load_probe():
    return load_tool("gpu/triton_probe.py")


@pytest.mark.parametrize("family, dtype", [("bf16", torch.bfloat16), ("fp8", torch.float8_e4m3fn)])
def test_probe_candidates_are_valid_distinct_labels(family, dtype):
    labels = load_probe().CANDIDATES[family]
    table = default_config(dtype, 128).label()
    assert labels and table not in labels and len(set(labels)) == len(labels)
    for label in labels:
        assert KernelConfig.from_label(label).label() == label
        assert KernelConfig.from_label(label).v_kmajor == (family == "fp8")  # FP8 needs V key-major to pipeline
