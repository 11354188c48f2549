"""Sealing predictions: canonical form, refusal to replace a seal, and verification that catches any change."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from softbench.cli import main
from softbench.core.errors import SealError, UsageError
from softbench.predictions.schema import ValidationError, canonical_bytes, normalize
from softbench.predictions.seal import SealRecord, seal_file, verify

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "softbench" / "protocols" / "predictions-paper.yaml"

# One predictions file written two ways: the second reorders keys and predictions, adds comments, folds the
# statement over lines, uses flow style, an alias (`thresholds`, `ge`), 8K for 8192 and ints for floats.
FIRST = """\
title: demo predictions
predictions:
  - id: P1
    statement: FP8 causal gets 10 to 15 percent faster.
    quantity: speedup_pct
    comparator: between
    threshold: [10.0, 15.0]
    scope:
      command: latency
      dtype: fp8
      causal: true
      seq: 8192
    evidence: latency
  - id: P2
    statement: registers do not grow
    quantity: registers.A1
    comparator: "<="
    threshold: {quantity: registers.A0}
    scope: {command: audit}
    evidence: [ncu]
  - id: P10
    statement: MUFU nearly idle
    quantity: ncu.A1.mufu_pipe_pct
    comparator: ">="
    threshold: 0.5
    scope: {command: audit, head_dim: 128}
    evidence: ncu
"""

SECOND = """\
# comments are not part of the seal
predictions:
- evidence: ncu   # trailing comment
  comparator: ge
  threshold: 0.5
  quantity: ncu.A1.mufu_pipe_pct
  scope: {head_dim: 128.0, command: audit}
  statement: "MUFU   nearly idle"
  id: P10
- id: P1
  scope: {seq: 8K, causal: yes, dtype: fp8, command: latency}
  statement: >
    FP8 causal gets 10 to 15
    percent faster.
  quantity: speedup_pct
  evidence: [latency, latency]
  thresholds:
    - 10
    - 15
  comparator: BETWEEN

- {id: P2, statement: registers do not grow, quantity: registers.A1, comparator: le,
   threshold: {quantity: registers.A0}, scope: {command: audit}, evidence: ncu}
title:    demo   predictions
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def handmade_seal(data: bytes, filename: str) -> str:
    """A seal file written by hand for `data`, with every line softbench seal writes, so that verify reads it."""
    meta = {"format": "softbench-seal/1", "sealed_utc": "2026-12-06T00:00:00.000+00:00", "git_commit": "none",
            "git_dirty": "unknown", "source": "by hand", "softbench": "0", "predictions": 1}
    return SealRecord(hashlib.sha256(data).hexdigest(), filename, meta).to_text()


def test_canonical_form_is_stable_under_key_order_comments_and_whitespace():
    a = canonical_bytes(normalize(yaml.safe_load(FIRST)))
    b = canonical_bytes(normalize(yaml.safe_load(SECOND)))
    assert a == b
    # predictions come out in natural id order whatever the input order
    assert [p["id"] for p in yaml.safe_load(a)["predictions"]] == ["P1", "P2", "P10"]


def test_change_of_meaning_changes_the_canonical_form():
    base = canonical_bytes(normalize(yaml.safe_load(FIRST)))
    for old, new in [("[10.0, 15.0]", "[10.0, 15.5]"), ("dtype: fp8", "dtype: bf16"), ("causal: true", "causal: false"),
                     ('comparator: "<="', 'comparator: "<"'), ("registers.A0}", "registers.A0x}")]:
        assert old in FIRST
        changed = canonical_bytes(normalize(yaml.safe_load(FIRST.replace(old, new))))
        assert changed != base, (old, new)


def test_seal_writes_canonical_yaml_and_parseable_sha256(tmp_path):
    src = write(tmp_path, "demo.yaml", FIRST)
    r = seal_file(src, directory=tmp_path / "sealed")
    assert r.created and r.yaml_path == tmp_path / "sealed" / "demo.yaml"
    data = r.yaml_path.read_bytes()
    assert data == canonical_bytes(normalize(yaml.safe_load(FIRST)))
    rec = SealRecord.parse(r.seal_path.read_text(), "x")
    assert rec.sha256 == hashlib.sha256(data).hexdigest() == r.sha256
    assert rec.filename == "demo.yaml"
    assert rec.meta["format"].startswith("softbench-seal/")
    assert rec.meta["sealed_utc"].endswith("+00:00")
    assert "git_commit" in rec.meta
    assert set(rec.predictions) == {"P1", "P2", "P10"}
    assert verify(r.yaml_path).content["predictions"][0]["id"] == "P1"


@pytest.mark.skipif(shutil.which("git") is None, reason="no git on this machine")
def test_a_draft_outside_any_repository_takes_the_commit_of_the_seals_repository(tmp_path):
    """A predictions file drafted outside any repository (under /tmp) is sealed with the commit of the repository
    its seal goes into; outside both, the commit is none."""
    repo = tmp_path / "project"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README").write_text("x\n")
    subprocess.run([*git, "add", "README"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / "drafts").mkdir()
    draft = write(tmp_path / "drafts", "demo.yaml", FIRST)
    rec = SealRecord.parse(seal_file(draft, directory=repo / "sealed").seal_path.read_text(), "x")
    assert rec.meta["git_commit"] == head and rec.meta["git_dirty"] == "false"
    outside = SealRecord.parse(seal_file(draft, directory=tmp_path / "sealed").seal_path.read_text(), "x")
    assert outside.meta["git_commit"] == "none"


@pytest.mark.skipif(shutil.which("sha256sum") is None, reason="no sha256sum on this machine")
def test_seal_file_is_read_by_sha256sum(tmp_path):
    r = seal_file(write(tmp_path, "demo.yaml", FIRST), directory=tmp_path / "sealed")
    done = subprocess.run(["sha256sum", "-c", "--strict", r.seal_path.name], cwd=r.seal_path.parent,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_seal_in_sha256sums_binary_form_names_the_same_file(tmp_path):
    """`sha256sum -b` writes '<hash> *<name>': the '*' marks binary mode, not part of the name."""
    r = seal_file(write(tmp_path, "demo.yaml", FIRST), directory=tmp_path / "sealed")
    text = r.seal_path.read_text()
    r.seal_path.write_text(text.replace("  demo.yaml\n", " *demo.yaml\n", 1))
    assert verify(r.yaml_path).record.filename == "demo.yaml"


def test_a_pair_named_yml_is_verified_as_such(tmp_path):
    """verify takes NAME.yml as the predictions file of the pair NAME.yml + NAME.sha256 (a suffix, not part of a
    bare name)."""
    r = seal_file(write(tmp_path, "demo.yaml", FIRST), directory=tmp_path / "sealed")
    yml = r.yaml_path.rename(r.yaml_path.with_suffix(".yml"))
    r.seal_path.write_text(r.seal_path.read_text().replace("  demo.yaml\n", "  demo.yml\n", 1))
    assert verify(yml).yaml_path == yml


def test_one_changed_byte_anywhere_is_caught(tmp_path):
    r = seal_file(write(tmp_path, "demo.yaml", FIRST), directory=tmp_path / "sealed")
    original = r.yaml_path.read_bytes()
    step = max(1, len(original) // 40)
    for pos in range(0, len(original), step):
        b = bytearray(original)
        b[pos] = ord("7") if b[pos] != ord("7") else ord("8")
        r.yaml_path.write_bytes(bytes(b))
        with pytest.raises(SealError):
            verify(r.yaml_path)
    r.yaml_path.write_bytes(original)
    verify(r.yaml_path)  # restored: verifies again


def test_mismatch_names_the_changed_prediction_and_shows_a_diff(tmp_path):
    r = seal_file(write(tmp_path, "demo.yaml", FIRST), directory=tmp_path / "sealed")
    text = r.yaml_path.read_text()
    assert "- 15.0\n" in text
    r.yaml_path.write_text(text.replace("- 15.0\n", "- 16.0\n"))
    with pytest.raises(SealError) as e:
        verify(r.yaml_path)
    msg = str(e.value)
    assert "prediction P1: changed" in msg
    assert "prediction P2: changed" not in msg
    # a non-canonical edit (extra spaces) is shown as a unified diff against the canonical rendering
    r.yaml_path.write_text(text.replace("- 15.0\n", "-   15.0\n"))
    with pytest.raises(SealError) as e:
        verify(r.yaml_path)
    assert "+  -   15.0" in str(e.value) and "@@" in str(e.value)


def test_edited_seal_hash_or_handmade_pair_is_refused(tmp_path):
    r = seal_file(write(tmp_path, "demo.yaml", FIRST), directory=tmp_path / "sealed")
    seal_text = r.seal_path.read_text()
    r.seal_path.write_text(("0" * 64) + seal_text[64:])
    with pytest.raises(SealError, match="does not match its seal"):
        verify(r.yaml_path)
    # a pair made by hand: the hash fits the bytes, but the bytes are not what seal writes
    handmade = FIRST.encode()
    r.yaml_path.write_bytes(handmade)
    r.seal_path.write_text(handmade_seal(handmade, "demo.yaml"))
    with pytest.raises(SealError, match="not in canonical form"):
        verify(r.yaml_path)


def test_resealing_identical_content_is_a_no_op_and_different_content_is_refused(tmp_path):
    sealed = tmp_path / "sealed"
    r = seal_file(write(tmp_path, "demo.yaml", FIRST), directory=sealed)
    before = (r.yaml_path.read_bytes(), r.seal_path.read_bytes())
    again = seal_file(write(tmp_path, "other.yaml", SECOND), name="demo", directory=sealed)
    assert not again.created and again.sha256 == r.sha256
    assert (r.yaml_path.read_bytes(), r.seal_path.read_bytes()) == before
    changed = write(tmp_path, "demo2.yaml", FIRST.replace("threshold: 0.5", "threshold: 0.25"))
    with pytest.raises(SealError, match="already holds different sealed content") as e:
        seal_file(changed, name="demo", directory=sealed)
    assert "-    threshold: 0.5" in str(e.value) or "threshold: 0.5" in str(e.value)
    assert f"--- {r.yaml_path}\n" in str(e.value)  # the diff names the sealed file where it is (--dir), not sealed/
    assert (r.yaml_path.read_bytes(), r.seal_path.read_bytes()) == before
    # an incomplete seal (partner file gone) is refused rather than quietly completed
    r.seal_path.unlink()
    with pytest.raises(SealError, match="without its partner"):
        seal_file(write(tmp_path, "demo.yaml", FIRST), directory=sealed)


@pytest.mark.parametrize("old,new,pid,field,message", [
    ('comparator: "<="', "comparator: ~=", "P2", "comparator", ""),
    ("threshold: [10.0, 15.0]", "threshold: 10.0", "P1", "threshold", ""),
    ("threshold: 0.5", "threshold: [0.1, 0.5]", "P10", "threshold", ""),
    ("dtype: fp8", "dtype: fp4", "P1", "scope.dtype", ""),
    ("causal: true", "causal: maybe", "P1", "scope.causal", ""),
    ("quantity: registers.A1", "quantity: registers..A1", "P2", "quantity", ""),
    ("    evidence: [ncu]\n", "", "P2", "evidence", ""),
    ("threshold: 0.5", "threshold: .nan", "P10", "threshold", ""),
    ("threshold: 0.5", "threshold: true", "P10", "threshold", ""),
    ("    evidence: ncu\n", "    evidence: ncu\n    treshold: 3\n", "P10", "treshold", ""),
    ("statement: MUFU nearly idle", 'statement: "   "', "P10", "statement", ""),  # blank text is no statement
    ("head_dim: 128", "head_dim: 0", "P10", "scope.head_dim", ""),
    # a reference holds the quantity alone: another key in it would be dropped from the seal without a word
    ("threshold: {quantity: registers.A0}", "threshold: {quantity: registers.A0, scale: 2}", "P2", "threshold", ""),
    # a quantity is a path into summary.json: words with a space between them are no path
    ("quantity: speedup_pct", "quantity: speedup pct", "P1", "quantity", "not a dotted path"),
    # a range takes exactly two bounds: a third is refused in words, not dropped or crashed on
    ("threshold: [10.0, 15.0]", "threshold: [10.0, 15.0, 20.0]", "P1", "threshold", "needs two bounds"),
    # a single comparator with a list says it takes one bound
    ("comparator: between", 'comparator: ">="', "P1", "threshold", "takes one bound"),
    # an empty scope list matches no session
    ("dtype: fp8", "dtype: []", "P1", "scope.dtype", "matches nothing"),
    # a prediction that needs no evidence could never be scored
    ("evidence: latency", "evidence: []", "P1", "evidence", "at least one evidence kind"),
    # threshold and thresholds are two spellings of one field: giving both is ambiguous
    ("    evidence: latency\n", "    evidence: latency\n    thresholds: [1.0, 2.0]\n", "P1", "thresholds", "not both"),
])
def test_validation_errors_name_the_prediction_and_field(old, new, pid, field, message):
    assert old in FIRST
    with pytest.raises(UsageError) as e:
        normalize(yaml.safe_load(FIRST.replace(old, new, 1)))
    assert f"prediction {pid!r}" in str(e.value) and f"field {field!r}" in str(e.value), str(e.value)
    assert message in str(e.value)  # where a row names it, the reason in words


def test_a_range_may_be_a_single_point():
    """between and outside take inclusive bounds, so [x, x] is a valid range (exactly x); only low > high is not."""
    content = normalize(yaml.safe_load(FIRST.replace("threshold: [10.0, 15.0]", "threshold: [12.5, 12.5]")))
    assert next(p for p in content["predictions"] if p["id"] == "P1")["threshold"] == [12.5, 12.5]


def test_a_scope_list_is_a_set_and_a_list_of_one_is_its_value():
    """A list in a scope means "any of": its order and repeats seal alike, and a list of one seals as that value."""
    def dtypes(written):
        text = FIRST.replace("dtype: fp8", f"dtype: {written}")
        return next(p for p in normalize(yaml.safe_load(text))["predictions"] if p["id"] == "P1")["scope"]["dtype"]

    assert dtypes("[fp8, bf16]") == dtypes("[bf16, fp8, bf16]") == ["bf16", "fp8"]
    assert dtypes("[fp8]") == dtypes("fp8") == "fp8"


def test_comparator_spellings_and_evidence_case_seal_alike():
    alt = FIRST.replace('comparator: ">="', 'comparator: "=>"').replace("    evidence: ncu\n", "    evidence: NCU\n")
    assert alt != FIRST
    assert canonical_bytes(normalize(yaml.safe_load(alt))) == canonical_bytes(normalize(yaml.safe_load(FIRST)))


def test_duplicate_ids_and_empty_files_are_refused():
    with pytest.raises(UsageError, match="'P1'.*used more than once"):
        normalize(yaml.safe_load(FIRST.replace("id: P2", "id: P1")))
    with pytest.raises(UsageError, match="non-empty list"):
        normalize({"predictions": []})
    with pytest.raises(UsageError, match="unknown top-level field"):
        normalize({"predictions": [], "extra": 1})


def test_paper_predictions_file_validates_and_seals(tmp_path):
    content = normalize(yaml.safe_load(PAPER.read_text()))
    preds = {p["id"]: p for p in content["predictions"]}
    assert len(preds) == 6
    assert preds["P4"]["scope"]["dtype"] == "fp8" and preds["P5"]["scope"]["dtype"] == "bf16"
    assert all(preds[k]["evidence"] == ["ncu"] for k in ("P1", "P2", "P3", "P6"))
    r = seal_file(PAPER, name="paper", directory=tmp_path)
    assert verify(r.yaml_path).record.sha256 == r.sha256


def test_cli_seal_and_verify_exit_codes(tmp_path, capsys):
    src = write(tmp_path, "demo.yaml", FIRST)
    sealed = tmp_path / "sealed"
    assert main(["seal", str(src), "--name", "d", "--dir", str(sealed)]) == 0
    assert main(["seal", str(src), "--name", "d", "--dir", str(sealed)]) == 0
    assert "identical content" in capsys.readouterr().out
    assert main(["verify", str(sealed / "d.yaml")]) == 0
    p = sealed / "d.yaml"
    p.write_bytes(p.read_bytes().replace(b"P10", b"P11", 1))
    assert main(["verify", str(p)]) == SealError.exit_code != 0
    assert main(["seal", str(tmp_path / "missing.yaml")]) == UsageError.exit_code


# --- scope keys and evidence kinds are checked against what sessions record --------------------------------

@pytest.mark.parametrize("old,new,field,message,hint", [
    ("      seq: 8192\n", "      seq: 8192\n      colour: blue\n", "scope.colour", "no latency session records 'colour'",
     None),
    ("      seq: 8192\n", "      seq: 8192\n      varaint: A1\n", "scope.varaint", "records 'varaint'",
     "did you mean variant"),
    ("    evidence: latency\n", "    evidence: vibes\n", "evidence", "'vibes' is not an evidence kind", None),
    ("    evidence: latency\n", "    evidence: latncy\n", "evidence", "'latncy' is not an evidence kind",
     "did you mean latency"),
    ("      command: latency\n", "      command: latecny\n", "scope.command", "'latecny' is not a command",
     "did you mean latency"),
    ("      seq: 8192\n", "      seq: 8192\n      protocol.rouns: 3\n", "scope.protocol.rouns",
     "protocol field 'rouns'", "did you mean rounds"),
    # audit sessions record no speed-up protocol: a latency key under an audit scope is refused
    ("    scope: {command: audit}\n", "    scope: {command: audit, speedup_pct: 3}\n", "scope.speedup_pct",
     "no audit session records 'speedup_pct'", None),
])
def test_seal_refuses_scope_keys_and_evidence_that_no_session_records(tmp_path, old, new, field, message, hint):
    assert old in FIRST
    src = write(tmp_path, "demo.yaml", FIRST.replace(old, new))
    with pytest.raises(UsageError) as e:
        seal_file(src, directory=tmp_path / "sealed")
    assert f"field {field!r}" in str(e.value) and message in str(e.value), str(e.value)
    if hint:
        assert hint in (e.value.hint or ""), e.value.hint
    else:  # nothing close: no misleading suggestion
        assert "did you mean" not in (e.value.hint or "")
    assert not (tmp_path / "sealed").exists(), "nothing is written before the file validates"


def test_recorded_keys_seal_including_provenance_and_dotted_paths(tmp_path):
    text = FIRST.replace("      seq: 8192\n", "      seq: 8192\n      source_sha256: abc\n      protocol.rounds: 3\n"
                                              "      median_ms.A0: 1.0\n")
    assert seal_file(write(tmp_path, "demo.yaml", text), directory=tmp_path / "sealed").created


def test_a_non_utf8_or_binary_predictions_file_is_refused(tmp_path):
    src = tmp_path / "bin.yaml"
    src.write_bytes(b"\xff\xfe\x00predictions: \x80\x81")
    with pytest.raises(UsageError, match="not UTF-8 text"):
        seal_file(src, directory=tmp_path / "sealed")
    with pytest.raises(UsageError, match="is a folder"):
        seal_file(tmp_path, directory=tmp_path / "sealed")


# --- a sealed name can be replaced, deliberately, and the old pair is kept --------------------------------

def test_replace_archives_the_old_pair_where_it_still_verifies(tmp_path):
    sealed = tmp_path / "sealed"
    first = seal_file(write(tmp_path, "demo.yaml", FIRST), directory=sealed)
    old_bytes = (first.yaml_path.read_bytes(), first.seal_path.read_bytes())
    fixed = write(tmp_path, "fixed.yaml", FIRST.replace("threshold: 0.5", "threshold: 0.25"))
    with pytest.raises(SealError, match="different sealed content") as e:
        seal_file(fixed, name="demo", directory=sealed)
    assert "--replace" in e.value.hint
    r = seal_file(fixed, name="demo", directory=sealed, replace=True)
    assert r.created and r.archived is not None and r.archived.parent == sealed / "replaced"
    assert r.record.meta["replaces"] == first.sha256
    # the old pair moved unchanged, and verifies where it lies now
    assert ((r.archived / "demo.yaml").read_bytes(), (r.archived / "demo.sha256").read_bytes()) == old_bytes
    assert verify(r.archived / "demo.yaml").record.sha256 == first.sha256
    assert verify(sealed / "demo.yaml").record.sha256 == r.sha256 != first.sha256
    # identical content with --replace is still a no-op
    again = seal_file(fixed, name="demo", directory=sealed, replace=True)
    assert not again.created and len(list((sealed / "replaced").iterdir())) == 1


def test_the_archive_of_a_replaced_seal_is_named_by_its_time_in_utc(tmp_path):
    """A seal whose sealed_utc was written with another offset was archived under that offset's local hour read
    as UTC (strftime of the time as given): 10:00+02:00 went to 100000Z rather than 080000Z."""
    from softbench.predictions.seal import _archive_dir

    sealed = tmp_path / "sealed"
    first = seal_file(write(tmp_path, "demo.yaml", FIRST), directory=sealed)
    text = first.seal_path.read_text()
    stamp = first.record.meta["sealed_utc"]
    first.seal_path.write_text(text.replace(stamp, "2026-12-06T10:00:00.000+02:00"))
    assert _archive_dir(sealed, first.seal_path).name == f"20261206T080000Z-{first.sha256[:12]}"


def test_a_sealed_file_edited_in_place_is_refused_not_called_sealed(tmp_path):
    # sealing the edited file itself once compared the edit with itself and answered "already sealed"
    sealed = tmp_path / "sealed"
    r = seal_file(write(tmp_path, "demo.yaml", FIRST), directory=sealed)
    pair = (r.yaml_path.read_bytes(), r.seal_path.read_bytes())
    r.yaml_path.write_bytes(r.yaml_path.read_bytes().replace(b"0.5", b"0.25", 1))
    edited = r.yaml_path.read_bytes()
    for replace in (False, True):
        with pytest.raises(SealError, match="edited after it was sealed") as e:
            seal_file(r.yaml_path, directory=sealed, replace=replace)
        assert "copy" in e.value.hint
        assert (r.yaml_path.read_bytes(), r.seal_path.read_bytes()) == (edited, pair[1])
        assert not (sealed / "replaced").exists()
    # a copy of the edit, sealed with --replace once the pair is restored, goes through
    copy = tmp_path / "edit.yaml"
    copy.write_bytes(edited)
    r.yaml_path.write_bytes(pair[0])
    again = seal_file(copy, name="demo", directory=sealed, replace=True)
    assert again.created and verify(sealed / "demo.yaml").record.sha256 == again.sha256 != r.sha256


def test_replace_completes_an_incomplete_pair(tmp_path):
    sealed = tmp_path / "sealed"
    r = seal_file(write(tmp_path, "demo.yaml", FIRST), directory=sealed)
    r.seal_path.unlink()
    again = seal_file(write(tmp_path, "demo.yaml", FIRST), directory=sealed, replace=True)
    assert again.created and (again.archived / "demo.yaml").exists()
    assert verify(sealed / "demo.yaml").record.sha256 == r.sha256


def test_a_window_reads_as_one_utc_time_whether_yaml_parsed_it_or_not(tmp_path):
    # unquoted, YAML reads a datetime; quoted, text; in another zone or none (taken as UTC): one canonical form
    forms = ["2026-12-05T17:00:00Z", '"2026-12-05T17:00:00Z"', '"2026-12-05T18:00:00+01:00"', "2026-12-05 17:00:00"]
    seen = set()
    for form in forms:
        text = FIRST.replace("    evidence: latency\n", f"    evidence: latency\n    until: {form}\n", 1)
        content = normalize(yaml.safe_load(text))
        (p1,) = [p for p in content["predictions"] if p["id"] == "P1"]
        assert p1["until"] == "2026-12-05T17:00:00+00:00"
        seen.add(canonical_bytes(content))
    assert len(seen) == 1
    bad = FIRST.replace("    evidence: latency\n", "    evidence: latency\n    until: after the lease\n", 1)
    with pytest.raises(UsageError, match=r"prediction 'P1', field 'until'.*not a time"):
        normalize(yaml.safe_load(bad))


def test_a_window_that_closed_before_the_seal_is_refused(tmp_path):
    def with_window(until: str) -> str:
        return FIRST.replace("    evidence: latency\n", f"    evidence: latency\n    until: {until}\n", 1)

    closed = write(tmp_path, "closed.yaml", with_window("2020-01-01T00:00:00Z"))
    with pytest.raises(UsageError, match="its window closed at 2020-01-01T00:00:00\\+00:00, before this seal"):
        seal_file(closed, directory=tmp_path / "sealed")
    assert not (tmp_path / "sealed").exists() or not any((tmp_path / "sealed").iterdir())
    open_ = write(tmp_path, "open.yaml", with_window("2999-01-01T00:00:00Z"))
    r = seal_file(open_, directory=tmp_path / "sealed")
    assert verify(r.yaml_path).content["predictions"][0]["until"] == "2999-01-01T00:00:00+00:00"


# --- found by an adversarial review (2026-12-06) ---------------------------------------------------------------

def test_a_repeated_key_is_refused_not_dropped(tmp_path):
    # PyYAML keeps the last of two equal keys: a second predictions list, or a second threshold, would replace
    # the first without a word
    twice = FIRST + "predictions:\n  - id: P9\n"
    with pytest.raises(UsageError, match="'predictions' appears twice"):
        seal_file(write(tmp_path, "twice.yaml", twice), directory=tmp_path / "sealed")
    inner = FIRST.replace("    threshold: 0.5\n", "    threshold: 0.5\n    threshold: 5.0\n", 1)
    with pytest.raises(UsageError, match="'threshold' appears twice"):
        seal_file(write(tmp_path, "inner.yaml", inner), directory=tmp_path / "sealed")
    assert not (tmp_path / "sealed").exists() or not any((tmp_path / "sealed").iterdir())


def test_a_bare_name_with_a_dot_opens_its_own_pair(tmp_path):
    sealed = tmp_path / "sealed"
    a = seal_file(write(tmp_path, "a.yaml", FIRST), name="p18", directory=sealed)
    b = seal_file(write(tmp_path, "b.yaml", FIRST.replace("threshold: 0.5", "threshold: 0.25")), name="p18.v2",
                  directory=sealed)
    assert verify(sealed / "p18").record.sha256 == a.sha256
    assert verify(sealed / "p18.v2").record.sha256 == b.sha256 != a.sha256


def test_replacing_incomplete_pairs_in_turn_keeps_every_archive(tmp_path):
    sealed = tmp_path / "sealed"
    sealed.mkdir()
    # three: the third must find a free name past the second's (-2), not reuse it
    drafts = [FIRST.replace("threshold: 0.5", f"threshold: {t}") for t in (0.5, 0.25, 0.125)]
    for draft in drafts:
        (sealed / "p.yaml").write_text(draft)  # a draft with no seal beside it
        seal_file(write(tmp_path, "src.yaml", FIRST.replace("threshold: 0.5", "threshold: 0.75")), name="p",
                  directory=sealed, replace=True)
        (sealed / "p.sha256").unlink()
    kept = sorted(p.read_text() for p in (sealed / "replaced").glob("*/p.yaml"))
    assert kept == sorted(drafts)


@pytest.mark.parametrize("written", ["9.0", "9"])
def test_an_unquoted_capability_seals_as_the_text_sessions_record(written):
    text = FIRST.replace("      seq: 8192\n", f"      seq: 8192\n      gpu_capability: {written}\n", 1)
    (p1,) = [p for p in normalize(yaml.safe_load(text))["predictions"] if p["id"] == "P1"]
    assert p1["scope"]["gpu_capability"] == "9.0"


@pytest.mark.parametrize("old, new, message", [
    ("threshold: 0.5", "threshold: " + "9" * 320, "too large"),
    ("      seq: 8192\n", "      seq: 8192\n      head_dim: .inf\n", "must be finite"),
    ("      seq: 8192\n", "      seq: 8192\n      head_dim: .nan\n", "must be finite"),
    ("    evidence: latency\n", "    evidence: latency\n    until: '0001-01-01T00:00:00+01:00'\n", "until"),
])
def test_numbers_and_times_past_the_edges_get_one_sentence(tmp_path, old, new, message):
    assert old in FIRST
    with pytest.raises(UsageError, match=message):
        seal_file(write(tmp_path, "edge.yaml", FIRST.replace(old, new, 1)), directory=tmp_path / "sealed")


def test_an_unquoted_date_is_taken_as_its_midnight():
    text = FIRST.replace("    evidence: latency\n", "    evidence: latency\n    until: 2999-01-01\n", 1)
    (p1,) = [p for p in normalize(yaml.safe_load(text))["predictions"] if p["id"] == "P1"]
    assert p1["until"] == "2999-01-01T00:00:00+00:00"


def test_resealing_identical_content_after_its_window_closed_is_still_a_no_op(tmp_path, monkeypatch):
    import datetime as dt
    from softbench.predictions import seal as seal_module
    text = FIRST.replace("    evidence: latency\n", "    evidence: latency\n    until: 2999-01-01T00:00:00Z\n", 1)
    r = seal_file(write(tmp_path, "w.yaml", text), directory=tmp_path / "sealed")
    later = dt.datetime(3000, 1, 1, tzinfo=dt.timezone.utc)
    real = seal_module.check_windows_open
    monkeypatch.setattr(seal_module, "check_windows_open", lambda content, now=None: real(content, now=later))
    again = seal_file(write(tmp_path, "w.yaml", text), directory=tmp_path / "sealed")
    assert not again.created and again.sha256 == r.sha256
    with pytest.raises(UsageError, match="window closed"):
        seal_file(write(tmp_path, "w.yaml", text.replace("threshold: 0.5", "threshold: 0.25")),
                  directory=tmp_path / "sealed", replace=True)


def test_a_handmade_pair_that_is_not_utf8_is_refused_in_one_sentence(tmp_path):
    y = tmp_path / "h.yaml"
    y.write_bytes(b"predictions: \xff\n")
    (tmp_path / "h.sha256").write_text(handmade_seal(y.read_bytes(), "h.yaml"))
    with pytest.raises(SealError, match="not UTF-8 text"):
        verify(y)


def test_the_seal_files_own_lines_are_checked(tmp_path):
    repo = tmp_path / "project"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    r = seal_file(write(tmp_path, "demo.yaml", FIRST), directory=repo / "sealed")
    original = r.seal_path.read_text()
    assert verify(r.yaml_path)  # sealed, not yet committed: nothing to compare the lines with
    subprocess.run([*git, "add", "sealed"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "seal"], check=True)
    edits = [(r.record.meta["sealed_utc"], "2000-01-01T00:00:00.000+00:00", "differs from its committed copy in "
              "sealed_utc"),
             ("# predictions: 3", "# predictions: 2", "counts 2 predictions"),
             (r.record.predictions["P1"], "0" * 64, "per-prediction hashes")]
    for old, new, message in edits:
        r.seal_path.write_text(original.replace(old, new))
        with pytest.raises(SealError, match=message):
            verify(r.yaml_path)
    r.seal_path.write_text(original)
    assert verify(r.yaml_path).record.sha256 == r.sha256


def test_a_seal_whose_time_was_edited_into_no_time_does_not_verify(tmp_path):
    """The seal's time decides which sessions count as evidence; `verify` once passed `sealed_utc: yesterday`,
    which `evaluate` then refused. Both now stop at the seal file, as at any damaged seal: bad input (2)."""
    r = seal_file(write(tmp_path, "demo.yaml", FIRST), directory=tmp_path / "sealed")
    text = r.seal_path.read_text()
    stamp = next(line for line in text.splitlines() if line.startswith("# sealed_utc: "))
    r.seal_path.write_text(text.replace(stamp, "# sealed_utc: yesterday"))
    with pytest.raises(UsageError, match="its sealed_utc 'yesterday' is not an ISO 8601 time"):
        verify(r.yaml_path)


def test_a_tag_is_told_apart_from_a_repeated_key_in_predictions_and_protocol_files(tmp_path):
    """One YAML reader for predictions and protocol files (core.textfile.parse_yaml): a tag the safe loader does
    not build is 'not plain YAML'; a repeated key, which the predictions loader refuses as a constructor error
    too, keeps the syntax hint rather than the advice about tags."""
    from softbench.core.protocol import load_yaml_mapping

    twice = write(tmp_path, "twice.yaml", FIRST + "predictions:\n  - id: P9\n")
    with pytest.raises(UsageError, match="'predictions' appears twice") as e:
        seal_file(twice, directory=tmp_path / "sealed")
    assert "not valid YAML" in str(e.value) and "tags" not in (e.value.hint or "")
    tagged = "x: !!python/object:os.system {}\n"
    with pytest.raises(UsageError, match="is not plain YAML") as e:
        seal_file(write(tmp_path, "tagged.yaml", tagged), directory=tmp_path / "sealed")
    assert e.value.hint == "use plain values, no tags"
    with pytest.raises(UsageError, match=r"protocol file .*tagged-protocol\.yaml is not plain YAML"):
        load_yaml_mapping(write(tmp_path, "tagged-protocol.yaml", tagged))


# FIRST's P1 alone, its scope only command and dtype, for the canonical forms and scope keys below
ONE = "predictions:\n" + FIRST[FIRST.index("  - id: P1"):FIRST.index("  - id: P2")].replace(
    "      causal: true\n      seq: 8192\n", "")
assert "causal: true" not in ONE and ONE.endswith("    evidence: latency\n")


def first(text: str) -> dict:
    """The normalized form of a file's first prediction."""
    return normalize(yaml.safe_load(text))["predictions"][0]


def test_a_whole_float_in_any_scope_key_seals_as_the_integer():
    """128.0 and 128 select the same sessions, for keys beyond the shape's integers too."""
    text = ONE.replace("      dtype: fp8\n", "      dtype: fp8\n      protocol.rounds: {}\n")
    assert first(text.format("3.0"))["scope"]["protocol.rounds"] == 3
    assert type(first(text.format("3.0"))["scope"]["protocol.rounds"]) is int
    assert first(text.format("3.0")) == first(text.format("3"))
    assert first(text.format("2.5"))["scope"]["protocol.rounds"] == 2.5


def test_unit_and_note_are_text_with_their_whitespace_collapsed():
    text = ONE.replace("    evidence: latency\n",
                       "    evidence: latency\n    unit: ' % '\n    note: |\n      two\n      lines\n")
    p = first(text)
    assert (p["unit"], p["note"]) == ("%", "two lines")
    for bad in ("unit: 5", "note: ''"):
        with pytest.raises(ValidationError, match="must be non-empty text"):
            first(ONE.replace("    evidence: latency\n", f"    evidence: latency\n    {bad}\n"))


def test_a_scope_without_a_command_seals_and_its_keys_are_still_checked(tmp_path):
    """A scope that names no command allows any command's keys (vocabulary._commands_in); it once crashed
    seal with an internal TypeError instead of sealing or naming the unknown key."""
    src = tmp_path / "nocmd.yaml"
    src.write_text(ONE.replace("      command: latency\n", ""))
    assert seal_file(src, directory=tmp_path / "sealed").created
    src.write_text(ONE.replace("      command: latency\n", "      colour: blue\n"))
    with pytest.raises(ValidationError, match="field 'scope.colour': no session records 'colour'"):
        seal_file(src, directory=tmp_path / "sealed2")


@pytest.mark.parametrize("scope", [
    # a list of commands: any of them; each one's keys are allowed
    "{command: [latency, sweep], dtype: fp8}",
    "{command: [energy, latency], protocol.rounds: 3}",
    "{command: [audit, latency], speedup_pct: 3}",
    # the GPU a session ran on, from env.json
    "{command: latency, gpu_name: NVIDIA H100 80GB HBM3, gpu_capability: '9.0'}",
    # a dotted path below a protocol field that holds a mapping
    "{command: energy, protocol.shape.seq: 8192}",
])
def test_scope_keys_that_sessions_record_seal(tmp_path, scope):
    src = tmp_path / "ok.yaml"
    src.write_text(ONE.replace("    scope:\n      command: latency\n      dtype: fp8\n", f"    scope: {scope}\n"))
    assert f"scope: {scope}" in src.read_text()
    assert seal_file(src, directory=tmp_path / "sealed").created


def test_a_misspelt_command_is_named_whichever_scope_key_comes_first(tmp_path):
    src = tmp_path / "typo.yaml"
    src.write_text(ONE.replace("      command: latency\n      dtype: fp8\n",
                               "      dtype: fp8\n      command: latecny\n"))
    with pytest.raises(ValidationError, match="field 'scope.command': 'latecny' is not a command") as e:
        seal_file(src, directory=tmp_path / "sealed")
    assert "did you mean latency" in (e.value.hint or "")
