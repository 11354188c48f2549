"""`softbench audit --backend triton --arch sm_90a`: softbench's own Hopper kernels compiled for the H200 on this
machine (no GPU), nothing run, their SASS audited as FA4's are, with the key loop's instruction mix beside the
counts. Refusals in one sentence; real compiles through the CLI (Triton's bundled ptxas, as make setup installs it)."""

import importlib.util
import json

import pytest

from softbench.audit import cross
from softbench.audit.engine import driver_env
from softbench.core.errors import UnsupportedError
from softbench.kernels.capability import Device

# found, not imported: the interpreter test modules set TRITON_INTERPRET before anything imports triton, and
# pytest imports this module before theirs
pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")


def _error_line(r) -> str:
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    return line


@pytest.mark.parametrize("args,expected", [
    (["--backend", "triton", "--arch", "sm_100a"], "--arch sm_100a compiles --backend fa4, not triton"),
    (["--backend", "fa4", "--arch", "sm_90a"], "--arch sm_90a compiles --backend triton, not fa4"),
    (["--backend", "fa4", "--arch", "sm_100a", "--triton-config", "gluon-n128s2-c240l24-hg8"],
     "--triton-config applies to --backend triton only"),
    (["--backend", "triton", "--arch", "sm_90a", "--reference", "fa3"], "--reference runs a kernel, and --arch sm_90a"),
    (["--backend", "triton", "--arch", "sm_90a", "--reference", "fa9"], "reference kernels fa3, not fa9"),
    (["--backend", "triton", "--arch", "sm_90a", "--kernel-regex", "("], "is not a regular expression"),
    (["--backend", "triton", "--arch", "sm_90a", "--seq", "3000000000"], "does not fit the 32-bit integer"),
    (["--backend", "triton", "--no-ncu", "--source-stalls"], "--source-stalls samples the launch"),
])
def test_combinations_the_audit_cannot_do_are_refused_before_anything_starts(cli, tmp_path, args, expected):
    r = cli("audit", *args, "--out", str(tmp_path))
    assert expected in _error_line(r)
    assert not list(tmp_path.iterdir())


def test_targets_name_their_backend():
    assert cross.target_for("sm_90a").capability == 90 and cross.target_for("sm_90a").num_sms == 132
    cross.check_target("triton", "sm_90a")
    cross.check_target("fa4", "native")
    cross.check_target("triton", "native")  # on an sm_90 GPU: run, under ncu where wanted


def test_a_native_triton_audit_needs_the_hopper_gpu(cli, tmp_path):
    """Without --arch the kernels run (under Nsight Compute): on this machine, with no sm_90 GPU, refused in one
    sentence that names the compile for the H200 as the way out; an sm_90 GPU passes the check."""
    r = cli("audit", "--backend", "triton", "--out", str(tmp_path))
    assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr
    assert "runs softbench's Hopper kernels on this machine's sm_90 GPU, and this machine has no CUDA GPU" in r.stderr
    assert "add --arch sm_90a" in r.stderr and not list(tmp_path.iterdir())
    with pytest.raises(UnsupportedError, match="this machine has an sm_100 GPU"):
        cross.check_native("triton", Device("cuda", "B200", 100))
    cross.check_native("triton", Device("cuda", "H200", 90))
    cross.check_native("fa4", Device("cpu", "cpu", None))  # FA4's own refusals say why elsewhere


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
    loop), and every loop keeps its 12 wgmma (QGMMA: Q.K^T, P.V and the row sums) and no spills. The session says it was compiled, not run."""
    s = _audit(cli, tmp_path, "--variants", "A0,h15-folded,noexp")
    assert s["compiled_only"] and s["arch"] == "sm_90a" and s["target_sms"] == 132 and s["ncu"] == {}
    assert set(s["kernel_config"].values()) == {"gluon-n128s2-c240l24-hg8-g1-pd-rla-lmt-tb-mlf"}  # Triton 3.6's default
    assert all(v["loop_bar_sync"] == 0 for v in s["loop"].values()), s["loop"]
    assert all(k == "_attn_fwd_ws" for k in s["kernel"].values()), s["kernel"]
    assert s["per_element_reference"] == "noexp" and s["per_element_by_family"]["A0"]["MUFU_EX2"] == 1.0
    loop = s["loop"]
    # the hot loop holds one tile form (-mlf): A0's 64 exponentials per tile and thread and the rows' alphas
    assert 64 <= loop["A0"]["loop_mufu_ex2"] <= 66 and loop["h15-folded"]["loop_mufu_ex2"] <= 2
    # noexp has no shift per score: the few it has are the masked branch's index arithmetic
    assert loop["h15-folded"]["loop_shift"] == 64 and loop["noexp"]["loop_shift"] <= 4, loop
    # Q.K^T's 4 wgmma, P.V's 4 and the row sums' 4 (the default's -lmt)
    assert all(v["loop_gmma"] == 12 and v["spill_stores"] == 0 for v in loop.values()), loop
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


def test_a_native_run_audits_the_cubin_its_launch_compiled(tmp_path, monkeypatch):
    """What the driver does after running --backend triton on the GPU, here with a real sm_90a cubin in place of
    the launch's: every kernel in Triton's in-memory cache of softbench's attention forwards is written into the
    dump folder, and the one that ran gives the loop record the cross-compile gives (its key loop, 8 wgmma)."""
    import os
    import subprocess
    import sys
    import types

    from softbench.audit.child import harvest_triton_cubins, triton_loop_record

    cubin = tmp_path / "compiled.cubin"
    code = ("import sys; from softbench.core.shapes import Shape; from softbench.kernels.triton_compile import "
            "compile_kernel; from softbench.kernels.gluon_config import GluonConfig; c = compile_kernel(Shape("
            "dtype='fp8', seq=8192, causal=True), 'A0', GluonConfig.from_label('gluon-n128s2-c240l24-hg8-g1-tb')); "
            "open(sys.argv[1], 'wb').write(c.asm['cubin'])")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", code, str(cubin)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    blob = cubin.read_bytes()
    kernel = types.SimpleNamespace(name="_attn_fwd_ws", asm={"cubin": blob, "ptx": "..."})
    jit = types.SimpleNamespace(device_caches={0: ({"key": kernel}, None, None, None, None)})
    monkeypatch.setitem(sys.modules, "softbench.kernels.gluon_attn", types.SimpleNamespace(_attn_fwd_ws=jit))
    monkeypatch.setitem(sys.modules, "softbench.kernels.triton_attn", types.SimpleNamespace())  # nothing compiled
    dump = tmp_path / "dump"
    dump.mkdir()
    monkeypatch.setenv("CUTE_DSL_DUMP_DIR", str(dump))
    written = harvest_triton_cubins()
    assert len(written) == 1 and written[0].startswith(str(dump / "_attn_fwd_ws-"))
    assert (dump / written[0]).read_bytes() == blob
    build = {"kernel": "gluon", "config": {"label": "gluon-n128s2-c240l24-hg8-g1-tb"}}
    record = triton_loop_record(build, written)
    assert record["kernel"] == "gluon" and record["config"] == "gluon-n128s2-c240l24-hg8-g1-tb"
    assert record["loop"]["loop_gmma"] == 8 and record["loop"]["loop_bar_sync"] == 0
    assert triton_loop_record(build, written * 2) is None and triton_loop_record(None, written) is None


def test_a_cross_compile_whose_sass_cannot_be_read_ends_partial_with_an_error_exit(cli, tmp_path):
    """For a cross-compile the SASS is all it measures: without it the session is kept, marked partial, and the
    command exits 5 after its tables, instead of 0 over a session marked complete."""
    r = cli("audit", "--backend", "triton", "--arch", "sm_90a", "--seq", "1K", "--variants", "A0",
            "--cuobjdump-path", "/bin/false", "--out", str(tmp_path))
    assert r.returncode == 5 and "Traceback" not in r.stderr, r.stderr
    assert "nothing was measured of A0" in r.stderr
    (session,) = tmp_path.iterdir()
    status = json.loads((session / "status.json").read_text())
    assert status["complete"] is False and status["state"] == "partial"


def test_the_compile_cli_reads_a_gluon_label_pasted_with_a_space_as_a_gluon_label(capsys):
    """`--label " gluon-..."` once went to the Triton kernel's parser, which refused it as no Triton label."""
    from softbench.kernels.triton_compile import run

    assert run(["fp8", "128", "A0", "--label", " gluon-n128s2-bogus"]) == 2
    err = capsys.readouterr().err
    assert "not a Gluon configuration label" in err and "Triton" not in err.split("(expected")[0]
