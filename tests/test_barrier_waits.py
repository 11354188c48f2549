"""softbench.audit.barrier_waits on the committed audits of BF16 causal 16K (2026-12-04): the wait counts docs/leases.md
quotes for the paired order and -ka come back from the per-instruction pages, what each wait was for is read right,
the audit's table carries them, and tools/analysis/mbarrier_waits.py prints them site by site."""

from pathlib import Path

import pytest

from softbench.audit import barrier_waits, source_stalls
from softbench.audit.render import source_stall_tables
from tests.repo_tools import load_tool

ROOT = Path(__file__).resolve().parents[1]
PAIRED = ROOT / "sessions/20261204T172236Z-audit-bf16-16K-causal-b1h16d128-triton"
K_AHEAD = ROOT / "sessions/20261204T172302Z-audit-bf16-16K-causal-b1h16d128-triton"
FA3 = ROOT / "sessions/20261204T100505Z-audit-bf16-16K-causal-b1h16d128-triton"
K, V, PRODUCER = barrier_waits.KINDS[:3]


def _page(folder: Path, label: str = "A0"):
    return source_stalls.read(str(folder / "ncu" / f"{label}-sass.csv.gz"))


def _big(sites, kind):
    return sorted(sites[(sites.serves == kind) & (sites.at_branch > 1000)].at_branch.tolist())


def test_the_k_ahead_figures_come_back_from_the_audits():
    """docs/leases.md (the leases of 17:07-17:38): the first consumer's K wait 1,867 samples in the paired order against
    1,075 under -ka, the second's 1,489 against 1,446, the V waits 2,477 against 2,823 (the two key loops' sites),
    the producer's two polls 10,497 and 316 against 3,810 and 6,515 (samples at each wait's branch)."""
    paired, ahead = barrier_waits.wait_sites(_page(PAIRED)), barrier_waits.wait_sites(_page(K_AHEAD))
    assert _big(paired, K) == [1489, 1867] and _big(ahead, K) == [1075, 1446]
    assert sum(_big(paired, V)) == 2477 and sum(_big(ahead, V)) == 2823
    assert sorted(paired[paired.serves == PRODUCER].at_branch)[-2:] == [316, 10497]
    assert sorted(ahead[ahead.serves == PRODUCER].at_branch)[-2:] == [3810, 6515]


def test_fa3s_waits_read_as_cutlass_writes_them():
    """FA3's consumers (CUTLASS's pipeline: a try-wait, a branch past the wait where it succeeded, a second try-wait
    and the branch to the retry loop) waited 1,516 samples for K and 1,459 for V at BF16 causal 16K, the figures
    docs/hopper-notes.md quotes from `20261204T100505Z`; each such pair of try-waits is one wait."""
    page = _page(FA3, "ref-fa3")
    sites = barrier_waits.wait_sites(page)
    assert _big(sites, K) == [1516] and _big(sites, V) == [1459]
    # the K wait: rows 1577-1580 are its try-wait (325 samples), the branch past it (1,516), the second try-wait (206)
    # and the branch to the retry loop (none here); one wait holds them all
    (k,) = sites[sites.at_branch == 1516].itertuples()
    assert (k.row, k.samples) == (1577, 1516 + 325 + 206)
    page.loc[1580, source_stalls.SAMPLES] = 7  # were a warp sampled at the second branch, it would be this wait's
    assert barrier_waits.wait_sites(page).set_index("row").loc[1577, "at_branch"] == 1516 + 7


def _with_instruction_inserted(page, row: int, source: str):
    """The page with an unsampled instruction `source` placed before `row`, the instructions from there on one
    instruction (16 bytes) later."""
    import pandas as pd

    inserted = page.loc[[row]].assign(Source=source, **{source_stalls.SAMPLES: 0, source_stalls.EXECUTED: 0})
    after = page.loc[row:].assign(Address=[hex(int(a, 16) + 0x10) for a in page.Address[row:]])
    return pd.concat([page.loc[:row - 1], inserted, after], ignore_index=True)


def test_a_cutlass_wait_stays_one_wait_with_an_instruction_between_its_try_waits():
    """ptxas may schedule an instruction between the branch past a CUTLASS wait and the second try-wait: FA3's K
    wait (rows 1577-1580) with one placed there (an address computation of the MMA that follows) is still one wait
    holding its try-waits' and its branch's samples."""
    page = _page(FA3, "ref-fa3")
    moved = barrier_waits.wait_sites(_with_instruction_inserted(page, 1579, "ULEA UR50, UR4, UR8, 0xb"))
    assert len(moved) == len(barrier_waits.wait_sites(page))
    (k,) = moved[moved.row == 1577].itertuples()
    assert (k.at_branch, k.samples) == (1516, 1516 + 325 + 206)


def test_a_wait_counts_its_branch_and_try_wait_and_retry_loops_are_not_waits():
    """A wait's samples in all are its branch's plus its try-wait's (the first consumer's K wait under -ka: 1,075 and
    115); the retry loops at the kernel's end, whose branch goes back to their try-wait, are not counted again."""
    df = _page(K_AHEAD)
    sites = barrier_waits.wait_sites(df)
    assert (sites.samples >= sites.at_branch).all() and sites.address.is_unique
    assert sites[sites.at_branch == 1075].iloc[0].samples == 1075 + 115
    try_waits = int(df["Source"].astype(str).str.contains(barrier_waits.TRY_WAIT, regex=False).sum())
    assert 0 < len(sites) < try_waits
    # the last retry loop's branch (row 5689) goes back to its own try-wait (row 5688), not past it
    assert df["Source"][5689].split()[-1] == df["Address"][5688] and 5688 not in set(sites.row)


def test_the_key_loops_mma_waits_order_the_forms_by_their_slack():
    """BF16 causal 8K under the 16-bit default (20261204T213415Z; docs/leases.md, the leases of 21:17-21:35): the
    consumers of noexp wait at their key loop's wgmma waits 498 samples, A0's 201 and h15-folded-clamped's 60, the
    order of their softmax's length (386, 452 and 523 loop instructions), while noexp and A0 take the same time."""
    audit = ROOT / "sessions/20261204T213415Z-audit-bf16-8K-causal-b1h16d128-triton/ncu"
    counts = {v: barrier_waits.key_loop_mma_waits(source_stalls.read(str(audit / f"{v}-sass.csv.gz")))
              for v in ("noexp", "A0", "h15-folded-clamped")}
    assert counts == {"noexp": 498, "A0": 201, "h15-folded-clamped": 60}


def test_the_summary_and_the_audit_table_carry_the_waits_by_kind():
    """summary.json's barrier_waits (per kind, and the waits with at least 0.5% of the samples) and the audit table's
    column; an audit written before the column reads "not recorded"."""
    waits = source_stalls.summarize(_page(K_AHEAD))["barrier_waits"]
    assert waits["at_branch"][PRODUCER] == 10614 and waits["at_branch"][V] == 2858
    assert {w["samples"] for w in waits["largest"]} >= {1075, 1446, 3810, 6515}
    summary = {"shape_tag": "bf16-16K", "variants": ["A0", "old"],
               "source_stalls": {"A0": {"samples": 1, "parked_samples": 0, "barrier_waits": waits},
                                 "old": {"samples": 1, "parked_samples": 0}}}
    (_, head, rows), = source_stall_tables(summary)
    cells = {r[0]: r[head.index("mbarrier waits, samples: K or Q / V / producer")] for r in rows}
    assert cells == {"A0": "3,016 / 2,858 / 10,614", "old": "not recorded"}


def test_a_wait_with_half_a_percent_of_the_samples_is_among_the_largest():
    """The summary lists each wait with at least 0.5% of the page's samples at its branch: on FA3's page padded to
    200 times its K wait's 1,516 samples that wait is listed, and with one of them moved off its branch it is not."""
    samples = source_stalls.SAMPLES
    page = _page(FA3, "ref-fa3")
    unwaited = 1584  # a UMOV after the K wait, in no wait's rows
    page.loc[unwaited, samples] += 200 * 1516 - page[samples].sum()
    assert [w["samples"] for w in barrier_waits.summarize(page)["largest"]] == [1516]
    page.loc[1578, samples] -= 1
    page.loc[unwaited, samples] += 1
    assert barrier_waits.summarize(page)["largest"] == []


def test_the_audit_table_says_where_the_working_warps_wait():
    """The rest of the row for the -ka audit's page: 37,298 of its 149,643 samples are parked warps' (25%); its three
    largest reasons, largest first; of its runs of back-to-back MUFU.EX2 the one executed most, the key loop's (12
    long, 512,064 times), before the longer runs outside the loop (49 long, 8,128 times)."""
    summary = {"shape_tag": "bf16-16K", "variants": ["A0"],
               "source_stalls": {"A0": source_stalls.summarize(_page(K_AHEAD))}}
    (_, _, rows), = source_stall_tables(summary)
    assert rows[0][:6] == ["A0", "149643", "25", "wait 38%, selected 15%, dispatch 14%", "12 (512064)",
                           "MUFU 23375, FMNMX 17594, BRA 16940"]


@pytest.mark.parametrize("sources, kind", [
    (["USGXT.U32 UR34, UR34, 0xe", "WARPGROUP.ARRIVE", "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR32], RZ, !UPT"], K),
    (["F2FP.BF16.F32.PACK_AB R152, R219, R228", "HGMMA.64x128x16.F32.BF16 R88, R152, gdesc[UR12].tnspB, R88"], V),
    (["WARPGROUP.ARRIVE", "QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR32], RZ, !UPT"], K),  # FP8
    (["QGMMA.64x128x32.F32.E4M3.E4M3 R88, R156, gdesc[UR28], R88, gsb0"], V),
    (["SYNCS.ARRIVE.TRANS64 RZ, [UR17+0x30170], R2", "UTMALDG.3D [UR8], [UR26]"], PRODUCER),
    (["@UP0  UTMALDG.3D [UR8], [UR14]"], PRODUCER),  # a predicated copy: the predicate is not the opcode
    (["IADD3 R1, R1, 0x1, RZ", "EXIT"], "other"),
])
def test_what_a_wait_was_for_is_the_next_mma_or_copy(sources, kind):
    assert barrier_waits.serves(sources) == kind


def test_the_tool_prints_the_sites_and_refuses_a_folder_without_a_page(capsys, tmp_path):
    tool = load_tool("analysis/mbarrier_waits.py")
    assert tool.main([str(K_AHEAD), "--least", "200"]) == 0
    out = capsys.readouterr().out
    assert "| 999 | 0x30170 | 1,075 | 1,190 | Q.K^T: K (or Q) | 512,064 |" in out
    assert "| 0x30160 |" not in out  # the second consumer's Q wait, 137 samples at its branch, under --least 200
    assert tool.main([str(tmp_path)]) == 2 and "--source-stalls" in capsys.readouterr().err
    assert tool.main(["--variant"]) == 2


def test_a_waits_executions_tell_a_query_blocks_waits_from_the_key_loops():
    """BF16 causal 8K under the 16-bit default (20261204T213415Z; docs/hopper-notes.md, the second Q buffer): the
    waits at a query block's start run once per block and warp (1,024 blocks of 4 warps: 4,096), the key loop's once
    per key tile and warp; the consumers' Q waits collect 66 and 91 samples, their first K's 43 and 100, while
    each key loop's K wait collects about 300."""
    sites = barrier_waits.wait_sites(source_stalls.read(str(
        ROOT / "sessions/20261204T213415Z-audit-bf16-8K-causal-b1h16d128-triton/ncu/A0-sass.csv.gz")))
    consumer = sites[sites.serves == K]
    per_block = consumer[consumer.executed == 4096]
    assert sorted(zip(per_block.barrier, per_block.at_branch)) == [
        ("0x30160", 91), ("0x30168", 66), ("0x30170", 43), ("0x30170", 100)]
    assert sorted(consumer[consumer.executed == consumer.executed.max()].at_branch) == [275, 314]


def test_fp8_waits_are_read_at_the_qgmma():
    """FP8 causal 8K under the FP8 default on an H100 (20261205T122700Z): FP8's warpgroup MMA is QGMMA, and the key
    loop's two consumer waits (once per key tile and warp, 249,984 times) are K's and V's. Read at HGMMA alone they
    were 'other' and the audit's K / V column said 0 / 0. noexp, whose loop is shortest, waits longest for K."""
    audit = ROOT / "sessions/20261205T122700Z-audit-fp8-8K-causal-b1h16d128-triton/ncu"
    at_k = {}
    for variant in ("A0", "noexp", "h15-folded"):
        sites = barrier_waits.wait_sites(source_stalls.read(str(audit / f"{variant}-sass.csv.gz")))
        loop = sites[sites.executed == 249_984]
        assert sorted(loop.serves) == sorted([K, V]), variant
        at_k[variant] = int(loop[loop.serves == K].at_branch.iloc[0])
    assert at_k == {"A0": 316, "noexp": 1341, "h15-folded": 745}
