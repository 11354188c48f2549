"""`softbench audit --arch sm_100a`: FA4's Blackwell forward compiled on this machine (no GPU), nothing run, its SASS
audited (softbench.audit.cross). Refusals and records with stand-in tools; one real compile, marked slow, where
CuTe DSL is installed (make setup installs it)."""

import json
import sys
import time

import pytest
import yaml

from softbench.audit import cross
from softbench.audit.engine import AuditOptions, driver_env, run_audit
from softbench.audit.render import audit_markdown, audit_notes, audit_tables
from softbench.core.errors import UsageError
from softbench.core.shapes import Shape

from test_audit import _opts, fake_tools  # noqa: F401  (the stand-in tools fixture)


def test_explicit_ncu_with_a_cross_compile_is_refused_in_one_sentence(cli, tmp_path):
    r = cli("audit", "--arch", "sm_100a", "--ncu", "--out", str(tmp_path))
    assert r.returncode == 2
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert "--ncu cannot be used with --arch sm_100a" in line and "no launch to profile" in line
    assert "Traceback" not in r.stderr and not list(tmp_path.iterdir())


def test_missing_cute_dsl_is_refused_in_one_sentence(monkeypatch, capsys, tmp_path):
    from softbench import cli

    monkeypatch.setitem(sys.modules, "cutlass", None)  # the import fails, as on a machine without CuTe DSL
    code = cli.main(["audit", "--arch", "sm_100a", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 3 and "Traceback" not in err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert "nvidia-cutlass-dsl==4.8.1 is not installed here" in line
    assert "hint: pip install nvidia-cutlass-dsl==4.8.1 quack-kernels==0.6.5" in err
    assert not list(tmp_path.iterdir())  # refused before any session


def test_a_native_fa4_audit_without_a_gpu_points_at_the_cross_compiles(monkeypatch, capsys, tmp_path):
    """On a CPU the shared FA4 refusal says 'use --backend sim', which audit rejects; the audit names what runs
    here instead: the cross-compiles (both run in test_real_cross_compile_of_a0_and_a1_for_sm_100a and the
    sm_90a tests of test_audit_triton)."""
    from softbench import cli
    from softbench.kernels import capability

    monkeypatch.setattr(capability, "detect_device", lambda prefer_cuda=True: capability.Device("cpu", "cpu", None))
    code = cli.main(["audit", "--seq", "1K", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 3 and "Traceback" not in err and "--backend sim" not in err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert line == "error: softbench audit runs FA4 on this machine's CUDA GPU, and none is visible here"
    assert "--arch sm_100a" in err and "--backend triton --arch sm_90a" in err
    assert not list(tmp_path.iterdir())



def test_an_fp8_fa4_audit_on_hopper_offers_no_simulation(monkeypatch, capsys, tmp_path):
    """FA4's FP8 forward is sm_100 only; the shared refusal offers latency's users the simulation, which audit (it
    reads compiled kernels) does not take: the audit's sentence names only what it can run."""
    from softbench import cli
    from softbench.kernels import capability

    monkeypatch.setattr(capability, "detect_device", lambda prefer_cuda=True: capability.Device("cuda", "NVIDIA H200", 90))
    code = cli.main(["audit", "--dtype", "fp8", "--seq", "1K", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 3 and "Traceback" not in err, err
    assert "FP8 through FA4 exists only in its sm_100 path" in err and "--backend triton" in err
    assert "--backend sim" not in err
    assert "hint: FA4's FP8 kernel is audited without a B200 with --arch sm_100a" in err  # what does run here
    assert not list(tmp_path.iterdir())

def test_missing_stack_names_every_missing_package(monkeypatch):
    for mod in ("cutlass", "quack"):
        monkeypatch.setitem(sys.modules, mod, None)
    msg = cross.missing_stack()
    assert "nvidia-cutlass-dsl==4.8.1, quack-kernels==0.6.5" in msg and msg.endswith("are not installed here")
    # the Hopper compile needs Gluon as well as Triton: a Triton without it is refused too
    monkeypatch.setitem(sys.modules, "triton.experimental.gluon", None)
    assert cross.missing_stack("triton").endswith("and it is not installed here")


def test_options_and_environment_of_a_cross_compile(tmp_path):
    with pytest.raises(UsageError, match="--ncu cannot be used with --arch sm_100a"):
        AuditOptions(shapes=(Shape(),), arch="sm_100a")
    with pytest.raises(UsageError, match="unknown --arch 'sm_120a'"):
        AuditOptions(shapes=(Shape(),), arch="sm_120a", use_ncu=False)
    target = AuditOptions(shapes=(Shape(),), arch="sm_100a", use_ncu=False).target
    assert (target.arch, target.capability, target.num_sms) == ("sm_100a", 100, 148)
    env, _ = driver_env(tmp_path, base={}, target=target)
    assert (env["FLASH_ATTENTION_ARCH"], env["CUTE_DSL_ARCH"], env["FLASH_ATTENTION_NUM_SMS"]) == \
        ("sm_100a", "sm_100a", "148")
    assert "FLASH_ATTENTION_ARCH" not in driver_env(tmp_path, base={})[0]
    dev = target.device()
    assert dev.kind == "cuda" and dev.arch == 100 and dev.present is False


def test_the_compile_child_refuses_an_environment_set_for_another_gpu(monkeypatch):
    """FA4 and CuTe DSL read the target at import: a child started with the H200's values in its environment, not
    merely without the B200's, would compile for the wrong GPU. Refused before anything is loaded (the variant's
    name is never looked at)."""
    target = cross.TARGETS["sm_100a"]
    for key, value in cross.TARGETS["sm_90a"].env().items():
        monkeypatch.setenv(key, value)
    req = {"target": target.to_dict(), "backend": "fa4", "variant": "no-such-variant", "shape": Shape().to_dict()}
    with pytest.raises(UsageError, match="needs FLASH_ATTENTION_ARCH=sm_100a, CUTE_DSL_ARCH=sm_100a, "
                                         "FLASH_ATTENTION_NUM_SMS=148 in its environment"):
        cross.compile_only(req)


def test_engine_records_the_target_in_every_file(tmp_path, fake_tools):  # noqa: F811
    (s,) = run_audit(_opts(tmp_path, fake_tools, variants=("A0", "A1", "noexp"), arch="sm_100a", use_ncu=False),
                     render_markdown=audit_markdown)
    assert s.path.name.endswith("-audit-bf16-8K-causal-b1h16d128-fa4-sm_100a")
    want = {"arch": "sm_100a", "compiled_only": True, "target_sms": 148}
    env, summary = s.read_json("env.json"), s.read_json("summary.json")
    protocol = yaml.safe_load((s.path / "protocol.yaml").read_text())
    for record in (env, protocol, summary):
        assert {k: record[k] for k in want} == want
    result = json.loads((s.path / "driver" / "A0-result.json").read_text())
    assert result["target_seen"]["arch"] == "sm_100a" and result["env_seen"]["CUTE_DSL_ARCH"] == "sm_100a"
    assert result["env_seen"]["FLASH_ATTENTION_NUM_SMS"] == "148"
    b = summary["budget"]
    assert (b["arch_family"], b["scores_per_clock_sm"], b["issue_slots_per_score"]) == ("sm_100", 16, 8)
    assert b["variants"]["A1"]["per_element_static"] == summary["per_element"]["A1"] == 3.0
    assert b["variants"]["A1"]["share_of_issue_slots"] == pytest.approx(3.0 / 8)
    assert any("per score element, emulated or not" in n for n in summary["per_element_notes"])
    titles = [t for t, _, _ in audit_tables(summary)]
    assert "compiled for sm_100a, not run" in titles[0] and "issue budget on sm_100" in titles[1]
    assert audit_notes(summary)[0].startswith("compiled for sm_100a (NVIDIA B200, 148 SMs assumed)")
    md = (s.path / "summary.md").read_text()
    assert "compiled for sm_100a, not run" in md and "Method, budget: nominal" in md


def test_a_native_audit_records_no_target(tmp_path, fake_tools):  # noqa: F811
    (s,) = run_audit(_opts(tmp_path, fake_tools, variants=("A0",), use_ncu=False))
    summary = s.read_json("summary.json")
    assert (summary["arch"], summary["compiled_only"], summary["target_sms"]) == ("native", False, None)
    assert "not run" not in audit_tables(summary)[0][0]


@pytest.mark.slow
def test_real_cross_compile_of_a0_and_a1_for_sm_100a(cli, tmp_path):
    """The real thing on this CPU: FA4's sm_100a forward compiled by CuTe DSL for stock A0 and Rowmax-H15 (A1),
    disassembled by whatever cuobjdump is found (triton's bundled one here)."""
    missing = cross.missing_stack()
    if missing:
        pytest.skip(f"CuTe DSL stack not installed ({missing}); make setup installs it")
    t0 = time.monotonic()
    r = cli("audit", "--arch", "sm_100a", "--seq", "1K", "--causal", "--variants", "A0,A1", "--out", str(tmp_path),
            timeout=600)
    wall = time.monotonic() - t0
    assert r.returncode == 0, r.stderr[-2000:]
    (path,) = tmp_path.iterdir()
    summary = json.loads((path / "summary.json").read_text())
    status = json.loads((path / "status.json").read_text())
    assert status["complete"] is True and summary["errors"] == {}, summary["errors"]
    assert summary["compiled_only"] is True and summary["arch"] == "sm_100a" and summary["target_sms"] == 148
    for v in ("A0", "A1"):
        assert list((path / "cubin" / v).glob("*.sm_100a.cubin")), v
        assert "FlashAttentionForwardSm100" in summary["kernel"][v]
    assert summary["sass"]["A0"]["MUFU_EX2"] > 100 and summary["sass"]["A1"]["MUFU_EX2"] < 10
    assert summary["per_element"]["A1"] is not None and summary["budget"]["issue_slots_per_score"] == 8
    assert summary["budget"]["variants"]["A1"]["share_of_issue_slots"] is not None
    (rec,) = [json.loads(ln) for ln in (path / "variants.jsonl").read_text().splitlines()][:1]
    assert rec["run"]["compiled_only"] is True and rec["run"]["forwards"] == 0
    assert rec["run"]["hardware_info_stand_in"]["used"] is True and rec["run"]["compile_s"] > 0
    assert "compiled for sm_100a" in r.stdout
    print(f"cross-compile audit of A0 and A1: {wall:.0f} s")


def test_a_named_kernel_pattern_that_matches_nothing_ends_the_audit_unmeasured(tmp_path, fake_tools):  # noqa: F811
    """--kernel-regex is taken at its word: a pattern that matches no function in the SASS fails the variant,
    naming the functions there are, where the largest function was audited and recorded as if it matched."""
    (s,) = run_audit(_opts(tmp_path, fake_tools, variants=("A0",), arch="sm_100a", use_ncu=False,
                           kernel_regex="zzz", kernel_regex_given=True))
    (rec,) = [json.loads(line) for line in (s.path / "variants.jsonl").read_text().splitlines()]
    assert rec["errors"]["sass"].startswith("no function matches /zzz/ in the SASS of ") and "its functions: " in \
        rec["errors"]["sass"]
    status = s.status()
    assert not status["complete"] and "nothing was measured of A0" in status["reason"]
    # the same pattern as a default (a kernel renamed since) falls back to the largest function, and says so
    (s,) = run_audit(_opts(tmp_path, fake_tools, variants=("A0",), arch="sm_100a", use_ncu=False, kernel_regex="zzz"))
    (rec,) = [json.loads(line) for line in (s.path / "variants.jsonl").read_text().splitlines()]
    assert "no function matches /zzz/; largest of" in rec["kernel_choice"] and s.status()["complete"]
