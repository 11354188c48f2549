"""The Triton backend through the other commands, run on the CPU by Triton's interpreter (small shapes)."""

import json

import pytest

pytest.importorskip("triton")

INTERPRET = {"TRITON_INTERPRET": "1"}


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["A1", "h15-proved"])
def test_gates_pass_for_the_triton_a1(tmp_path, cli, variant):
    r = cli("gates", "--backend", "triton", "--variant", variant, "--heads", "1", "--head-dim", "64",
            "--multi-seq", "256", "--out", str(tmp_path), env=INTERPRET)
    assert r.returncode == 0, r.stderr
    summary = json.loads(next(tmp_path.iterdir()).joinpath("summary.json").read_text())
    assert summary["all_passed"] is True and summary["backend"] == "triton" and summary["variant"] == variant


@pytest.mark.slow
def test_gates_catch_the_triton_noexp_control(tmp_path, cli):
    r = cli("gates", "--backend", "triton", "--variant", "noexp", "--heads", "1", "--head-dim", "64",
            "--multi-seq", "256", "--out", str(tmp_path), env=INTERPRET)
    assert r.returncode == 1, r.stderr


def test_triton_refusals_are_specific(tmp_path, cli):
    r = cli("gates", "--backend", "triton", "--head-dim", "96", "--out", str(tmp_path), env=INTERPRET)
    assert r.returncode == 3 and "head dims 64, 128 and 256, not 96" in r.stderr
    r = cli("energy", "--backend", "triton", "--seconds", "1", "--out", str(tmp_path), env=INTERPRET)
    assert r.returncode == 3
    assert not any(tmp_path.iterdir())


def test_gates_take_the_triton_variants_and_refuse_the_others():
    from softbench.kernels.catalog import check
    from softbench.core.errors import UsageError

    check("triton", "h15-proved")  # a Triton-only variant, not an FA4 patch
    with pytest.raises(UsageError, match="built by the fa4 backend, not by triton"):
        check("triton", "h15-wg")  # an FA4 sm_90 patch the Triton kernel lacks
    with pytest.raises(UsageError, match="built by the triton backend, not by fa4"):
        check("fa4", "h15-proved")
