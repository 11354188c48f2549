"""h15-folded through the tile-wise simulation: with the running maximum growing across key tiles, every key's
effective weight (its own tile's weight times each later rescale) must be Rowmax-H15 on the final anchor's
lattice, which holds only because the rescale is the ratio of the anchors' lattices, not exp2 of the max
difference; and the simulation backend builds the variant."""

import math

import torch

from softbench import operators as ops
from softbench.core.shapes import Shape
from softbench.kernels.backends import SimBackend
from softbench.kernels.inputs import make_inputs
from softbench.kernels.sim import H15_FOLDED, TileMap, element_map, sim_attention

SEQ, TILE, D = 512, 64, 32


def _growing_rows(seed=0):
    """8 query rows against keys whose scores grow along the sequence, so the maximum moves in most tiles."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 8, 1, D, generator=g)
    growth = torch.linspace(0, 3, SEQ).view(1, SEQ, 1, 1)
    k = torch.randn(1, SEQ, 1, D, generator=g) * 0.5 + q.mean(1, keepdim=True) * growth
    return q, k


def _lattice_error(weight_map):
    """log2 of each key's effective weight (probability over the final maximum's) minus half of 2cs - rne(2cm)."""
    q, k = _growing_rows()
    eye = torch.eye(SEQ).view(1, SEQ, 1, SEQ)
    p = sim_attention(q, k, eye, False, weight_map, tile=TILE).double()[0, :, 0]  # (rows, keys)
    c = float(torch.tensor(1.0 / math.sqrt(D) * math.log2(math.e)))
    s = (q.float().transpose(1, 2) @ k.float().transpose(1, 2).transpose(-1, -2))[0, 0].double()  # as sim's
    m = s.amax(-1, keepdim=True)
    assert ((s.argmax(-1) // TILE) > 0).all()  # the final maximum is not in the first tile: rescales happened
    w_eff = p / p.gather(-1, s.argmax(-1, keepdim=True))  # the final maximum's weight is exactly 1
    y = 2 * c * s - torch.round(2 * c * m)
    return torch.log2(w_eff) - y / 2


def test_online_weights_sit_on_the_final_anchors_lattice():
    err = _lattice_error(H15_FOLDED)
    lo, hi = ops.half_octave_error_bounds()
    assert err.min() >= lo - 1e-5 and err.max() <= hi + 1e-5  # the FP32 rescales' rounding only
    assert err.min() < lo + 1e-2 and err.max() > hi - 1e-2


def test_the_exact_rescale_would_leave_each_tiles_phase_in_its_weights():
    naive = TileMap(H15_FOLDED.weights, element_map(ops.exact_exp2).rescale)
    err = _lattice_error(naive)
    lo, hi = ops.half_octave_error_bounds()
    assert err.min() < lo - 0.1 or err.max() > hi + 0.1


def test_the_simulation_backend_builds_h15_folded():
    backend = SimBackend(device="cpu")
    backend.load("h15-folded")
    assert backend.weight_fn is H15_FOLDED
    shape = Shape(dtype="fp8", seq=256, heads=2, kv_heads=1, head_dim=64, causal=True)
    inputs = make_inputs(shape, 0, "cpu")
    out = backend.build(shape, inputs)().float()
    a1 = sim_attention(inputs.q, inputs.k, inputs.v, True, ops.rowmax_h15, descale=inputs.descale).float()
    exact = sim_attention(inputs.q, inputs.k, inputs.v, True, ops.exact_exp2, descale=inputs.descale).float()
    assert torch.isfinite(out).all()
    # an approximation of the same size as A1's, and not A1
    err, err_a1 = ((out - exact).norm() / exact.norm()).item(), ((a1 - exact).norm() / exact.norm()).item()
    assert 0.3 * err_a1 < err < 3 * err_a1 and not torch.equal(out, a1)
