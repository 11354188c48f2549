"""The report's latency table, its speed-up against sequence length and its A/A nulls, on real inputs: the H200
sessions in the project's sessions/ (read in place, never modified) and a simulation run interrupted during its
warm-up."""
from __future__ import annotations

import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from softbench.cli import main
from softbench.predictions.sessions import load_session, load_sessions
from softbench.report import figures
from softbench.report.nulls import null_rows, null_summary, null_table_rows
from softbench.report.reestimate import MIN_ESTIMATES_FOR_WORKERS, ReferenceEstimates, against_reference
from softbench.report.tables import latency_table
from conftest import interrupt_when
from tests.test_report import make_session

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = ROOT / "sessions"
# one comparison (FP8 causal 8K, A0 against h15-folded, both timed with ref-fa3 and an A/A null) in each protocol
SUSTAINED = SESSIONS / "20261205T143052Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-folded-sustained"
INTERLEAVED = SESSIONS / "20261205T193812Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-folded-interleaved"
ROUNDS = SESSIONS / "20261130T114414Z-latency-bf16-4K-causal-b1h16d128-fa4-A0-vs-A1"  # the paper's rounds
ROUNDS_AA = SESSIONS / "20261130T114548Z-latency-bf16-8K-causal-b1h16d128-fa4-A0-vs-A0"  # --variant A0
NO_NULL = SESSIONS / "20261201T092549Z-latency-fp8-16K-causal-b1h16d128-triton-A0-vs-A1-interleaved"  # --no-null
# sweep variants: A0 against h15-folded, h15-1of2 and h15-1of4 interleaved in one run (one round)
SWEEP = SESSIONS / "20261201T145451Z-latency-bf16-8K-causal-b1h16d128-triton-A0-vs-h15-folded-2-interleaved"
COLUMNS = ["session", "backend", "dtype", "seq", "mask", "comparison", "quantity", "speed-up % [95% interval]",
           "A/A null % [95% interval]", "variant vs reference % [95% interval]", "per-round sd pp", "per-round %",
           "median ms"]


def _cells(table) -> dict[str, dict[str, str]]:
    """The table's rows by session, each a mapping from column to cell."""
    return {row[0]: dict(zip(table.columns, row)) for row in table.rows}


def _pct(est: dict) -> str:
    lo, hi = est["ci95_pct"]
    return f"{est['estimate_pct']:+.2f} [{lo:+.2f}, {hi:+.2f}]"


def _edited_copy(session: Path, folder: Path, edit) -> Path:
    """A copy of a committed session in `folder`, its summary.json changed in place by `edit(summary)`."""
    copy = folder / session.name
    shutil.copytree(session, copy)
    summary = json.loads((copy / "summary.json").read_text())
    edit(summary)
    (copy / "summary.json").write_text(json.dumps(summary))
    return copy


# --- 1: a run stopped in its warm-up records its medians as None -----------------------------------------------

WARMUP_ONLY = ("protocol:\n  kind: interleaved\n  calls: 5\n  budget_s: 20\n  warmup_min_s: 120\n"
               "  warmup_max_s: 120\n")  # a warm-up far longer than the test waits: the Ctrl-C lands inside it


@pytest.mark.slow
def test_report_of_a_run_interrupted_during_its_warm_up(tmp_path, recwarn):
    proto = tmp_path / "warmup.yaml"
    proto.write_text(WARMUP_ONLY)
    out = tmp_path / "sessions"
    args = [sys.executable, "-m", "softbench", "latency", "--backend", "sim", "--seq", "128", "--heads", "2",
            "--protocol", str(proto), "--out", str(out)]
    def two_warmup_windows():
        found = list(out.glob("*/windows.jsonl"))
        return bool(found) and found[0].read_text().count('"warmup"') >= 2

    code, err = interrupt_when(args, ROOT, two_warmup_windows, "the run wrote no warm-up windows")
    assert code == 130, err
    (session,) = out.iterdir()
    summary = json.loads((session / "summary.json").read_text())
    assert summary["complete"] is False and set(summary["median_ms"].values()) == {None}

    report = tmp_path / "report"
    assert main(["report", str(session), "--out", str(report)]) == 0  # was 70: None formatted with .4f
    (row,) = _cells(latency_table(load_sessions([session]))).values()
    assert row["session"].endswith("(partial)")
    assert row["median ms"] == "A0 -, A0' -, A1 -" and row["speed-up % [95% interval]"] == "-"
    assert row["A/A null % [95% interval]"] == "not measured (no pairs recorded)"
    assert "A0 -, A0' -, A1 -" in (report / "report.md").read_text()
    # its timeline has no pair to draw: said on the figure, not warned about on the terminal
    assert not [w for w in recwarn if "legend" in str(w.message)]


def test_a_latency_session_without_medians_is_tabled_not_fatal(tmp_path):
    # the files such a run leaves, as the interleaved protocol writes them before any pair
    shape = {"dtype": "bf16", "seq": 128, "causal": True, "batch": 1, "heads": 2, "kv_heads": 2, "head_dim": 128}
    kernels = {"A0": {"role": "baseline"}, "A0'": {"role": "null"}, "A1": {"role": "variant"}}
    session = make_session(tmp_path / "s", "20261206T000000Z-latency-partial", "latency", {
        "backend": "sim", "baseline": "A0", "variant": "A1", "shape": shape, "protocol_kind": "interleaved",
        "quantity": "at equal clock", "null": "A0'", "references": [], "kernels": kernels,
        "comparisons": {"A0'": {"role": "null", "paired": None}, "A1": {"role": "variant", "paired": None}},
        "median_ms": {"A0": None, "A0'": None, "A1": None}, "speedup_pct": None, "speedup_ci95_pct": None},
        complete=False)
    (row,) = _cells(latency_table(load_sessions([session]))).values()
    assert row["median ms"] == "A0 -, A0' -, A1 -"
    assert main(["report", str(session), "--out", str(tmp_path / "report")]) == 0


# --- 2: the speed-up against sequence length draws one line per quantity ----------------------------------------

def _drawn(monkeypatch, recs, tmp_path):
    """The figure plot_speedup_vs_seq draws: its axis, as it would be saved."""
    saved = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, path: saved.append(fig) or path)
    assert figures.plot_speedup_vs_seq(recs, tmp_path / "f.png") is not None
    (fig,) = saved
    (ax,) = fig.axes
    return ax


def test_speedup_vs_seq_draws_each_quantity_as_its_own_line(monkeypatch, tmp_path):
    recs = load_sessions([SUSTAINED, INTERLEAVED])
    ax = _drawn(monkeypatch, recs, tmp_path)
    _, labels = ax.get_legend_handles_labels()
    assert sorted(labels) == ["triton fp8 causal A0 vs h15-folded, at equal clock (interleaved)",
                              "triton fp8 causal A0 vs h15-folded, sustained (at the power cap)"]
    # what is drawn is each session's paired estimate, and the axis says so
    assert ax.get_ylabel() == "speed-up % (paired estimate)"
    lines = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()
             if not line.get_label().startswith("_")}
    for rec, quantity in ((SUSTAINED, "sustained"), (INTERLEAVED, "at equal clock")):
        paired = json.loads((rec / "summary.json").read_text())["comparisons"]["h15-folded"]["paired"]
        (ys,) = [y for label, y in lines.items() if f", {quantity} (" in label]
        assert ys == [paired["estimate_pct"]]


def test_speedup_vs_seq_names_the_paper_rounds_and_their_pooled_medians(monkeypatch, tmp_path):
    ax = _drawn(monkeypatch, load_sessions([ROUNDS]), tmp_path)
    assert ax.get_legend_handles_labels()[1] == ["fa4 bf16 causal A0 vs A1, paper rounds (clock effects mixed)"]
    assert ax.get_ylabel() == "speed-up % (pooled medians)"
    ax = _drawn(monkeypatch, load_sessions([ROUNDS, INTERLEAVED]), tmp_path)
    assert ax.get_ylabel() == "speed-up % (paired estimate; paper rounds: pooled medians)"


# --- 3: the latency table names its quantity, and carries the interval, the null and FA3 ------------------------

def test_latency_table_names_the_quantity_with_its_interval_null_and_fa3():
    recs = load_sessions([SUSTAINED, INTERLEAVED, NO_NULL, ROUNDS, ROUNDS_AA])
    table = latency_table(recs)
    assert table.columns == COLUMNS
    rows = _cells(table)
    for path, quantity in ((SUSTAINED, "sustained (at the power cap)"), (INTERLEAVED, "at equal clock (interleaved)")):
        row, summary = rows[path.name], json.loads((path / "summary.json").read_text())
        comps = summary["comparisons"]
        assert row["quantity"] == quantity
        assert row["speed-up % [95% interval]"] == _pct(comps["h15-folded"]["paired"])
        assert row["A/A null % [95% interval]"] == _pct(comps["A0'"]["paired"])
        # the variant against FA3, per pair, as docs/leases.md's rows give it (tools/analysis/lease_rows.py)
        estimates, why = against_reference(load_session(path), "ref-fa3")
        assert why is None
        assert row["variant vs reference % [95% interval]"] == "FA3: " + _pct(estimates["h15-folded"])
    assert rows[SUSTAINED.name]["variant vs reference % [95% interval]"] == "FA3: +8.83 [+8.34, +9.31]"
    # --no-null: the null is said to be missing, not left blank; FA3 is still beside the speed-up
    no_null = rows[NO_NULL.name]
    assert no_null["A/A null % [95% interval]"] == "not measured"
    assert no_null["variant vs reference % [95% interval]"].startswith("FA3: ")
    # the paper rounds: their quantity, their pooled medians and window bootstrap named; no FA3, no null
    rounds, summary = rows[ROUNDS.name], json.loads((ROUNDS / "summary.json").read_text())
    assert rounds["quantity"] == "paper rounds (clock effects mixed)"
    lo, hi = summary["bootstrap_ci95_pct"]
    assert rounds["speed-up % [95% interval]"] == (f"{summary['speedup_pct']:+.2f} [{lo:+.2f}, {hi:+.2f}] "
                                                   "(pooled medians, window bootstrap)")
    assert rounds["A/A null % [95% interval]"] == "not measured"
    assert rounds["variant vs reference % [95% interval]"] == "not timed"
    assert rows[ROUNDS_AA.name]["A/A null % [95% interval]"] == ("not measured (the run itself is A/A: its "
                                                                 "speed-up is the null)")



def test_a_speedup_over_a_baseline_that_is_not_exact_attention_says_so_in_its_cell():
    """The -lm run of 2026-12-02 (A0's row sums on the tensor core over the whole row, which loses precision at
    FP8): its A0's error against FP32 is 2.06 times FA3's, so its speed-ups are not over exact attention. The
    table keeps the row and says so beside the number; a run over exact attention carries no such words."""
    over_row = SESSIONS / "20261202T132424Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-folded-interleaved"
    rows = _cells(latency_table(load_sessions([over_row, INTERLEAVED])))
    summary = json.loads((over_row / "summary.json").read_text())
    assert rows[over_row.name]["speed-up % [95% interval]"] == (
        f"{summary['speedup_pct']:+.2f} [{summary['speedup_ci95_pct'][0]:+.2f}, {summary['speedup_ci95_pct'][1]:+.2f}]"
        "; WARNING: not over exact attention (A0: 2.06x ref-fa3's error against FP32)")
    assert "WARNING" not in rows[INTERLEAVED.name]["speed-up % [95% interval]"]


def test_one_round_has_no_spread_between_rounds():
    """A paper-round session of one round records a per-round sd of 0.0: no spread was measured, so the cell is
    empty rather than zero; three rounds keep theirs."""
    one = SESSIONS / "20261130T122217Z-latency-bf16-8K-causal-b1h16d128-fa4-A0-vs-A0"
    rows = _cells(latency_table(load_sessions([one, ROUNDS])))
    assert json.loads((one / "summary.json").read_text())["per_round_sd_pp"] == 0.0
    assert rows[one.name]["per-round sd pp"] == "-"
    assert rows[ROUNDS.name]["per-round sd pp"] == "6.20"



def test_a_round_without_an_estimate_is_left_out_of_the_rounds_and_their_spread(tmp_path):
    """A copy of a paired run of three rounds whose second round could not be estimated (NaN, as too few pairs
    leave it; None): the row lists the other two and their spread, where the sd once raised out of the report."""
    rounds = json.loads((NO_NULL / "summary.json").read_text())["comparisons"]["A1"]["per_round"]
    kept = [rounds[0]["estimate_pct"], rounds[2]["estimate_pct"]]
    for missing in (float("nan"), None):
        def drop_second(summary, missing=missing):
            summary["comparisons"]["A1"]["per_round"][1]["estimate_pct"] = missing
        copy = _edited_copy(NO_NULL, tmp_path / f"{missing}", drop_second)
        row = _cells(latency_table(load_sessions([copy])))[copy.name]
        assert row["per-round %"] == ", ".join(f"{x:+.2f}" for x in kept)
        assert row["per-round sd pp"] == f"{abs(kept[0] - kept[1]) / 2:.2f}"


def test_every_variant_of_a_sweep_run_and_every_round_is_in_its_row():
    """sweep variants interleaves several variants in one run: the row names them all, with each one's speed-up
    over A0 and against FA3; a paired run of three rounds lists each round's estimate."""
    rows = _cells(latency_table(load_sessions([SWEEP, NO_NULL])))
    row, comps = rows[SWEEP.name], json.loads((SWEEP / "summary.json").read_text())["comparisons"]
    assert row["comparison"] == "A0 vs h15-folded, h15-1of2, h15-1of4"
    assert row["speed-up % [95% interval]"] == "; ".join(
        f"{v} {_pct(comps[v]['paired'])}" for v in ("h15-folded", "h15-1of2", "h15-1of4"))
    estimates, _ = against_reference(load_session(SWEEP), "ref-fa3")
    assert row["variant vs reference % [95% interval]"] == "FA3: " + ", ".join(
        f"{v} {_pct(estimates[v])}" for v in ("h15-folded", "h15-1of2", "h15-1of4"))
    rounds = json.loads((NO_NULL / "summary.json").read_text())["comparisons"]["A1"]["per_round"]
    assert len(rounds) == 3
    assert rows[NO_NULL.name]["per-round %"] == ", ".join(f"{r['estimate_pct']:+.2f}" for r in rounds)
    # and the spread between them, as the paper rounds record theirs (population sd)
    import statistics
    assert rows[NO_NULL.name]["per-round sd pp"] == f"{statistics.pstdev([r['estimate_pct'] for r in rounds]):.2f}"
    # a sweep run whose summary heads with another variant than --variants named first: each value under its own
    # name (the comparison once read protocol.yaml's first name and the cell the summary's)
    other = SESSIONS / "20261202T053447Z-latency-bf16-8K-causal-b1h16d128-triton-A0-vs-h15-sat-1-interleaved"
    summary = json.loads((other / "summary.json").read_text())
    row = _cells(latency_table(load_sessions([other])))[other.name]
    assert summary["variant"] == "h15-folded" and row["comparison"] == "A0 vs h15-folded, h15-sat"
    assert row["speed-up % [95% interval]"].startswith(f"h15-folded {_pct(summary['comparisons']['h15-folded']['paired'])}; h15-sat ")


def test_a_further_variant_without_an_estimate_is_listed_as_not_measured(tmp_path):
    """A sweep run's further variant whose paired estimate is None (a run stopped before its first pair): its cell
    says so rather than printing an empty interval as if it were a value."""
    def unmeasured(summary):
        summary["comparisons"]["h15-1of2"]["paired"]["estimate_pct"] = None
    copy = _edited_copy(SWEEP, tmp_path, unmeasured)
    row = _cells(latency_table(load_sessions([copy])))[copy.name]
    assert "; h15-1of2 not measured (no pairs); h15-1of4 " in row["speed-up % [95% interval]"]


def test_a_sweep_run_whose_rounds_have_no_estimate_shows_no_round_under_a_name(tmp_path):
    assert _cells(latency_table(load_sessions([SWEEP])))[SWEEP.name]["per-round %"].startswith("h15-folded: +")

    def no_round_estimates(summary):
        for r in summary["comparisons"]["h15-folded"]["per_round"]:
            r["estimate_pct"] = None
    copy = _edited_copy(SWEEP, tmp_path, no_round_estimates)
    assert _cells(latency_table(load_sessions([copy])))[copy.name]["per-round %"] == "-"


def test_the_speedup_figures_name_the_variant_whose_speedup_they_draw():
    """The figures draw summary.json's speedup_pct, which is the speed-up of the summary's first variant: their
    comparison (a bar panel's title, a line's legend) names that variant, not protocol.yaml's first --variants name
    (once h15-sat's +9.99 was drawn as "A0 vs h15-folded", whose own is +10.95)."""
    from softbench.report.records import lat_group

    for name in ("20261202T034758Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-folded-1-interleaved",
                 "20261202T053447Z-latency-bf16-8K-causal-b1h16d128-triton-A0-vs-h15-sat-1-interleaved"):
        rec = load_session(SESSIONS / name)
        drawn = rec.summary["variant"]
        assert rec.summary["speedup_pct"] == rec.summary["comparisons"][drawn]["paired"]["estimate_pct"]
        assert drawn != rec.facts["variant"]  # the case the figures once mislabelled
        assert lat_group(rec)[-1] == f"A0 vs {drawn}"


def test_report_md_carries_the_new_columns(tmp_path):
    rep = main(["report", str(SUSTAINED), str(NO_NULL), "--out", str(tmp_path / "r")])
    assert rep == 0
    md = (tmp_path / "r" / "report.md").read_text()
    assert "| " + " | ".join(COLUMNS) + " |" in md
    assert ("| sustained (at the power cap) | +5.71 [+5.29, +6.12] | -0.18 [-1.12, +0.76] | "
            "FA3: +8.83 [+8.34, +9.31] |") in md


# --- 3: a session without a null is listed among the nulls, as not measured --------------------------------------

def test_sessions_without_a_null_are_listed_as_not_measured():
    recs = load_sessions([INTERLEAVED, NO_NULL, ROUNDS, ROUNDS_AA])
    rows = {r.session: r for r in null_rows(recs)}
    assert set(rows) == {INTERLEAVED.name, NO_NULL.name, ROUNDS.name, ROUNDS_AA.name}
    measured = rows[INTERLEAVED.name]
    paired = json.loads((INTERLEAVED / "summary.json").read_text())["comparisons"]["A0'"]["paired"]
    assert measured.estimate_pct == paired["estimate_pct"]
    for name in (NO_NULL.name, ROUNDS.name, ROUNDS_AA.name):
        assert rows[name].estimate_pct is None and rows[name].covers_zero is None
    table = {row[0]: row for row in null_table_rows(list(rows.values()))}
    assert table[NO_NULL.name][1:] == ["interleaved", "fp8", "3", "-", "-", "not measured", "-", "-"]
    assert table[ROUNDS.name][1] == "paper rounds" and table[ROUNDS.name][6] == "not measured"
    assert table[ROUNDS_AA.name][6] == "not measured (the run itself is A/A: its speed-up is the null)"
    lines = null_summary(list(rows.values()))
    # the groups count the measured null only; the others are counted apart
    assert any(line.startswith("- interleaved, four or more kernels, null started first: 1 null(s)") for line in lines)
    assert "- 3 session(s) without an A/A null estimate: listed as not measured" in lines


def test_a_damaged_windows_file_is_a_note_and_a_failed_report_leaves_no_folder(tmp_path, monkeypatch):
    """A copy whose windows.jsonl has a line that is no object, and one whose stamps mix a zone and none: the first
    is not drawn, with the file and line named; the second is drawn against the window index. A report that fails
    half way leaves no figures without a report.md: it is drawn beside --out and moved in once complete."""
    bad = tmp_path / "in" / "bad" / INTERLEAVED.name
    mixed = tmp_path / "in" / "mixed" / INTERLEAVED.name
    for copy in (bad, mixed):
        shutil.copytree(INTERLEAVED, copy)
    lines = (bad / "windows.jsonl").read_text().splitlines()
    (bad / "windows.jsonl").write_text("\n".join([lines[0], "5", *lines[2:]]) + "\n")
    lines = (mixed / "windows.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["utc"] = first["utc"].split("+")[0]
    (mixed / "windows.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    out = tmp_path / "out"
    assert main(["report", str(bad.parent), "--out", str(out / "bad")]) == 0
    assert "line 2 is a JSON number, not an object" in (out / "bad" / "report.md").read_text()
    assert main(["report", str(mixed.parent), "--out", str(out / "mixed")]) == 0
    assert (out / "mixed" / f"latency-windows-{INTERLEAVED.name}.png").is_file()

    def broken(*args, **kwargs):
        raise RuntimeError("a bug half way through the report")

    monkeypatch.setattr("softbench.report.build.null_rows", broken)
    with pytest.raises(RuntimeError):
        from softbench.report.build import build_report
        build_report([mixed.parent], out / "failed")
    assert not (out / "failed").exists() and sorted(p.name for p in out.iterdir()) == ["bad", "mixed"]


# --- the estimates against FA3 worked out ahead, in worker processes --------------------------------------------

def test_estimates_worked_out_in_workers_are_the_ones_asking_gives(monkeypatch):
    from softbench.report import reestimate

    names = sorted(p.name for p in SESSIONS.glob("*-latency-*-interleaved"))[-(MIN_ESTIMATES_FOR_WORKERS + 4):]
    recs = [load_session(SESSIONS / n) for n in names]
    assert all(r.summary.get("references") for r in recs)
    asked = {r.name: against_reference(r, "ref-fa3") for r in recs}
    assert sum(1 for est, why in asked.values() if est and why is None) >= MIN_ESTIMATES_FOR_WORKERS
    ahead = ReferenceEstimates()
    ahead.prefetch(recs, jobs=2)
    monkeypatch.setattr(reestimate, "against_reference", lambda *_: pytest.fail("asked again after the prefetch"))
    assert {r.name: ahead(r, "ref-fa3") for r in recs} == asked


def test_a_session_whose_estimate_fails_ahead_is_asked_again_and_fails_as_before(monkeypatch):
    from softbench.report import reestimate

    rec = load_session(INTERLEAVED)
    broken = replace(rec, summary={**rec.summary, "comparisons": ["not", "a", "mapping"]})
    with pytest.raises(AttributeError):
        against_reference(broken, "ref-fa3")
    ahead = ReferenceEstimates()
    ahead.prefetch([broken, rec], jobs=1)
    asked_again = []
    monkeypatch.setattr(reestimate, "against_reference", lambda r, ref: asked_again.append(r.name) or ({}, "again"))
    assert ahead(rec, "ref-fa3") != ({}, "again")  # the readable one was kept from the prefetch
    assert ahead(broken, "ref-fa3") == ({}, "again") and asked_again == [broken.name]
