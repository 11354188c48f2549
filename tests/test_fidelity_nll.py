"""Block NLL and vocabulary-output divergences against float64 references; the paired block bootstrap and the
session tables."""

import math

import numpy as np
import pytest
import torch

from types import SimpleNamespace

from softbench.core.errors import UnsupportedError, UsageError
from softbench.fidelity.nll import BlockScore, Divergences, FP32Head, score_block
from softbench.fidelity.summary import blocks_csv, check_rows, summarize
from softbench.core.stats import bootstrap_indices


class _Head(FP32Head):
    def __init__(self, weight, softcap=None):
        self.weight, self.bias, self.softcap = weight, None, softcap


def _case(n=700, hid=24, vocab=300, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(vocab, hid, generator=g) * 0.4
    h0 = torch.randn(n, hid, generator=g)
    h1 = h0 + 0.05 * torch.randn(n, hid, generator=g)
    t = torch.randint(0, vocab, (n,), generator=g)
    return _Head(w), h0, h1, t


def test_nll_and_divergences_against_float64():
    head, h0, h1, t = _case()
    score = score_block(head, h1, t, baseline_hidden=h0, chunk=128)  # chunks that do not divide n
    lb = torch.log_softmax(h0.double() @ head.weight.double().T, -1)
    lc = torch.log_softmax(h1.double() @ head.weight.double().T, -1)
    nll = torch.nn.functional.nll_loss(lc, t, reduction="sum").item()
    pb, pc = lb.exp(), lc.exp()
    m = 0.5 * (pb + pc)
    row = score.to_row()
    assert score.n_tokens == 700
    assert row["nll"] == pytest.approx(nll / 700, rel=1e-6)
    assert row["kl_forward"] == pytest.approx((pb * (lb - lc)).sum().item() / 700, rel=1e-3)
    assert row["kl_reverse"] == pytest.approx((pc * (lc - lb)).sum().item() / 700, rel=1e-3)
    jsd = 0.5 * (pb * (lb - m.log())).sum() + 0.5 * (pc * (lc - m.log())).sum()
    assert row["jsd"] == pytest.approx(jsd.item() / 700, rel=1e-3)
    assert row["top1_agreement"] == pytest.approx((lb.argmax(-1) == lc.argmax(-1)).double().mean().item())
    assert 0 < row["jsd"] <= math.log(2)


def test_identical_distributions_have_zero_divergence():
    head, h0, _, t = _case(n=100)
    row = score_block(head, h0, t, baseline_hidden=h0.clone()).to_row()
    assert row["kl_forward"] == 0 and row["kl_reverse"] == 0 and row["jsd"] == 0
    assert row["top1_agreement"] == 1.0
    assert "kl_forward" not in score_block(head, h0, t).to_row()


def test_final_logit_softcap_is_applied():
    head, h0, _, t = _case(n=50)
    capped = _Head(head.weight * 50, softcap=3.0)
    lp = capped.log_probs(h0)
    logits = torch.tanh((h0 @ capped.weight.T) / 3.0) * 3.0
    assert torch.allclose(lp, torch.log_softmax(logits, -1), atol=1e-5)


class _Model:
    """What FP32Head reads of a model: its config and its output embeddings."""

    def __init__(self, head, **config):
        self.config, self.head = SimpleNamespace(**config), head

    def get_output_embeddings(self):
        return self.head


def test_the_head_is_read_from_the_model_with_its_bias_and_softcap_in_fp32():
    g = torch.Generator().manual_seed(4)
    lin = torch.nn.Linear(8, 20, bias=True).to(torch.bfloat16)
    with torch.no_grad():
        lin.bias.copy_(torch.randn(20, generator=g))
    head = FP32Head(_Model(lin, final_logit_softcapping=30.0))
    assert head.weight.dtype == head.bias.dtype == torch.float32 and head.softcap == 30.0
    h = torch.randn(5, 8, generator=g)
    logits = torch.tanh((h @ lin.weight.float().T + lin.bias.float()) / 30.0) * 30.0
    assert torch.allclose(head.log_probs(h), torch.log_softmax(logits, -1), atol=1e-5)
    assert FP32Head(_Model(lin, logit_scale=1.0)).softcap is None  # a scale of 1 is no scale
    for attr, value in (("logit_scale", 2.0), ("logits_scaling", 0.5)):  # a scale the head would leave out
        with pytest.raises(UnsupportedError, match="scales its logits"):
            FP32Head(_Model(lin, **{attr: value}))


def _rows(nll_base, diffs: dict, n_tokens=2047):
    rows = []
    for b, base in enumerate(nll_base):
        rows.append({"block": b, "condition": "exact", "nll": base, "n_tokens": n_tokens})
        for name, d in diffs.items():
            rows.append({"block": b, "condition": name, "nll": base + d[b], "n_tokens": n_tokens,
                         "kl_forward": 0.01 * (b + 1), "kl_reverse": 0.02, "jsd": 0.005, "top1_agreement": 0.9})
    return rows


def _conds(*names):
    return [{"name": "exact", "baseline": True}] + [{"name": n, "baseline": False} for n in names]


def test_bootstrap_hand_checkable_constant_difference():
    base = [3.0, 3.1, 2.9, 3.05] * 5
    s = summarize(_rows(base, {"a": [0.01] * 20}), _conds("a"), n_boot=1000)
    a = s["conditions"][0]
    assert (a["dnll"], a["ci_low"], a["ci_high"]) == pytest.approx((0.01, 0.01, 0.01))
    assert a["resolved"] and a["n_lower"] == 0 and a["n_blocks"] == 20
    assert a["ppl_change_pct"] == pytest.approx(100 * (math.exp(0.01) - 1))
    assert s["baseline"]["nll"] == pytest.approx(np.mean(base)) and s["baseline"]["predictions"] == 20 * 2047
    assert a["kl_forward"] == pytest.approx(np.mean([0.01 * (b + 1) for b in range(20)]))  # prediction-weighted


def test_no_interval_and_nothing_resolved_below_the_minimum_number_of_blocks():
    from softbench.fidelity.limits import MIN_BLOCKS
    from softbench.fidelity.report import condition_rows, fidelity_markdown

    n = MIN_BLOCKS - 1
    s = summarize(_rows([3.0] * n, {"a": [0.01] * n}), _conds("a"), n_boot=500)  # would be "resolved" if allowed
    a = s["conditions"][0]
    assert a["dnll"] == pytest.approx(0.01) and a["n_blocks"] == n
    assert (a["ci_low"], a["ci_high"], a["resolved"], a["ppl_change_ci_pct"]) == (None, None, None, None)
    assert s["bootstrap"]["interval"] is False and s["bootstrap"]["min_blocks"] == MIN_BLOCKS
    row = condition_rows({**s, "complete": True})[0]
    assert row[2] == "[no interval]" and row[4] == "n/a"
    md = fidelity_markdown({**s, "complete": True, "model": {"label": "m"}, "corpus": {"name": "c"}})
    assert f"below the {MIN_BLOCKS} that a percentile bootstrap interval needs" in md and "| yes |" not in md
    s = summarize(_rows([3.0] * MIN_BLOCKS, {"a": [0.01] * MIN_BLOCKS}), _conds("a"), n_boot=500)
    assert s["conditions"][0]["resolved"] is True and s["bootstrap"]["interval"] is True


def test_condition_rows_say_no_for_an_interval_across_zero_and_give_the_control_its_own_answer():
    from softbench.fidelity.report import condition_rows

    # the exp2 control sits a constant 0.01 above exact; the operator adds zero-mean noise on top of it: resolved
    # against exact, not against the control
    noise = np.random.default_rng(3).normal(0.0, 0.001, size=20)
    noise -= noise.mean()
    conds = [{"name": "exact", "baseline": True}, {"name": "sim:op", "path": "sim"},
             {"name": "sim:exp2", "path": "sim", "role": "control"}]
    s = summarize(_rows([3.0] * 20, {"sim:op": 0.01 + noise, "sim:exp2": [0.01] * 20}), conds, n_boot=500)
    op = s["conditions"][0]
    assert op["resolved"] is True and op["control"]["resolved"] is False
    row = condition_rows(s)[0]
    assert (row[4], row[6]) == ("yes", "no")  # "resolved" and "resolved vs sim:exp2"
    from softbench.fidelity.report import console_rows

    # the terminal's row: the dNLL with its interval, then the PPL change
    assert console_rows(s)[0][1:3] == [f"{op['dnll']:+.5f} [{op['ci_low']:+.5f}, {op['ci_high']:+.5f}]",
                                       f"{op['ppl_change_pct']:+.3f}%"]


def test_a_session_with_no_complete_block_gets_no_interval_note():
    from softbench.fidelity.report import headline, interval_note

    s = summarize([], _conds("a"))
    assert s["bootstrap"]["interval"] is False  # no blocks is also below the minimum ...
    assert interval_note(s) is None and headline(s) == "no block completed"  # ... but the headline says it all


@pytest.mark.parametrize("summary, says", [
    ({"dtype": "bf16", "path": "kernel"}, ""),
    ({"dtype": "fp8", "path": "sim"}, "E4M3: neither the operands nor P"),
    ({"dtype": "fp8", "path": "kernel"}, "E4M3: Q, K and V, one scale per tensor, and P at P.V"),  # always E4M3
    ({"dtype": "fp8", "path": "sim", "fp8_operands": True}, "E4M3: Q, K and V, one scale per tensor, and P at P.V"),
    ({"dtype": "fp8", "path": "sim", "fp8_storage": True}, "E4M3: P, its row sums included"),
    # storage rounding already covers P at P.V: named once
    ({"dtype": "fp8", "path": "kernel", "fp8_storage": True},
     "E4M3: Q, K and V, one scale per tensor, and P, its row sums included"),
])
def test_fp8_rounding_names_what_went_through_e4m3(summary, says):
    from softbench.fidelity.report import fp8_rounding

    assert fp8_rounding(summary) == says


def test_a_kernel_path_session_without_a_backend_is_named_as_fa4():
    from softbench.fidelity.report import fidelity_markdown

    s = {**summarize(_rows([3.0] * 2, {"a": [0.1] * 2}), _conds("a"), n_boot=100), "path": "kernel"}
    assert "(kernel: `fa4`)" in fidelity_markdown(s)  # sessions from before --backend ran FA4
    md = fidelity_markdown({**s, "backend": "triton", "kernels": {"a": "gluon A1"}})
    assert "(kernel: `triton`, `gluon A1`)" in md
    assert "(kernel:" not in fidelity_markdown({**s, "path": "row"})  # only the kernel path ran a kernel


def test_each_simulated_operator_is_put_against_the_exact_exp2_control():
    g = np.random.default_rng(1)
    ctrl = g.normal(0.001, 0.0005, size=20)
    op = ctrl + 0.002
    conds = [{"name": "exact", "baseline": True}, {"name": "sim:rowmax-h15", "path": "sim"},
             {"name": "sim:exp2", "path": "sim", "role": "control"}, {"name": "row:rowmax-h15", "path": "row"}]
    s = summarize(_rows([3.0] * 20, {"sim:rowmax-h15": op, "sim:exp2": ctrl, "row:rowmax-h15": op}), conds,
                  n_boot=500)
    h15, exp2, row = s["conditions"]
    assert h15["control"]["name"] == "sim:exp2" and h15["control"]["dnll"] == pytest.approx(0.002)
    assert h15["control"]["ci_low"] == pytest.approx(0.002) and h15["control"]["resolved"]
    assert h15["dnll"] == pytest.approx(float(op.mean()))  # the headline stays the contrast with exact
    assert "control" not in exp2 and "control" not in row  # the control itself, and a whole-row operator


def test_bootstrap_uses_the_same_indices_for_every_condition():
    g = np.random.default_rng(5)
    d = g.normal(0.001, 0.002, size=20)
    s = summarize(_rows([3.0] * 20, {"a": d, "b": d + 0.0005, "c": -d}), _conds("a", "b", "c"), n_boot=2000, seed=0)
    a, b, c = s["conditions"]
    # the interval recomputed independently from the shared indices
    reps = d[bootstrap_indices(20, 2000, 0)].mean(axis=1)
    lo, hi = np.quantile(reps, [0.025, 0.975])
    assert (a["ci_low"], a["ci_high"]) == pytest.approx((lo, hi))
    assert a["ppl_change_ci_pct"] == pytest.approx([100 * math.expm1(lo), 100 * math.expm1(hi)])
    # paired on the same resamples: a shift moves the interval by exactly the shift, a sign flip mirrors it
    assert (b["ci_low"] - a["ci_low"], b["ci_high"] - a["ci_high"]) == pytest.approx((0.0005, 0.0005))
    assert (c["ci_low"], c["ci_high"]) == pytest.approx((-a["ci_high"], -a["ci_low"]))
    assert a["n_lower"] == int((d < 0).sum()) and c["n_lower"] == int((d > 0).sum())
    contrast = next(x for x in s["contrasts"] if (x["a"], x["b"]) == ("a", "b"))
    assert contrast["dnll"] == pytest.approx(-0.0005) and contrast["ci_high"] == pytest.approx(-0.0005)


def test_the_baseline_nll_is_weighted_by_tokens_and_its_perplexity_is_its_exponential():
    # blocks of 1 and 3 predicted tokens at NLL 1.0 and 3.0: (1 + 9) / 4 = 2.5, not the blocks' mean 2.0
    rows = [{"block": 0, "condition": "exact", "nll": 1.0, "n_tokens": 1},
            {"block": 1, "condition": "exact", "nll": 3.0, "n_tokens": 3},
            {"block": 0, "condition": "a", "nll": 1.5, "n_tokens": 1},
            {"block": 1, "condition": "a", "nll": 3.0, "n_tokens": 3}]
    s = summarize(rows, _conds("a"), n_boot=100)
    assert s["baseline"]["nll"] == 2.5 and s["baseline"]["ppl"] == pytest.approx(math.exp(2.5))
    assert s["baseline"]["predictions"] == 4
    assert s["conditions"][0]["nll"] == pytest.approx((1.5 + 9.0) / 4)
    assert s["conditions"][0]["dnll"] == pytest.approx(0.25)  # the mean over blocks of the per-block difference


def test_blocks_lower_and_equal_are_counted_apart():
    s = summarize(_rows([3.0] * 3, {"a": [0.0, -0.1, 0.2]}), _conds("a"), n_boot=100)
    assert (s["conditions"][0]["n_lower"], s["conditions"][0]["n_equal"]) == (1, 1)


def test_contrasts_are_between_the_approximations_only():
    s = summarize(_rows([3.0] * 3, {"a": [0.1] * 3, "b": [0.3] * 3}), _conds("a", "b"), n_boot=100)
    assert [(c["a"], c["b"]) for c in s["contrasts"]] == [("a", "b")]
    assert s["contrasts"][0]["dnll"] == pytest.approx(-0.2)


def test_only_blocks_complete_for_every_condition_count_and_the_last_row_wins():
    rows = _rows([3.0, 3.0, 3.0], {"a": [0.1, 0.2, 0.3]})
    rows = [r for r in rows if not (r["block"] == 2 and r["condition"] == "a")]  # block 2 unfinished
    rows.append({"block": 0, "condition": "a", "nll": 3.5, "n_tokens": 2047})  # block 0 redone after a resume
    s = summarize(rows, _conds("a"), n_boot=200)
    assert s["block_ids"] == [0, 1]
    assert s["conditions"][0]["dnll"] == pytest.approx((0.5 + 0.2) / 2)
    assert s["conditions"][0]["kl_forward"] is None  # the redone row has none: not averaged from a subset


def test_blocks_csv_quotes_names_and_gives_dnll():
    rows = _rows([3.0, 2.0], {"row:grid:K=8,R=4.0": [0.25, -0.5]})
    text = blocks_csv(rows, ["exact", "row:grid:K=8,R=4.0"])
    lines = text.splitlines()
    assert lines[0].startswith("block,condition,nll,n_tokens,dnll")
    assert lines[1].startswith("0,exact,3.0,2047,,")
    assert lines[2].startswith('0,"row:grid:K=8,R=4.0",3.25,2047,0.25,')
    assert lines[4].startswith('1,"row:grid:K=8,R=4.0",1.5,2047,-0.5,')


def test_blocks_csv_puts_a_condition_the_run_no_longer_names_after_the_named_ones():
    # a row left by an earlier run's condition "old" still goes out, after the conditions in `names` order
    rows = _rows([3.0], {"a": [0.1]}) + [{"block": 0, "condition": "old", "nll": 3.123456789012, "n_tokens": 2047}]
    lines = blocks_csv(rows, ["exact", "a"]).splitlines()
    assert [line.split(",")[1] for line in lines[1:]] == ["exact", "a", "old"]
    assert lines[3].startswith("0,old,3.123456789012,2047,")  # every digit, as recorded


@pytest.mark.parametrize("edit, says", [
    ({"block": -1}, "no block number"),
    ({"block": 1.5}, "no block number"),
    ({"n_tokens": 0}, "not a positive whole number"),
    ({"kl_forward": float("nan")}, "kl_forward nan, not a finite number"),
])
def test_check_rows_refuses_a_row_the_engine_would_not_write(edit, says):
    good = _rows([3.0], {"a": [0.1]})
    check_rows(good, "blocks.jsonl")  # the rows as the engine writes them pass
    with pytest.raises(UsageError, match=says):
        check_rows([good[0], {**good[1], **edit}], "blocks.jsonl")


def test_check_rows_takes_block_zero_and_a_single_token():
    # the lowest values the engine writes: block 0 and a block of one predicted token
    check_rows([{"block": 0, "condition": "exact", "nll": 1.0, "n_tokens": 1}], "blocks.jsonl")


def test_block_score_row():
    r = BlockScore(10.0, 4, Divergences(0.4, 0.8, 0.2, 3)).to_row()
    assert r == {"nll": 2.5, "n_tokens": 4, "kl_forward": 0.1, "kl_reverse": 0.2, "jsd": 0.05, "top1_agreement": 0.75}
