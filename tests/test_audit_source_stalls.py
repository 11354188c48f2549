"""softbench.audit.source_stalls on the per-instruction stall samples recorded on the H200 (sessions/stalls-h200-*);
the audit's --source-stalls around it is in test_audit.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from softbench.audit import source_stalls as stall_samples

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "sessions" / "stalls-h200-20261202-0716"


def test_gluon_loop_issues_a_tiles_exponentials_back_to_back_where_fa3_spreads_them():
    gluon = stall_samples.read(str(RECORDED / "gluon-a0-fp8-sass.csv.gz"))
    fa3 = stall_samples.read(str(RECORDED / "fa3-fp8-sass.csv.gz"))
    # the key loop's unmasked path: 63 MUFU.EX2 in a row (the 64th sits a few instructions before them), run by
    # every warp-tile of the launch
    loop_runs = [r for r in stall_samples.mufu_runs(gluon) if r[2] > 100_000]
    assert [n for _, n, _, _ in loop_runs] == [63], loop_runs
    assert stall_samples.mufu_runs(fa3) == []
    # both kernels issue the same exponentials (one per score, and two per row and tile for the rescale)
    ex2 = [int(df.loc[df["opcode"].str.startswith("MUFU.EX2"), stall_samples.EXECUTED].sum()) for df in (gluon, fa3)]
    assert abs(ex2[0] - ex2[1]) < 0.01 * ex2[1], ex2


def test_parked_warps_are_counted_apart():
    """Triton pads the Gluon kernel's one-warp producer to a warpgroup: three warps wait at a barrier for the whole
    launch, a third of its samples; FA3 has none such."""
    gluon = stall_samples.read(str(RECORDED / "gluon-a0-fp8-sass.csv.gz"))
    fa3 = stall_samples.read(str(RECORDED / "fa3-fp8-sass.csv.gz"))
    share = gluon.loc[stall_samples.parked(gluon), stall_samples.SAMPLES].sum() / gluon[stall_samples.SAMPLES].sum()
    assert 0.3 < share < 0.45, share
    assert not stall_samples.parked(fa3).any()
    working = stall_samples.by_reason(gluon)
    # the exported reasons cover nearly all samples (ncu leaves a few percent unattributed)
    assert working.index[0] == "stall_wait" and 95 < working.sum() <= 100.0001, working
    # the three NOPs whose samples are all barrier stalls (264, 8,890 and 4,420); a NOP with 3 of its 5 samples at
    # a barrier is a working warp's
    summary = stall_samples.summarize(gluon)
    assert summary["parked_samples"] == 264 + 8890 + 4420
    ops = stall_samples.by_opcode(gluon)
    # the parked warps are left out of the opcodes too: the working warps' NOPs are not among the 12 with most samples
    assert ops.index[0] == "MUFU" and "NOP" not in ops.index
    # reasons no working warp stalled for (membar, tex, ...) are left out of the shares
    assert "membar" not in summary["reasons_pct"] and min(summary["reasons_pct"].values()) > 0
    # and the printed line leaves out those under half a percent (branch_resolving 0.39, imc 0.05, drain 0.03)
    line = next(ln for ln in stall_samples.render("gluon", gluon).splitlines() if ln.startswith("Stall reasons"))
    assert line.endswith(", math 0.8")


def test_a_nop_is_parked_from_nine_tenths_of_its_samples_at_a_barrier(tmp_path):
    page = tmp_path / "page.csv"
    page.write_text('"Kernel Name","k",\n"Address","Source","Warp Stall Sampling (All Samples)","Instructions '
                    'Executed","stall_barrier"\n"0x0","  NOP","10","4","9"\n"0x10","  NOP","10","4","8"\n'
                    '"0x20","  NOP","0","4","0"\n')
    assert list(stall_samples.parked(stall_samples.read(str(page)))) == [True, False, False]


def test_runs_of_mufu_ex2_as_long_as_the_least_asked_for_are_listed():
    gluon = stall_samples.read(str(RECORDED / "gluon-a0-fp8-sass.csv.gz"))
    runs = stall_samples.mufu_runs(gluon, least=63)
    assert [n for _, n, _, _ in runs] == [65, 66, 63, 63]
    # the key loop's run: row 1971, 63 MUFU.EX2 each run 249,984 times; its samples are those of all 63
    row, n, executions, samples = runs[-1]
    assert (row, executions) == (1971, 249_984)
    per_row = gluon[stall_samples.SAMPLES]
    assert samples == int(per_row.iloc[row:row + n].sum()) > per_row.iloc[row]
    # each opcode's three main reasons, largest first
    assert stall_samples.by_opcode(gluon).loc["MUFU", "main reasons"] == "wait 4220, not_selected 582, mio 531"


def test_cli_prints_markdown_and_refuses_no_arguments():
    run = [sys.executable, "-m", "softbench.audit.source_stalls"]
    r = subprocess.run(run + [str(RECORDED / "fa3-bf16-sass.csv.gz")], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "| opcode | samples | executed | main reasons |" in r.stdout and "HGMMA" in r.stdout
    r = subprocess.run(run, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2
    # a file that is not such a page: one sentence, exit 2
    r = subprocess.run(run + [str(RECORDED / "README.md")], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and r.stderr.startswith("error:") and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("name", ["gluon-a0-bf16", "fa3-bf16", "gluon-a0-fp8", "fa3-fp8"])
def test_every_recorded_page_reads(name):
    df = stall_samples.read(str(RECORDED / f"{name}-sass.csv.gz"))
    assert len(df) > 1000 and df[stall_samples.SAMPLES].sum() > 10_000
    assert {"MUFU", "FMNMX", "BRA"} <= set(df["base"])
    assert not df["opcode"].str.startswith("@").any()  # predicates dropped, @!P0 and @UP1 alike


def test_a_page_without_the_columns_the_summary_reads_is_refused_in_one_sentence(tmp_path):
    """An exported page that lacks a column the summary needs (here the barrier stalls, which set the parked warps
    apart) is refused by name, not left to fail inside the summary."""
    page = tmp_path / "page.csv"
    page.write_text('"Kernel Name","k",\n"Address","Source","Warp Stall Sampling (All Samples)","Instructions '
                    'Executed"\n"0x0","  NOP","3","4"\n')
    with pytest.raises(ValueError, match="no column 'stall_barrier'"):
        stall_samples.read(str(page))


AUDITED = ROOT / "sessions" / "20261204T144139Z-audit-bf16-8K-causal-b1h16d128-triton" / "ncu" / "A0-sass.csv.gz"


def _stalls_cli(*args):
    return subprocess.run([sys.executable, "-m", "softbench.audit.source_stalls", *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


def _one_line_error(r):
    assert r.returncode == 2 and r.stderr.startswith("error:") and r.stderr.count("\n") == 1, r.stderr
    assert "Traceback" not in r.stderr


def test_a_truncated_gzipped_page_is_refused_in_one_line(tmp_path):
    page = tmp_path / "A0-sass.csv.gz"
    page.write_bytes(AUDITED.read_bytes()[:20000])  # a copy cut short: gzip raises EOFError, not OSError
    with pytest.raises(ValueError, match="cut short or damaged"):
        stall_samples.read(str(page))
    r = _stalls_cli(page)
    _one_line_error(r)
    assert "cut short" in r.stderr


@pytest.mark.parametrize("zeroed", [False, True])
def test_a_page_without_samples_says_so(tmp_path, zeroed):
    """A header-only page, or one whose counts are all 0: no percentages (no division by zero), one line."""
    import gzip

    lines = gzip.open(AUDITED, "rt").read().splitlines()
    page = tmp_path / "page.csv"
    if zeroed:
        df = stall_samples.read(str(AUDITED))
        df = df.drop(columns=["opcode", "base"])
        counts = [c for c in df.columns if c == stall_samples.SAMPLES or c.startswith("stall_")]
        df[counts] = 0
        page.write_text(lines[0] + "\n" + df.to_csv(index=False))
    else:
        page.write_text("\n".join(lines[:2]) + "\n")
    df = stall_samples.read(str(page))
    s = stall_samples.summarize(df)  # what the audit records beside the page must not fail either
    assert s["samples"] == 0 and s["reasons_pct"] == {}
    r = _stalls_cli(page)
    _one_line_error(r)
    assert "no warp-stall samples" in r.stderr
