"""tools/gpu/pd_diagnose.py's summary of where an output leaves its reference (the GPU run itself is the host's):
on real tensors of the kernel's layout, (batch, seq, heads, dim)."""
from __future__ import annotations

import torch

from repo_tools import load_tool

diagnose = load_tool("gpu/pd_diagnose.py")


def test_differing_blocks_names_the_block_and_the_consumer():
    # small integers, so that each difference below is exact in FP32 (x + 0.5 - x is 0.5 only where no bit is lost)
    ref = torch.randint(-4, 5, (2, 300, 3, 16), generator=torch.Generator().manual_seed(0)).float()
    out = ref.clone()
    assert diagnose.differing_blocks(out, ref) == {"elements_differing": 0, "nan_rows": 0, "blocks_differing": 0,
                                                   "largest": []}
    out[1, 130, 2, 5] += 0.5  # batch 1, head 2, block 1 (rows 128-255), its first consumer's rows (130 - 128 < 64)
    out[0, 70, 0, 0] += 0.25  # batch 0, head 0, block 0, the second consumer's rows (70 >= 64)
    out[0, 10, 0, 1] += 0.125  # the same block, the first consumer's rows too
    out[1, 299, 1, :] = float("nan")  # a row never written: counted apart, not as a difference
    r = diagnose.differing_blocks(out, ref)
    assert r["elements_differing"] == 3 and r["nan_rows"] == 1 and r["blocks_differing"] == 2, r
    first, second = r["largest"]  # the largest difference first
    assert first == {"batch": 1, "head": 2, "block": 1, "consumers": [0], "rows": 1, "max_abs": 0.5}, first
    assert (second["batch"], second["head"], second["block"], second["consumers"], second["rows"]) == (0, 0, 0, [0, 1], 2)
    assert second["max_abs"] == 0.25, second
    # one consumer (64-row blocks): row 70 is block 1's first consumer
    one = diagnose.differing_blocks(out, ref, block_m=64)
    assert {(x["batch"], x["block"]) for x in one["largest"]} == {(1, 2), (0, 1), (0, 0)}, one
