"""Names listed inside a sentence (softbench.core.wording)."""

import pytest

from softbench.core.wording import listed


def test_one_two_and_three_names_read_as_a_sentence_names_them():
    assert listed(["sm_90"]) == "sm_90"
    assert listed(["--seed", "--blocks"]) == "--seed and --blocks"
    assert listed(["sm_80", "sm_90", "sm_120"]) == "sm_80, sm_90 and sm_120"
    assert listed(["energy", "latency", "trace"], "or") == "energy, latency or trace"  # a choice among them


def test_no_names_is_a_caller_error_not_an_empty_phrase():
    with pytest.raises(ValueError, match="at least one"):
        listed([])
