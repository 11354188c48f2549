"""`softbench audit --backend triton --arch sm_90a`: softbench's own Hopper kernels compiled for the H200 on this
machine (no GPU), nothing run, their SASS audited as FA4's are, with the key loop's instruction mix beside the
counts. Refusals in one sentence; real compiles through the CLI (Triton's bundled ptxas, as make setup installs it)."""

import importlib.util
import json

import pytest

from softbench.audit import cross
from softbench.audit.engine import driver_env
from softbench.core.errors import UsageError

# found, not imported: the interpreter test modules set TRITON_INTERPRET before anything imports triton, and
# pytest imports this module before theirs
pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")


def _error_line(r) -> str:
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    return line


@pytest.mark.parametrize("args,expected", [
    (["--backend", "triton"], "compiles for the H200 and reads the SASS (--arch sm_90a)"),
    (["--backend", "triton", "--arch", "sm_100a"], "--arch sm_100a compiles --backend fa4, not triton"),
    (["--backend", "fa4", "--arch", "sm_90a"], "--arch sm_90a compiles --backend triton, not fa4"),
    (["--backend", "fa4", "--arch", "sm_100a", "--triton-config", "gluon-n128s2-c240l24-hg8"],
     "--triton-config applies to --backend triton only"),
])
def test_combinations_the_audit_cannot_do_are_refused_before_anything_starts(cli, tmp_path, args, expected):
    r = cli("audit", *args, "--out", str(tmp_path))
    assert expected in _error_line(r)
    assert not list(tmp_path.iterdir())


def test_targets_name_their_backend():
    assert cross.target_for("sm_90a").capability == 90 and cross.target_for("sm_90a").num_sms == 132
    cross.check_target("triton", "sm_90a")
    cross.check_target("fa4", "native")
    with pytest.raises(UsageError) as refused:
        cross.check_target("triton", "native")
    assert refused.value.hint == "add --arch sm_90a"


def test_a_compile_for_sm90a_leaves_the_interpreter_out(tmp_path):
    env, removed = driver_env(tmp_path, base={"TRITON_INTERPRET": "1"}, target=cross.target_for("sm_90a"))
    assert "TRITON_INTERPRET" not in env and removed == {"TRITON_INTERPRET": "1"}
    assert driver_env(tmp_path, base={"TRITON_INTERPRET": "1"})[0]["TRITON_INTERPRET"] == "1"


def _audit(cli, tmp_path, *args) -> dict:
    r = cli("audit", "--backend", "triton", "--arch", "sm_90a", "--dtype", "fp8", "--seq", "8K", *args,
            "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    (session,) = [p for p in tmp_path.iterdir() if p.name.endswith("-triton-sm_90a")]
    return json.loads((session / "summary.json").read_text()) | {"_session": session}


@pytest.mark.slow
def test_gluon_kernel_compiled_for_sm90a_and_audited(cli, tmp_path):
    """The FP8 kernel an H200 runs (the Gluon kernel, one consumer warpgroup): A0 pays one MUFU.EX2 per score
    element over noexp, h15-folded none, its weight the scaling FFMA and a shift (64 per tile and thread in the key
    loop), and every loop keeps its 8 wgmma (QGMMA) and no spills. The session says it was compiled, not run."""
    s = _audit(cli, tmp_path, "--variants", "A0,h15-folded,noexp")
    assert s["compiled_only"] and s["arch"] == "sm_90a" and s["target_sms"] == 132 and s["ncu"] == {}
    assert set(s["kernel_config"].values()) == {"gluon-n128s2-c240l24-hg8-g1-tb"}  # Triton 3.6's default
    assert all(v["loop_bar_sync"] == 0 for v in s["loop"].values()), s["loop"]
    assert all(k == "_attn_fwd_ws" for k in s["kernel"].values()), s["kernel"]
    assert s["per_element_reference"] == "noexp" and s["per_element_by_family"]["A0"]["MUFU_EX2"] == 1.0
    loop = s["loop"]
    assert loop["A0"]["loop_mufu_ex2"] >= 128 and loop["h15-folded"]["loop_mufu_ex2"] <= 4
    assert loop["h15-folded"]["loop_shift"] == 64 and loop["noexp"]["loop_shift"] == 0, loop
    assert all(v["loop_gmma"] == 8 and v["spill_stores"] == 0 for v in loop.values()), loop
    assert s["budget"]["issue_slots_per_score"] == 8.0  # FP8 d128 on sm_90
    md = (s["_session"] / "summary.md").read_text()
    assert "one iteration of the key loop" in md and "compiled for sm_90a, not run" in md


@pytest.mark.slow
def test_a_named_configuration_is_the_one_compiled(cli, tmp_path):
    """--triton-config reaches the compile: the skipped rescale's loop jumps over O's 64 multiplies."""
    s = _audit(cli, tmp_path, "--variants", "A0", "--triton-config", "gluon-n128s2-c240l24-hg8-g1-rs")
    assert s["kernel_config"] == {"A0": "gluon-n128s2-c240l24-hg8-g1-rs"}
    assert s["loop"]["A0"]["loop_vote"] == 1 and s["loop"]["A0"]["loop_fmul_jumped"] == 64


def test_loop_table_names_the_configuration_once_or_per_variant():
    from softbench.audit.render import loop_tables

    loop = {"loop_instructions": 970, "loop_mufu_ex2": 132, "loop_fmul_jumped": 64}
    shared = {"shape_tag": "t", "variants": ["A0", "noexp"], "loop": {"A0": loop, "noexp": loop},
              "kernel_config": {"A0": "gluon-x", "noexp": "gluon-x"}}
    ((title, columns, rows),) = loop_tables(shared)
    assert title.endswith(", gluon-x") and "configuration" not in columns and rows[0][:3] == ["A0", "970", "132"]
    mixed = {**shared, "kernel_config": {"A0": "gluon-x", "noexp": "gluon-y"}}
    ((title, columns, rows),) = loop_tables(mixed)
    assert columns[1] == "configuration" and rows[1][1] == "gluon-y" and rows[0][-1] == "64"
    assert loop_tables({"variants": ["A0"]}) == []  # an FA4 audit has no loop block
