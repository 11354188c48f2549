"""tools/analysis/rescale_skip_rates.py: which rows keep O's scale under each rescale rule, on hand-made tile
maxima, and the warp rates on the benchmark's own inputs."""
from __future__ import annotations

import torch

from repo_tools import load_tool
from softbench.core.shapes import Shape
from softbench.kernels.inputs import make_inputs

skip = load_tool("analysis/rescale_skip_rates.py")


def _kept(rule: str, maxima: list[float]) -> list[bool]:
    tmax = torch.tensor([maxima])  # one row, its largest score per tile in log2 units
    return [bool(k[0]) for k in skip.keeps(rule, tmax)]


def test_each_rule_keeps_o_where_it_should():
    maxima = [0.0, -1.0, 1.0, 0.5, 3.0, 7.0]  # running maximum 0, 0, 1, 1, 3, 7: anchors r = 0, 0, 2, 2, 6, 14
    assert _kept("rs", maxima) == [False, True, False, True, False, False]
    # A0's lazy maximum moves only past 2 octaves: at 3.0 (> 0 + 2) and 7.0 (> 3 + 2)
    assert _kept("rl-a0", maxima) == [False, True, True, True, False, False]
    # h15-folded's anchor stays while its step is even and at most 2N half octaves: 2 kept under both, 6 only under 4
    assert _kept("h15-even-2", maxima) == [False, True, True, True, False, False]
    assert _kept("h15-even-4", maxima) == [False, True, True, True, True, False]
    # an odd step (anchor 0 -> 1 at a maximum of 0.5) changes the lattice's phase: O must be rescaled
    assert _kept("h15-even-8", [0.0, 0.5, 0.6]) == [False, False, True]


def test_warp_rates_on_the_benchmarks_inputs_order_as_the_rules_nest():
    """Where the exact maximum stays, so does h15's anchor (its step is then the even one it had): h15-even-N keeps
    at least -rs's tiles, and more with a larger N; the rates are shares."""
    inputs = make_inputs(Shape(dtype="bf16", seq=1024, heads=1, head_dim=128, causal=True), seed=0, device="cpu")
    tmax = skip.tile_maxima(inputs.q[0, :, 0].float(), inputs.k[0, :, 0].float(), causal=True)
    assert tmax.shape == (1024, 8) and torch.isinf(tmax[0, 1:]).all()
    rates = {rule: skip.warp_skip_rate(rule, tmax) for rule in ("rs", "rl-a0", "h15-even-2", "h15-even-8")}
    assert all(0.0 <= r < 1.0 for r in rates.values()), rates
    assert rates["rs"] <= rates["h15-even-2"] <= rates["h15-even-8"], rates
    assert rates["rl-a0"] > rates["rs"], rates
