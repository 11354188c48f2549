"""tools/analysis/operator_fidelity.py: issue 15's fidelity table (h15-folded beside A1 per model, corpus and path)
is what the committed fidelity sessions give, one model and one text under each of their names, and the paired
contrast carries the sign of h15-folded minus A1."""

from pathlib import Path

from softbench.predictions.sessions import load_sessions
from softbench.report.records import raw_records
from tests.repo_tools import load_tool

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = ROOT / "sessions"
operator_fidelity = load_tool("analysis/operator_fidelity.py")

ALIAS_RUN = "20261201T223359Z-fidelity-smollm2-135m-sim"  # --model smollm2-135m --corpus austen
FILE_RUN = "20261201T125114Z-fidelity-SmolLM2-135M-Instruct.Q4_1-sim"  # the GGUF by path, austen.txt
KJV_RUN = "20261204T224753Z-fidelity-smollm2-135m-sim"  # A1, h15-folded and the hybrids on the KJV, this CPU
# the kernel path through Triton's interpreter, 20 x 512 on Austen, one operator per session, the same stock kernel
FOLDED_KERNEL = "20261204T231759Z-fidelity-smollm2-135m-kernel-triton"
A1_KERNEL = "20261204T233852Z-fidelity-smollm2-135m-kernel-triton"


def _records(*names):
    return load_sessions([SESSIONS / n for n in names])


def test_an_alias_and_its_file_are_one_model_and_one_text():
    alias, by_file = _records(ALIAS_RUN, FILE_RUN)
    assert operator_fidelity.model_name(alias.summary) == operator_fidelity.model_name(by_file.summary)
    names = operator_fidelity.corpus_names([alias, by_file])
    assert list(names.values()) == ["austen"]  # the shortest of "austen" and "austen.txt", one hash


def test_the_contrast_is_folded_minus_a1():
    (kjv,) = _records(KJV_RUN)
    recorded = next(c for c in kjv.summary["contrasts"]
                    if c["a"] == "sim:rowmax-h15" and c["b"] == "sim:rowmax-h15-folded")
    assert recorded["dnll"] < 0 < recorded["ci_high"] - recorded["ci_low"]  # a - b: A1 costs less
    text = operator_fidelity.contrast(kjv, "rowmax-h15", "rowmax-h15-folded")
    low, high = (float(v) for v in text.split("[")[1].rstrip("]").split(","))
    assert float(text.split()[0]) == round(-recorded["dnll"], 5)
    assert (low, high) == (round(-recorded["ci_high"], 5), round(-recorded["ci_low"], 5))
    assert operator_fidelity.contrast(kjv, "rowmax-h15", "rowmax-h15-sat") is None  # not run in that session


def _point(rec, operator):
    from softbench.report.fidelity_match import fidelity_points
    return next(p for p in fidelity_points([rec]) if p.operator == operator)


def test_two_kernel_sessions_on_the_same_blocks_pair_up():
    """The two interpreter runs share their blocks and their stock kernel's NLL bit for bit: their contrast is the
    mean per-block difference of the two operators' NLLs, with an interval from the fidelity command's bootstrap."""
    a1, folded = _records(A1_KERNEL, FOLDED_KERNEL)
    text = operator_fidelity.paired_across(a1, _point(a1, "rowmax-h15"), folded, _point(folded, "rowmax-h15-folded"))
    assert text.endswith("(two sessions, 20 blocks)")
    nll = {}
    for rec in (a1, folded):
        for row in raw_records(rec, "blocks.jsonl"):
            nll[(row["condition"], row["block"])] = row["nll"]
    diffs = [nll[("kernel:rowmax-h15-folded", b)] - nll[("kernel:rowmax-h15", b)] for b in range(20)]
    assert float(text.split()[0]) == round(sum(diffs) / 20, 5)
    low, high = (float(v) for v in text.split("[")[1].split("]")[0].split(","))
    assert low < sum(diffs) / 20 < high and low > 0  # resolved: h15-folded costs more than A1 here


def test_sessions_on_other_blocks_or_baselines_do_not_pair():
    """The simulation's session scores exact attention as its baseline, the kernel path its stock kernel: the two
    are not the same blocks' baselines, so no contrast is drawn across them."""
    sim, folded = _records(ALIAS_RUN, FOLDED_KERNEL)
    assert operator_fidelity.paired_across(sim, _point(sim, "rowmax-h15"), folded,
                                           _point(folded, "rowmax-h15-folded")) is None


KJV_KERNEL = "| kjv | kernel (triton) | cuda | bf16 | 2048 |"
KJV_PARTIAL_FOLDED = "20261202T041056Z-fidelity-SmolLM2-135M-Instruct.Q4_1-kernel-triton"  # cut at 29 of 97 blocks
KJV_WHOLE_FOLDED = "20261206T132357Z-fidelity-SmolLM2-135M-Instruct.Q4_1-kernel-triton"


def _kjv_kernel_row(folder: Path) -> str:
    (row,) = [r for r in operator_fidelity.table(folder).splitlines() if KJV_KERNEL in r]
    return row


def test_a_partial_session_says_how_many_blocks_it_holds_until_a_whole_one_supersedes_it(tmp_path):
    # the KJV through the GPU kernel before 2026-12-06: h15-folded's only session is the partial one
    for name in (KJV_PARTIAL_FOLDED, "20261202T040743Z-fidelity-SmolLM2-135M-Instruct.Q4_1-kernel-triton"):
        (tmp_path / name).symlink_to(SESSIONS / name)
    row = _kjv_kernel_row(tmp_path)
    assert "+0.00291 [+0.00157, +0.00417] (partial, 29 of 97 blocks)" in row and KJV_PARTIAL_FOLDED[:16] in row
    # with the whole session of 2026-12-06 beside it, the session with more complete blocks gives the cell
    (tmp_path / KJV_WHOLE_FOLDED).symlink_to(SESSIONS / KJV_WHOLE_FOLDED)
    row = _kjv_kernel_row(tmp_path)
    assert "partial" not in row and KJV_WHOLE_FOLDED[:16] in row and KJV_PARTIAL_FOLDED[:16] not in row


def test_the_readme_table_is_what_the_sessions_give():
    printed = operator_fidelity.table(SESSIONS)
    assert len(printed.splitlines()) >= 2 + 10
    assert printed in (ROOT / "README.md").read_text()


# FP8 with the operands through E4M3 (2026-12-05, this CPU, 20 x 512 on Austen): the kernel path through the
# interpreter, one operator per session, and the simulation with --fp8-operands, without and with --fp8-storage
FP8_FOLDED_KERNEL = "20261205T210341Z-fidelity-smollm2-135m-kernel-triton"
FP8_OPERANDS_SIM = "20261205T205942Z-fidelity-smollm2-135m-sim"
FP8_OPERANDS_P_SIM = "20261205T214410Z-fidelity-smollm2-135m-sim"
FP8_PLAIN_SIM = "20261203T065917Z-fidelity-smollm2-135m-sim"  # FA4's offset only


def test_fp8_settings_say_what_went_through_e4m3():
    """FP8 conditions that round different things to E4M3 are different settings: the plain simulation (FA4's
    probability offset only), the operands scaled into E4M3 (the kernel path always, the simulation with
    --fp8-operands), and P rounded as well (--fp8-storage)."""
    want = {FP8_FOLDED_KERNEL: "fp8, E4M3 Q/K/V", FP8_OPERANDS_SIM: "fp8, E4M3 Q/K/V",
            FP8_OPERANDS_P_SIM: "fp8, E4M3 Q/K/V, E4M3 P", FP8_PLAIN_SIM: "fp8"}
    for rec in _records(*want):
        assert operator_fidelity.dtype_label(rec.summary, _point(rec, "rowmax-h15-folded")) == want[rec.name]


def test_a_contrast_recorded_the_other_way_round_keeps_its_sign():
    """The FP8 simulation gave its operators as h15-folded then A1, so it recorded h15-folded - A1 as it is."""
    (sim,) = _records(FP8_OPERANDS_SIM)
    recorded = next(c for c in sim.summary["contrasts"]
                    if c["a"] == "sim:rowmax-h15-folded" and c["b"] == "sim:rowmax-h15")
    text = operator_fidelity.contrast(sim, "rowmax-h15", "rowmax-h15-folded")
    assert float(text.split()[0]) == round(recorded["dnll"], 5)
    low, high = (float(v) for v in text.split("[")[1].rstrip("]").split(","))
    assert (low, high) == (round(recorded["ci_low"], 5), round(recorded["ci_high"], 5))
