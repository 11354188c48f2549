"""The scope vocabulary that `seal` checks against must cover what sessions record: every top-level key of
the recorded sessions' summary.json and protocol.yaml, and the fields of their protocol mappings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from softbench.cli import main
from softbench.predictions.vocabulary import PROTOCOL_FIELDS, RECORDED, RECORDS_ONLY, scope_key_problem

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = sorted((ROOT / "sessions").glob("*/status.json"))


def recorded_keys(folder: Path) -> tuple[str, set[str], set[str]]:
    command = json.loads((folder / "status.json").read_text())["command"]
    keys: set[str] = set()
    protocol_fields: set[str] = set()
    for name in ("summary.json", "protocol.yaml"):
        p = folder / name
        if p.exists():
            data = json.loads(p.read_text()) if name.endswith(".json") else yaml.safe_load(p.read_text())
            keys |= set(data)
            if isinstance(data.get("protocol"), dict):
                protocol_fields |= set(data["protocol"])
    return command, keys, protocol_fields


def assert_covered(folder: Path) -> None:
    command, keys, protocol_fields = recorded_keys(folder)
    if command in RECORDS_ONLY:
        return  # an environment record or a matrix's index is no evidence: no prediction scopes it
    assert keys <= RECORDED[command], (folder.name, sorted(keys - RECORDED[command]))
    assert protocol_fields <= PROTOCOL_FIELDS.get(command, frozenset()), (folder.name, protocol_fields)
    for key in keys:
        assert scope_key_problem(key, {"command": command}) is None, key


@pytest.mark.skipif(not SESSIONS, reason="no recorded sessions")
def test_every_key_of_the_recorded_sessions_is_a_valid_scope_key():
    for status in SESSIONS:
        assert_covered(status.parent)


def test_a_freshly_recorded_sim_gates_session_is_covered(tmp_path, monkeypatch):
    from inprocess_worker import InProcessRunner
    from softbench.gates import engine as gates_engine

    # what the session records is the command's, wherever its kernels run: here in this process
    monkeypatch.setattr(gates_engine, "default_runner", InProcessRunner)
    assert main(["gates", "--backend", "sim", "--heads", "1", "--head-dim", "32", "--multi-seq", "256",
                 "--out", str(tmp_path)]) == 0
    (session,) = tmp_path.iterdir()
    assert_covered(session)
