"""Reports: PNGs and report.md for synthetic latency, energy and fidelity sessions and for the recorded
sessions copied to tests/data/sessions (read, never modified)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest
from PIL import Image

from softbench.cli import main
from softbench.report.build import build_report
from tests.repo_tools import copy_sessions, write_session

REAL_SESSIONS = Path(__file__).resolve().parent / "data" / "sessions"  # copies of recorded sessions (small files)


def make_session(root: Path, name: str, command: str, summary: dict | None, complete: bool = True,
                 protocol: dict | None = None, records: dict[str, list[dict]] | None = None) -> Path:
    return write_session(root, name, {"command": command, "complete": complete},
                         None if summary is None else {"command": command, "complete": complete, **summary},
                         protocol, records=records)


def latency_session(root: Path, dtype: str, seq: int, causal: bool, speedup: float, complete: bool = True) -> Path:
    shape = {"dtype": dtype, "seq": seq, "causal": causal, "batch": 1, "heads": 16, "kv_heads": 16, "head_dim": 128}
    windows = []
    for r in range(3):
        for label, ms in (("A0", 1.0), ("A1", 1.0 / (1 + speedup / 100))):
            for w in range(4):
                windows.append({"round": r, "label": label, "ms_per_call": ms * (1 + 0.01 * w),
                                "gpu_sm_clock_mhz": 1700 + 10 * w,
                                "utc": f"2026-01-01T00:00:{10 * r + 5 * (label == 'A1') + w:02d}.000+00:00"})
    mask = "causal" if causal else "noncausal"
    return make_session(
        root, f"2026T-latency-{dtype}-{seq}-{mask}", "latency",
        {"backend": "sim", "baseline": "A0", "variant": "A1", "shape": shape, "speedup_pct": speedup,
         "per_round_speedup_pct": [speedup - 1, speedup, speedup + 1], "per_round_sd_pp": math.sqrt(2 / 3),
         "median_ms": {"A0": 1.0, "A1": 1.0 / (1 + speedup / 100)}},
        complete=complete, protocol={"baseline": "A0", "variant": "A1", "backend": "sim", "shape": shape},
        records={"windows.jsonl": windows})


def assert_png(path: Path) -> None:
    assert path.exists() and path.stat().st_size > 2000, path
    with Image.open(path) as im:
        assert im.format == "PNG" and im.size[0] > 100 and im.size[1] > 100


def test_latency_report(tmp_path):
    src = tmp_path / "sessions"
    for dtype in ("bf16", "fp8"):
        for causal in (True, False):
            for seq in (4096, 8192):
                latency_session(src, dtype, seq, causal, speedup=seq / 1024 + (5 if dtype == "fp8" else 0))
    latency_session(src, "bf16", 16384, True, 7.0, complete=False)
    out = tmp_path / "report"
    rep = build_report([src], out)
    names = {p.name for p in rep.figures}
    assert {"latency-speedup-vs-seq.png", "latency-speedup-bars.png"} <= names
    assert sum(n.startswith("latency-windows-") for n in names) == 9
    for p in rep.figures:
        assert_png(p)
    md = rep.markdown_path.read_text()
    assert "(partial)" in md and "2026T-latency-fp8-8192-noncausal" in md and "+13.00" in md
    # a folder's name carries the mask as one hyphen-free word; a table names it in words
    (table,) = [t for t in rep.tables if t.title == "latency sessions"]
    masks = {r[0]: r[table.columns.index("mask")] for r in table.rows}
    assert masks["2026T-latency-fp8-8192-noncausal"] == "non-causal"
    assert masks["2026T-latency-fp8-8192-causal"] == "causal"
    assert not list(out.glob(".*tmp")), "temporary files left behind"


def test_energy_and_fidelity_reports(tmp_path):
    src = tmp_path / "sessions"
    # the energy engine's layout: samples per loop (time from the loop's start; idle samples before it) and
    # per-loop records in summary.json with the energy per forward by method
    order = ["A0", "A1", "A1", "A0"]
    samples = [{"loop": i, "variant": v, "phase": "loop", "time_s": 0.1 * t, "power_w": 300 + 50 * (v == "A1") + t,
                "sm_clock_mhz": 1800 - t} for i, v in enumerate(order) for t in range(20)]
    samples += [{"loop": i, "variant": v, "phase": "idle", "time_s": -30.0, "power_w": 80.0} for i, v in enumerate(order)]
    loops = [{"loop": i, "variant": v, "forwards": 1000, "mean_power_w": 310.0 + i, "time_per_forward_ms": 0.5,
              "energy_per_forward_mj": {"sampled": 155.0 + i, "counter": 154.0 + i}} for i, v in enumerate(order)]
    make_session(src, "e1-energy", "energy", {"loops": loops, "variants": {}}, records={"samples.jsonl": samples})
    make_session(src, "f1-fidelity", "fidelity", {"conditions": [
        {"name": "rowmax-h15", "dnll": 0.002, "ci_low": 0.001, "ci_high": 0.003},
        {"name": "a0-vs-a0", "dnll": 0.0, "ci_low": -0.0005, "ci_high": 0.0004},
    ], "baseline": {"name": "kernel:stock"}, "dtype": "fp8"}, complete=False)
    make_session(src, "g1-gates", "gates", {"passed": True})
    rep = build_report([src], tmp_path / "out")
    names = sorted(p.name for p in rep.figures)
    assert names == ["energy-power-e1-energy.png", "fidelity-intervals-f1-fidelity.png"]
    for p in rep.figures:
        assert_png(p)
    tables = {t.title: t for t in rep.tables}
    energy_rows = tables["energy sessions"].rows
    assert [r[1] for r in energy_rows] == ["0 A0", "1 A1", "2 A1", "3 A0"]
    assert energy_rows[2][2].startswith("energy_per_forward_mj.counter 156, energy_per_forward_mj.sampled 157")
    fid = {r[1]: r for r in tables["fidelity sessions"].rows}
    assert fid["rowmax-h15"][7] == "yes" and fid["a0-vs-a0"][7] == "no"
    # each dNLL says what it is a difference from: here the kernel path's own A0, at FP8
    assert fid["rowmax-h15"][2:4] == ["kernel:stock", "fp8"]
    assert fid["rowmax-h15"][0].endswith("(partial)")
    assert [u[0] for u in rep.unknown] == ["g1-gates"]
    md = rep.markdown_path.read_text()
    assert "g1-gates" in md and "sessions not drawn" in md


def test_energy_rows_rank_their_numbers_and_fidelity_rows_say_resolved_only_off_zero(tmp_path):
    """An energy loop's numbers: energy per forward first, then power, clock and forwards, then the rest by name,
    two levels deep; a fidelity condition is resolved only when its interval excludes 0, on either side."""
    from softbench.predictions.sessions import load_session
    from softbench.report.tables import energy_table, fidelity_table

    loop = {"loop": 0, "variant": "A0", "zeta": 1.0, "forwards": 1000, "alpha": 2.0, "median_sm_clock_mhz": 1800,
            "mean_power_w": 310.0, "energy_per_forward_mj": {"sampled": 155.0}, "ramp": {"samples": 3, "w": {"x": 9.0}}}
    e = load_session(make_session(tmp_path, "e1", "energy", {"loops": [loop]}))
    empty = load_session(make_session(tmp_path, "e2", "energy", {"loops": []}))
    rows = energy_table([e, empty]).rows
    assert rows[0][1:] == ["0 A0", "energy_per_forward_mj.sampled 155, mean_power_w 310, median_sm_clock_mhz 1800, "
                                   "forwards 1000, alpha 2, loop 0, ramp.samples 3, zeta 1"]
    assert rows[1][1:] == ["-", "no per-loop entries in summary.json"]
    f = load_session(make_session(tmp_path, "f1", "fidelity", {"conditions": [
        {"name": "below", "dnll": -0.002, "ci_low": -0.003, "ci_high": -0.001},
        {"name": "touches", "dnll": 0.1, "ci_low": 0.0, "ci_high": 0.2}]}))
    fid = {r[1]: r for r in fidelity_table([f]).rows}
    assert fid["below"][7] == "yes" and fid["touches"][7] == "no"
    assert fid["touches"][6] == f"{100 * (math.exp(0.1) - 1):+.3f}" == "+10.517"


def test_the_fidelity_figure_fills_a_marker_where_the_table_calls_its_interval_resolved(monkeypatch, tmp_path):
    """The figure's axis reads 'filled: interval excludes zero': an interval wholly below zero (the variant does
    better than its baseline) is resolved as much as one wholly above, and its marker is filled as the table's
    resolved column says; one that touches or straddles zero is drawn hollow."""
    from matplotlib.colors import same_color

    from softbench.predictions.sessions import load_session
    from softbench.report import figures
    from softbench.report.tables import fidelity_table

    conditions = [{"name": "below", "dnll": -0.002, "ci_low": -0.003, "ci_high": -0.001},
                  {"name": "above", "dnll": 0.002, "ci_low": 0.001, "ci_high": 0.003},
                  {"name": "touches", "dnll": 0.1, "ci_low": 0.0, "ci_high": 0.2},
                  {"name": "straddles", "dnll": 0.0, "ci_low": -0.001, "ci_high": 0.001}]
    rec = load_session(make_session(tmp_path, "f1", "fidelity", {"conditions": conditions}))
    saved = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, path: saved.append(fig) or path)
    assert figures.plot_fidelity(rec, tmp_path / "f.png") is not None
    (fig,) = saved
    (ax,) = fig.axes
    # each condition's point marker sits at its row, the condition's place in the session's list
    points = {int(line.get_ydata()[0]): line for line in ax.get_lines() if line.get_marker() == "o"}
    resolved = {r[1]: r[7] == "yes" for r in fidelity_table([rec]).rows}
    assert resolved == {"below": True, "above": True, "touches": False, "straddles": False}
    for row, c in enumerate(conditions):
        filled = not same_color(points[row].get_markerfacecolor(), "white")
        assert filled == resolved[c["name"]], c["name"]


def test_energy_loops_are_read_from_the_first_key_that_holds_any_and_named_by_what_they_carry():
    from softbench.report.records import loop_entries, loop_name

    loops = [{"loop": 0, "variant": "A0"}, {"loop": 1, "label": "A1"}]
    # an empty mapping under an earlier key is passed over, not taken for "no loops"
    assert loop_entries({"loops": {}, "per_loop": loops}) == [("0 A0", loops[0]), ("1", loops[1])]
    assert loop_entries({"loops": [], "variants": {"A0": loops[0]}}) == [("A0", loops[0])]
    assert loop_name({"label": "A1"}, 3) == "A1" and loop_name({}, 3) == "3"
    assert loop_name({"name": "warm", "loop": 0}, 3) == "warm"  # a loop's own name before its index
    # a mapping by name keeps the order the session ran its loops in
    assert [n for n, _ in loop_entries({"loops": {"A1": {}, "A0": {}}})] == ["A1", "A0"]


def test_a_mask_recorded_as_anything_but_true_or_false_is_shown_as_unknown():
    from softbench.core.shapes import mask_words
    from softbench.report.records import mask_label

    assert mask_label(True) == mask_words(True) and mask_label(False) == mask_words(False)
    assert mask_label("false") == "?" and mask_label(None) == "?"  # a truthy string is no causal mask


def test_sessions_without_drawable_records_are_listed_not_fatal(tmp_path):
    src = tmp_path / "sessions"
    make_session(src, "e-empty", "energy", None, complete=False)
    make_session(src, "f-empty", "fidelity", {"conditions": {}})
    rep = build_report([src], tmp_path / "out")
    assert rep.figures == []
    assert {u[0] for u in rep.unknown} == {"e-empty (partial)", "f-empty"}


def test_speed_against_fidelity_says_which_kind_of_session_it_lacks(tmp_path):
    fidelity_only = make_session(tmp_path / "f", "f1", "fidelity", {"conditions": {}}).parent
    latency_only = REAL_SESSIONS / "20261130T194613Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-noexp"
    for src, missing in ((fidelity_only, "latency session with a speed-up"), (latency_only, "fidelity session")):
        rep = build_report([src], tmp_path / f"out-{missing[0]}", session_figures=False)
        why = f"speed against fidelity: not drawn: no {missing} among the paths to join with"
        assert ("speed against fidelity", [why]) in rep.sections and why in rep.notes


def test_a_fidelity_session_whose_dnll_the_table_cannot_read_is_left_out_and_the_rest_reported(tmp_path):
    src = tmp_path / "sessions"
    # a finite dNLL of 1000 nats: its perplexity change exp(1000) overflows a float
    make_session(src, "f-huge", "fidelity", {"conditions": [
        {"name": "rowmax-h15", "dnll": 1000.0, "ci_low": 999.0, "ci_high": 1001.0}]})
    make_session(src, "f-good", "fidelity", {"conditions": [
        {"name": "rowmax-h15", "dnll": 0.002, "ci_low": 0.001, "ci_high": 0.003}]})
    rep = build_report([src], tmp_path / "out", session_figures=False)
    (why,) = [why for name, why in rep.unknown if name == "f-huge"]
    assert why.startswith("a value of summary.json or protocol.yaml is of a kind the report cannot read "
                          "(OverflowError")
    (table,) = [t for t in rep.tables if t.title == "fidelity sessions"]
    assert [r[0] for r in table.rows] == ["f-good"]


def test_a_session_with_a_damaged_file_is_drawn_and_its_damage_listed(tmp_path):
    src = tmp_path / "sessions"
    folder = make_session(src, "f-damaged", "fidelity", {"conditions": {}}, protocol={"path": "sim"})
    (folder / "protocol.yaml").write_text("- a list, not a mapping\n")
    rep = build_report([src], tmp_path / "out")
    assert ("f-damaged", "protocol.yaml holds no mapping") in rep.unknown
    assert "- `f-damaged`: protocol.yaml holds no mapping" in rep.markdown_path.read_text()


def _tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def test_report_on_recorded_sessions(tmp_path, capsys):
    before = _tree_digest(REAL_SESSIONS)
    latency_dirs = sorted(p.parent.name for p in REAL_SESSIONS.glob("*/windows.jsonl"))
    out = tmp_path / "report"
    assert main(["report", str(REAL_SESSIONS), "--out", str(out)]) == 0
    pngs = sorted(out.glob("*.png"))
    for p in pngs:
        assert_png(p)
    assert {p.name for p in pngs} >= {"latency-speedup-vs-seq.png", "latency-speedup-bars.png"}
    assert len([p for p in pngs if p.name.startswith("latency-windows-")]) == len(latency_dirs)
    md = (out / "report.md").read_text()
    assert all(name in md for name in latency_dirs)
    assert _tree_digest(REAL_SESSIONS) == before, "the report must not modify the sessions"


def test_damaged_sessions_are_listed_and_the_rest_is_drawn(tmp_path):
    src = tmp_path / "sessions"
    good = latency_session(src, "bf16", 8192, True, 3.0)
    bad_windows = latency_session(src, "fp8", 8192, True, 9.0)
    lines = (bad_windows / "windows.jsonl").read_text().splitlines()
    lines[3] = "{not json"
    (bad_windows / "windows.jsonl").write_text("\n".join(lines) + "\n")
    bad_summary = make_session(src, "broken-latency", "latency", None)
    (bad_summary / "summary.json").write_text("{")
    rep = build_report([src], tmp_path / "out")
    assert (tmp_path / "out" / f"latency-windows-{good.name}.png") in rep.figures
    why: dict[str, str] = {}
    for name, reason in rep.unknown:
        why[name] = why.get(name, "") + reason + "; "
    assert "line 4" in why[bad_windows.name]
    assert "summary.json unreadable" in why["broken-latency"]


def test_a_records_file_replaced_by_a_folder_is_named_and_the_rest_is_drawn(tmp_path, capsys):
    """A folder where a session's windows.jsonl belongs once ended the whole report with the machine's error (exit
    74, "Is a directory"), as if the disk had failed."""
    src = tmp_path / "sessions"
    good = latency_session(src, "bf16", 8192, True, 3.0)
    folder = latency_session(src, "fp8", 8192, True, 9.0)
    (folder / "windows.jsonl").unlink()
    (folder / "windows.jsonl").mkdir()
    out = tmp_path / "out"
    assert main(["report", str(src), "--out", str(out)]) == 0
    assert "Is a directory" not in capsys.readouterr().err
    md = (out / "report.md").read_text()
    assert "windows.jsonl is a folder, not a JSON-lines file of records" in md
    assert (out / f"latency-windows-{good.name}.png").exists()


def _timeline_pairs(tmp_path, windows: list[tuple]) -> list[tuple[float, float]]:
    """The protocol timeline's (time, speed-up) pairs of A1 for an interleaved session of these windows, each
    (cycle, label, ms per call, t_s), measured unless a fifth item names another phase."""
    from softbench.predictions.sessions import load_session
    from softbench.report.figures import protocol_timeline

    rows = [{"round": 0, "cycle": c, "label": label, "phase": phase[0] if phase else "measure", "ms_per_call": ms,
             "t_s": t} for c, label, ms, t, *phase in windows]
    d = make_session(tmp_path, "s", "latency", {"protocol_kind": "interleaved", "baseline": "A0",
                                                  "comparisons": {"A1": {"role": "variant"}}},
                     records={"windows.jsonl": rows})
    return protocol_timeline(load_session(d))["pairs"]["A1"]


def test_the_timeline_takes_the_median_of_a_cycles_windows_as_the_summaries_do(tmp_path):
    """Two windows of a kernel in one cycle: their median is their mean (numpy's and the summaries' rule); the
    timeline once took the upper one, so its pairs differed from the session's own."""
    (t, pct), = _timeline_pairs(tmp_path, [(0, "A0", 1.0, 0.0), (0, "A0", 1.2, 0.1), (0, "A1", 1.0, 0.2)])
    assert pct == pytest.approx(10.0) and t == pytest.approx(0.1)


def test_the_timeline_pairs_measured_windows_only_and_counts_time_from_the_first_window_of_any_phase(tmp_path):
    (t, pct), = _timeline_pairs(tmp_path, [(0, "A0", 5.0, 100.0, "warmup"), (0, "A1", 5.0, 100.5, "warmup"),
                                           (0, "A0", 1.1, 110.0), (0, "A1", 1.0, 111.0)])
    # 1.1 ms against 1.0 ms: A1 10% faster; at the pair's mean time 110.5 s, 10.5 s after the first warm-up window
    assert pct == pytest.approx(10.0) and t == pytest.approx(10.5)


def test_trace_report(tmp_path):
    src = tmp_path / "sessions"
    # a variant other than the table's default names (A0, A1): the row must read the names the session recorded
    table = [{"seq": s, "causal": True, "baseline": "A0", "variant": "h15-sat", "kernel_us": {"A0": k0, "h15-sat": k1},
              "call_latency_us": {"A0": c0, "h15-sat": c1}, "kernel_only_speedup_pct": 100 * (k0 / k1 - 1),
              "call_latency_speedup_pct": 100 * (c0 / c1 - 1), "non_kernel_pct": {"A0": 100 - 100 * k0 / c0,
                                                                                 "h15-sat": 100 - 100 * k1 / c1},
              "kernel_only_speedup_timed_pct": timed}
             for s, k0, k1, c0, c1, timed in ((4096, 100.0, 90.0, 140.0, 130.0, 12.5),
                                              (8192, 400.0, 360.0, 404.0, 363.0, None))]
    make_session(src, "t-trace", "trace", {"source": "nsys", "table": table})
    make_session(src, "t-empty", "trace", {"source": "nsys", "table": []})
    rep = build_report([src], tmp_path / "out")
    (fig,) = rep.figures
    assert_png(fig)
    (tab,) = rep.tables
    assert [r[2] for r in tab.rows] == ["4K", "8K"]
    assert tab.rows[0][7] == "+11.1"  # 100 * (100 / 90 - 1)
    assert [r[8] for r in tab.rows] == ["+12.5", "-"]  # the timed calls' own speed-up, where the trace had one
    assert tab.rows[0][9] == "+7.7"  # call latency: 100 * (140 / 130 - 1)
    assert tab.rows[0][4] == "A0 vs h15-sat"  # which two kernels each row compares
    assert tab.rows[0][5:7] == ["100.0 / 90.0", "140.0 / 130.0"]  # each kernel's own durations, by its name
    assert tab.rows[0][11:] == ["- / -", "- / -"]  # a session without point records has no checks to show
    # what the two pairs of columns mean, under the table in report.md
    md = rep.markdown_path.read_text()
    table_end = md.index("| t-trace |", md.index("## trace sessions"))
    caption = md[table_end:].split("\n\n")[1]
    assert caption.startswith("A cell of two figures reads baseline / variant.") and "beyond 2% the clock moved" in caption
    assert [u[0] for u in rep.unknown] == ["t-empty"]


def test_a_trace_row_shows_each_windows_clock_and_the_kernels_beside_the_attention_kernel():
    """Read from sessions an H100 recorded on 2026-12-07: without settling, h15-folded's median moved +4.6% between
    the halves of its timed calls (A0's +0.2%); its key-norm kernel took 2.4% of its GPU time, none beside A0's
    forward. A session from before the halves check shows '-' there, and FA4's A0 and A1 run one kernel each."""
    from softbench.predictions.sessions import load_session
    from softbench.report.tables import trace_table

    committed = Path(__file__).resolve().parents[1] / "sessions"
    (row,) = trace_table([load_session(committed / "20261207T110313Z-trace-fp8-causal-8K-triton-A0-h15-folded")]).rows
    assert row[4] == "A0 vs h15-folded" and row[11:] == ["+0.2 / +4.6", "0.0 / 2.4"]
    fa4 = Path(__file__).resolve().parent / "data" / "sessions" / "20261130T121826Z-trace-bf16-causal-4K-8K-16K-fa4-A0-A1"
    rows = trace_table([load_session(fa4)]).rows
    assert [r[11:] for r in rows] == [["- / -", "0.0 / 0.0"]] * 3


def test_speedup_bars_name_each_session_and_carry_its_interval():
    """Each bar of the speed-up figure is named by its session's start, the kernel configuration the worker reported
    (the defaults resolved: a run that named none still says which it ran) and, unless at equal clock, its quantity;
    its whisker is the paired 95% interval the session recorded. Read from sessions the H200 recorded."""
    from softbench.predictions.sessions import load_session
    from softbench.report.figures import _bar_error
    from softbench.report.records import bar_label, kernel_config

    root = Path(__file__).resolve().parents[1] / "sessions"
    sustained = load_session(next(root.glob("20261202T093051Z-latency-*")))
    default = load_session(next(root.glob("20261202T094224Z-latency-*")))  # --triton-config left out
    assert bar_label(sustained) == "093051 n128s2-c240l24-hg8-g1-lt-tb sustained"
    assert bar_label(default) == "094224 n128s2-c240l24-hg8-g1-lt-tb"
    assert kernel_config(default) == "gluon-n128s2-c240l24-hg8-g1-lt-tb" and default.protocol["backend_options"] == {}
    low, high = sustained.summary["speedup_ci95_pct"]
    mid = sustained.summary["speedup_pct"]
    assert _bar_error(sustained.summary) == ([mid - low], [high - mid])
    # a session without an interval (the paper's rounds) keeps its per-round sd; one with neither has no whisker
    assert _bar_error({"speedup_pct": 5.0, "per_round_sd_pp": 0.7, "per_round_speedup_pct": [4.3, 5.7]}) == \
        ([0.7], [0.7])
    # one round records an sd of 0.0, which is no spread: no whisker rather than a whisker of zero
    assert _bar_error({"speedup_pct": 5.0, "per_round_sd_pp": 0.0, "per_round_speedup_pct": [5.0]}) is None
    assert _bar_error({"speedup_pct": 5.0}) is None
    # an estimate outside its own interval (a median against a bootstrap interval) gets no negative whisker, which
    # matplotlib refuses: the whisker on its side is zero
    assert _bar_error({"speedup_pct": 5.0, "speedup_ci95_pct": [5.5, 7.0]}) == ([0.0], [2.0])
    # an interval of NaN bounds (too few pairs) draws no whisker, as the speed/fidelity figure draws none
    assert _bar_error({"speedup_pct": 5.0, "speedup_ci95_pct": [float("nan"), float("nan")]}) is None


def test_a_speed_up_is_named_by_the_variant_its_summary_heads_with_before_the_first_one_given(tmp_path):
    """A sweep's summary heads with the first variant it summarized, which need not be the first name given to
    --variants (protocol.yaml's): the summary's name wins; the protocol's stands in where the summary names none."""
    from softbench.predictions.sessions import load_session
    from softbench.report.records import first_variant

    status = {"command": "latency", "complete": True}
    swept = write_session(tmp_path, "20261207T000000Z-latency", status, {"variant": "h15-sat", "speedup_pct": 1.0},
                          {"variant": "h15-folded"})
    assert first_variant(load_session(swept)) == "h15-sat"
    unnamed = write_session(tmp_path, "20261207T000001Z-latency", status, {"speedup_pct": 1.0},
                            {"variant": "h15-folded"})
    assert first_variant(load_session(unnamed)) == "h15-folded"
    nothing = write_session(tmp_path, "20261207T000002Z-latency", status, {"speedup_pct": 1.0}, {})
    assert first_variant(load_session(nothing)) == "?"


# committed sessions, one of each kind of summary the report reads fields from
_TRACE = "20261130T121826Z-trace-bf16-causal-4K-8K-16K-fa4-A0-A1"
_PAPER = "20261130T143110Z-latency-bf16-8K-causal-b1h16d128-fa4-A0-vs-A1"
_INTERLEAVED = "20261206T092804Z-latency-bf16-8K-causal-b1h16d128-triton-A0-vs-noexp-interleaved"
_GOOD = "20261206T092914Z-latency-bf16-8K-causal-b1h16d128-triton-A0-vs-noexp-interleaved"

# (session, file, edit, what the reason names): each once ended the whole report in an internal error
_EDITED_FIELDS = {
    "a trace table that is text": (_TRACE, "summary.json", lambda d: d.update(table="x"), "AttributeError"),
    "a trace row's baseline as a list": (_TRACE, "summary.json", lambda d: d["table"][0].update(baseline=[]),
                                         "unhashable type: 'list'"),
    "medians that are text": (_PAPER, "summary.json", lambda d: d.update(median_ms="x"), "no attribute 'items'"),
    "a speed-up that is text": (_PAPER, "summary.json", lambda d: d.update(speedup_pct="x"),
                                "the estimate 'x' is not a number"),
    "rounds that are a number": (_PAPER, "summary.json", lambda d: d.update(per_round_speedup_pct=-1),
                                 "'int' object is not iterable"),
    "comparisons that are text": (_INTERLEAVED, "summary.json", lambda d: d.update(comparisons="x"),
                                  "no attribute 'items'"),
    "a null's comparison that is null": (_INTERLEAVED, "summary.json",
                                         lambda d: d["comparisons"].update({"A0'": None}), "no attribute 'get'"),
    "an exactness verdict that is null": (_INTERLEAVED, "summary.json", lambda d: d["exactness"].update(ok=None),
                                          "StopIteration"),
    "kernels that are text": (_INTERLEAVED, "summary.json", lambda d: d.update(kernels="x"), "no attribute"),
    # only the null table reads the twin in the baseline's process (--null-in-process): the probe must run it too
    "an in-process null's interval that is text": (
        _INTERLEAVED, "summary.json",
        lambda d: d.update(null_in_process="A0~", comparisons={**d["comparisons"], "A0~": {
            "paired": {"estimate_pct": 0.1, "ci95_pct": "ab"}}}), "could not convert string to float"),
    # JSON's integers have no bound; a float format or float() meets one past a float's range with OverflowError
    "a speed-up past a float's range": (_INTERLEAVED, "summary.json", lambda d: d.update(speedup_pct=10 ** 400),
                                        "OverflowError"),
}


@pytest.mark.parametrize("edit", sorted(_EDITED_FIELDS))
def test_a_session_with_a_field_of_the_wrong_kind_is_left_out_and_the_rest_drawn(tmp_path, capsys, edit):
    name, filename, change, says = _EDITED_FIELDS[edit]
    src = copy_sessions(sorted({name, _GOOD}), tmp_path / "sessions")
    path = src / name / filename
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    out = tmp_path / "report"
    assert main(["report", str(src), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "internal error" not in printed
    md = (out / "report.md").read_text()
    (line,) = [ln for ln in md.splitlines() if ln.startswith(f"- `{name}`")]
    assert "of a kind the report cannot read" in line and says in line and "left out of every table" in line
    assert (out / f"latency-windows-{_GOOD}.png").exists()  # the good session is still drawn
    assert not (out / f"latency-windows-{name}.png").exists()


@pytest.mark.parametrize("summary", [None, "", "{}"])
def test_a_session_without_a_summary_is_left_out_not_guessed(tmp_path, summary):
    """A latency session whose summary.json is gone (or empty) was tabulated with empty cells as the paper's rounds,
    a protocol it never ran (its protocol.yaml says interleaved)."""
    src = copy_sessions([_INTERLEAVED, _GOOD], tmp_path / "sessions")
    path = src / _INTERLEAVED / "summary.json"
    path.unlink() if summary is None else path.write_text(summary)
    out = tmp_path / "report"
    assert main(["report", str(src), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    (line,) = [ln for ln in md.splitlines() if ln.startswith(f"- `{_INTERLEAVED}`")]
    assert "no summary.json that holds a result" in line and "left out of every table" in line
    rows = [ln for ln in md.splitlines() if ln.startswith("| ") and _INTERLEAVED in ln]
    assert rows == [] and any(_GOOD in ln for ln in md.splitlines() if ln.startswith("| "))


def test_a_figure_that_cannot_draw_a_value_is_named_and_the_report_goes_on(tmp_path):
    """A negative per-round sd passes the tables (they print it) but not matplotlib's whiskers: the bars figure is
    named as not drawn, and the rest of the report is written."""
    src = copy_sessions([_PAPER, _GOOD], tmp_path / "sessions")
    path = src / _PAPER / "summary.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "per_round_sd_pp": -1}))
    rep = build_report([src], tmp_path / "out")
    reasons = [why for name, why in rep.unknown if name == "latency-speedup-bars.png"]
    assert reasons == ["a session holds a value of a kind this figure cannot draw (ValueError: 'yerr' must not "
                       "contain negative values)"]
    assert (tmp_path / "out" / "latency-speedup-vs-seq.png") in rep.figures and rep.markdown_path.exists()


def test_a_window_of_zero_time_leaves_its_pair_off_the_timeline(tmp_path):
    """A records file edited to a window of 0 ms: its cycle has no speed-up to draw; once it ended the report with a
    division by zero."""
    (t, pct), = _timeline_pairs(tmp_path, [(0, "A0", 1.1, 0.0), (0, "A1", 1.0, 0.1), (1, "A0", 1.1, 0.2),
                                           (1, "A1", 0, 0.3)])
    assert pct == pytest.approx(10.0) and t == pytest.approx(0.05)


def test_a_speed_up_recorded_as_a_flag_leaves_its_session_out(tmp_path):
    """`"speedup_pct": true` once printed in the latency table as a speed-up of +1.00%."""
    src = tmp_path / "sessions"
    good = latency_session(src, "bf16", 8192, True, 3.0)
    flag = latency_session(src, "fp8", 8192, True, 9.0)
    summary = json.loads((flag / "summary.json").read_text())
    (flag / "summary.json").write_text(json.dumps({**summary, "speedup_pct": True}))
    rep = build_report([src], tmp_path / "out")
    (table,) = [t for t in rep.tables if t.title == "latency sessions"]
    assert [r[0] for r in table.rows] == [good.name]
    assert flag.name in {name for name, _ in rep.unknown}


_SUSTAINED = "20261206T091118Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-noexp-sustained"


def _sustained_with_last_block(tmp_path, median_ms) -> Path:
    """A copy of the committed sustained session whose last block's median_ms is edited to `median_ms`."""
    src = copy_sessions([_SUSTAINED], tmp_path / "sessions")
    path = src / _SUSTAINED / "blocks.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[-1]["median_ms"] = median_ms
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return src


@pytest.mark.parametrize("value", [[], "x", 0, -1.0, True])
def test_a_block_of_the_wrong_kind_is_named_in_its_records_file_and_the_session_kept(tmp_path, value):
    """A block's median_ms edited to [] once left the whole session out, with a reason that blamed summary.json or
    protocol.yaml; 0 and -1 gave speed-ups against FA3 from a time that is none. The session's own estimates
    against A0 stay in the table; the estimate against FA3 is not made, and its reason names blocks.jsonl."""
    from softbench.predictions.sessions import load_session
    from softbench.report.reestimate import against_reference

    src = _sustained_with_last_block(tmp_path, value)
    rep = build_report([src], tmp_path / "out")
    assert not [why for name, why in rep.unknown if name == _SUSTAINED]
    (table,) = [t for t in rep.tables if t.title == "latency sessions"]
    assert [r[0] for r in table.rows] == [_SUSTAINED]
    estimates, why = against_reference(load_session(src / _SUSTAINED), "ref-fa3")
    assert estimates == {} and "its units in blocks.jsonl cannot be paired: a unit of " in why
    assert f"has median_ms {value!r}, not a time" in why


def test_a_block_time_near_a_floats_limit_gives_a_reason_and_no_numpy_warning(tmp_path):
    """median_ms 1e308 is a finite time, but its ratios overflow: the numpy warnings reached the user's terminal."""
    import warnings

    from softbench.predictions.sessions import load_session
    from softbench.report.reestimate import against_reference

    src = _sustained_with_last_block(tmp_path, 1e308)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimates, why = against_reference(load_session(src / _SUSTAINED), "ref-fa3")
    assert estimates == {} and "do not give back its own estimate" in why
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]


class CountingProgress:
    def __init__(self):
        self.total, self.done = None, 0

    def planned(self, total):
        assert self.total is None and self.done == 0, "the total is told once, before any figure"
        self.total = total

    def drawn(self):
        self.done += 1


def test_without_session_figures_only_the_figures_across_sessions_are_drawn_and_the_rest_counted(tmp_path):
    src = tmp_path / "sessions"
    for seq in (4096, 8192):
        latency_session(src, "fp8", seq, True, speedup=3.0)
    make_session(src, "f1-fidelity", "fidelity", {"conditions": [
        {"name": "rowmax-h15", "dnll": 0.002, "ci_low": 0.001, "ci_high": 0.003}], "dtype": "fp8"})
    full = build_report([src], tmp_path / "full", on_figures=(every := CountingProgress()))
    assert every.total == every.done == 5  # two across sessions, two window figures, one dNLL figure
    assert len(full.figures) == 5
    lean = build_report([src], tmp_path / "lean", session_figures=False, on_figures=(few := CountingProgress()))
    assert few.total == few.done == 2
    assert sorted(p.name for p in lean.figures) == ["latency-speedup-bars.png", "latency-speedup-vs-seq.png"]
    assert sorted(p.name for p in (tmp_path / "lean").glob("*.png")) == sorted(p.name for p in lean.figures)
    (note,) = [n for n in lean.notes if "--no-session-figures" in n]
    assert note.startswith("3 figures drawn one per session were left out")
    assert note in lean.markdown_path.read_text()
    assert not [n for n in full.notes if "--no-session-figures" in n]


def test_the_figure_bar_stops_the_spinner_and_shows_no_bar_when_no_figure_is_drawn():
    from types import SimpleNamespace

    from softbench.report.progress import FigureBar

    stops = []
    with FigureBar(SimpleNamespace(stop=lambda: stops.append(1))) as bar:
        bar.planned(0)
        assert stops == [1] and bar.bar.task is None  # no empty bar left on the terminal
    with FigureBar(SimpleNamespace(stop=lambda: None)) as bar:
        bar.planned(2)
        bar.drawn()
        (task,) = bar.bar.bar.tasks
        assert (task.total, task.completed) == (2, 1)


def test_report_cli_leaves_out_session_figures_when_asked(tmp_path, capsys):
    src = tmp_path / "sessions"
    latency_session(src, "bf16", 4096, False, speedup=2.0)
    out = tmp_path / "out"
    assert main(["report", str(src), "--out", str(out), "--no-session-figures"]) == 0
    printed = capsys.readouterr().out
    assert "1 figure drawn one per session was left out (--no-session-figures)" in printed
    assert "2 figures and" in printed
    assert not list(out.glob("latency-windows-*"))
