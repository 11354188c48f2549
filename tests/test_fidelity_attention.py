"""Attention paths against float64 references, the router's refusals, and condition building."""

import math

import pytest
import torch

from softbench.core.errors import UnsupportedError, UsageError
from softbench.fidelity import attention
from softbench.fidelity.conditions import build_conditions
from softbench.fidelity.operator_zoo import parse_operator


def _qkv(seq=300, h=6, hk=2, d=16, seed=0, dtype=torch.float32, spread=3.0):
    g = torch.Generator().manual_seed(seed)
    q = (torch.randn(1, h, seq, d, generator=g) * spread).to(dtype)
    k = torch.randn(1, hk, seq, d, generator=g).to(dtype)
    v = torch.randn(1, hk, seq, d, generator=g).to(dtype)
    return q, k, v


def _reference(q, k, v, scale, weights=None, softcap=None, window=None):
    """float64 causal GQA attention, written out (a softcap on the scores, a band mask for a window);
    returns (b, s, h, d)."""
    h, hk, seq = q.shape[1], k.shape[1], q.shape[2]
    qd, kd, vd = q.double(), k.double().repeat_interleave(h // hk, 1), v.double().repeat_interleave(h // hk, 1)
    s = (qd @ kd.transpose(-1, -2)) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    mask = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    if window:
        mask |= torch.ones(seq, seq, dtype=torch.bool).tril(-window)  # key j with i - j >= window is out
    s = s.masked_fill(mask, -math.inf)
    w = torch.softmax(s, dim=-1) if weights is None else weights(s)
    p = w / w.sum(-1, keepdim=True)
    return (p @ vd).transpose(1, 2)


def test_exact_matches_float64_reference_with_gqa():
    q, k, v = _qkv()
    out = attention.ExactAttention()(q, k, v, 0.25)
    assert out.shape == (1, 300, 6, 16)
    assert torch.allclose(out.double(), _reference(q, k, v, 0.25), atol=2e-6)


def test_query_chunking_does_not_change_rows():
    q, k, v = _qkv(seq=130)
    a = attention._causal_rows(q, k, v, 0.3, lambda s: torch.softmax(s, -1), q_chunk=7)
    b = attention._causal_rows(q, k, v, 0.3, lambda s: torch.softmax(s, -1), q_chunk=512)
    assert torch.allclose(a, b, atol=1e-6)


def test_row_path_operators_against_reference():
    q, k, v = _qkv(seq=200)
    exp2 = attention.RowAttention(parse_operator("exp2"))(q, k, v, 0.25)
    assert torch.allclose(exp2.double(), _reference(q, k, v, 0.25), atol=2e-6)
    temp = attention.RowAttention(parse_operator("temperature:alpha=0.6"))(q, k, v, 0.25)
    assert torch.allclose(temp.double(), _reference(q, k, v, 0.25 * 0.6), atol=2e-6)
    pot = attention.RowAttention(parse_operator("pot-m:m=1"))(q, k, v, 0.25)

    def pot_weights(s):  # 2^-round(Delta/ln2) from the final row maximum, masked entries 0
        delta = (s.amax(-1, keepdim=True) - s) / math.log(2)
        return torch.where(torch.isinf(s), torch.zeros_like(s), torch.exp2(-torch.round(delta)))

    assert torch.allclose(pot.double(), _reference(q, k, v, 0.25, pot_weights), atol=2e-6)


def test_simulation_with_exact_exp2_reproduces_softmax():
    q, k, v = _qkv(seq=300)  # three tiles of 128, the last partial
    out = attention.SimAttention(parse_operator("exp2"), tile=128)(q, k, v, 0.25)
    assert torch.allclose(out.double(), _reference(q, k, v, 0.25), atol=2e-6)


def test_simulation_and_whole_row_h15_agree_within_one_tile_and_differ_across_tiles():
    """Within one tile the running maximum is the final one, so the tile and whole-row paths coincide;
    across tiles the lattice is anchored at the running maximum and the two differ (paper B.2)."""
    q, k, v = _qkv(seq=120)
    op = parse_operator("rowmax-h15")
    sim = attention.SimAttention(op, tile=128)(q, k, v, 0.25)
    row = attention.RowAttention(op)(q, k, v, 0.25)
    assert torch.allclose(sim, row, atol=2e-6)
    q, k, v = _qkv(seq=512, seed=3)
    sim = attention.SimAttention(op, tile=64)(q, k, v, 0.25)
    row = attention.RowAttention(op)(q, k, v, 0.25)
    assert (sim - row).abs().max().item() > 1e-4


def test_folded_h15_on_the_simulation_and_whole_row_paths():
    """rowmax-h15-folded: within one tile the running maximum is the final one and, at a power-of-two scale, both
    paths form the same products 2cs (raw scores and c = scale log2 e, or scaled scores and c = log2 e): equal
    outputs. Across tiles they differ, and from Rowmax-H15 (a lattice shifted by each row's phase) everywhere;
    the FP8 storage keeps the anchor's rescale."""
    op, h15 = parse_operator("rowmax-h15-folded"), parse_operator("rowmax-h15")
    q, k, v = _qkv(seq=120)
    sim = attention.SimAttention(op, tile=128)(q, k, v, 0.25)
    assert torch.allclose(sim, attention.RowAttention(op)(q, k, v, 0.25), atol=2e-6)
    assert (sim - attention.SimAttention(h15, tile=128)(q, k, v, 0.25)).abs().max().item() > 1e-3
    q, k, v = _qkv(seq=512, seed=3)
    sim = attention.SimAttention(op, tile=64)(q, k, v, 0.25)
    assert (sim - attention.RowAttention(op)(q, k, v, 0.25)).abs().max().item() > 1e-4
    ref = _reference(q, k, v, 0.25)

    def error(out):
        return ((out.double() - ref).norm() / ref.norm()).item()

    fp8 = attention.SimAttention(op, tile=64, max_offset=8.0, fp8_storage=True)(q, k, v, 0.25)
    a1 = error(attention.SimAttention(h15, tile=64)(q, k, v, 0.25))
    assert 0.5 * a1 < error(sim) < 2 * a1 and 0.5 * a1 < error(fp8) < 2 * a1  # A1's size, as its envelope says
    assert not torch.equal(fp8, sim)


def test_hybrids_on_the_simulation_and_whole_row_paths():
    """rowmax-h15-1of2 and -1of4: within one tile both paths agree (the tile's positions are the keys); their error
    against exact attention lies between A0's and A1's, larger with more Rowmax-H15 keys."""
    q, k, v = _qkv(seq=120)
    ref = _reference(q, k, v, 0.25)

    def error(out):
        return ((out.double() - ref).norm() / ref.norm()).item()

    errors = []
    for name in ("exp2", "rowmax-h15-1of4", "rowmax-h15-1of2", "rowmax-h15"):
        op = parse_operator(name)
        sim = attention.SimAttention(op, tile=128)(q, k, v, 0.25)
        assert torch.allclose(sim, attention.RowAttention(op)(q, k, v, 0.25), atol=2e-6), name
        errors.append(error(sim))
    assert errors == sorted(errors) and errors[1] > 10 * errors[0], errors


def test_bf16_probabilities_are_stored_before_pv():
    q, k, v = _qkv(seq=64, dtype=torch.bfloat16)
    out = attention.ExactAttention()(q, k, v, 0.25)
    assert out.dtype == torch.bfloat16
    ref = _reference(q, k, v, 0.25)
    assert (out.double() - ref).abs().max().item() < 3e-2  # bf16-level, not exact


def test_bf16_probabilities_are_rounded_to_bf16_exactly_as_a_fused_kernel_stores_them():
    """Not only close to the float64 reference: P is rounded to V's dtype (BF16) before P.V, which the output
    shows bit for bit against the same steps written out; an FP32 P would round differently somewhere."""
    q, k, v = _qkv(seq=64, h=2, hk=2, dtype=torch.bfloat16)
    out = attention.ExactAttention()(q, k, v, 0.25)
    s = (q.float() @ k.float().transpose(-1, -2)) * 0.25
    s = s.masked_fill(torch.ones(64, 64, dtype=torch.bool).triu(1), -math.inf)
    p = torch.softmax(s, dim=-1)
    p = (p / p.sum(dim=-1, keepdim=True)).to(torch.bfloat16).float()
    assert torch.equal(out, (p @ v.float()).transpose(1, 2).to(torch.bfloat16))


def test_router_takes_the_default_scale_and_runs_what_needs_no_refusal():
    """No scaling from the model: 1/sqrt(head dim) (0.25 at head dim 16). A window as long as the block is plain
    causal attention, which the simulation runs. Query and key lengths that differ (a KV cache) are refused."""
    q, k, v = _qkv(seq=16)
    args = dict(module=None, query=q, key=k, value=v, attention_mask=None)
    attention.ROUTER.use(attention.ExactAttention())
    assert torch.equal(attention.ROUTER.forward(**args)[0], attention.ROUTER.forward(**args, scaling=0.25)[0])
    attention.ROUTER.use(attention.SimAttention(parse_operator("rowmax-h15")))
    attention.ROUTER.forward(**args, scaling=0.25, sliding_window=16)
    with pytest.raises(UnsupportedError, match="query and key lengths differ"):
        attention.ROUTER.forward(**{**args, "query": q[:, :, :8]}, scaling=0.25)


def test_sdpa_is_causal_and_a_row_operator_is_refused_by_the_simulation():
    """The wiring check's SDPA path is causal: query 0 sees key 0 alone, so its output is V's first row. A row
    operator (grid quantizes the whole row) cannot run tile by tile."""
    q, k, v = _qkv(seq=16, h=4, hk=2)
    out = attention.SdpaAttention()(q, k, v, 0.25)
    assert torch.allclose(out[0, 0], v[0, :, 0].repeat_interleave(2, dim=0), atol=1e-6)
    with pytest.raises(UnsupportedError, match="needs the whole row"):
        attention.SimAttention(parse_operator("grid"))


def test_fp8_operands_reach_the_simulation_in_e4m3_with_their_descales():
    """At FP8 the kernel path's operands are E4M3 with one scale per tensor (max|x| / 448); without FP8 they are the
    model's own, with descales of 1."""
    q, k, v = _qkv(seq=16, h=2, hk=2)
    q8, k8, v8, descale = attention._kernel_operands(q, k, v, True)
    assert q8.dtype == k8.dtype == v8.dtype == torch.float8_e4m3fn
    assert descale[0] == pytest.approx(q.abs().max().item() / 448)
    assert attention._kernel_operands(q, k, v, False)[3] == (1.0, 1.0, 1.0)


def _call(**kw):
    q, k, v = _qkv(seq=16)
    attention.ROUTER.use(attention.ExactAttention())
    args = dict(module=None, query=q, key=k, value=v, attention_mask=None, scaling=0.25)
    args.update(kw)
    return attention.ROUTER.forward(**args)


def test_router_refuses_what_it_cannot_honour():
    out, weights = _call()
    assert out.shape == (1, 16, 6, 16) and weights is None
    attention.ROUTER.use(attention.SimAttention(parse_operator("rowmax-h15")))
    q, k, v = _qkv(seq=16)
    args = dict(module=None, query=q, key=k, value=v, attention_mask=None, scaling=0.25)
    with pytest.raises(UnsupportedError, match="softcaps") as e:
        attention.ROUTER.forward(**args, softcap=50.0)
    assert "--path row" in e.value.hint
    with pytest.raises(UnsupportedError, match="sliding window of 8"):
        attention.ROUTER.forward(**args, sliding_window=8)
    attention.ROUTER.forward(**args, sliding_window=4096)  # longer than the block: plain causal attention
    with pytest.raises(UnsupportedError, match="attention mask"):
        _call(attention_mask=torch.ones(1, 1, 16, 16, dtype=torch.bool))
    with pytest.raises(UnsupportedError, match="dropout"):
        _call(dropout=0.1)


def test_fp32_paths_honour_softcap_and_window_through_the_router():
    q, k, v = _qkv(seq=40, spread=6.0)
    args = dict(module=None, query=q, key=k, value=v, attention_mask=None, scaling=0.25)
    attention.ROUTER.use(attention.ExactAttention())
    out, _ = attention.ROUTER.forward(**args, softcap=5.0, sliding_window=8)
    assert torch.allclose(out.double(), _reference(q, k, v, 0.25, softcap=5.0, window=8), atol=2e-6)
    plain = _reference(q, k, v, 0.25)
    assert (out.double() - plain).abs().max() > 1e-2  # the cap and the window do change the rows
    op = parse_operator("rowmax-h15")
    attention.ROUTER.use(attention.RowAttention(op))
    row, _ = attention.ROUTER.forward(**args, softcap=5.0, sliding_window=8)
    capped = attention.RowAttention(op)
    ref = _reference(q, k, v, 0.25, weights=lambda x: capped.weights(x.float()).double(), softcap=5.0, window=8)
    assert torch.allclose(row.double(), ref, atol=2e-5)


def test_conditions_route_row_anchored_operators_to_the_whole_row_path():
    conds = build_conditions("sim", ["rowmax-h15", "rowmax-pot:kmax=20", "row:rowmax-h15", "grid:K=8",
                                     "sim:pot-m:m=2"])
    names = [c.name for c in conds]
    assert names == ["exact", "sim:rowmax-h15", "row:rowmax-pot:kmax=20,tail=clamp", "row:rowmax-h15",
                     "row:grid:K=8,R=4.0,recon=nearest,weight=exp", "sim:pot-m:m=2", "sim:exp2"]
    assert conds[-1].describe()["role"] == "control"  # added: the exact-exp2 control of the simulated ones
    assert [c.name for c in build_conditions("row", ["rowmax-h15"])] == ["exact", "row:rowmax-h15"]
    assert [c.name for c in build_conditions("sim", ["exp2", "rowmax-h15"])] == ["exact", "sim:exp2",
                                                                                 "sim:rowmax-h15"]
    assert "whole-row" in conds[2].note and "running maximum" in conds[5].note
    with pytest.raises(UsageError, match="whole row"):
        build_conditions("sim", ["sim:grid"])
    with pytest.raises(UsageError, match="given twice"):
        build_conditions("sim", ["rowmax-h15", "sim:rowmax-h15"])


def test_conditions_refuse_an_unknown_path_or_backend_and_an_empty_operator_list():
    with pytest.raises(UsageError, match="--path must be one of kernel, sim, row, not 'gpu'"):
        build_conditions("gpu", ["rowmax-h15"])
    with pytest.raises(UsageError, match="no --operator given"):
        build_conditions("sim", [])
    with pytest.raises(UsageError, match="--backend must be one of fa4, triton, not 'cuda'"):
        build_conditions("kernel", ["rowmax-h15"], backend="cuda")
    # an operator the kernel implements, but written for the simulation: not run as the kernel
    with pytest.raises(UsageError, match="FA4 variants only"):
        build_conditions("kernel", ["sim:rowmax-h15"])


def test_kernel_path_conditions_say_which_kernel_ran_and_are_not_whole_row():
    stock, variant = build_conditions("kernel", ["rowmax-h15"], backend="triton")
    assert stock.note == "softbench's Triton forward, exact exp2 (A0)"
    assert variant.note == "softbench's Triton forward, Rowmax-H15 weights (A1)"
    assert variant.describe()["whole_row"] is False
    assert build_conditions("row", ["rowmax-h15"])[1].describe()["whole_row"] is True


def test_each_in_process_condition_gets_its_paths_attention_with_the_runs_simulation_settings():
    from softbench.core.errors import MeasurementError
    from softbench.fidelity import attention
    from softbench.fidelity.local_eval import SimSettings, make_impl

    exact, sim, control = build_conditions("sim", ["rowmax-h15"])
    settings = SimSettings(tile=64, rescale_threshold=8.0, max_offset=8.0, fp8_storage=False, fp8_operands=True)
    assert isinstance(make_impl(exact, settings), attention.ExactAttention)
    impl = make_impl(sim, settings)
    assert isinstance(impl, attention.SimAttention) and impl.label == "sim:rowmax-h15"
    assert (impl.tile, impl.rescale_threshold, impl.max_offset, impl.fp8_operands) == (64, 8.0, 8.0, True)
    assert isinstance(make_impl(build_conditions("row", ["rowmax-h15"])[1], settings), attention.RowAttention)
    with pytest.raises(MeasurementError, match="cannot run in this process"):
        make_impl(build_conditions("kernel", ["rowmax-h15"])[1], settings)  # the kernel path's workers run it


def test_kernel_path_conditions():
    conds = build_conditions("kernel", ["rowmax-h15"])
    assert [(c.name, c.variant) for c in conds] == [("kernel:stock", "A0"), ("kernel:rowmax-h15", "A1")]
    with pytest.raises(UsageError, match="FA4 variants only"):
        build_conditions("kernel", ["rowmax-pot"])
    # h15-sat exists in softbench's Triton-backend kernels, not in the FA4 patch
    conds = build_conditions("kernel", ["rowmax-h15-sat"], backend="triton")
    assert [(c.name, c.variant) for c in conds] == [("kernel:stock", "A0"), ("kernel:rowmax-h15-sat", "h15-sat")]
    # one variant process beside the stock one: several operators are refused before anything loads (the H200
    # run 20261201T125041Z named three and was refused only after the model had loaded)
    with pytest.raises(UsageError, match="one --operator at a time, got 2"):
        build_conditions("kernel", ["rowmax-h15", "rowmax-h15-sat"], backend="triton")
    with pytest.raises(UsageError, match="FA4 variants only: rowmax-h15, rowmax-h15-1of2, rowmax-h15-1of4 "):
        build_conditions("kernel", ["rowmax-h15-sat"])
    # the hybrids run in both: FA4's sm_90 patches and softbench's kernels
    for backend in ("fa4", "triton"):
        conds = build_conditions("kernel", ["rowmax-h15-1of4"], backend=backend)
        assert [(c.name, c.variant) for c in conds][1:] == [("kernel:rowmax-h15-1of4", "h15-1of4")]
    with pytest.raises(UsageError, match="cannot be mixed"):
        build_conditions("sim", ["kernel:rowmax-h15"])
