"""A recorded session as evaluation reads it (softbench.predictions.sessions): which evidence it supplies, the
facts a scope is matched against, when it started, and which folders are sessions. Each case here is one a hand
mutation of sessions.py survived."""

from __future__ import annotations

import pytest

from softbench.core.errors import UsageError
from softbench.predictions.sessions import load_session, session_dirs, session_facts, session_start
from tests.repo_tools import write_session

AUDIT = {"command": "audit", "complete": True}


@pytest.mark.parametrize("summary,kind,supplied", [
    ({"evidence": ["sass", "ncu"]}, "sass", True),   # the kinds an audit lists under `evidence`
    ({"evidence": ["sass"]}, "ncu", False),
    ({"ncu": {"A1": {"mufu_pipe_pct": 1.0}}}, "ncu", True),
    ({"ncu": {}}, "ncu", False),                     # an empty block is no evidence
    ({"ncu": []}, "ncu", False),
    ({"ncu": False}, "ncu", False),                  # a flag that says ncu did not run
    ({"ncu": None}, "ncu", False),
    ({}, "audit", True),                             # every session supplies its own command's evidence
])
def test_a_session_supplies_the_evidence_it_lists_or_holds(tmp_path, summary, kind, supplied):
    s = load_session(write_session(tmp_path, "s", AUDIT, {"command": "audit", **summary}))
    assert s.supplies(kind) is supplied


def test_facts_take_the_protocol_over_the_summary_and_the_commit_and_gpu_from_env():
    facts = session_facts({"command": "latency"},
                          {"variant": "A1'", "shape": {"dtype": "fp8", "seq": 8192, "unused": 1}},
                          {"variant": "A1"},
                          {"softbench": {"source_sha256": "abc", "commit": "deadbeef"},
                           "gpu": {"name": "NVIDIA H100", "capability": ""}})
    assert facts["variant"] == "A1"  # protocol.yaml names the variant; the summary's label (A1') does not
    assert (facts["dtype"], facts["seq"]) == ("fp8", 8192) and "unused" not in facts
    assert (facts["source_sha256"], facts["git_commit"]) == ("abc", "deadbeef")
    assert facts["gpu_name"] == "NVIDIA H100" and "gpu_capability" not in facts  # an empty capability is none
    assert facts["command"] == "latency"
    # the command the summary records stands; status.json's fills in only where none is recorded
    assert session_facts({"command": "latency"}, {"command": "sweep"}, {})["command"] == "sweep"
    # a null recorded is no fact: it hides neither status.json's command nor the summary's variant
    nulls = session_facts({"command": "latency"}, {"command": None, "variant": "A1", "shape": {"seq": 8192}},
                          {"variant": None, "shape": {"seq": None}})
    assert (nulls["command"], nulls["variant"], nulls["seq"]) == ("latency", "A1", 8192)


def test_the_start_is_the_earliest_recorded_time_the_folder_stamp_included():
    early, late = "2026-12-01T10:00:00.000+00:00", "2026-12-01T12:00:00.000+00:00"
    t = session_start("x", {"started_utc": late}, {"started_utc": early}, {})
    assert t.isoformat().startswith("2026-12-01T10:00:00")
    folder = session_start("20261201T090000Z-latency", {"started_utc": late}, {}, {})
    assert folder is not None and folder < session_start("x", {"started_utc": late}, {}, {})


@pytest.mark.parametrize("status,summary,complete", [
    ({"command": "latency", "complete": True}, {"command": "latency"}, True),
    ({"command": "latency", "complete": "yes"}, {"command": "latency"}, False),  # only JSON true is complete
    ({"command": "latency", "complete": 1}, {"command": "latency"}, False),
    ({"command": "latency", "complete": True}, {"command": "latency", "complete": False}, False),
    ({"command": "latency", "complete": True}, None, True),  # no summary: status.json decides
])
def test_only_json_true_makes_a_session_complete(tmp_path, status, summary, complete):
    assert load_session(write_session(tmp_path, "s", status, summary)).complete is complete


def test_session_dirs_reads_a_folder_of_sessions_one_level_deep(tmp_path):
    # a folder of sessions holds sessions, not folders of them: a session two levels down is not evidence of this
    # folder (a sweep's point folders and an archive of older runs would otherwise be read as runs of their own)
    write_session(tmp_path / "all", "a", AUDIT)
    write_session(tmp_path / "all" / "older", "b", AUDIT)
    assert [p.name for p in session_dirs([tmp_path / "all"])] == ["a"]
    assert session_dirs([tmp_path / "all" / "a"]) == [tmp_path / "all" / "a"]  # a session named itself


def test_session_dirs_lists_each_session_once_in_name_order_and_refuses_a_file(tmp_path):
    for name in ("b", "a", "c"):
        write_session(tmp_path / "all", name, AUDIT)
    (tmp_path / "link").symlink_to(tmp_path / "all" / "a")
    found = session_dirs([tmp_path / "all", tmp_path / "link", tmp_path / "all" / "b"])
    assert [p.name for p in found] == ["a", "b", "c"]
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(UsageError, match="neither a session nor a folder of sessions"):
        session_dirs([tmp_path / "file.txt"])
