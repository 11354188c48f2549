"""The variant catalog: every entry is built by each backend it names and refused by the others, and every command
refuses a variant its backend does not build before any worker starts."""

import re
import subprocess
from pathlib import Path

import pytest
import torch

from softbench.core.errors import UsageError
from softbench.core.shapes import Shape
from softbench.kernels import catalog
from softbench.kernels.backends import BACKENDS, SimBackend
from softbench.kernels.catalog import VARIANTS, built_by, check, get_variant

KERNELS = Path(catalog.__file__).parent
PAIRS = [(name, backend) for name in VARIANTS for backend in BACKENDS]


def test_every_entry_names_known_backends_only():
    for name, v in VARIANTS.items():
        assert set(v.backends) <= set(BACKENDS), name
        assert v.name == name


def test_an_entry_without_a_known_role_or_any_backend_is_refused():
    with pytest.raises(ValueError, match="role 'hero' is not one of baseline, candidate, control"):
        catalog.Variant("x", "hero", "exp2", "d", ("sim",))
    with pytest.raises(ValueError, match="variant x: no backend builds it"):
        catalog.Variant("x", "candidate", "exp2", "d", ())


def test_variants_that_share_an_operator_are_joined_to_its_fidelity():
    # the report joins a variant's speed to fidelity through its operator: h15-wg (Rowmax-H15 in one warpgroup,
    # hardware exp2 in the other) is not Rowmax-H15's
    assert {n for n, v in VARIANTS.items() if v.operator == "rowmax-h15"} == {"A1", "h15-proved", "h15-noclamp"}
    assert get_variant("h15-wg").operator == "mixed"


@pytest.mark.parametrize("name,backend", PAIRS, ids=[f"{n}-{b}" for n, b in PAIRS])
def test_check_accepts_the_builders_and_refuses_the_others_by_name(name, backend):
    v = get_variant(name)
    if backend in v.backends:
        assert check(backend, name) is v
    else:
        with pytest.raises(UsageError) as e:
            check(backend, name)
        message = str(e.value)
        assert f"variant {name} is built by the" in message and f"not by {backend}" in message
        assert all(b in message for b in v.backends)
        assert message.count(".") <= 1  # one sentence


def test_check_names_one_backend_or_several_and_hints_the_first():
    with pytest.raises(UsageError) as e:
        check("fa4", "h15-sat")
    assert "built by the triton and sim backends, not by fa4" in str(e.value) and e.value.hint == "--backend triton"
    with pytest.raises(UsageError) as e:
        check("sim", "h15-proved")
    assert "built by the triton backend, not by sim" in str(e.value) and e.value.hint == "--backend triton"


@pytest.mark.parametrize("name", built_by("sim"))
def test_the_simulation_builds_each_of_its_variants_on_a_tiny_shape(name):
    backend = SimBackend(device="cpu")
    backend.load(name)
    from softbench.kernels.inputs import make_inputs

    shape = Shape(dtype="bf16", seq=16, heads=1, head_dim=16, causal=True)
    out = backend.build(shape, make_inputs(shape, 0, "cpu"))()
    assert out.shape == (1, 16, 1, 16)
    if get_variant(name).correct:
        assert torch.isfinite(out.float()).all()


def test_the_simulation_computes_each_variants_own_operator():
    """The weight map each simulated variant takes is its operator's: A0 the exact exp2, A1 Rowmax-H15, h15-sat
    the saturated form, which differs from A1 only next to rounding ties (x = 1/4 + 1 ulp: 2x just above 1/2 is
    n = 1 for A1, 2x + 252 rounded onto the tie is n = 0 for h15-sat), noexp the exponent itself."""
    from softbench.kernels.sim_weights import weight_fn

    x = torch.tensor([0.25, -3.0, -130.0])
    x[0] = torch.nextafter(x[0], torch.tensor(1.0))
    assert weight_fn("A0")(x).tolist() == torch.exp2(x).tolist()
    assert weight_fn("A1")(x).tolist() == [1.5, 2.0 ** -3, 2.0 ** -126]
    assert weight_fn("h15-sat")(x).tolist() == [1.0, 2.0 ** -3, 2.0 ** -126]
    assert torch.equal(weight_fn("noexp")(x), x)
    # the hybrids take A1's weight (1.5 for x[0]) on their own keys of a 16-key row and the exact exp2 on the rest:
    # the odd keys for h15-1of2, keys 9, 11, 13 and 15 for h15-1of4 (operators.hybrid_picks)
    row = x[0].repeat(16)
    for name, picked in (("h15-1of2", list(range(1, 16, 2))), ("h15-1of4", [9, 11, 13, 15])):
        w = weight_fn(name).weights(row, torch.tensor(0.0), 1.0, 0.0)
        assert [k for k in range(16) if w[k] == 1.5] == picked, name
        assert all(w[k] == torch.exp2(row[k]) for k in range(16) if k not in picked), name


@pytest.mark.parametrize("name", [n for n in VARIANTS if n not in built_by("sim")])
def test_the_simulation_refuses_the_others_when_loading(name):
    with pytest.raises(UsageError, match=f"variant {name} is built by"):
        SimBackend(device="cpu").load(name)


def test_fa4_has_a_patch_for_exactly_its_catalog_variants():
    from softbench.kernels.fa4_patches import FA4_PATCHES

    patched = {n for n in FA4_PATCHES if not catalog.EMULATION_NAME.match(n)}  # emulation: added at run time
    assert patched == set(built_by("fa4"))


def _weights_branched_on(path: Path) -> set[str]:
    """The variant names a kernel source compares its WEIGHT constexpr with (its weight-map branches)."""
    return set(re.findall(r'WEIGHT == "([^"]+)"', path.read_text(encoding="utf-8")))


def test_the_triton_kernels_branch_on_each_of_their_variants():
    """A name the kernels never compare WEIGHT with would fall through to the last branch (the exponent itself):
    each triton variant must have a branch of its own, in the Triton kernel (whose weight function the Gluon kernel
    calls) or in the Gluon kernel."""
    branched = _weights_branched_on(KERNELS / "triton_attn.py")
    assert set(built_by("triton")) <= branched
    assert branched <= set(VARIANTS)
    gluon = _weights_branched_on(KERNELS / "gluon_attn.py")
    assert gluon <= set(built_by("triton")) and "h15-proved" in gluon


def test_the_triton_kernels_take_their_list_from_the_catalog():
    ta = pytest.importorskip("softbench.kernels.triton_attn")
    assert ta.WEIGHT_MAPS == built_by("triton")
    ta.check_variant("h15-proved")
    with pytest.raises(UsageError, match="Triton forward implements"):
        ta.check_variant("h15-wg")


def test_emulation_settings_are_fa4_variants_by_name():
    assert get_variant("emu-f8-s1").backends == ("fa4",)
    check("fa4", "emu-f16-s1-r2")
    with pytest.raises(UsageError, match="built by the fa4 backend, not by triton"):
        check("triton", "emu-f8-s1")
    with pytest.raises(UsageError, match="unknown kernel variant 'emu-fast'"):
        check("fa4", "emu-fast")
    assert get_variant("emu-f8-s1-r2").role == "candidate"
    with pytest.raises(UsageError, match="unknown kernel variant 'emu-f8-s1-fast'"):
        check("fa4", "emu-f8-s1-fast")  # the whole name is a setting, not its start


def test_fidelity_runs_one_variant_per_operator_and_backend():
    hybrids = {"rowmax-h15-1of2": "h15-1of2", "rowmax-h15-1of4": "h15-1of4"}
    assert catalog.fidelity_variants("fa4") == {"rowmax-h15": "A1", **hybrids}
    assert catalog.fidelity_variants("triton") == {"rowmax-h15": "A1", **hybrids, "rowmax-h15-sat": "h15-sat",
                                                   "rowmax-h15-folded": "h15-folded"}


# every command that starts workers, with a variant its backend does not build
REFUSED = {
    "latency": ["latency", "--backend", "sim", "--variant", "h15-proved"],
    "sweep": ["sweep", "variants", "--backend", "sim", "--variants", "A1,h15-wg"],
    "energy": ["energy", "--backend", "sim", "--order", "A0,h15-proved"],
    "gates": ["gates", "--backend", "sim", "--variant", "h15-noclamp"],
    "trace": ["trace", "run", "--backend", "triton", "--variants", "A0,h15-wg"],
    "audit": ["audit", "--variants", "A0,h15-proved"],
    "fidelity": ["fidelity", "--model", "smollm2-135m", "--path", "kernel", "--backend", "fa4", "--operator", "rowmax-h15-sat"],
}


@pytest.mark.parametrize("command", sorted(REFUSED))
def test_every_command_refuses_before_any_process_starts(command, monkeypatch, capsys, tmp_path):
    from softbench.cli import main

    def no_process(*args, **kwargs):
        raise AssertionError(f"a process was started: {args[0] if args else kwargs}")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    assert main([*REFUSED[command], "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert ("is built by the" in err) or ("FA4 variants only: rowmax-h15, " in err), err
    assert not any(tmp_path.iterdir())
