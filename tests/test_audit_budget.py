"""The nominal per-score issue budget (softbench.audit.budget): numbers derived from its constants by hand."""

import pytest

from softbench.audit import budget


def test_blackwell_bf16_d128_sixteen_scores_per_clock_and_eight_issue_slots():
    b = budget.issue_budget("sm_100a", "bf16", 128)
    # 8192 FLOP/clk/SM / (4 * 128 FLOP per score) = 16 scores/clk; 128 thread-instructions/clk / 16 = 8 per score
    assert b["flop_per_score"] == 512 and b["scores_per_clock_sm"] == 16
    assert b["issue_slots_per_score"] == 8 and b["mufu_ex2_per_score"] == 1.0
    assert b["mufu_clocks_per_score"] == b["tensor_clocks_per_score"] == 1 / 16


def test_blackwell_fp8_halves_the_budget_and_hopper_doubles_it():
    fp8 = budget.issue_budget("sm_100", "fp8", 128)
    assert (fp8["scores_per_clock_sm"], fp8["issue_slots_per_score"], fp8["mufu_ex2_per_score"]) == (32, 4, 0.5)
    h = budget.issue_budget(90, "bf16", 128)
    assert (h["arch_family"], h["scores_per_clock_sm"], h["issue_slots_per_score"]) == ("sm_90", 8, 16)
    assert budget.issue_budget("sm_90a", "fp8", 64)["scores_per_clock_sm"] == 32  # 8192 / 256


def test_unknown_architectures_have_no_budget():
    assert budget.issue_budget("sm_80", "bf16", 128) is None
    assert budget.issue_budget(None, "bf16", 128) is None
    assert budget.arch_family("sm_103a") == "sm_100" and budget.arch_family("cpu") is None


def test_budget_block_sets_the_static_estimate_beside_the_budget():
    blk = budget.budget_block("sm_100a", "bf16", 128, {"A0": 2.0, "A1": 6.0, "broken": None})
    assert blk["variants"]["A1"] == {"per_element_static": 6.0, "share_of_issue_slots": pytest.approx(0.75)}
    assert blk["variants"]["broken"]["share_of_issue_slots"] is None
    assert "nominal" in blk["method"] and "static" in blk["method"]


def test_a_head_dim_of_zero_or_less_has_no_budget():
    assert budget.issue_budget("sm_90", "bf16", 0) is None
    assert budget.issue_budget("sm_90", "bf16", -64) is None
