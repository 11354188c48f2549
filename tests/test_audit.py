"""The audit: SASS parsing and counting, resource usage, ncu CSV parsing, the engine end to end with stand-in
tools (tests/data/audit, hand-made), and its error paths. No GPU needed."""

import gzip
import json
import os
import stat
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from softbench.audit.render import audit_markdown, audit_tables
from softbench.core.errors import MeasurementError, UsageError
from softbench.predictions.evaluate import resolve
from softbench.audit import ncu, sass
from softbench.audit.engine import AuditOptions, driver_env, run_audit
from softbench.core.session import read_jsonl
from softbench.core.shapes import Shape

DATA = Path(__file__).parent / "data" / "audit"
KERNEL_RX = "FlashAttentionForwardSm"
ATT = ("kernel_cutlass_kernel_flash_attncuteflash_fwd_sm90FlashAttentionForwardSm90_object_at__"
       "tensorptrbf16gmemalign16_0")


def _kernel(variant):
    fn, _ = sass.pick_kernel(sass.parse_sass((DATA / f"{variant}.sass").read_text()), KERNEL_RX)
    return fn


# --- SASS ------------------------------------------------------------------------------------------------

def test_parse_cuobjdump_dump_finds_functions_and_skips_encoding_lines():
    fns = sass.parse_sass((DATA / "A0.sass").read_text())
    assert [f.name for f in fns] == ["kernel_cutlass_kernel_quackfill_tensorptrf32_0", ATT]
    assert [len(f) for f in fns] == [6, 31]
    assert fns[1].instructions[0].opcode == "LDC" and fns[1].instructions[1].address == 0x10


def test_family_counts_hand_counted():
    # A0's toy kernel, counted by hand from the fixture: 4 element exponentials + 1 row rescale, ...
    got = {k: v for k, v in sass.count_families(_kernel("A0")).items() if v}
    assert got == {"MUFU_EX2": 5, "FFMA": 4, "FMUL": 3, "FADD": 4, "FMNMX": 4, "CONVERT": 2, "MMA": 1, "STS": 1,
                   "SHFL": 1, "SYNC": 1, "BRANCH": 3, "OTHER": 2, "total": 31}
    a1 = sass.count_families(_kernel("A1"))
    assert (a1["MUFU_EX2"], a1["FMNMX"], a1["FADD"], a1["SHIFT"], a1["total"]) == (1, 8, 8, 4, 39)
    assert sass.count_opcodes(_kernel("A1"))["IMAD.SHL.U32"] == 2


def test_instruction_operands_and_registers():
    i = sass.parse_instruction("@!P0 FFMA.FTZ R3, R2.reuse, c[0x0][0x380], -R4", 0x40)
    assert (i.predicate, i.base, i.modifiers) == ("@!P0", "FFMA", ("FTZ",))
    assert i.dest_registers() == {3} and i.source_registers() == {2, 4}
    st = sass.parse_instruction("STG.E.64 desc[UR4][R4.64], R6.64")
    assert st.dest_registers() == set() and st.source_registers() == {4, 5, 6, 7}
    assert sass.family_of(sass.parse_instruction("IMAD.MOV.U32 R1, RZ, RZ, R2")) == "MOV"
    assert sass.family_of(sass.parse_instruction("IMAD.SHL.U32 R5, R5, 0x400000, RZ")) == "SHIFT"
    assert sass.family_of(sass.parse_instruction("MUFU.RCP R3, R2")) == "MUFU_OTHER"
    assert sass.family_of(sass.parse_instruction("STL.64 [R1+0x8], R4")) == "STL"
    assert sass.family_of(sass.parse_instruction("UIADD3 UR4, UR4, 0x1, URZ")) == "UNIFORM"


def test_nvdisasm_layout_is_read_too():
    text = """
\t.section\t.text.my_kernel,"ax",@progbits
.text.my_kernel:
.L_x_0:
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/              @!PT MUFU.EX2 R2, R3 ;
        /*0020*/                   EXIT ;
"""
    (fn,) = sass.parse_sass(text)
    assert fn.name == "my_kernel" and [i.opcode for i in fn.instructions] == ["MOV", "MUFU.EX2", "EXIT"]
    assert fn.instructions[1].predicate == "@!PT"


def test_pick_kernel_falls_back_to_the_largest_function():
    fns = sass.parse_sass((DATA / "A0.sass").read_text())
    fn, how = sass.pick_kernel(fns, "NoSuchKernel")
    assert fn.name == ATT and "no function matches" in how
    assert sass.pick_kernel([], KERNEL_RX)[0] is None
    # a pattern the user named has no fallback: the largest function would be audited under its name
    assert sass.pick_kernel(fns, "NoSuchKernel", fallback=False) == (None, "no function matches /NoSuchKernel/")
    assert sass.pick_kernel(fns, KERNEL_RX, fallback=False)[0].name == ATT


def _functions(*bodies: tuple[str, list[str]]) -> list:
    """SASS functions from (name, instructions) in cuobjdump's layout."""
    text = ""
    for name, instrs in bodies:
        text += f'\t.section\t.text.{name},"ax",@progbits\n.text.{name}:\n'
        text += "".join(f"        /*{16 * i:04x}*/                   {ins} ;\n" for i, ins in enumerate(instrs))
    return sass.parse_sass(text)


def test_pick_kernel_takes_the_largest_matching_function():
    fns = _functions(("attn_small", ["EXIT"]), ("attn_big", ["MOV R1, R2", "EXIT"]),
                     ("other", ["MOV R1, R2", "MOV R3, R4", "EXIT"]))
    fn, how = sass.pick_kernel(fns, "attn")
    assert (fn.name, how) == ("attn_big", "largest of 2 function(s) matching /attn/")


def test_only_a_shift_by_22_ends_an_exponential_path():
    (fn,) = _functions(("k", ["FFMA R2, R0, R1, -R3", "SHF.L.U32 R4, R2, 0x17, RZ", "SHF.L.U32 R5, R2, 0x16, RZ"]))
    depth = sass.dependency_depth(fn)
    assert (depth["sinks"], depth["resolved"], depth["median"]) == (1, 1, 1.0)


def test_no_fewer_exponentials_than_the_baseline_gives_no_element_count():
    def fam(ex2, total):
        return {**{k: 0 for k in sass.FAMILY_NAMES}, "MUFU_EX2": ex2, "total": total}

    r = sass.per_element_costs({"A0": fam(4, 100), "noexp": fam(4, 90)})
    assert r["per_element"] == {} and r["elements_static"] == 0
    assert r["notes"] == ["noexp has no fewer exponentials than A0 (4 vs 4): the element count is unknown"]


def test_instruction_families_and_widths_by_hand():
    assert sorted(sass.parse_instruction("STS.128 [R0], R4.128").source_registers()) == [0, 4, 5, 6, 7]
    for paired, family in (("FMUL2 R2, R4, R6", "FMUL"), ("FFMA2 R2, R4, R6, R8", "FFMA"),
                           ("FADD2 R2, R4, R6", "FADD")):
        assert sass.family_of(sass.parse_instruction(paired)) == family
    (fn,) = _functions(("k", ["NOP", "EXIT"]))
    counts = sass.count_families(fn)
    assert counts["total"] == 2 and counts["NOP"] == 1


def test_resource_usage_after_a_common_block():
    text = ("Resource usage:\n Common:\n  GLOBAL:0\n Function a: REG:10 STACK:0 SHARED:0 LOCAL:0\n"
            " Common:\n  GLOBAL:0\n")
    assert sass.parse_resource_usage(text) == {"a": {"REG": 10, "STACK": 0, "SHARED": 0, "LOCAL": 0}}


def test_an_exponential_path_may_start_at_the_first_instruction():
    (fn,) = _functions(("k", ["FFMA R2, R0, R1, -R3", "MUFU.EX2 R4, R2"]))
    depth = sass.dependency_depth(fn)
    assert (depth["resolved"], depth["unresolved"], depth["median"]) == (1, 0, 1.0)


def test_per_element_with_noexp_reference():
    fams = {v: sass.count_families(_kernel(v)) for v in ("A0", "A1", "noexp")}
    pe = sass.per_element_costs(fams)
    # 4 element exponentials in A0's code; A0 adds 1 MUFU per element over noexp, A1 adds FMNMX + FADD + shift
    assert pe["reference"] == "noexp" and pe["elements_static"] == 4
    assert pe["per_element"] == {"A0": 1.0, "A1": 3.0, "noexp": 0.0}
    assert pe["by_family"]["A1"] == {"FMNMX": 1.0, "FADD": 1.0, "SHIFT": 1.0}
    assert pe["by_family"]["A0"] == {"MUFU_EX2": 1.0}


def test_per_element_on_sm100_counts_fa4s_emulated_exponentials():
    """FA4's sm_100 forward computes some exponentials on the FMA pipe, without MUFU.EX2. The counts of the two
    recorded sm_100a audits (causal 8K, BF16 and FP8; tests/data/audit/sm100a-counts.json keeps their families and
    opcodes) check the count of them: A0's exponentials, MUFU.EX2 plus two per FADD2.RM, come to as many elements
    as the clamps (FMNMX) that A1 adds over noexp, one per element, and A1 then costs 3 instructions per element
    (clamp, magic add, shift). Counting MUFU.EX2 alone would have made every value per hardware exponential."""
    recorded = json.loads((DATA / "sm100a-counts.json").read_text())
    for dtype, emulated in (("bf16", 48), ("fp8", 96)):
        v = recorded[dtype]["variants"]
        fams = {k: x["families"] for k, x in v.items()}
        pe = sass.per_element_costs(fams, opcodes={k: x["opcodes"] for k, x in v.items()})
        clamps = v["A1"]["opcodes"]["FMNMX"] - v["noexp"]["opcodes"]["FMNMX"]
        assert pe["elements_static"] == clamps == 384, dtype
        assert pe["emulated_static"] == {"A0": emulated, "A1": 0, "noexp": 0}
        assert pe["per_element"]["A1"] == 3.0 and pe["per_element"]["noexp"] == 0.0
        mufu_only = sass.per_element_costs(fams)
        assert mufu_only["elements_static"] == 384 - emulated
        assert mufu_only["per_element"]["A1"] > 3.0


def test_per_element_without_noexp_is_flagged():
    fams = {v: sass.count_families(_kernel(v)) for v in ("A0", "A1")}
    pe = sass.per_element_costs(fams)
    assert pe["reference"] == "A0" and pe["per_element"] == {"A0": 1.0, "A1": 3.0}
    assert any("assumed" in n for n in pe["notes"])
    same = sass.per_element_costs({"A0": fams["A0"], "A0b": dict(fams["A0"])})
    assert same["per_element"]["A0b"] is None and same["notes"]
    assert sass.per_element_costs({"A1": fams["A1"]})["per_element"] == {}


def test_per_element_dynamic_needs_both_kernels_counted_and_fewer_xu_instructions_in_the_reference():
    a0 = {"instructions": 130.0, "xu_instructions": 17.0}
    # the same XU count in both: no element count (and no division by zero)
    same = sass.per_element_dynamic({"A0": a0, "noexp": {"instructions": 113.0, "xu_instructions": 17.0}})
    assert same["per_element"] == {} and same["notes"] == ["the XU instruction difference is not positive: no "
                                                            "element count"]
    # noexp profiled without its XU counter, or not at all: no estimate, whichever of the two has counts
    for partial in ({"A0": a0, "noexp": {"instructions": 113.0, "xu_instructions": None}}, {"A0": a0}):
        got = sass.per_element_dynamic(partial)
        assert got["per_element"] == {} and got["notes"] == ["needs ncu instruction counts of A0 and noexp"]


def test_dependency_depth():
    a0, a1, ne = (sass.dependency_depth(_kernel(v)) for v in ("A0", "A1", "noexp"))
    assert (a0["resolved"], a0["unresolved"], a0["median"]) == (4, 1, 1.0)  # the rescale MUFU has no FFMA
    assert (a1["resolved"], a1["median"], a1["max"]) == (4, 3.0, 3)
    assert "IMAD.SHL.U32 <- FADD <- FMNMX <- FFMA.FTZ" in a1["chains"]
    assert ne["resolved"] == 0 and "median" not in ne
    assert a0["sinks"] == a0["resolved"] + a0["unresolved"] == 5  # every sink is counted, resolved or not


def test_depth_is_the_median_over_the_resolved_sinks():
    (fn,) = _functions(("k", ["FFMA R2, R0, R1, -R3", "MUFU.EX2 R4, R2",  # depth 1
                              "FFMA R5, R0, R1, -R3", "MUFU.EX2 R6, R5",  # depth 1
                              # Rowmax-H15's clamp, add and shift: depth 3
                              "FFMA R7, R0, R1, -R3", "FMNMX R8, R7, -252, !PT", "FADD R9, R8, 12583166",
                              "SHF.L.U32 R10, R9, 0x16, RZ",
                              "MUFU.EX2 R11, R12"]))  # R12 is written nowhere: no FFMA to reach
    depth = sass.dependency_depth(fn)
    assert (depth["sinks"], depth["resolved"], depth["unresolved"]) == (4, 3, 1)
    # depths 1, 1, 3: the median is 1 (their mean would be 5/3)
    assert (depth["median"], depth["min"], depth["max"]) == (1.0, 1, 3)
    assert depth["chains"] == {"MUFU.EX2 <- FFMA": 2, "SHF.L.U32 <- FADD <- FMNMX <- FFMA": 1}


def test_a_right_shift_or_another_multiplier_ends_no_exponential_path():
    # SHF.R by 22 and IMAD.SHL by 2^23 build no exponent field; IMAD.SHL by 2^22 (0x400000) does
    (fn,) = _functions(("k", ["FFMA R2, R0, R1, -R3", "SHF.R.U32.HI R4, RZ, 0x16, R2",
                              "IMAD.SHL.U32 R5, R2, 0x800000, RZ", "IMAD.SHL.U32 R6, R2, 0x400000, RZ"]))
    depth = sass.dependency_depth(fn)
    assert (depth["sinks"], depth["resolved"], depth["chains"]) == (1, 1, {"IMAD.SHL.U32 <- FFMA": 1})


def test_a_packed_ffma2_starts_an_exponential_path():
    (fn,) = _functions(("k", ["FFMA2 R2, R0, R4, -R6", "MUFU.EX2 R8, R2"]))
    assert sass.dependency_depth(fn)["chains"] == {"MUFU.EX2 <- FFMA2": 1}


def test_the_ffma_is_looked_for_at_most_window_instructions_back():
    fill = ["MOV R10, R11"] * 3
    (near,) = _functions(("k", ["FFMA R2, R0, R1, -R3", *fill, "MUFU.EX2 R4, R2"]))  # the FFMA 4 back
    (far,) = _functions(("k", ["FFMA R2, R0, R1, -R3", *fill, "MOV R12, R13", "MUFU.EX2 R4, R2"]))  # 5 back
    assert sass.dependency_depth(near, window=4)["resolved"] == 1
    assert sass.dependency_depth(far, window=4)["unresolved"] == 1


def test_family_counts_of_the_recorded_sm100a_kernels_follow_from_their_opcodes():
    """A family is a function of the opcode alone, so each recorded sm_100a audit's opcode counts give its family
    counts back. This pins the rules on opcodes the sm_90 dumps lack: tcgen05's UTCHMMA is an MMA, its UTCBAR and
    UTCATOMSWS are not uniform-datapath instructions (OTHER)."""
    recorded = json.loads((DATA / "sm100a-counts.json").read_text())
    for dtype, audit in recorded.items():
        for variant, counts in audit["variants"].items():
            rebuilt = Counter()
            for opcode, n in counts["opcodes"].items():
                rebuilt[sass.family_of(sass.parse_instruction(opcode))] += n
            assert {k: rebuilt[k] for k in sass.FAMILY_NAMES} == \
                {k: n for k, n in counts["families"].items() if k != "total"}, (dtype, variant)
    assert [sass.family_of(sass.parse_instruction(op)) for op in ("UTCHMMA", "UTCBAR", "UIADD3")] == \
        ["MMA", "OTHER", "UNIFORM"]


def test_the_recorded_h200_audits_sass_gives_back_what_the_audit_recorded():
    """The FA4 audit recorded on the H200 (sessions/20261130T121009Z-...: the dumps under sass/, the counts in
    tests/data/sessions' copy of its variants.jsonl): parsing each dump again gives the same opcode and family
    counts and the same dependency depth. Each kernel has 8 instructions under a uniform predicate (@UP0, @!UP1),
    which the hand-made dumps above lack."""
    audit = "20261130T121009Z-audit-bf16-8K-causal-b1h16d128-fa4"
    dumps = Path(__file__).resolve().parents[1] / "sessions" / audit / "sass"
    for rec in read_jsonl(Path(__file__).parent / "data" / "sessions" / audit / "variants.jsonl"):
        fn, _ = sass.pick_kernel(sass.parse_sass((dumps / f"{rec['variant']}.sass").read_text()), KERNEL_RX)
        assert sum(i.predicate.startswith(("@UP", "@!UP")) for i in fn.instructions) == 8, rec["variant"]
        assert sass.count_opcodes(fn) == rec["opcodes"] and sass.count_families(fn) == rec["families"]
        assert sass.dependency_depth(fn) == rec["dependency_depth"], rec["variant"]
    # FA4's scalar emulated exponential starts with one FADD.RM (none in these kernels): one element each
    assert sass.exponentials_static({"MUFU_EX2": 10}, {"FADD2.RM": 4, "FADD.RM": 3}) == 10 + 2 * 4 + 3


def test_resource_usage_two_line_and_one_line_layouts():
    res = sass.parse_resource_usage((DATA / "resource-usage.txt").read_text())
    assert res[ATT]["REG"] == 168 and res[ATT]["LOCAL"] == 8 and res[ATT]["STACK"] == 16
    assert res["kernel_cutlass_kernel_quackfill_tensorptrf32_0"]["CONSTANT[0]"] == 528
    one = sass.parse_resource_usage(" Function _Z3fooPf:REG:10 STACK:0 SHARED:48 LOCAL:0 CONSTANT[0]:360\n")
    assert one == {"_Z3fooPf": {"REG": 10, "STACK": 0, "SHARED": 48, "LOCAL": 0, "CONSTANT[0]": 360}}


# --- ncu -------------------------------------------------------------------------------------------------

def test_ncu_raw_csv_units_row_thousands_and_kernel_choice():
    kernels = ncu.parse_csv((DATA / "ncu-A0.csv").read_text())
    assert len(kernels) == 2
    k = ncu.pick_kernel(kernels, KERNEL_RX)
    assert k.kernel_name == ATT and k.metrics["gpu__time_duration.sum"] == (403488.0, "nsecond")
    q, notes = ncu.quantities(k)
    assert q["duration_us"] == pytest.approx(403.488) and q["instructions"] == 130_100_000
    assert (q["mufu_pipe_pct"], q["fma_pipe_pct"], q["alu_pipe_pct"], q["issue_active_pct"]) == (40.3, 15.5, 17.9, 37.3)
    assert q["sm_clock_mhz"] == pytest.approx(1980.0) and q["registers_per_thread"] == 168
    assert q["local_load_bytes"] == 0 and q["fma_cycles_pct"] is None and notes == []
    assert q["grid_size"] == "(132, 1, 1)"


def test_ncu_details_layout_gives_the_same_quantities():
    wide = ncu.quantities(ncu.pick_kernel(ncu.parse_csv((DATA / "ncu-A0.csv").read_text()), KERNEL_RX))[0]
    long = ncu.quantities(ncu.pick_kernel(ncu.parse_csv((DATA / "ncu-A0-details.csv").read_text()), KERNEL_RX))[0]
    assert {k: v for k, v in long.items() if k != "id"} == {k: v for k, v in wide.items() if k != "id"}


def test_ncu_units_and_numbers():
    assert ncu.to_number('"1,234,567"') == 1234567 and ncu.to_number("12.5") == 12.5
    assert ncu.to_number("") is None and ncu.to_number("n/a") is None
    text = '"ID","Kernel Name","gpu__time_duration.sum","sm__cycles_elapsed.avg.per_second"\n' \
           '"","","msecond","Mhz"\n"0","FlashAttentionForwardSm90_x","0.4","1,755"\n'
    q, _ = ncu.quantities(ncu.pick_kernel(ncu.parse_csv(text), KERNEL_RX))
    assert q["duration_us"] == pytest.approx(400.0) and q["sm_clock_mhz"] == 1755
    odd = text.replace("msecond", "fortnight")
    q, notes = ncu.quantities(ncu.parse_csv(odd)[0])
    assert q["duration_us"] is None and "fortnight" in notes[0]
    assert ncu.to_number("1234,567") is None  # commas that do not group thousands make no number


def test_ncu_every_spelling_of_a_unit_gives_the_same_number():
    """ncu prints a quantity in base units (--print-units base) or scaled as it chooses; each spelling gives the
    same number in the unit the quantity's name says (1755 MHz, 403.488 us, 1536 bytes)."""
    def read(metric, unit, cell, quantity):
        text = f'"ID","Kernel Name","{metric}"\n"","","{unit}"\n"0","FlashAttentionForwardSm90_x","{cell}"\n'
        q, notes = ncu.quantities(ncu.parse_csv(text)[0])
        assert notes == [], notes
        return q[quantity]

    for unit, cell in (("cycle/second", "1,755,000,000"), ("hz", "1,755,000,000"), ("khz", "1,755,000"),
                       ("cycle/msecond", "1,755,000"), ("cycle/usecond", "1,755"), ("Mhz", "1,755"),
                       ("cycle/nsecond", "1.755"), ("ghz", "1.755")):
        assert read("sm__cycles_elapsed.avg.per_second", unit, cell, "sm_clock_mhz") == pytest.approx(1755.0), unit
    for unit, cell in (("nsecond", "403,488"), ("usecond", "403.488"), ("msecond", "0.403488"),
                       ("second", "0.000403488")):
        assert read("gpu__time_duration.sum", unit, cell, "duration_us") == pytest.approx(403.488), unit
    # 1536 bytes = 1.5 KiB = 1536 / 2**20 MiB
    for unit, cell in (("byte", "1,536"), ("kbyte", "1.536"), ("Mbyte", "0.001536"), ("gbyte", "0.000001536"),
                       ("kibyte", "1.5"), ("mibyte", "0.00146484375")):
        assert read("dram__bytes_read.sum", unit, cell, "dram_read_bytes") == pytest.approx(1536.0), unit


def test_ncu_of_several_matching_launches_the_longest_is_taken():
    text = ('"ID","Kernel Name","gpu__time_duration.sum"\n"","","nsecond"\n'
            '"0","FlashAttentionForwardSm90_x","100,000"\n"1","FlashAttentionForwardSm90_x","400,000"\n'
            '"2","FlashAttentionForwardSm90_x","200,000"\n')
    assert ncu.pick_kernel(ncu.parse_csv(text), KERNEL_RX).identity["ID"] == "1"


def test_ncu_a_metric_in_a_unit_softbench_cannot_read_gives_way_to_the_next_candidate():
    text = ('"ID","Kernel Name","sm__issue_active.avg.pct_of_peak_sustained_active",'
            '"smsp__issue_active.avg.pct_of_peak_sustained_active"\n"","","fortnight","%"\n'
            '"0","FlashAttentionForwardSm90_x","40.0","37.3"\n')
    q, notes = ncu.quantities(ncu.parse_csv(text)[0])
    assert q["issue_active_pct"] == 37.3 and "fortnight" in notes[0]


def test_ncu_log_lines_after_the_table_and_a_table_without_its_units_row():
    header = ('"ID","Kernel Name","gpu__time_duration.sum",'
              '"sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"\n')
    row = '"0","FlashAttentionForwardSm90_x","403,488","40.30"\n'
    # ncu's own last line, where its log and the CSV share a stream, is no launch
    logged = ncu.parse_csv(header + '"","","nsecond","%"\n' + row + "==PROF== Disconnected from process 1\n")
    assert [k.kernel_name for k in logged] == ["FlashAttentionForwardSm90_x"]
    # no units row: a percentage needs none, a time in no unit is left out with a note
    (bare,) = ncu.parse_csv(header + row)
    q, notes = ncu.quantities(bare)
    assert q["mufu_pipe_pct"] == 40.3 and q["duration_us"] is None and notes[0].startswith("duration_us")


def test_ncu_l2_dram_and_sm_balance_in_the_quantities_units():
    text = ('"ID","Kernel Name","lts__t_sector_hit_rate.pct","dram__bytes_read.sum","sm__cycles_active.avg",'
            '"sm__cycles_active.max"\n"","","%","Mbyte","cycle","cycle"\n'
            '"0","FlashAttentionForwardSm90_x","87.25","1,536.5","1,000,000","1,056,000"\n')
    q, notes = ncu.quantities(ncu.pick_kernel(ncu.parse_csv(text), KERNEL_RX))
    assert q["l2_hit_rate_pct"] == 87.25 and q["dram_read_bytes"] == pytest.approx(1536.5e6) and notes == []
    assert q["sm_active_max_over_mean"] == pytest.approx(1.056)
    assert {"lts__t_sector_hit_rate.pct", "dram__bytes_read.sum"} <= set(ncu.ALL_METRICS)
    # a unit softbench does not convert leaves the quantity out, with a note, rather than a wrong number
    q, notes = ncu.quantities(ncu.pick_kernel(ncu.parse_csv(text.replace("Mbyte", "sector")), KERNEL_RX))
    assert q["dram_read_bytes"] is None and "sector" in notes[0]


def test_ncu_tensor_pipe_share_and_the_time_it_implies():
    """The wgmma pipe's share of the SMs' active cycles, the generic tensor counter where an ncu lacks the gmma one,
    and the tensor core's working time: share x mean active cycles / clock (1.627e6 cycles at 1626.7 MHz is 1000 us;
    80% of it, 800 us)."""
    head = ('"ID","Kernel Name","sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",'
            '"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",'
            '"sm__inst_executed_pipe_tensor_op_gmma.sum",'
            '"sm__cycles_active.avg","sm__cycles_elapsed.avg.per_second"\n"","","%","%","inst","cycle","Mhz"\n')
    text = head + '"0","_attn_fwd_ws","80.00","79.00","1,048,576","1,626,700","1,626.7"\n'
    q, notes = ncu.quantities(ncu.pick_kernel(ncu.parse_csv(text), "_attn_fwd"))
    assert q["tensor_active_pct"] == 80.0 and q["tensor_instructions"] == 1048576 and notes == []
    assert q["tensor_busy_us"] == pytest.approx(800.0)
    generic_only = head + '"0","_attn_fwd_ws","","79.00","","1,626,700","1,626.7"\n'
    q, _ = ncu.quantities(ncu.pick_kernel(ncu.parse_csv(generic_only), "_attn_fwd"))
    assert q["tensor_active_pct"] == 79.0 and q["tensor_instructions"] is None
    no_clock = head.replace(',"sm__cycles_elapsed.avg.per_second"', "").replace(',"Mhz"', "") + \
        '"0","_attn_fwd_ws","80.00","79.00","1","1,626,700"\n'
    q, _ = ncu.quantities(ncu.pick_kernel(ncu.parse_csv(no_clock), "_attn_fwd"))
    assert q["tensor_active_pct"] == 80.0 and q["tensor_busy_us"] is None
    assert {"sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__inst_executed_pipe_tensor_op_gmma.sum"} <= set(ncu.ALL_METRICS)


def test_ncu_table_leaves_out_the_counters_no_launch_has():
    """An audit recorded before softbench read L2 and DRAM gets no empty columns for them; one that read them for
    any launch shows them, with a dash where a launch lacks it."""
    old = {"variants": ["A0", "A1"], "ncu": {"A0": {"duration_us": 400.0}, "A1": {"duration_us": 420.0}}}
    (_, columns, rows), = [t for t in audit_tables(old) if "Nsight Compute" in t[0]]
    assert columns == ["variant", "duration us"] and rows == [["A0", "400.0"], ["A1", "420.0"]]
    new = {"variants": ["A0", "A1"], "ncu": {"A0": {"duration_us": 400.0, "l2_hit_rate_pct": 91.5},
                                              "A1": {"duration_us": 420.0}}}
    (_, columns, rows), = [t for t in audit_tables(new) if "Nsight Compute" in t[0]]
    assert columns == ["variant", "duration us", "L2 hit %"] and rows[0][2] == "91.5" and rows[1][2] != "91.5"


def test_ncu_parse_errors_are_clear():
    with pytest.raises(MeasurementError, match="no ncu CSV table"):
        ncu.parse_csv("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n")
    with pytest.raises(MeasurementError, match="no profiled kernel matches.*vectorized_elementwise"):
        ncu.pick_kernel(ncu.parse_csv((DATA / "ncu-A0.csv").read_text())[:1], KERNEL_RX)


def test_ncu_failure_classification():
    reason, hint = ncu.classify_failure("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission ...", 1)
    assert "permission" in reason and "NVreg_RestrictProfilingToAdminUsers" in hint
    log = "==ERROR== Failed to find metric sm__issue_active.avg.pct_of_peak_sustained_active\n"
    assert ncu.rejected_metrics(log, ncu.ALL_METRICS) == ["sm__issue_active.avg.pct_of_peak_sustained_active"]
    assert "regex" in ncu.classify_failure("==WARNING== No kernels were profiled.\n")[0]
    argv = ncu.profile_command("ncu", "X", 4, "r.ncu-rep", "l.log", ("a", "b"), ["python", "-m", "m"])
    assert argv[argv.index("--clock-control") + 1] == "none" and argv[argv.index("--launch-skip") + 1] == "4"
    assert argv[argv.index("--metrics") + 1] == "a,b" and argv[-3:] == ["python", "-m", "m"]
    assert argv[argv.index("--launch-count") + 1] == "1"  # the one launch after the skipped ones
    several = "".join(f"==ERROR== failure {i}\n" for i in (1, 2, 3, 4))
    assert ncu.classify_failure(several, 1) == ("==ERROR== failure 1; ==ERROR== failure 2; ==ERROR== failure 3", None)


# --- engine, end to end with stand-in tools ----------------------------------------------------------------

def _tool(bin_dir: Path, name: str, script: str) -> None:
    p = bin_dir / name
    p.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{DATA / script}" "$@"\n')
    p.chmod(p.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def fake_tools(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _tool(bin_dir, "cuobjdump", "fake_cuobjdump.py")
    _tool(bin_dir, "ncu", "fake_ncu.py")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(DATA), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("CUTE_DSL_PTXAS_PATH", "/opt/some/ptxas")
    return bin_dir


def _opts(tmp_path, bin_dir, **kw) -> AuditOptions:
    base = dict(shapes=(Shape(seq=8192, causal=True),), backend="fa4", variants=("A0", "A1", "noexp"),
                tool_dirs=(str(bin_dir),), out_dir=tmp_path / "sessions", driver_module="fake_audit_driver",
                timeout_s=60)
    base.update(kw)
    return AuditOptions(**base)


def test_engine_records_sass_ncu_and_the_evaluator_keys(tmp_path, fake_tools):
    (s,) = run_audit(_opts(tmp_path, fake_tools), render_markdown=audit_markdown)
    p = s.path
    from test_vocabulary import assert_covered

    assert_covered(p)  # what it records, a seal can scope
    for name in ("env.json", "protocol.yaml", "counts.json", "summary.json", "summary.md", "sass/A1.sass",
                 "ncu/A0.csv", "ncu/noexp.ncu-rep", "variants.jsonl"):
        assert (p / name).exists(), name
    assert s.status()["complete"] is True
    summary = json.loads((p / "summary.json").read_text())
    assert summary["command"] == "audit" and summary["errors"] == {}
    expect = {"ncu.A0.mufu_pipe_pct": 40.3, "ncu.A1.alu_pipe_pct": 35.4, "ncu.noexp.fma_pipe_pct": 16.2,
              "ncu.A1.issue_active_pct": 45.0, "ncu.A0.duration_us": 403.488, "ncu.A1.instructions": 164.8e6,
              "registers.A0": 168, "spills.A1": 0, "sass.A1.MUFU_EX2": 1, "sass.A0.MUFU_EX2": 5,
              "sass.A1.SHIFT": 4, "per_element.A0": 1.0, "per_element.A1": 3.0, "per_element.noexp": 0.0}
    for key, want in expect.items():
        assert resolve(summary, key) == pytest.approx(want), key
    n = 17.1e6 - 0.13e6  # XU warp instructions of A0 minus noexp
    assert summary["per_element_dynamic"]["A1"] == pytest.approx((164.8e6 - 113.1e6) / n)
    assert summary["local_bytes"]["A0"] == 8 and summary["dependency_depth"]["A1"]["median"] == 3.0
    assert summary["evidence"] == ["sass", "ncu"]
    env = json.loads((p / "env.json").read_text())
    assert env["audit_env_removed"] == {"CUTE_DSL_PTXAS_PATH": "/opt/some/ptxas"}
    seen = json.loads((p / "driver" / "A0-result.json").read_text())["env_seen"]
    assert "cubin" in seen["CUTE_DSL_KEEP"] and seen["CUTE_DSL_PTXAS_PATH"] is None
    assert seen["FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED"] == "0"
    counts = json.loads((p / "counts.json").read_text())
    assert counts["A0"]["kernel"] == ATT and counts["A0"]["resources"]["REG"] == 168
    assert [r["variant"] for r in read_jsonl(p / "variants.jsonl")] == ["A0", "A1", "noexp"]
    md = (p / "summary.md").read_text()
    assert "MUFU.EX2" in md and "Nsight Compute" in md
    titles = [t for t, _, _ in audit_tables(summary)]
    assert len(titles) == 2


def test_spills_count_local_loads_and_stores_alike(tmp_path):
    from softbench.audit.summary import summarize_audit

    (fn,) = _functions(("k", ["STL [R1], R4", "LDL R4, [R1]", "STL.64 [R1+0x8], R6", "EXIT"]))
    records = {"A0": {"families": sass.count_families(fn), "errors": {}}}
    summary = summarize_audit(records, _opts(tmp_path, tmp_path), Shape(seq=8192, causal=True))
    assert summary["spills"] == {"A0": 3}  # two stores and a load, whatever their width


def test_the_summary_counts_fa4s_emulated_exponentials_from_each_variants_opcodes(tmp_path):
    """The recorded sm_100a BF16 audit (sm100a-counts.json) as the engine's records: the element count takes A0's
    48 emulated exponentials from its opcodes (384 elements, where MUFU.EX2 alone would count 336), the notes say
    so, and the budget table sets A1's cost against the issue slots of a score."""
    from softbench.audit.render import budget_tables
    from softbench.audit.summary import FA4_SM100_EMULATION, summarize_audit

    variants = json.loads((DATA / "sm100a-counts.json").read_text())["bf16"]["variants"]
    records = {v: {"families": x["families"], "opcodes": x["opcodes"], "run": {"device": {"arch": 100}},
                   "errors": {}} for v, x in variants.items()}
    summary = summarize_audit(records, _opts(tmp_path, tmp_path), Shape(seq=8192, causal=True))
    assert summary["per_element_elements_static"] == 384
    assert summary["per_element_emulated_static"] == {"A0": 48, "A1": 0, "noexp": 0}
    assert summary["per_element"]["A1"] == 3.0 and FA4_SM100_EMULATION in summary["per_element_notes"]
    # A1's 3 instructions per element against the nominal issue slots per score, and their ratio
    slots = summary["budget"]["issue_slots_per_score"]
    (_, _, rows), = budget_tables(summary)
    assert ["A1", "3.00", f"{slots:.1f}", f"{3.0 / slots:.2f}"] in rows


def test_the_budget_is_for_the_gpu_the_variants_ran_on_whichever_failed(tmp_path):
    from softbench.audit.summary import summarize_audit

    ran = {"run": {"device": {"arch": 90}}, "errors": {}}
    failed = {"errors": {"run": "the variant did not compile"}}  # no device recorded
    shape = Shape(seq=8192, causal=True)
    for records in ({"A0": ran, "noexp": failed}, {"A1": failed, "A0": ran}):
        summary = summarize_audit(records, _opts(tmp_path, tmp_path), shape)
        assert summary["budget"]["arch_family"] == "sm_90", list(records)
    assert summarize_audit({"A0": failed}, _opts(tmp_path, tmp_path), shape)["budget"] is None


def test_engine_without_ncu_still_audits_the_sass(tmp_path, fake_tools):
    (fake_tools / "ncu").unlink()
    (s,) = run_audit(_opts(tmp_path, fake_tools, variants=("A0", "A1")))
    summary = s.read_json("summary.json")
    assert "ncu was not found" in summary["errors"]["A0"]["ncu"] and "--no-ncu" in summary["errors"]["A0"]["ncu"]
    assert summary["ncu"] == {} and summary["evidence"] == ["sass"]
    assert summary["sass"]["A1"]["MUFU_EX2"] == 1 and summary["per_element"]["A1"] == 3.0
    # --no-ncu: no error at all about ncu
    (s2,) = run_audit(_opts(tmp_path, fake_tools, variants=("A0",), use_ncu=False))
    assert s2.read_json("summary.json")["errors"] == {}


def test_engine_without_counter_permission(tmp_path, fake_tools, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "perm")
    (s,) = run_audit(_opts(tmp_path, fake_tools, variants=("A0",)))
    summary = s.read_json("summary.json")
    err = summary["errors"]["A0"]["ncu"]
    assert "ERR_NVGPUCTRPERM" in err and "NVreg_RestrictProfilingToAdminUsers" in err
    assert summary["sass"]["A0"]["MUFU_EX2"] == 5 and summary["registers"]["A0"] == 168


@pytest.mark.parametrize("mode, refused", [
    ("badmetric", ["sm__issue_active.avg.pct_of_peak_sustained_active"]),
    # ncu names the first unknown metric it meets and stops: the second is refused only on the next run
    ("badmetrics", ["sm__issue_active.avg.pct_of_peak_sustained_active", "lts__t_sector_hit_rate.pct"]),
])
def test_engine_drops_each_metric_ncu_refuses(tmp_path, fake_tools, monkeypatch, mode, refused):
    monkeypatch.setenv("FAKE_NCU_MODE", mode)
    (s,) = run_audit(_opts(tmp_path, fake_tools, variants=("A0",)))
    summary = s.read_json("summary.json")
    assert "A0" not in summary["errors"] and summary["ncu"]["A0"]["mufu_pipe_pct"] == 40.3
    notes = summary["ncu_notes"]["A0"]
    for i, metric in enumerate(refused):  # in the order ncu refused them, each in a note of its own
        assert notes[i].startswith(f"ncu refused {metric}:")
    (rec,) = read_jsonl(s.path / "variants.jsonl")
    assert not set(refused) & set(rec["ncu_metrics_asked"])


def test_engine_asks_for_the_core_metrics_when_ncu_fails_on_a_metric_it_does_not_name(tmp_path, fake_tools,
                                                                                        monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "unnamedmetric")
    (s,) = run_audit(_opts(tmp_path, fake_tools, variants=("A0",)))
    summary = s.read_json("summary.json")
    assert "A0" not in summary["errors"] and summary["ncu"]["A0"]["mufu_pipe_pct"] == 40.3
    assert "asked again for the core metrics only" in summary["ncu_notes"]["A0"][0]
    (rec,) = read_jsonl(s.path / "variants.jsonl")
    assert rec["ncu_metrics_asked"] == list(ncu.CORE_METRICS)


def test_engine_reads_the_report_ncu_wrote_before_exiting_with_an_error(tmp_path, fake_tools, monkeypatch):
    """The program failed after its launch was profiled: ncu wrote the report and passed the exit code on. The
    counters are read, and the notes say how ncu ended."""
    monkeypatch.setenv("FAKE_NCU_MODE", "apperror")
    (s,) = run_audit(_opts(tmp_path, fake_tools, variants=("A0",)))
    summary = s.read_json("summary.json")
    assert "A0" not in summary["errors"] and summary["ncu"]["A0"]["mufu_pipe_pct"] == 40.3
    assert "ncu exited with code 1; its report is read anyway" in summary["ncu_notes"]["A0"]


def _audit_with_a_crashing_disassembler(tmp_path, bin_dir, monkeypatch) -> dict:
    """The summary of A0's audit under a cuobjdump that dies (exit code 2) after printing half the SASS."""
    monkeypatch.setenv("FAKE_CUOBJDUMP_MODE", "crash")
    (s,) = run_audit(_opts(tmp_path, bin_dir, variants=("A0",), use_ncu=False))
    return s.read_json("summary.json")


def test_a_disassembler_that_crashes_midway_leaves_the_kernel_uncounted(tmp_path, fake_tools, monkeypatch):
    """The half-printed kernel is not counted as if it were the whole one."""
    summary = _audit_with_a_crashing_disassembler(tmp_path, fake_tools, monkeypatch)
    assert summary["errors"]["A0"]["sass"].startswith("disassembling cutlass___call___flash_fwd_A0.sm_90a.cubin failed")
    assert "A0" not in summary["sass"]


def test_a_disassemblers_crash_is_reported_with_its_exit_code_and_what_it_said(tmp_path, fake_tools, monkeypatch):
    """The error once quoted the first 400 characters of the half-printed dump (its header), neither the exit code
    nor cuobjdump's own message, which comes after the dump."""
    error = _audit_with_a_crashing_disassembler(tmp_path, fake_tools, monkeypatch)["errors"]["A0"]["sass"]
    assert "(exit code 2)" in error and error.endswith("Internal error (fake crash)")


def test_a_kernel_missing_from_the_resource_usage_is_said_and_ncu_gives_its_registers(tmp_path, fake_tools,
                                                                                         monkeypatch):
    monkeypatch.setenv("FAKE_CUOBJDUMP_MODE", "noresources")
    (s,) = run_audit(_opts(tmp_path, fake_tools, variants=("A0",)))
    summary = s.read_json("summary.json")
    assert summary["errors"]["A0"] == {"resources": f"no resource-usage line for {ATT}"}
    assert summary["registers_source"]["A0"] == "ncu" and summary["sass"]["A0"]["MUFU_EX2"] == 5


def test_engine_keeps_going_when_a_variant_fails(tmp_path, fake_tools, monkeypatch):
    (s,) = run_audit(_opts(tmp_path, fake_tools, variants=("A0", "broken"), use_ncu=False))
    summary = s.read_json("summary.json")
    assert "compile failed" in summary["errors"]["broken"]["run"]
    assert "no cubin" in summary["errors"]["broken"]["sass"]
    assert summary["sass"]["A0"]["total"] == 31 and "A0" not in summary["errors"]


def test_large_sass_is_gzipped(tmp_path, fake_tools, monkeypatch):
    import softbench.audit.disassembly as disassembly

    monkeypatch.setattr(disassembly, "SASS_GZIP_ABOVE_BYTES", 100)
    (s,) = run_audit(_opts(tmp_path, fake_tools, variants=("A0",), use_ncu=False))
    text = gzip.open(s.path / "sass" / "A0.sass.gz", "rt").read()
    assert text == (DATA / "A0.sass").read_text()


def test_driver_env_keeps_other_keep_tokens(tmp_path):
    env, removed = driver_env(tmp_path, base={"CUTE_DSL_KEEP": "ptx", "CUTE_DSL_PTXAS_PATH": "/x", "A": "1"})
    assert env["CUTE_DSL_KEEP"] == "cubin,ptx" and env["CUTE_DSL_DUMP_DIR"] == str(tmp_path)
    assert removed == {"CUTE_DSL_PTXAS_PATH": "/x"} and env["A"] == "1"


def test_real_driver_on_the_cpu_simulation(tmp_path, fake_tools):
    """The real driver (softbench.audit.driver) runs the sim backend; it has no cubin to audit, and the
    session says so while keeping the run."""
    opts = _opts(tmp_path, fake_tools, backend="sim", variants=("A0",), use_ncu=False,
                 driver_module="softbench.audit.driver",
                 shapes=(Shape(seq=128, heads=1, head_dim=64),), warmup=1, calls=1)
    (s,) = run_audit(opts)
    (rec,) = read_jsonl(s.path / "variants.jsonl")
    assert rec["run"]["ok"] is True and rec["run"]["forwards"] == 3
    assert "no cubin" in rec["errors"]["sass"]


def test_options_are_validated():
    from softbench.core.errors import UsageError

    with pytest.raises(UsageError, match="--variants names A0 more than once"):
        AuditOptions(shapes=(Shape(),), variants=("A0", "A0"))
    with pytest.raises(UsageError, match="calls"):
        AuditOptions(shapes=(Shape(),), calls=0)


def test_cli_refuses_clearly_without_a_gpu(cli):
    r = cli("audit", "--variants", "A0,B9")
    assert r.returncode == 2 and "unknown kernel variant 'B9'" in r.stderr
    r = cli("audit", "--no-ncu")
    assert r.returncode == 3 and "CUDA GPU" in r.stderr


def test_tool_runner_reports_timeouts_and_missing_tools(tmp_path):
    from softbench.audit.tools import run_tool

    code, text = run_tool([sys.executable, "-c", "import time; time.sleep(30)"], None, 1)
    assert code == -1 and "timed out after 1 s" in text
    code, text = run_tool([str(tmp_path / "no-such-tool")], None, 5)
    assert code == -1 and "cannot run" in text
    code, text = run_tool([sys.executable, "-c", "print('hi')"], None, 30, log=tmp_path / "x.log")
    assert code == 0 and "hi" in (tmp_path / "x.log").read_text()


def test_a_ctrl_c_while_a_tool_runs_ends_the_tool_and_what_it_started(tmp_path, monkeypatch):
    """The tool runs in its own session, out of reach of the terminal's Ctrl-C: softbench must end it (ncu and
    its target, or the driver, which would write on into a session already marked partial)."""
    import os
    import subprocess

    from softbench.audit import tools

    started = []
    real_communicate = subprocess.Popen.communicate

    def interrupted_once(self, *args, **kwargs):
        if not started:
            started.append(self.pid)
            raise KeyboardInterrupt
        return real_communicate(self, *args, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "communicate", interrupted_once)
    child = tmp_path / "child.pid"
    script = (f"import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; "
              f"time.sleep(60)']); open({str(child)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    with pytest.raises(KeyboardInterrupt):
        tools.run_tool([sys.executable, "-c", script], None, 120)
    (pid,) = started
    with pytest.raises(ProcessLookupError):  # the group, grandchild included, is gone
        os.killpg(pid, 0)


def test_the_per_element_note_without_noexp_says_how_elements_were_counted():
    from softbench.audit.render import audit_notes

    with_noexp = audit_notes({"per_element_reference": "noexp", "per_element_elements_static": 192})
    assert "192 element exponentials in A0's code" in with_noexp[0]
    without = audit_notes({"per_element_reference": "A0"})
    assert "counted per variant as the MUFU.EX2 it removes from A0" in without[0] and "?" not in without[0]


def test_tools_are_also_looked_for_in_tritons_bundled_bin():
    """A machine without a CUDA toolkit still disassembles: triton's wheel bundles cuobjdump and nvdisasm."""
    from softbench.audit.tools import default_tool_dirs
    from softbench.kernels.triton_compile import bundled_tool_dir

    d = bundled_tool_dir()
    if d is None:
        pytest.skip("triton is not installed here")
    assert Path(d).parts[-3:] == ("backends", "nvidia", "bin") and (Path(d) / "cuobjdump").is_file()
    assert default_tool_dirs()[-1] == d  # after PATH, CUDA_HOME and the toolkit's folders


def test_the_sass_count_of_emulated_exponentials_is_fa4s_own_share_for_every_setting():
    """Two independent routes to the share of FA4's exponentials that its polynomial computes: FA4's own predicate
    (softbench.sweep.emulation, beta) and the SASS of each setting compiled for sm_100a (FP8 causal 8K, session
    20261201T191856Z; its families and opcodes are kept in tests/data/audit/sm100a-counts.json). They agree for
    the stock setting (A0 = emu-f8-s1) and five others, from none to three quarters."""
    from fractions import Fraction

    from softbench.sweep.emulation import parse_variant

    v = json.loads((DATA / "sm100a-counts.json").read_text())["fp8-emulation"]["variants"]
    pe = sass.per_element_costs({k: x["families"] for k, x in v.items()},
                                opcodes={k: x["opcodes"] for k, x in v.items()})
    n = pe["elements_static"]
    settings = {name: parse_variant(name) for name in v if name.startswith("emu-")} | {"A0": parse_variant("emu-f8-s1")}
    assert len(settings) == 6 and {s.beta for s in settings.values()} == {Fraction(k, 8) for k in (0, 1, 2, 3, 4, 6)}
    for name, setting in settings.items():
        assert Fraction(pe["emulated_static"][name], n) == setting.beta, name
        # every exponential is in the count, emulated or not: the MUFU's share is the rest
        assert Fraction(pe["by_family"][name]["MUFU_EX2"]).limit_denominator(n) == 1 - setting.beta, name


def test_a_reference_kernel_is_profiled_beside_the_variants(tmp_path, fake_tools):
    """--reference fa3: one more row, run through the reference backend's A0 with no options, found by ncu in the
    demangled name (FA3's function is cutlass's device_kernel) and picked from the report by either name; its
    cubin is not disassembled, so it has counters and no SASS, and no error says otherwise."""
    (s,) = run_audit(_opts(tmp_path, fake_tools, variants=("A0",), references=("fa3",)), render_markdown=audit_markdown)
    summary = s.read_json("summary.json")
    assert summary["variants"] == ["A0", "ref-fa3"] and summary["errors"] == {}
    request = json.loads((s.path / "driver" / "ref-fa3-request.json").read_text())
    assert (request["backend"], request["variant"], request["options"]) == ("ref-fa3", "A0", {})
    made = json.loads((s.path / "ncu" / "ref-fa3.ncu-rep").read_text())
    assert made["name_base"] == "demangled" and made["kernel_name"] == "regex:FlashAttnFwdSm90"
    assert json.loads((s.path / "ncu" / "A0.ncu-rep").read_text())["name_base"] == "function"
    assert summary["ncu"]["ref-fa3"]["kernel_name"] == "device_kernel"
    assert summary["ncu"]["ref-fa3"]["duration_us"] == summary["ncu"]["A0"]["duration_us"]  # the same fake CSV
    assert summary["sass"].get("ref-fa3") is None and summary["sass"]["A0"]["MUFU_EX2"] == 5
    assert yaml.safe_load((s.path / "protocol.yaml").read_text())["references"] == ["fa3"]
    with pytest.raises(UsageError, match="reference kernels fa3, not fa9"):
        _opts(tmp_path, fake_tools, references=("fa9",))
    with pytest.raises(UsageError, match="--no-ncu reads none"):
        _opts(tmp_path, fake_tools, references=("fa3",), use_ncu=False)


def test_warp_stalls_are_read_and_tabled_largest_first():
    """Nsight Compute's warp-stall breakdown: each reason's metric becomes stall_<reason>, and the table keeps the
    reasons with the largest totals over the rows, largest first."""
    from softbench.audit import ncu
    from softbench.audit.render import stall_tables

    metric = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
    k = ncu.KernelMetrics("k", {}, {metric.format("long_scoreboard"): (1.25, "ratio"),
                                    metric.format("wait"): (0.5, ""), metric.format("barrier"): (0.0, "")})
    values, notes = ncu.quantities(k)
    assert values["stall_long_scoreboard"] == 1.25 and values["stall_wait"] == 0.5 and notes == []
    assert values["stall_math_pipe_throttle"] is None
    assert all(f"stall_{r}" in values for r in ncu.STALL_REASONS)
    assert metric.format("mio_throttle") in ncu.ALL_METRICS
    summary = {"shape_tag": "t", "variants": ["A0", "ref-fa3"],
               "ncu": {"A0": {**values}, "ref-fa3": {**values, "stall_wait": 2.5, "stall_barrier": None}}}
    ((title, columns, rows),) = stall_tables(summary)
    assert columns == ["variant", "wait", "long scoreboard"]  # totals 3.0 and 2.5; reasons at zero left out
    assert rows == [["A0", "0.50", "1.25"], ["ref-fa3", "2.50", "1.25"]]
    assert stall_tables({"variants": ["A0"], "ncu": {"A0": {"stall_wait": None}}}) == []


def test_source_stalls_keep_each_launchs_page_and_summarize_it(tmp_path, fake_tools):
    """--source-stalls: ncu is asked for the SourceCounters section, each launch's SASS page is exported and kept
    gzipped beside its report, and the summary names its longest runs of back-to-back MUFU.EX2 (the H200 page of
    the Gluon kernel: 63 in the key loop; FA3's: none) and its opcodes with the most samples."""
    opts = _opts(tmp_path, fake_tools, backend="triton", variants=("A0",), references=("fa3",), source_stalls=True,
                 kernel_regex="_attn_fwd")
    (s,) = run_audit(opts, render_markdown=audit_markdown)
    summary = s.read_json("summary.json")
    assert "source_stalls" not in json.dumps(summary["errors"])
    assert json.loads((s.path / "ncu" / "A0.ncu-rep").read_text())["sections"] == ["SourceCounters"]
    assert yaml.safe_load((s.path / "protocol.yaml").read_text())["ncu_sections"] == ["SourceCounters"]
    gluon, fa3 = summary["source_stalls"]["A0"], summary["source_stalls"]["ref-fa3"]
    assert (s.path / gluon["page"]).is_file() and gluon["page"] == "ncu/A0-sass.csv.gz"
    assert [r["length"] for r in gluon["mufu_runs"] if r["executions"] > 100_000] == [63]
    assert fa3["mufu_runs"] == [] and fa3["parked_samples"] == 0 < gluon["parked_samples"]
    reasons = gluon["reasons_pct"]
    assert gluon["opcodes"][0]["opcode"] == "MUFU" and max(reasons, key=reasons.get) == "wait"
    md = (s.path / "summary.md").read_text()
    assert "instruction by instruction" in md and "63 (249984)" in md
    # what it records is scope vocabulary that predictions can be sealed against (the H200's first such session
    # recorded ncu_sections before the vocabulary had it)
    from softbench.predictions.vocabulary import RECORDED

    recorded = set(summary) | set(yaml.safe_load((s.path / "protocol.yaml").read_text()))
    assert recorded <= RECORDED["audit"], sorted(recorded - RECORDED["audit"])


def test_source_stalls_that_cannot_be_exported_leave_the_rest_of_the_audit(tmp_path, fake_tools, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "nosource")
    (s,) = run_audit(_opts(tmp_path, fake_tools, variants=("A0",), source_stalls=True))
    summary = s.read_json("summary.json")
    assert "--page source exited with code 1" in summary["errors"]["A0"]["source_stalls"]
    assert summary["source_stalls"] == {} and summary["ncu"]["A0"]["duration_us"] > 0


def test_source_stalls_need_a_native_run_under_softbenchs_ncu(tmp_path, fake_tools, cli):
    for bad in (dict(use_ncu=False), dict(collector="nsight-python"), dict(arch="sm_100a", use_ncu=False)):
        with pytest.raises(UsageError, match="--source-stalls samples the launch"):
            _opts(tmp_path, fake_tools, source_stalls=True, **bad)
    r = cli("audit", "--backend", "triton", "--arch", "sm_90a", "--source-stalls", "--out", str(tmp_path / "s"))
    assert r.returncode == 2 and "--source-stalls samples the launch" in r.stderr, r.stderr


@pytest.mark.parametrize("content", [b"\xff\xfe not text", b"[" * 100000 + b"]" * 100000, b"[1, 2]", b'{"ok": tru'])
def test_a_childs_result_file_that_does_not_read_as_a_mapping_is_none(tmp_path, content):
    """The child's result file as the driver reads it back: bytes that are no UTF-8 or nest past the parser's depth
    once left read_result as an internal error (UnicodeDecodeError, RecursionError), and a JSON list went on to
    callers that take a mapping. Each is no result, so the driver reports the child's failure instead."""
    from softbench.audit.tools import read_result

    path = tmp_path / "result.json"
    path.write_bytes(content)
    assert read_result(path) == {}
    path.write_text('{"variant": "A1"}')
    assert read_result(path) == {"variant": "A1"}
