"""tools/analysis/kernel_ptx_hashes.py's hash: blind to what moving code changes in the PTX (line-number records,
comments, the debug sections), not to an instruction."""
from __future__ import annotations

from repo_tools import load_tool

hashes = load_tool("analysis/kernel_ptx_hashes.py")

PTX = """.visible .entry _attn_fwd_ws(
\t.loc\t1 1233 0                        // gluon_attn.py:1233:0
\tfma.rn.f32 \t%f3, %f1, %f2, %f4;   // a comment
\tadd.f32 \t%f5, %f3, %f1;
}
\t.section\t.debug_info
.b8 230
"""


def test_hash_ignores_line_records_comments_and_debug_sections():
    moved = (PTX.replace("1233", "1239").replace("a comment", "another")
             .replace(".b8 230", ".b8 236"))
    assert hashes.ptx_body_hash(moved) == hashes.ptx_body_hash(PTX)


def test_hash_ignores_the_labels_of_inlined_scopes():
    # Triton leaves a $L__tmpN: label where an inlined function's scope begins, for the debugger; moving code into a
    # helper renumbers them and changes nothing that runs
    scoped = PTX.replace("\tadd.f32", "$L__tmp7:\n\tadd.f32")
    assert hashes.ptx_body_hash(scoped) == hashes.ptx_body_hash(PTX)
    branch = PTX.replace("\tadd.f32", "$L__BB0_7:\n\tadd.f32")  # a block label is a branch target: it counts
    assert hashes.ptx_body_hash(branch) != hashes.ptx_body_hash(PTX)


def test_hash_sees_an_instruction_change():
    # the -ro row-sum fusion of 2026-12-04: an add that became part of an FMA changes the hash
    fused = PTX.replace("add.f32 \t%f5, %f3, %f1;", "fma.rn.f32 \t%f5, %f3, %f1, %f6;")
    assert hashes.ptx_body_hash(fused) != hashes.ptx_body_hash(PTX)
    assert hashes.ptx_body_hash(PTX.replace("%f4", "%f7")) != hashes.ptx_body_hash(PTX)


def test_cases_cover_both_defaults_and_each_schedule():
    labels = {case[4] for case in hashes.CASES}
    assert hashes.BF16_DEFAULT in labels and hashes.FP8_DEFAULT in labels
    assert any("-pt" in x for x in labels) and any("-pd" in x for x in labels) and any("-pp" in x for x in labels)
    assert any("-pde" in x for x in labels)
    assert {case[0] for case in hashes.CASES} == {"bf16", "fp16", "fp8"}
    assert {case[1] for case in hashes.CASES} == {64, 128}
    assert len(set(hashes.CASES)) == len(hashes.CASES)
