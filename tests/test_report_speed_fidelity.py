"""The speed-against-fidelity figure over recorded sessions copied to tests/data/sessions (read, never modified):
FP8 causal 8K on the H200 (an interleaved and a sustained session that timed FA3, a paper-round session of noexp)
and two BF16 fidelity sessions of SmolLM2-135M on Austen (the simulation's exp2 and rowmax-h15, the Triton kernel's
rowmax-h15-sat). The sustained copy leaves out its 1.2 MB windows.jsonl: the figure reads its blocks.jsonl. Beside
them, read in place from the project's sessions/, three of 2026-12-06 on an H100: FP8 causal 8K h15-folded against
FA3, and the FP8 fidelity of SmolLM2-135M on Austen through the simulation (against exact attention) and through the
Gluon kernel (against its own A0)."""

from __future__ import annotations

import json
import shutil

import pytest

from softbench.cli import main
from softbench.core.errors import UsageError
from softbench.latency.summary import paired_estimate
from softbench.predictions.sessions import load_session, load_sessions
from softbench.report.build import build_report
from softbench.report.fidelity_match import fidelity_points
from softbench.report.reestimate import against_reference, paired_units
from softbench.report.speed_fidelity import choose_shape, join_speed_fidelity
from softbench.report.tables import speed_fidelity_table
from conftest import ROOT
from test_report import REAL_SESSIONS, assert_png
from tests.repo_tools import write_session

SHAPE = "fp8-8K-causal-b1h16d128"
INTERLEAVED = "20261201T093441Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-sat-interleaved"
SUSTAINED = "20261201T094422Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-sat-sustained"
NOEXP = "20261130T194613Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-noexp"
SIM = "20261130T125817Z-fidelity-SmolLM2-135M-Instruct.Q4_1-sim"
KERNEL = "20261130T193241Z-fidelity-SmolLM2-135M-Instruct.Q4_1-kernel-triton"
PROJECT = ROOT / "sessions"
FOLDED = "20261206T021410Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-folded-interleaved"
FP8_SIM = "20261206T021946Z-fidelity-SmolLM2-135M-Instruct.Q4_1-sim"
FP8_KERNEL = "20261206T021656Z-fidelity-SmolLM2-135M-Instruct.Q4_1-kernel-triton"
PATHS = (REAL_SESSIONS, PROJECT / FOLDED, PROJECT / FP8_SIM, PROJECT / FP8_KERNEL)


def _summary(name: str) -> dict:
    folder = REAL_SESSIONS / name if (REAL_SESSIONS / name).exists() else PROJECT / name
    return json.loads((folder / "summary.json").read_text())


def _condition(name: str, condition: str) -> dict:
    return next(c for c in _summary(name)["conditions"] if c["name"] == condition)


def _join(paths=PATHS, shape=None):
    recs = load_sessions(paths)
    lat = [r for r in recs if r.command == "latency"]
    return join_speed_fidelity(lat, [r for r in recs if r.command == "fidelity"], choose_shape(lat, shape))


def test_the_joined_values_are_the_sessions_numbers():
    sf = _join()
    assert sf.shape_tag == SHAPE  # four of the five latency sessions: the most common shape
    assert (sf.dtype, sf.reference) == ("fp8", "exact")
    by = {(p.speed.session, p.speed.label, p.speed.against): p for p in sf.points}
    for session, label in ((INTERLEAVED, "A0'"), (SUSTAINED, "A0'"), (FOLDED, "A0'"), (FOLDED, "h15-folded")):
        p = by[(session, label, "A0")]
        written = _summary(session)["comparisons"][label]["paired"]
        assert (p.speed.estimate_pct, [p.speed.ci_low, p.speed.ci_high]) == (written["estimate_pct"],
                                                                             written["ci95_pct"])
    # every dNLL at FP8 and against exact attention, h15-folded's and A0's (exp2) alike: the FP8 simulation's,
    # not the kernel path's, which is measured against its own A0 and would leave out the FP8 error A0 carries
    folded, null = by[(FOLDED, "h15-folded", "A0")], by[(INTERLEAVED, "A0'", "A0")]
    assert (folded.fidelity.session, folded.fidelity.condition) == (FP8_SIM, "sim:rowmax-h15-folded")
    assert (null.fidelity.session, null.fidelity.condition) == (FP8_SIM, "sim:exp2")
    for p in (folded, null):
        assert (p.fidelity.dtype, p.fidelity.reference) == ("fp8", "exact")
        c = _condition(p.fidelity.session, p.fidelity.condition)
        assert (p.fidelity.dnll, p.fidelity.ci_low, p.fidelity.ci_high) == (c["dnll"], c["ci_low"], c["ci_high"])
    # each point names its board: the H100's and the H200's sessions are drawn apart
    assert (folded.speed.board, null.speed.board) == ("NVIDIA H100 80GB HBM3", "NVIDIA H200")
    # the table prints those numbers, numbered as the figure numbers its points
    row = speed_fidelity_table(sf).rows[sf.points.index(folded)]
    written = _summary(FOLDED)["comparisons"]["h15-folded"]["paired"]
    lo, hi = written["ci95_pct"]
    assert row[2] == "NVIDIA H100 80GB HBM3"
    assert row[7:10] == [f"{written['estimate_pct']:+.2f}", f"[{lo:+.2f}, {hi:+.2f}]", FOLDED]
    c = _condition(FP8_SIM, "sim:rowmax-h15-folded")
    assert row[12:15] == ["exact", f"{c['dnll']:+.5f}", f"[{c['ci_low']:+.5f}, {c['ci_high']:+.5f}]"]
    # h15-sat's operator was evaluated at BF16 only: not drawn beside an FP8 speed-up, and said so
    (sat,) = [line for line in sf.skipped if line.startswith("variant h15-sat")]
    assert ("rowmax-h15-sat at fp8 in the figure's evaluation (against exact, SmolLM2-135M-Instruct.Q4_1.gguf on "
            "austen.txt, blocks of 2048, E4M3: Q, K and V, one scale per tensor, and P at P.V); it was evaluated only "
            "at bf16 (against kernel:stock (triton A0), ") in sat


def test_the_table_numbers_its_points_from_one_and_marks_partial_sessions_and_another_variant_run():
    from dataclasses import replace

    sf = _join()
    p = sf.points[0]
    whole = replace(p, speed=replace(p.speed, complete=True),
                    fidelity=replace(p.fidelity, complete=True, variant=p.speed.variant))
    part = replace(p, speed=replace(p.speed, complete=False),
                   fidelity=replace(p.fidelity, complete=False, variant="h15-other"))
    sf.points = [whole, part]
    rows = speed_fidelity_table(sf).rows
    assert [r[0] for r in rows] == ["1", "2"]
    assert (rows[0][9], rows[0][11]) == (p.speed.session, p.fidelity.condition)
    assert rows[0][15].startswith(f"{p.fidelity.session}: ")
    assert (rows[1][9], rows[1][11]) == (f"{p.speed.session} (partial)", f"{p.fidelity.condition} (ran h15-other)")
    assert rows[1][15].startswith(f"{p.fidelity.session} (partial): ")


def test_a_point_is_drawn_from_the_newest_complete_session_and_nulls_come_first():
    import datetime as dt
    from dataclasses import replace

    from softbench.report.speed_fidelity import QUANTITY_ORDER, _newest

    sf = _join()
    p = sf.points[0].speed
    early, late = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc), dt.datetime(2026, 12, 2, tzinfo=dt.timezone.utc)
    old, new, partial = (replace(p, complete=True, started=early), replace(p, complete=True, started=late),
                         replace(p, complete=False, started=late))
    assert _newest([old, new]) is new and _newest([new, old]) is new
    assert _newest([partial, old]) is old
    # against one kernel on one backend, the A/A null's point before the variants'
    groups = [[q.speed.role for q in sf.points if q.speed.against == against and q.speed.backend == "triton"]
              for against in {q.speed.against for q in sf.points}]
    assert any("null" in roles and "variant" in roles for roles in groups)
    assert all(roles == sorted(roles, key=lambda r: r != "null") for roles in groups)
    # and one kernel's quantities in the order at equal clock, sustained, paper rounds
    h200_null = ("null", "A0", "triton", "NVIDIA H200")
    quantities = [q.speed.quantity for q in sf.points
                  if (q.speed.role, q.speed.against, q.speed.backend, q.speed.board) == h200_null]
    assert len(set(quantities)) > 1 and quantities == sorted(quantities, key=QUANTITY_ORDER.index)


def test_a_point_counts_every_session_that_measured_it_and_draws_the_newest(tmp_path):
    """A copy of the h15-folded session under a later name has the same points: each point is drawn once (the two
    record the same start, so the later name wins the tie) and says that two sessions at the shape had it."""
    again = tmp_path / FOLDED.replace("20261206T021410Z", "20261206T231410Z")
    shutil.copytree(PROJECT / FOLDED, again)
    sf = _join([PROJECT / FOLDED, again, PROJECT / FP8_SIM])
    assert len(sf.points) == len(_join([PROJECT / FOLDED, PROJECT / FP8_SIM]).points) > 0
    assert {(p.speed.session, p.sessions) for p in sf.points} == {(again.name, 2)}


def test_the_report_words_name_the_shape_drawn_its_share_and_the_other_shapes():
    from collections import Counter

    from softbench.report.speed_fidelity import SpeedFidelity, describe

    first = describe(SpeedFidelity(shape_tag="a"), Counter({"a": 3, "b": 1, "c": 2}), None)[0]
    assert "(the shape most latency sessions measured: 3 of 6)" in first
    assert "Other shapes recorded: b (1), c (2);" in first


def test_sessions_count_for_a_shape_when_they_name_it_and_have_a_speedup(tmp_path):
    from softbench.report.speed_fidelity import latency_shapes
    from test_report import make_session

    recs = [load_session(make_session(tmp_path, name, "latency", summary)) for name, summary in (
        ("s1", {"shape_tag": "x", "protocol_kind": "sustained"}),  # a paired run, even before its first estimate
        ("s2", {"shape_tag": "x", "speedup_pct": 1.0}),  # the paper rounds: by their speed-up
        ("s3", {"shape_tag": "y", "protocol_kind": "paper"}),  # rounds with no speed-up: nothing to draw
        ("s4", {"protocol_kind": "interleaved", "speedup_pct": 1.0}))]  # no shape: no point
    assert dict(latency_shapes(recs)) == {"x": 2}


def test_against_fa3_is_estimated_from_the_sessions_own_units():
    sf = _join()
    fa3 = {(p.speed.session, p.speed.label): p.speed for p in sf.points if p.speed.against == "ref-fa3"}
    assert set(fa3) == {(INTERLEAVED, "A0"), (SUSTAINED, "A0"), (FOLDED, "A0"), (FOLDED, "h15-folded")}
    for session, quantity in ((INTERLEAVED, "at equal clock"), (SUSTAINED, "sustained")):
        rec = load_session(REAL_SESSIONS / session)
        units, key, slot = paired_units(rec)
        s = rec.summary
        # the units give back what the session wrote against A0 (its interval too where its method is today's;
        # the interleaved session was summarized before the moving-block bootstrap) ...
        again = paired_estimate(units, "A0", "ref-fa3", s["protocol_kind"], key, slot)
        written = s["comparisons"]["ref-fa3"]["paired"]
        assert (again["estimate_pct"], again["n_pairs"]) == (written["estimate_pct"], written["n_pairs"])
        if again["method"] == written["method"]:
            assert again == written
        # ... and A0 against FA3 is FA3 against A0 turned round (a median or mean of ratios, so nearly)
        fa3_vs_a0 = s["comparisons"]["ref-fa3"]["paired"]["estimate_pct"]
        a0 = fa3[(session, "A0")]
        assert a0.session == session and a0.n == s["comparisons"]["ref-fa3"]["paired"]["n_pairs"]
        assert a0.estimate_pct == pytest.approx(100 * (1 / (1 + fa3_vs_a0 / 100) - 1), abs=0.5)
        assert a0.ci_low < a0.estimate_pct < a0.ci_high < 0


def test_units_that_do_not_give_back_the_session_are_not_reestimated(tmp_path):
    copy = tmp_path / INTERLEAVED
    shutil.copytree(REAL_SESSIONS / INTERLEAVED, copy)
    lines = (copy / "windows.jsonl").read_text().splitlines()
    measured = [i for i, line in enumerate(lines) if '"phase": "measure"' in line]
    del lines[measured[-1]]  # one measured window fewer: one pair fewer than the session counted
    (copy / "windows.jsonl").write_text("\n".join(lines) + "\n")
    against, why = against_reference(load_session(copy), "ref-fa3")
    assert against == {} and "do not give back its own estimate" in why
    sf = _join([copy, PROJECT / FP8_SIM])
    assert [(p.speed.label, p.speed.against) for p in sf.points] == [("A0'", "A0")]  # the null, as written
    assert len(sf.notes) == 1 and INTERLEAVED in sf.notes[0]


def _folded_with_null(tmp_path, name, **paired):
    """FOLDED copied with its null's written estimate changed by `paired`."""
    copy = tmp_path / name / FOLDED
    shutil.copytree(PROJECT / FOLDED, copy)
    summary = json.loads((copy / "summary.json").read_text())
    summary["comparisons"]["A0'"]["paired"].update(paired)
    (copy / "summary.json").write_text(json.dumps(summary))
    return load_session(copy)


def test_a_written_estimate_is_given_back_to_its_pairs_count_and_its_interval(tmp_path):
    written = json.loads((PROJECT / FOLDED / "summary.json").read_text())["comparisons"]["A0'"]["paired"]
    against, why = against_reference(load_session(PROJECT / FOLDED), "ref-fa3")
    assert why is None and set(against) == {"A0", "h15-folded"}
    refused = "its recorded units do not give back its own estimate of A0' against A0"
    for name, change in (("pairs", {"n_pairs": written["n_pairs"] + 1}),
                         ("estimate", {"estimate_pct": written["estimate_pct"] * (1 + 1e-6)}),
                         ("interval", {"ci95_pct": [written["ci95_pct"][0] + 0.01, written["ci95_pct"][1]]}),
                         # an interval left undefined matches only an undefined one, not the units' finite one
                         ("no interval", {"ci95_pct": [None, None]})):
        assert against_reference(_folded_with_null(tmp_path, name, **change), "ref-fa3") == ({}, refused), name
    # an interval written by an earlier method is not held to today's, which the estimates then name
    older = _folded_with_null(tmp_path, "older", ci95_pct=[written["ci95_pct"][0] + 0.01, written["ci95_pct"][1]],
                              method="percentile bootstrap over pairs")
    against, why = against_reference(older, "ref-fa3")
    assert why is None and "moving-block" in against["A0"]["method"]


def test_a_written_estimate_whose_kernel_left_no_units_is_not_given_back(tmp_path):
    copy = tmp_path / FOLDED
    shutil.copytree(PROJECT / FOLDED, copy)
    lines = (copy / "windows.jsonl").read_text().splitlines()
    (copy / "windows.jsonl").write_text("".join(f"{line}\n" for line in lines if json.loads(line)["label"] != "A0'"))
    assert against_reference(load_session(copy), "ref-fa3") == (
        {}, "its recorded units do not give back its own estimate of A0' against A0")


@pytest.mark.parametrize("field, value", [("round", "1"), ("cycle", True)])
def test_a_window_whose_round_or_cycle_is_no_count_cannot_be_paired(tmp_path, field, value):
    copy = tmp_path / FOLDED
    shutil.copytree(PROJECT / FOLDED, copy)
    rows = [json.loads(line) for line in (copy / "windows.jsonl").read_text().splitlines()]
    first = next(r for r in rows if r.get("phase") in ("measure", None))
    first[field] = value  # a JSON true is a Python int: refused all the same
    (copy / "windows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert against_reference(load_session(copy), "ref-fa3") == (
        {}, f"its units in windows.jsonl cannot be paired: a unit of {first['label']} has {field} {value!r}, "
            "not a count")


def test_a_session_without_its_units_file_is_not_reestimated(tmp_path):
    copy = tmp_path / FOLDED
    shutil.copytree(PROJECT / FOLDED, copy)
    (copy / "windows.jsonl").unlink()
    assert against_reference(load_session(copy), "ref-fa3") == (
        {}, "it holds no recorded units (windows.jsonl or blocks.jsonl) to pair")


def test_a_circuit_window_whose_predecessor_is_no_kernel_cannot_be_paired(tmp_path):
    circuit = "20261201T093240Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-sat-interleaved"
    copy = tmp_path / circuit
    shutil.copytree(PROJECT / circuit, copy)
    rows = [json.loads(line) for line in (copy / "windows.jsonl").read_text().splitlines()]
    first = next(r for r in rows if r.get("phase") in ("measure", None))
    first["predecessor"] = 5
    (copy / "windows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    against, why = against_reference(load_session(copy), "ref-fa3")
    assert against == {}
    assert why == ("its units in windows.jsonl cannot be paired: "
                   f"a unit of {first['label']} has predecessor 5, not a kernel's name")


def test_a_session_that_names_its_order_circuit_only_in_its_protocol_pairs_by_predecessor():
    from dataclasses import replace

    name = "20261201T093240Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-sat-interleaved"
    circuit = load_session(PROJECT / name)
    assert paired_units(circuit)[2] == "predecessor"  # its run records the circuit
    s = circuit.summary
    # a summary whose run records no circuit, only the protocol's order
    said = replace(circuit, summary={**s, "run": {**s["run"], "order": {}},
                                     "protocol": {**s["protocol"], "order": "circuit"}})
    assert paired_units(said)[2] == "predecessor"
    cycles = replace(circuit, summary={**s, "run": {**s["run"], "order": {}}})
    assert paired_units(cycles)[2] is None  # neither: the windows pair per cycle


def test_a_missing_join_is_reported(tmp_path, capsys):
    sf = _join()
    (noexp,) = [s for s in sf.skipped if "noexp" in s]
    assert "operator identity" in noexp and NOEXP in noexp
    assert not any(p.speed.variant == "noexp" for p in sf.points)
    # with the kernel path's FP8 session alone, its reference (the kernel's own A0) is the figure's, and A0's
    # operator (exp2) has no condition against it: every A0 point is left out
    alone = _join([PROJECT / FOLDED, PROJECT / FP8_KERNEL])
    assert alone.reference == "kernel:stock" and {p.speed.variant for p in alone.points} == {"h15-folded"}
    assert any(s.startswith("variant A0 (operator exp2): A0 is the stock kernel the dNLLs against kernel:stock are "
                            "measured from (its dNLL is 0 by definition") for s in alone.skipped)
    # with the simulation beside it, exact attention covers h15-folded as well: on that tie the reference is exact,
    # and A0 (whose operator does not vote) is drawn against it too
    both = _join([PROJECT / FOLDED, PROJECT / FP8_KERNEL, PROJECT / FP8_SIM])
    assert both.reference == "exact" and {p.speed.variant for p in both.points} == {"A0", "h15-folded"}
    out = tmp_path / "report"
    assert main(["report", *map(str, PATHS), "--out", str(out)]) == 0
    assert "speed against fidelity: not joined: variant noexp (operator identity)" in capsys.readouterr().out
    assert "- not joined: variant noexp (operator identity)" in (out / "report.md").read_text()


def test_dnlls_of_two_evaluations_are_not_drawn_side_by_side(tmp_path):
    """Two FP8 simulation sessions of SmolLM2-135M on Austen, both against exact attention: one with E4M3 operands
    (its exp2 dNLL +0.0173) and one without (exp2 +0.0002, h15-folded +0.0020). A copy of the first that keeps only
    its exp2 condition once gave A0's dNLL from it beside h15-folded's from the other: the figure now takes one
    evaluation (the one that covers h15-folded) and draws A0 from that one too."""
    with_operands = PROJECT / "20261205T205942Z-fidelity-smollm2-135m-sim"
    without = PROJECT / "20261203T064154Z-fidelity-smollm2-135m-sim"
    copy = tmp_path / "20261206T230000Z-fidelity-smollm2-135m-sim"
    shutil.copytree(with_operands, copy)
    summary = json.loads((copy / "summary.json").read_text())
    summary["conditions"] = [c for c in summary["conditions"] if c["name"] in ("exact", "sim:exp2")]
    (copy / "summary.json").write_text(json.dumps(summary))
    sf = _join([PROJECT / FOLDED, copy, without])
    drawn = {p.speed.variant: p.fidelity for p in sf.points}
    assert {f.session for f in drawn.values()} == {without.name}
    assert drawn["A0"].dnll == _condition(without.name, "sim:exp2")["dnll"]
    assert drawn["h15-folded"].dnll == _condition(without.name, "sim:rowmax-h15-folded")["dnll"]
    assert sf.evaluation.fp8 == "E4M3: neither the operands nor P" and sf.evaluation.block_len == 1024
    # the two sessions differ in what they round and in their blocks: two evaluations, not one
    assert len({p.evaluation for p in fidelity_points(load_sessions([copy, without]))}) == 2


def _fidelity(root, stamp: str, path: str, operators: dict, complete: bool = True, backend: str | None = None,
              corpus: str = "austen", text: str = "0" * 64):
    """A fidelity session folder (its folder's stamp is its start) whose conditions evaluate `operators`
    ({operator: params}) on `path`, each with a dNLL of 0.01 and an interval around it."""
    conditions = [{"name": f"{path}:{op}", "path": path, "operator": {"operator": op, "params": params},
                   "dnll": 0.01, "ci_low": 0.005, "ci_high": 0.015} for op, params in operators.items()]
    summary = {"command": "fidelity", "complete": complete, "path": path, "backend": backend, "dtype": "bf16",
               "baseline": {"name": "kernel:stock" if path == "kernel" else "exact"},
               "model": {"label": "smollm2-135m"}, "corpus": {"name": corpus, "text_sha256": text},
               "block_len": 512, "conditions": conditions}
    return load_session(write_session(root, f"{stamp}-fidelity-smollm2-135m-{path}",
                                      {"command": "fidelity", "complete": complete}, summary))


def test_a_condition_of_an_operator_with_parameters_stands_for_no_variant(tmp_path):
    rec = _fidelity(tmp_path, "20261201T000000Z", "sim", {"rowmax-pot": {"kmax": 20}, "rowmax-h15": {}})
    assert [p.operator for p in fidelity_points([rec])] == ["rowmax-h15"]


def test_one_text_under_two_corpus_names_is_one_evaluation(tmp_path):
    a = _fidelity(tmp_path, "20261201T000000Z", "sim", {"exp2": {}}, corpus="austen")
    b = _fidelity(tmp_path, "20261202T000000Z", "sim", {"exp2": {}}, corpus="austen.txt")
    assert len({p.evaluation for p in fidelity_points([a, b])}) == 1  # the same text's sha256
    c = _fidelity(tmp_path, "20261203T000000Z", "sim", {"exp2": {}}, corpus="austen", text="1" * 64)
    assert len({p.evaluation for p in fidelity_points([a, c])}) == 2  # one name, two texts
    from softbench.report.fidelity_match import evaluation

    # a corpus recorded with an empty name is known by its source
    assert evaluation({"corpus": {"name": "", "source": "austen.txt"}}, "sim", None).corpus == "austen.txt"


def test_the_condition_drawn_is_by_path_then_complete_then_newest(tmp_path):
    from softbench.report.fidelity_match import best_fidelity

    def drawn(*recs):
        return best_fidelity(fidelity_points(list(recs)), "rowmax-h15", "triton").session

    op = {"rowmax-h15": {}}
    same_backend = _fidelity(tmp_path, "20261201T000000Z", "kernel", op, backend="triton")
    sim_old = _fidelity(tmp_path, "20261202T000000Z", "sim", op)
    other_backend_new = _fidelity(tmp_path, "20261203T000000Z", "kernel", op, backend="gluon")
    row_newest = _fidelity(tmp_path, "20261204T000000Z", "row", op)
    # the path ranks first, over completeness and age: the same kernel, the simulation, another kernel, a row path
    assert drawn(row_newest, other_backend_new, sim_old, same_backend) == same_backend.name
    assert drawn(row_newest, other_backend_new, sim_old) == sim_old.name
    assert drawn(row_newest, other_backend_new) == other_backend_new.name
    # on one path, a complete session before a newer partial one, then the newer of two complete ones
    sim_partial = _fidelity(tmp_path, "20261205T000000Z", "sim", op, complete=False)
    assert drawn(sim_partial, sim_old) == sim_old.name
    sim_new = _fidelity(tmp_path, "20261206T000000Z", "sim", op)
    assert drawn(sim_old, sim_new, sim_partial) == sim_new.name


def test_on_equal_coverage_the_evaluation_against_exact_attention_wins_over_a_complete_one(tmp_path):
    from softbench.report.fidelity_match import choose_evaluation

    op = {"rowmax-h15": {}}
    exact_partial = _fidelity(tmp_path, "20261201T000000Z", "sim", op, complete=False)
    stock_complete = _fidelity(tmp_path, "20261202T000000Z", "kernel", op, backend="triton")
    chosen = choose_evaluation(fidelity_points([stock_complete, exact_partial]), {"rowmax-h15"})
    assert chosen.reference == "exact"


def test_an_evaluation_with_any_complete_session_counts_as_complete(tmp_path):
    from softbench.report.fidelity_match import choose_evaluation

    op = {"rowmax-h15": {}}
    whole = _fidelity(tmp_path, "20261201T000000Z", "sim", op)
    partial = _fidelity(tmp_path, "20261202T000000Z", "sim", op, complete=False)  # the same evaluation, unfinished
    other = _fidelity(tmp_path, "20261203T000000Z", "sim", op, complete=False)  # newer, another block length
    other.summary["block_len"] = 1024
    chosen = choose_evaluation(fidelity_points([whole, partial, other]), {"rowmax-h15"})
    assert chosen.block_len == 512  # complete (through `whole`) before newest


def test_of_two_complete_evaluations_the_one_with_the_newest_session_is_chosen(tmp_path):
    from softbench.report.fidelity_match import choose_evaluation

    op = {"rowmax-h15": {}}
    newest = _fidelity(tmp_path, "20261203T000000Z", "sim", op)
    oldest = _fidelity(tmp_path, "20261201T000000Z", "sim", op)  # the same evaluation as `newest`
    between = _fidelity(tmp_path, "20261202T000000Z", "sim", op)
    between.summary["block_len"] = 1024
    # the points in any order: an evaluation is as new as its newest session, not its last one read
    assert choose_evaluation(fidelity_points([newest, oldest, between]), {"rowmax-h15"}).block_len == 512


def test_kernel_path_sessions_against_two_stock_variants_are_two_evaluations(tmp_path):
    op = {"rowmax-h15": {}}
    old = _fidelity(tmp_path, "20261201T000000Z", "kernel", op, backend="triton")  # records no stock variant: A0
    new = _fidelity(tmp_path, "20261202T000000Z", "kernel", op, backend="triton")
    new.summary["baseline"]["variant"] = "A0-fp8"
    stocks = [p.evaluation.stock_variant for p in fidelity_points([old, new])]
    assert stocks == ["A0", "A0-fp8"]


def test_a_condition_without_an_interval_is_not_drawn(tmp_path):
    # a session below MIN_BLOCKS writes its dNLL with no interval (ci_low, ci_high None): it gives no point
    rec = _fidelity(tmp_path, "20261201T000000Z", "sim", {"rowmax-h15": {}})
    rec.summary["conditions"][0].update(ci_low=None, ci_high=None)
    assert fidelity_points([rec]) == []


def test_older_summaries_name_their_conditions_and_baseline_as_they_wrote_them():
    from softbench.report.records import fidelity_conditions, fidelity_reference

    interval = {"dnll": 0.01, "ci_low": 0.0, "ci_high": 0.02}
    # conditions kept as a mapping by name, a baseline named by a string
    assert fidelity_conditions({"conditions": {"sim:exp2": interval, "broken": "x"}}) == [("sim:exp2", interval)]
    assert fidelity_reference({"baseline": "exact", "path": "kernel"}) == "exact"
    # in a list, a condition's name comes first, then its older keys, then its place
    named = {"name": "sim:exp2", "label": "exp2 (sim)", **interval}
    assert fidelity_conditions({"conditions": [named, {"label": "row", **interval}, interval]}) == [
        ("sim:exp2", named), ("row", {"label": "row", **interval}), ("2", interval)]


def test_a_dnll_at_another_dtype_is_never_drawn_beside_a_speedup():
    """The FP8 latency session of h15-folded with a BF16 simulation session alone (exp2 +0.0000, h15-folded
    +0.0029 at BF16): a BF16 dNLL says nothing about the FP8 kernel whose speed-up it would be drawn beside, so
    nothing is joined, and each variant's sentence says where its operator was evaluated instead."""
    bf16_sim = PROJECT / "20261201T125114Z-fidelity-SmolLM2-135M-Instruct.Q4_1-sim"
    sf = _join([PROJECT / FOLDED, bf16_sim])
    assert sf.dtype == "fp8" and sf.points == [] and sf.evaluation is None
    assert len(sf.skipped) == 2
    assert all("at fp8 in the figure's evaluation (any evaluation); it was evaluated only at bf16" in s
               for s in sf.skipped)
    # the report says why there is no figure, and says so only then
    from collections import Counter

    from softbench.report.speed_fidelity import describe

    nothing = "- nothing joined, so no figure was drawn"
    assert nothing in describe(sf, Counter({SHAPE: 1}), None)
    assert nothing not in describe(_join([PROJECT / FOLDED, PROJECT / FP8_SIM]), Counter({SHAPE: 1}), None)


def test_the_evaluation_is_chosen_by_the_variants_operators_not_the_baselines(tmp_path):
    """The kernel path's FP8 session covers h15-folded (against its stock A0); a copy of the FP8 simulation that
    keeps only exp2 covers A0's operator (against exact). Were the A0 points (A/A null, A0 against FA3) to vote,
    the tie would go to exact attention and h15-folded would lose its dNLL; the baseline's operator does not vote,
    so the figure draws h15-folded from the kernel path and leaves A0 out as the stock kernel."""
    only_exp2 = tmp_path / "20261206T230000Z-fidelity-SmolLM2-135M-Instruct.Q4_1-sim"
    shutil.copytree(PROJECT / FP8_SIM, only_exp2)
    summary = json.loads((only_exp2 / "summary.json").read_text())
    summary["conditions"] = [c for c in summary["conditions"] if c["name"] in ("exact", "sim:exp2")]
    (only_exp2 / "summary.json").write_text(json.dumps(summary))
    sf = _join([PROJECT / FOLDED, PROJECT / FP8_KERNEL, only_exp2])
    assert sf.reference == "kernel:stock"
    assert {p.speed.variant for p in sf.points} == {"h15-folded"}
    assert {p.fidelity.session for p in sf.points} == {FP8_KERNEL}
    assert any(s.startswith("variant A0 (operator exp2): A0 is the stock kernel") for s in sf.skipped)


def test_the_figure_is_written_and_named_in_the_report(tmp_path):
    out = tmp_path / "report"
    assert main(["report", *map(str, PATHS), "--out", str(out)]) == 0
    fig = out / f"speed-vs-fidelity-{SHAPE}.png"
    assert_png(fig)
    md = (out / "report.md").read_text()
    assert f"## speed against fidelity at {SHAPE}" in md and f"]({fig.name})" in md


def test_one_variant_on_two_boards_is_drawn_in_two_colours():
    """The A/A nulls (variant A0) of the H200's sessions and of the H100's h15-folded session: two series, two
    greys, each named by its GPU in the legend; h15-folded's colour is no grey."""
    from softbench.report.speed_figure import series_colours, series_label

    colours = series_colours(_join().points)
    a0 = {k: c for k, c in colours.items() if k[0] == "A0"}
    assert {k[2] for k in a0} == {"NVIDIA H100 80GB HBM3", "NVIDIA H200"}
    assert len(set(a0.values())) == len(a0)
    assert all(not c.startswith("C") for c in a0.values())
    (folded,) = [k for k in colours if k[0] == "h15-folded"]
    assert colours[folded].startswith("C")
    assert series_label(folded) == "h15-folded (triton, H100 80GB HBM3)"
    # A0 on two backends and two boards: four greys, none repeated (three shades once cycled)
    from types import SimpleNamespace

    four = [SimpleNamespace(speed=SimpleNamespace(variant="A0", backend=b, board=g))
            for b in ("fa4", "triton") for g in ("NVIDIA H100 80GB HBM3", "NVIDIA H200")]
    assert len(set(series_colours(four).values())) == 4


def test_another_shape_on_request_and_an_unrecorded_one_refused(tmp_path):
    rep = build_report([REAL_SESSIONS], tmp_path / "bf16", speed_shape="bf16-4K-causal-b1h16d128")
    assert_png(tmp_path / "bf16" / "speed-vs-fidelity-bf16-4K-causal-b1h16d128.png")
    (table,) = [t for t in rep.tables if t.title.startswith("speed against fidelity")]
    # A1 on FA4 through the simulation: the complete session, not the newer partial one
    (row,) = table.rows
    assert row[1:5] == ["A1", "NVIDIA H200", "-", "fa4"] and row[15].startswith(SIM)  # FA4 reports no configuration
    assert row[12] == "exact"
    with pytest.raises(UsageError, match="measured shape 'fp8-9K'"):
        build_report([REAL_SESSIONS], tmp_path / "none", speed_shape="fp8-9K")
    assert not (tmp_path / "none").exists()
    assert main(["report", str(REAL_SESSIONS), "--out", str(tmp_path / "cli"), "--speed-fidelity-shape",
                 "fp8-9K"]) == 2
    assert not (tmp_path / "cli").exists()


def test_a_session_whose_baseline_is_not_exact_gives_no_points():
    """The -lm run (its A0's error against FP32 2.06 times FA3's, recorded before summary.json carried the check)
    is left out of the figure with one sentence; the -lmt run of the same shape gives its points."""
    from pathlib import Path

    from softbench.report.speedups import session_speedups

    sessions = Path(__file__).resolve().parents[1] / "sessions"
    over_row = load_session(sessions / "20261202T132424Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-folded-interleaved")
    per_tile = load_session(sessions / "20261202T134042Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-folded-interleaved")
    points, notes = session_speedups(over_row)
    assert points == [] and len(notes) == 1 and "left out: WARNING, not exact attention: A0's error" in notes[0]
    points, notes = session_speedups(per_tile)
    assert {(p.label, p.against) for p in points} >= {("h15-folded", "A0"), ("A0", "ref-fa3")} and notes == []


def test_the_points_of_a_sustained_session_carry_its_quantity_and_each_kernels_role():
    from softbench.report.speedups import session_quantity, session_speedups

    rec = load_session(REAL_SESSIONS / SUSTAINED)
    assert session_quantity(rec) == "sustained"
    points, notes = session_speedups(rec)
    assert notes == [] and {p.quantity for p in points} == {"sustained"}
    # against FA3 the baseline is drawn as itself, not as a variant
    assert {(p.against, p.label): p.role for p in points} == {
        ("A0", "A0'"): "null", ("A0", "h15-sat"): "variant", ("ref-fa3", "A0"): "baseline",
        ("ref-fa3", "h15-sat"): "variant"}


def test_a_paper_round_null_is_one_point_named_by_its_variant_and_counted_in_its_own_windows(tmp_path):
    from softbench.report.speedups import PAPER, session_quantity, session_speedups

    status = {"command": "latency", "complete": True}
    # summary.json names the null's label (A0'), protocol.yaml the variant it ran (A0); 19 windows of A0', 21 of A0
    summary = {"command": "latency", "baseline": "A0", "variant": "A0'", "speedup_pct": 0.4,
               "bootstrap_ci95_pct": [-0.3, 1.1], "n_windows": {"A0": 21, "A0'": 19}}
    rec = load_session(write_session(tmp_path, "20261130T000000Z-latency-null", status, summary, {"variant": "A0"}))
    assert session_quantity(rec) == PAPER
    (point,), notes = session_speedups(rec)
    assert notes == []
    assert (point.label, point.variant, point.role, point.against) == ("A0'", "A0", "null", "A0")
    assert (point.estimate_pct, point.ci_low, point.ci_high, point.n) == (0.4, -0.3, 1.1, 19)
    assert point.method == "pooled medians; window bootstrap"  # the summary names no bootstrap method
    no_interval = write_session(tmp_path, "20261130T000002Z-latency-null", status,
                                {k: v for k, v in summary.items() if k != "bootstrap_ci95_pct"}, {"variant": "A0"})
    ((point,), _) = session_speedups(load_session(no_interval))
    assert (point.ci_low, point.ci_high) == (None, None)  # no interval, not one of zero width
    # a paper-round session that wrote no speed-up gives no point
    unfinished = write_session(tmp_path, "20261130T000001Z-latency-null", status,
                               {k: v for k, v in summary.items() if k != "speedup_pct"}, {"variant": "A0"})
    assert session_speedups(load_session(unfinished)) == ([], [])


def test_the_figures_source_lines_name_the_null_and_the_reference_and_a0s_greys_span_black_to_mid_grey():
    from softbench.report.speed_figure import _err, series_colours, source_line

    sf = _join()
    lines = [source_line(i + 1, p) for i, p in enumerate(sf.points)]
    assert lines[0].startswith(f"[1] A0' (A/A null), at equal clock, vs A0: latency {INTERLEAVED[:16]} ")
    assert lines[4].startswith(f"[5] A0, at equal clock, vs FA3: latency {INTERLEAVED[:16]} ")  # ref-fa3 as FA3
    # two A0 series (H200, H100): the first black, the last the mid grey 0.6, whatever their number
    colours = series_colours(sf.points)
    assert [c for (variant, _, _), c in colours.items() if variant == "A0"] == ["0.000", "0.600"]
    # a whisker is never negative: an estimate outside its interval gets zero on that side
    assert _err(5.0, 5.5, 7.0) == [[0.0], [2.0]] and _err(5.0, float("nan"), float("nan")) is None


def test_a_source_line_names_the_kernel_variant_that_ran_the_dnll_where_it_is_not_the_timed_one():
    """The join matches by operator: a dNLL from the kernel path may come from another variant of the same operator
    (FA4's A1 beside the Gluon kernel's h15-sat). The source line says which one ran; a dNLL of the timed variant
    itself, or of a path with no variant (the simulation), adds nothing."""
    from dataclasses import replace

    from softbench.report.speed_fidelity import JoinedPoint
    from softbench.report.speed_figure import source_line

    point = _join().points[3]  # h15-folded against A0, its dNLL from the simulation
    kernel = replace(point.fidelity, path="kernel", variant="A1")
    assert ", ran A1 from " in source_line(1, JoinedPoint(point.speed, point.operator, kernel, 1))
    same = replace(kernel, variant=point.speed.variant)
    assert ", ran " not in source_line(1, JoinedPoint(point.speed, point.operator, same, 1))
    assert ", ran " not in source_line(1, point)


def test_a_speedup_between_two_configurations_names_both():
    """latency --variant-config ran h15-folded in two consumers and A0 in the FP8 default (the H200, 09:15): its
    points against A0 carry both configurations, the table and the figure's source line say so; against FA3 and
    in a session of one configuration a point carries its kernel's alone."""
    from conftest import ROOT
    from softbench.report.speed_fidelity import JoinedPoint, SpeedFidelity
    from softbench.report.speed_figure import source_line
    from softbench.report.fidelity_match import fidelity_points
    from softbench.report.speedups import session_speedups

    two, default = "gluon-n128s2-c240l24-hg2-pd-rla-lmt-tb-mlf", "gluon-n128s2-c240l24-hg8-g1-pd-rla-lmt-tb-mlf"
    name = "20261204T091554Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-folded-interleaved"
    rec = load_session(ROOT / "sessions" / name)
    points, notes = session_speedups(rec)
    assert notes == []
    by = {(p.label, p.against): p for p in points}
    assert (by[("h15-folded", "A0")].config, by[("h15-folded", "A0")].against_config) == (two, default)
    assert (by[("A0'", "A0")].config, by[("A0'", "A0")].against_config) == (default, default)
    assert (by[("h15-folded", "ref-fa3")].config, by[("h15-folded", "ref-fa3")].against_config) == (two, "")
    fid = fidelity_points([load_session(REAL_SESSIONS / SIM)])[0]
    sf = SpeedFidelity(SHAPE, [JoinedPoint(by[("h15-folded", "A0")], "rowmax-h15-folded", fid, 1),
                               JoinedPoint(by[("h15-folded", "ref-fa3")], "rowmax-h15-folded", fid, 1)])
    rows = speed_fidelity_table(sf).rows
    assert rows[0][3] == f"{two} against A0 in {default}" and rows[1][3] == two
    assert "(n128s2-c240l24-hg2-pd-rla-lmt-tb-mlf against n128s2-c240l24-hg8-g1-pd-rla-lmt-tb-mlf)" in \
        source_line(1, sf.points[0])
    assert " against " not in source_line(2, sf.points[1]).split(",")[0]
    # a session of one configuration (2026-12-01, the FP8 default then): the same configuration on both sides
    sat = {(p.label, p.against): p for p in session_speedups(load_session(REAL_SESSIONS / INTERLEAVED))[0]}
    assert sat[("h15-sat", "A0")].config == sat[("h15-sat", "A0")].against_config == "gluon-n128s2-c240l24-hg8-g1"



def test_a_fidelity_summary_without_its_baseline_is_read_by_its_path():
    """Every recorded fidelity session names its baseline; one that does not (another tool's, a future format) is
    read by its path: the simulation and the row path measure against exact attention, the kernel path against its
    own stock kernel."""
    from softbench.report.records import fidelity_reference

    assert fidelity_reference(_summary(SIM)) == "exact" and fidelity_reference(_summary(KERNEL)) == "kernel:stock"
    for path, ref in (("sim", "exact"), ("row", "exact"), ("kernel", "kernel:stock"), ("elsewhere", "?")):
        assert fidelity_reference({"path": path}) == ref

def test_a_report_estimates_each_session_against_fa3_once(tmp_path, monkeypatch):
    """The latency table, the replications and this figure all read the sessions against FA3; each estimate
    re-checks the session with a fresh bootstrap, so a report makes it once per session and reference. Counted at
    the estimator itself, which every path reaches, however a part of the report calls against_reference."""
    import softbench.report.reestimate as reestimate

    calls = []
    estimator = reestimate.paired_estimate

    def counted(units, *args):
        calls.append(args[:2])
        return estimator(units, *args)

    monkeypatch.setattr(reestimate, "paired_estimate", counted)
    for folder in (REAL_SESSIONS / INTERLEAVED, REAL_SESSIONS / SUSTAINED, PROJECT / FOLDED):  # one estimate each
        against_reference(load_session(folder), "ref-fa3")
    once = sorted(calls)
    calls.clear()
    rep = build_report(PATHS, tmp_path / "out")
    assert once and sorted(calls) == once
    # all three parts still show them: the table's cell, the figure's points against FA3
    (table,) = [t for t in rep.tables if t.title == "latency sessions"]
    cells = {row[0]: row[9] for row in table.rows}
    assert cells[INTERLEAVED].startswith("FA3: ") and "not estimated" not in cells[INTERLEAVED]
    sf = _join()
    assert {p.speed.session for p in sf.points if p.speed.against == "ref-fa3"} == {INTERLEAVED, SUSTAINED, FOLDED}


def test_the_x_labels_are_wrapped_to_their_panels(tmp_path, monkeypatch):
    """The kernel path's reference is a long phrase: on one line, the two panels' x labels ran into each other
    (BF16 causal 8K, h15-folded against A0 and against FA3 on an H100, its dNLL through the Gluon kernel)."""
    from softbench.report import speed_figure

    drawn = []
    monkeypatch.setattr(speed_figure, "save_figure", lambda fig, path: drawn.append(fig) or path)
    paths = [PROJECT / "20261206T090527Z-latency-bf16-8K-causal-b1h16d128-triton-A0-vs-h15-folded-interleaved",
             PROJECT / "20261206T122653Z-fidelity-SmolLM2-135M-Instruct.Q4_1-kernel-triton"]
    sf = _join(paths, "bf16-8K-causal-b1h16d128")
    assert speed_figure.plot_speed_fidelity(sf, tmp_path / "f.png") is not None
    labels = [ax.get_xlabel() for ax in drawn[0].axes if ax.get_xlabel()]
    assert len(labels) == 2 and "own stock kernel" in labels[0]
    assert all(len(line) <= speed_figure.XLABEL_CHARS for label in labels for line in label.splitlines())
