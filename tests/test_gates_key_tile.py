"""The gates' key tile for softbench's Triton forward: the single-tile gate must run one whole tile of the kernel
that runs, whose BLOCK_N comes from the configuration table (64 at BF16/FP16 d128, 128 at FP8 d128) or from the
backend options (--triton-config), through the same resolve_config that TritonBackend.build uses. A 128-key
single-tile gate on the BF16 d128 kernel spans two tiles and fails on the H200 (Rowmax-H15 weights follow the
running maximum's re-anchoring)."""

import os
from dataclasses import asdict
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # as test_triton_attn: before anything imports triton

import pytest
import torch

pytest.importorskip("triton")

from softbench.core.errors import UsageError  # noqa: E402
from softbench.kernels.triton_attn import KernelConfig  # noqa: E402
from softbench.kernels.triton_backend import TritonBackend, resolve_config  # noqa: E402
from softbench.gates import engine as gates_engine  # noqa: E402
from softbench.gates.engine import run_gates  # noqa: E402
from softbench.gates.options import GatesOptions, key_tile, resolve_options  # noqa: E402
from softbench.core.shapes import Shape  # noqa: E402

OVERRIDE = asdict(KernelConfig.from_label("m64n32w4s2"))  # what --triton-config m64n32w4s2 passes on


def test_triton_key_tile_follows_the_configuration_table():
    assert key_tile("triton", "bf16", 128, {}) == 64
    assert key_tile("triton", "fp16", 128, {}) == 64
    assert key_tile("triton", "fp8", 128, {}) == 128


def test_triton_key_tile_is_the_block_n_the_backend_builds():
    for dtype, torch_dtype in (("bf16", torch.bfloat16), ("fp8", torch.float8_e4m3fn)):
        for options in ({}, OVERRIDE):
            backend = TritonBackend(**options, device="cpu")
            built = backend.config_for(Shape(dtype=dtype, seq=256, head_dim=128), torch_dtype)
            assert key_tile("triton", dtype, 128, options) == built.block_n


def test_triton_key_tile_follows_an_override():
    assert key_tile("triton", "bf16", 128, OVERRIDE) == 32
    assert key_tile("triton", "fp8", 128, {"block_n": 64}) == 64


def test_resolve_config_takes_backend_options():
    # backend options that are not configuration (fallback, device) and None values leave the table's choice
    table = resolve_config(torch.bfloat16, 128, {})
    assert resolve_config(torch.bfloat16, 128, {"fallback": False, "device": "cpu", "block_m": None}) == table
    assert resolve_config(torch.bfloat16, 128, {"num_stages": 3}) == KernelConfig(
        **{**asdict(table), "num_stages": 3})


def test_key_tile_of_the_other_backends_is_unchanged():
    assert key_tile("sim", "bf16", 128, {}) == 128 and key_tile("sim", "bf16", 128, {"tile": 64}) == 64
    assert key_tile("fa4", "bf16", 128, {}) == 128 and key_tile("fa4", "fp8", 256, {}) == 64


def test_default_single_seq_is_one_triton_tile():
    opts = resolve_options(GatesOptions(backend="triton", dtype="bf16", head_dim=128))
    assert opts.single_seq == 64
    opts = resolve_options(GatesOptions(backend="triton", dtype="bf16", head_dim=128, backend_options=OVERRIDE))
    assert opts.single_seq == 32
    assert resolve_options(GatesOptions(backend="triton", dtype="fp8", head_dim=128)).single_seq == 128
    # an explicit length within the tile is kept (gates_reevaluate builds its options this way)
    assert resolve_options(GatesOptions(backend="triton", dtype="bf16", single_seq=48)).single_seq == 48


def test_single_tile_gate_refuses_two_triton_tiles(tmp_path):
    # the length that failed on the H200: 128 keys are two BF16 d128 tiles
    with pytest.raises(UsageError, match="at most 64 keys .*triton at bf16 head dim 128.*not 128"):
        run_gates(GatesOptions(backend="triton", dtype="bf16", head_dim=128, single_seq=128, out_dir=tmp_path))
    with pytest.raises(UsageError, match="more than one key tile \\(128 keys\\)"):
        resolve_options(GatesOptions(backend="triton", dtype="fp8", head_dim=128, multi_seq=128))
    assert not any(tmp_path.iterdir())  # refused before a session folder is made


def test_cli_passes_the_triton_config_and_the_resolved_length(tmp_path, monkeypatch):
    from softbench import cli
    from softbench.kernels import capability

    seen = []
    monkeypatch.setattr(capability, "unsupported_reason", lambda *a: None)  # no GPU needed to build the options

    def run_gates(opts, progress=None):
        seen.append(opts)
        raise UsageError("stop before any worker")

    monkeypatch.setattr(gates_engine, "run_gates", run_gates)
    code = cli.main(["gates", "--backend", "triton", "--triton-config", "m64n32w4s2", "--out", str(tmp_path)])
    assert code == UsageError.exit_code
    (opts,) = seen
    # no fallback configuration for the gates: the single-tile length is sized to this one's key tile
    # the label names its kernel too, so that an sm_90 GPU, whose default at BF16 is the Gluon kernel, runs this one
    assert opts.single_seq == 32 and opts.backend_options == {"kernel": "triton", **OVERRIDE, "fallback": False}
    built = TritonBackend(**opts.backend_options, device="cpu")  # keys the worker accepts
    assert built.overrides == {"kernel": "triton", **OVERRIDE} and built.fallback is False
    seen.clear()
    cli.main(["gates", "--backend", "triton", "--dtype", "fp8", "--out", str(tmp_path)])
    assert seen[0].single_seq == 128 and seen[0].backend_options == {"fallback": False}


def test_cli_refuses_triton_config_for_other_backends(tmp_path, cli):
    for backend in ("sim", "fa4"):
        r = cli("gates", "--backend", backend, "--triton-config", "m64n32w4s2", "--out", str(tmp_path))
        assert r.returncode == 2 and "--triton-config applies to --backend triton only" in r.stderr, r.stderr
    r = cli("gates", "--backend", "triton", "--triton-config", "m64x", "--out", str(tmp_path))
    assert r.returncode == 2 and "not a Triton configuration label" in r.stderr, r.stderr
    assert not Path(tmp_path).exists() or not any(Path(tmp_path).iterdir())


def test_cli_refuses_a_rescale_threshold_outside_the_simulation(tmp_path, cli):
    r = cli("gates", "--backend", "triton", "--rescale-threshold", "8", "--out", str(tmp_path))
    assert r.returncode == 2 and "--rescale-threshold applies to --backend sim only" in r.stderr
    assert not any(tmp_path.iterdir())
