"""Bad input to `seal`, `verify` and `evaluate`, found by a fuzz sweep: each gets one sentence and exit 2 (a seal
that no longer matches what was sealed keeps 6), never a traceback, 70 or 74. The seals and the session are the
repository's own, copied into tmp_path."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli

from softbench.core.errors import SealError, UsageError
from softbench.predictions.evaluate import evaluate
from softbench.predictions.seal import verify
from softbench.predictions.sessions import load_sessions

ROOT = Path(__file__).resolve().parents[1]
SEAL = "bf16-causal"  # no `until`: it can be sealed again at any time
# the one session that meets its prediction B1
SESSION = ROOT / "sessions" / "20261204T052647Z-latency-bf16-8K-causal-b1h16d128-triton-A0-vs-h15-sat-interleaved"


def copy_seal(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for suffix in (".yaml", ".sha256"):
        shutil.copy(ROOT / "sealed" / f"{SEAL}{suffix}", folder)
    return folder / f"{SEAL}.yaml"


def refused(done, code: int, says: str) -> None:
    """One `error:` line saying `says` (a hint may follow), the exit code, no traceback."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, done.stderr
    assert lines[0].startswith("error: ") and says in lines[0], done.stderr
    assert all(line.startswith("hint: ") for line in lines[1:]) and "Traceback" not in done.stderr + done.stdout


def test_an_empty_seal_path_is_one_sentence_not_an_internal_error(tmp_path):
    refused(run_cli("verify", "", cwd=tmp_path), 2, "names no file")
    refused(run_cli("evaluate", "", "--sessions", str(tmp_path), cwd=tmp_path), 2, "names no file")


def test_a_seal_name_too_long_for_a_file_or_empty_is_refused_before_anything_is_written(tmp_path):
    src, out = ROOT / "sealed" / f"{SEAL}.yaml", tmp_path / "out"
    refused(run_cli("seal", str(src), "--dir", str(out), "--name", "a" * 300), 2, "more than the 100")
    refused(run_cli("seal", str(src), "--dir", str(out), "--name", "a" * 101), 2, "more than the 100")  # one past
    refused(run_cli("seal", str(src), "--dir", str(out), "--name", ""), 2, "--name is empty")
    assert not out.exists()
    done = run_cli("seal", str(src), "--dir", str(out), "--name", "a" * 100)  # the longest name still seals
    assert done.returncode == 0 and (out / f"{'a' * 100}.sha256").is_file(), done.stderr


def test_a_sealed_file_replaced_by_a_huge_one_does_not_match_and_is_not_read(tmp_path):
    """seal reads no predictions file over 16 MiB, so a sealed file that large was replaced: a mismatch (6), said
    without reading it whole into memory."""
    sealed = copy_seal(tmp_path / "sealed")
    with sealed.open("r+b") as f:
        f.truncate(17 << 20)  # sparse: nothing written to the disk
    refused(run_cli("verify", str(sealed)), 6, "does not match its seal: it is 17 MiB, more than any predictions file")


def test_a_missing_seal_is_bad_input_not_a_mismatch(tmp_path):
    missing = str(tmp_path / "nonexist.yaml")
    refused(run_cli("verify", missing), 2, "does not exist")
    refused(run_cli("evaluate", missing, "--sessions", str(tmp_path)), 2, "does not exist")


def _lines(text: str, keep) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if keep(line))


# each: what the .sha256 file becomes, and a piece of the sentence that refuses it
DAMAGED = {
    "empty": (lambda t: "", "the first line must be"),
    "garbled": (lambda t: "garbled stuff here\n", "the first line must be"),
    "first-line-extra-word": (lambda t: t.replace(".yaml\n", ".yaml extra\n", 1), "the first line must be"),
    "unknown-format": (lambda t: t.replace("softbench-seal/1", "softbench-seal/99"), "the only format"),
    "no-header": (lambda t: _lines(t, lambda line: not line.startswith("#")), "lacks the '# key: value' lines"),
    "no-meta-lines": (lambda t: _lines(t, lambda line: not line.startswith("# ") or line.startswith("# prediction.")),
                      "sealed_utc, git_commit"),
    "time-no-time": (lambda t: _lines(t, lambda line: not line.startswith("# sealed_utc")) + "# sealed_utc: soon\n",
                     "its sealed_utc 'soon' is not an ISO 8601 time"),
    "time-twice": (lambda t: t + "# sealed_utc: 2026-11-01T00:00:00.000+00:00\n", "gives its sealed_utc line twice"),
    "commit-short": (lambda t: _lines(t, lambda line: not line.startswith("# git_commit")) + "# git_commit: abc\n",
                     "its git_commit 'abc' is not a commit"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_a_damaged_seal_file_is_bad_input(tmp_path, damage):
    edit, says = DAMAGED[damage]
    sealed = copy_seal(tmp_path)
    seal = sealed.with_suffix(".sha256")
    seal.write_text(edit(seal.read_text()))
    refused(run_cli("verify", str(sealed)), 2, says)


def test_a_binary_seal_file_is_bad_input_and_evaluate_stops_at_it(tmp_path):
    sealed = copy_seal(tmp_path / "sealed")
    sealed.with_suffix(".sha256").write_bytes(b"\xff" * 80)
    refused(run_cli("verify", str(sealed)), 2, "not UTF-8")
    out = tmp_path / "ev.json"
    refused(run_cli("evaluate", str(sealed), "--sessions", str(tmp_path), "--json", str(out)), 2, "not UTF-8")
    assert not out.exists()


def _repository_with_the_projects_commits(folder: Path) -> bool:
    """A fresh repository that reads this project's objects (no copy of them), so that a seal copied into it finds
    the commit it was made at; False where git or the project's repository is not there."""
    if shutil.which("git") is None:
        return False
    objects = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--path-format=absolute", "--git-path", "objects"],
                             capture_output=True, text=True)
    if objects.returncode != 0:
        return False
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    (folder / ".git" / "objects" / "info" / "alternates").write_text(objects.stdout.strip() + "\n")
    return True


def test_a_seal_dated_before_the_commit_it_was_made_at_does_not_verify(tmp_path):
    """A sealed_utc moved back lets sessions recorded before the real seal count as its evidence."""
    repo = tmp_path / "repo"
    if not _repository_with_the_projects_commits(repo):
        pytest.skip("no git, or the project is not in a git repository")
    sealed = copy_seal(repo / "sealed")
    seal = sealed.with_suffix(".sha256")
    record = verify(sealed).record  # as committed, it verifies
    made = subprocess.run(["git", "-C", str(repo), "show", "-s", "--format=%cI", record.meta["git_commit"]],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip("the seal's commit is not in this clone")
    seal.write_text(seal.read_text().replace(record.meta["sealed_utc"], "2026-11-01T00:00:00.000+00:00"))
    with pytest.raises(SealError, match="is earlier than its commit"):
        verify(sealed)
    refused(run_cli("evaluate", str(sealed), "--sessions", str(tmp_path)), 6, "is earlier than its commit")


@pytest.mark.skipif(not SESSION.is_dir(), reason="the recorded session is not here")
@pytest.mark.parametrize("complete", ["no", "false", "yes", 1])
def test_only_json_true_makes_a_session_complete(tmp_path, complete):
    sessions = tmp_path / "sessions"
    shutil.copytree(SESSION, sessions / SESSION.name)
    v = verify(copy_seal(tmp_path / "sealed"))

    def b1(include_partial=False):
        ev = evaluate(v.content, load_sessions([sessions]), include_partial=include_partial,
                      sealed_utc=v.record.meta["sealed_utc"])
        return next(p for p in ev.predictions if p.id == "B1")

    assert b1().verdict == "met"  # as recorded
    status = sessions / SESSION.name / "status.json"
    status.write_text(json.dumps({"command": "latency", "complete": complete, "state": "partial"}))
    assert b1().verdict == "unverified" and "partial" in b1().reason
    used = b1(include_partial=True)
    assert used.verdict == "met" and used.evidence[0].partial


def test_an_empty_json_path_is_refused(tmp_path):
    sealed = copy_seal(tmp_path / "sealed")
    refused(run_cli("evaluate", str(sealed), "--sessions", str(tmp_path), "--json", "", cwd=tmp_path), 2,
            "--json is empty")
