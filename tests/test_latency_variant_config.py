"""latency --variant-config: the variant's kernels in a configuration of their own, the baseline and its nulls in
--triton-config's (or the default's), so that a variant's fastest form is timed against the fastest exact kernels
in one run. Run for real on the CPU through Triton's interpreter (the Triton-language kernel: two tile shapes)."""

from __future__ import annotations

import json

import pytest
import yaml

from softbench.core.errors import UsageError
from softbench.core.protocol import InterleavedProtocol, SustainedProtocol
from softbench.core.shapes import Shape
from softbench.latency.engine import LatencyOptions, protocol_record
from softbench.latency.render import configuration_lines

BASE, OWN = "m64n32w4s2", "m32n32w4s2"
TINY = ["--backend", "triton", "--seq", "128", "--heads", "1", "--head-dim", "64", "--variant", "h15-sat",
        "--budget-s", "1"]
SHAPE = (Shape(seq=128, heads=1, head_dim=64),)


def test_only_the_variants_take_the_variant_configuration():
    """The baseline, the null in its own process and the null inside the baseline's keep the baseline's options (or
    they would be no A/A null); the variant and any further variants take the variant's; references take none."""
    base, own = {"kernel": "triton", "block_m": 64}, {"kernel": "triton", "block_m": 32}
    opts = LatencyOptions(shapes=SHAPE, backend="triton", variant="h15-sat", more_variants=("A1",), null=True,
                          null_in_process=True, references=("fa3",), backend_options=base, variant_options=own)
    got = {s.label: s.options for s in opts.kernel_specs()}
    assert got == {"A0": base, "h15-sat": own, "A1": own, "A0'": base, "A0~": base, "ref-fa3": {}}
    assert protocol_record(opts, SHAPE[0], {})["variant_backend_options"] == own
    # without --variant-config every kernel runs the baseline's, and protocol.yaml says nothing more
    plain = LatencyOptions(shapes=SHAPE, backend="triton", variant="h15-sat", null=True, backend_options=base)
    assert {s.label: s.options for s in plain.kernel_specs()} == {"A0": base, "h15-sat": base, "A0'": base}
    assert "variant_backend_options" not in protocol_record(plain, SHAPE[0], {})


def test_an_aa_run_under_two_configurations_is_refused():
    opts = LatencyOptions(shapes=SHAPE, backend="triton", variant="A0", variant_options={"kernel": "triton"})
    with pytest.raises(UsageError, match="not an A/A null"):
        opts.kernel_specs()


@pytest.mark.slow
def test_the_variant_runs_its_own_configuration_in_the_same_run(tmp_path, cli):
    r = cli("latency", *TINY, "--null", "--triton-config", BASE, "--variant-config", OWN, "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    (session,) = tmp_path.iterdir()
    summary = json.loads((session / "summary.json").read_text())
    built = {k: s["build_info"]["config"]["label"] for k, s in summary["smoke"].items()}
    assert built == {"A0": BASE, "A0'": BASE, "h15-sat": OWN}
    record = yaml.safe_load((session / "protocol.yaml").read_text())
    assert record["variant_backend_options"]["block_m"] == 32 and record["backend_options"]["block_m"] == 64
    assert f"configurations (each kernel in its own): A0, A0' {BASE}; h15-sat {OWN}" in r.stdout
    # a prediction scopes the variant's configuration by the path the worker recorded it under; the report's bar
    # names both configurations
    from softbench.predictions.evaluate import scope_mismatch
    from softbench.predictions.sessions import load_session
    from softbench.report.records import bar_label

    rec = load_session(session)
    assert scope_mismatch({"backend_options.label": BASE, "smoke.h15-sat.build_info.config.label": OWN}, rec) is None
    assert scope_mismatch({"smoke.h15-sat.build_info.config.label": BASE}, rec) is not None
    assert bar_label(rec).endswith(f"{BASE} / h15-sat {OWN}")


def test_one_configuration_for_every_kernel_says_nothing_more():
    """A session whose kernels share one configuration (the H200's, recorded) has no configurations line; the same
    session with its variant's build rewritten to another label has one, the baseline's kernels first."""
    from conftest import ROOT

    name = "20261204T085610Z-latency-fp8-8K-causal-b1h16d128-triton-A0-vs-h15-folded-interleaved"
    summary = json.loads((ROOT / "sessions" / name / "summary.json").read_text())
    assert configuration_lines(summary) == []
    summary["smoke"]["h15-folded"]["build_info"]["config"]["label"] = "gluon-other"
    (line,) = configuration_lines(summary)
    assert line == ("configurations (each kernel in its own): A0, A0' gluon-n128s2-c240l24-hg2-pd-rla-lmt-tb-mlf; "
                    "h15-folded gluon-other")


@pytest.mark.parametrize("args, message", [
    (["--backend", "sim", "--seq", "128", "--variant-config", BASE], "--variant-config applies to --backend triton"),
    ([*TINY, "--variant", "A0", "--variant-config", OWN], "not an A/A null"),
    ([*TINY, "--variant-config", "m64n32w4"], "--variant-config"),
    ([*TINY, "--gpus", "0", "--control", "--variant-config", OWN], "--control"),
])
def test_variant_config_refusals_are_one_sentence(tmp_path, cli, args, message):
    r = cli("latency", *args, "--out", str(tmp_path))
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not any(tmp_path.iterdir()), "a refused run writes no session"


def test_a_variant_named_twice_in_one_interleaving_is_refused():
    """Each variant is timed under its own label: a second one would overwrite the first's windows. Only sweep's
    --variants gives the engine more than one, so the sentence names that option (the same as sweep's own)."""
    opts = LatencyOptions(shapes=SHAPE, backend="triton", variant="A1", more_variants=("noexp", "A1"))
    with pytest.raises(UsageError, match="--variants names A1 more than once"):
        opts.kernel_specs()


@pytest.mark.parametrize("protocol", [InterleavedProtocol(), SustainedProtocol()], ids=["interleaved", "sustained"])
def test_the_baseline_after_the_first_variant_is_refused_by_the_engine(protocol):
    """The baseline as a later variant would take its label A0 a second time (once a ValueError, exit 70, from the
    process pool); the engine refuses it whoever builds the options, under either protocol that shares one run."""
    opts = LatencyOptions(shapes=SHAPE, backend="triton", variant="A1", more_variants=("A0",),
                          protocol=protocol)
    with pytest.raises(UsageError, match="only the first variant can be the baseline again"):
        opts.kernel_specs()


def test_a_configuration_for_another_backend_is_refused_as_the_option_that_gave_it():
    # --variant-config given with --backend sim: the refusal points at --variant-config, not at --triton-config
    import click

    from softbench.core.options import check_triton_config

    with pytest.raises(click.BadParameter) as e:
        check_triton_config({"kernel": "triton"}, "sim", "--variant-config")
    assert e.value.format_message().startswith("Invalid value for --variant-config:")
    assert "--triton-config" not in e.value.format_message()
    check_triton_config({"kernel": "triton"}, "triton", "--variant-config")  # its own backend: taken
    check_triton_config({}, "sim", "--variant-config")  # not given: nothing to refuse


@pytest.mark.parametrize("label", [BASE, "gluon-n128s2-c240l24-hg8"])
def test_a_label_with_spaces_around_it_is_the_label(label):
    # as a quoted shell variable or a YAML value may give it: the Gluon label must not be read as a Triton one
    from softbench.core.options import parse_triton_config

    assert parse_triton_config(f" {label} ") == parse_triton_config(label)
