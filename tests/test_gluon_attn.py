"""softbench's Gluon forward (softbench.kernels.gluon_attn) on a machine without a GPU: what its configurations
compile to (tests/test_gluon_config.py reads their labels), how the Triton backend picks it (and refuses it where it
cannot run instead of replacing it), the gates' key tile under it, and a cross-compilation for sm_90a with Triton's
bundled ptxas, which checks what Hopper gets: warp specialization with a register split, wgmma of the right shapes,
no spills, the exponential gone from A1's loop. Its arithmetic is checked on the H200 (tools/gpu/gluon_probe.py:
against softbench's tile-wise simulation, and bit for bit against the Triton kernel where both use the same key
tile); Triton's interpreter does not run Gluon."""

import functools
import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

pytest.importorskip("triton")
pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")

from softbench.core.errors import UnsupportedError, UsageError  # noqa: E402
from softbench.kernels import gluon_attn as ga  # noqa: E402
from softbench.kernels.inputs import make_inputs  # noqa: E402
from softbench.kernels.triton_attn import KernelConfig  # noqa: E402
from softbench.kernels import triton_attn as ta  # noqa: E402
from softbench.kernels.triton_backend import TritonBackend, default_kernel, kernel_of, resolve_config  # noqa: E402
from softbench.gates.options import key_tile  # noqa: E402
from softbench.core.shapes import Shape  # noqa: E402
from softbench.kernels.gluon_config import DEFAULT, DEFAULT_FP8, DEFAULT_SYNC, GluonConfig, default_config  # noqa: E402




def test_one_consumer_launches_with_128_registers():
    # one consumer: a 128-register launch, so that two programs share an SM's registers
    assert ga.launch_options(GluonConfig(consumers=1)) == {"num_warps": 4, "maxnreg": 128}
    assert "maxnreg" not in ga.launch_options(GluonConfig())


def test_resolve_config_follows_the_kernel_named():
    assert resolve_config(torch.bfloat16, 128, {"kernel": "gluon"}) == \
        GluonConfig(head_group=4, rescale="lazy", rescale_at="pv", row_sum="tree", p_round="wgmma",
                    tile_loops="two-fenced", schedule="dynamic", loads="k-ahead", sync=DEFAULT_SYNC)
    assert resolve_config(torch.bfloat16, 128, {"kernel": "gluon", "block_n": 64, "num_warps": None}) == \
        GluonConfig(block_n=64, head_group=4, rescale="lazy", rescale_at="pv", row_sum="tree", p_round="wgmma",
                    tile_loops="two-fenced", schedule="dynamic", loads="k-ahead", sync=DEFAULT_SYNC)
    # a label names every field: the default's lazy rescale does not leak into a configuration named without it
    named = GluonConfig.from_label("gluon-n128s2-c240l24-hg8-tb").to_dict()
    assert resolve_config(torch.bfloat16, 128, named) == GluonConfig.from_label("gluon-n128s2-c240l24-hg8-tb")
    # a Triton label's fields do not leak into the Gluon configuration and back
    triton_label = {"kernel": "triton", **KernelConfig.from_label("m64n32w4s2").__dict__}
    assert resolve_config(torch.bfloat16, 128, triton_label) == KernelConfig.from_label("m64n32w4s2")
    with pytest.raises(UsageError, match="unknown Triton-backend kernel"):
        resolve_config(torch.bfloat16, 128, {"kernel": "cuda"})


def test_default_kernel_is_gluon_only_where_it_runs(monkeypatch):
    # this machine: no GPU (or the interpreter), so the Triton kernel, whose table stays the default
    assert ga.usable_here() is not None
    assert default_kernel(torch.bfloat16, 128) == "triton"
    assert kernel_of(resolve_config(torch.bfloat16, 128, {})) == "triton"
    # an sm_90 GPU with the compiled Triton: Gluon at every dtype, A0's maximum moved lazily at both; at FP8 one
    # consumer warpgroup per program and the row sums on the tensor core per tile, at 16 bits per-thread row sums
    # added pairwise, P rounded at P.V's wgmma and O rescaled beside the next Q.K^T, each K loaded ahead of the
    # previous tile's V; both on the dynamic schedule
    monkeypatch.setattr(ga, "usable_here", lambda: None)
    assert default_kernel(torch.bfloat16, 128) == default_kernel(torch.float16, 64) == "gluon"
    assert default_kernel(torch.float8_e4m3fn, 128) == "gluon"
    # with Triton 3.6 (this machine's) the warpgroup barriers are left out by default (-tb)
    assert resolve_config(torch.bfloat16, 128, {}).label() == "gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf-ka"
    assert resolve_config(torch.float8_e4m3fn, 128, {}).label() == "gluon-n128s2-c240l24-hg8-g1-pd-rla-lmt-tb-mlf"
    # a field given on top of the FP8 default keeps the rest of it
    assert resolve_config(torch.float8_e4m3fn, 128, {"stages": 3}).label() == \
        "gluon-n128s3-c240l24-hg8-g1-pd-rla-lmt-tb-mlf"
    assert resolve_config(torch.float8_e4m3fn, 128, {"row_sum": "row"}).label() == \
        "gluon-n128s2-c240l24-hg8-g1-pd-rla-tb-mlf"
    # another Triton: the PTX rewrite is not for it, so the default keeps Triton's barriers
    monkeypatch.setattr(ga.triton, "__version__", "3.7.0")
    assert resolve_config(torch.bfloat16, 128, {}).label() == "gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-mlf-ka"
    assert resolve_config(torch.float8_e4m3fn, 128, {}).label() == "gluon-n128s2-c240l24-hg8-g1-pd-rla-lmt-mlf"
    # the gates' single-tile length is the key tile of the kernel that runs
    assert key_tile("triton", "bf16", 128, {}) == 128
    assert key_tile("triton", "fp8", 128, {}) == 128
    assert key_tile("triton", "bf16", 128, {"kernel": "triton"}) == 64


@pytest.mark.parametrize("machine", ["here", "sm_90"])
def test_head_dim_256_runs_in_the_triton_kernel_on_every_machine(monkeypatch, machine):
    """Only the Triton-language kernel implements head dim 256 (Gemma-3's), so it is the default there on sm_90
    too, at every dtype (the choice still ignores the variant); the Gluon kernel asked for by name at 256 is
    refused with the reason, before any launch."""
    if machine == "sm_90":
        monkeypatch.setattr(ga, "usable_here", lambda: None)
    for dtype in (torch.bfloat16, torch.float16, torch.float8_e4m3fn):
        assert default_kernel(dtype, 256) == "triton"
        assert resolve_config(dtype, 256, {}) == ta.default_config(dtype, 256)
        with pytest.raises(UnsupportedError, match="^the Gluon forward is written for head dims 64 and 128, "
                                                   "not 256$") as e:
            resolve_config(dtype, 256, {"kernel": "gluon"})
        assert "64, 128 and 256" in e.value.hint
    # the gates' single-tile length follows: the Triton table's 64-key tile at 256
    assert key_tile("triton", "bf16", 256, {}) == key_tile("triton", "fp8", 256, {}) == 64
    # a backend built from a Gluon label refuses the shape rather than running another kernel
    from softbench.core.options import parse_triton_config

    backend = TritonBackend(**parse_triton_config("gluon-n128s2-c240l24-hg8"), device="cpu")
    with pytest.raises(UnsupportedError, match="not 256"):
        backend.config_for(Shape(dtype="bf16", seq=128, heads=2, head_dim=256), torch.bfloat16)
    # the kernel's own entry points refuse 256 too (check_inputs, shared with the Triton kernel, accepts it)
    with pytest.raises(UnsupportedError, match="not 256"):
        default_config(torch.bfloat16, 256)
    q = torch.zeros(1, 64, 2, 256, dtype=torch.bfloat16)
    with pytest.raises(UnsupportedError, match="not 256"):
        ga.prepare_operands(q, q[:, :, :1], q[:, :, :1], DEFAULT)




@pytest.mark.parametrize("schedule, suffix, mode", [("rounds", "-pt", 1), ("dynamic", "-pd", 2),
                                                    ("dynamic-deferred", "-pde", 3)])
def test_persistent_labels_read_back_and_change_no_output_bit(schedule, suffix, mode):
    """-pt and -pd: their place in the label (after -g1, before the rescale's suffix), read back with and without
    -g1; the ping-pong refused with them (the persistent partitions are written without the turn hand-over);
    plain() drops them (a persistent schedule runs each query block's arithmetic unchanged, only in another
    program, so its outputs are checked bit for bit against the one-block kernel's); and the kernel gets the
    schedule as its PERSISTENT constant, without which the cross-compile and the launch would build the one-block
    kernel whatever the label says."""
    pt = GluonConfig(head_group=16, schedule=schedule, rescale="lazy-anchor", row_sum="mma-tile", sync="mbarrier")
    assert pt.label() == f"gluon-n128s2-c240l24-hg16{suffix}-rla-lmt-tb"
    assert GluonConfig.from_label(pt.label()) == pt and GluonConfig.from_label(pt.label()).schedule == schedule
    one = GluonConfig(consumers=1, schedule=schedule, rescale="moved", rescale_at="pv", sync="mbarrier")
    assert one.label() == f"gluon-n128s2-c240l24-hg8-g1{suffix}-rs-ro-tb"
    assert GluonConfig.from_label(one.label()) == one
    assert GluonConfig.from_label(f"gluon-n128s2-c240l24-hg8-g1{suffix}").schedule == schedule
    assert GluonConfig.from_label("gluon-n128s2-c240l24-hg16-rla-lmt-tb").schedule == "blocks"
    with pytest.raises(UsageError, match="Gluon configuration label"):
        GluonConfig.from_label(f"gluon-n128s2-c240l24-hg8{suffix}-g1")  # one order only: one label each
    with pytest.raises(UsageError, match="Gluon configuration label"):
        GluonConfig.from_label("gluon-n128s2-c240l24-hg8-pt-pd")  # one schedule at a time
    # the same configuration without -pt/-pd, -tb, -rs, -ro; what changes bits (-rla, -lmt, -g1) stays
    assert pt.plain() == GluonConfig.from_label("gluon-n128s2-c240l24-hg16-rla-lmt")
    assert pt.plain().schedule == "blocks"
    assert one.plain() == GluonConfig(consumers=1)
    with pytest.raises(UsageError, match="persistent schedules"):
        GluonConfig(pingpong=True, schedule=schedule)
    with pytest.raises(UsageError, match="persistent schedules"):
        GluonConfig.from_label(f"gluon-n128s2-c240l24-hg8-pp{suffix}")  # -ppn-pd is written: its own test
    with pytest.raises(UsageError, match="scheduled as"):
        GluonConfig(schedule="greedy")
    for fp8 in (True, False):
        assert ga.kernel_constants(pt, 8192, 128, True, fp8, "h15-folded")["PERSISTENT"] == mode
        assert ga.kernel_constants(pt.plain(), 8192, 128, True, fp8, "h15-folded")["PERSISTENT"] == 0


def test_named_ping_pong_runs_under_the_dynamic_schedule():
    """-ppn with -pd: the label reads back (ping-pong before the schedule); the kernel gets PINGPONG 2 with the
    persistent schedule; refused with the mbarrier hand-over (whose turn phases restart with each block) and with the
    other persistent schedules. Cross-compiled at BF16 causal 8K under the 16-bit default's options: the key loop
    takes its turn (one bar.sync, on a turn barrier) with its wgmmas and waits as under -pd, nothing more spilled, no
    ptxas advisory; the second consumer arrives once more on the first's barrier than it syncs on its own (the first
    turn, given once per program), the first consumer's arrivals match the second's syncs."""
    label = "gluon-n128s2-c240l24-hg4-ppn-pd-rl-ro-ltt-pm-tb-mlf"
    cfg = GluonConfig.from_label(label)
    assert cfg.pingpong and cfg.handover == "named" and cfg.schedule == "dynamic" and cfg.label() == label
    constants = ga.kernel_constants(cfg, 8192, 128, True, False, "A0")
    assert constants["PINGPONG"] == 2 and constants["PERSISTENT"] == 2
    for bad in ("gluon-n128s2-c240l24-hg4-pp-pd-rl-ro-ltt", "gluon-n128s2-c240l24-hg4-ppn-pt-rl",
                "gluon-n128s2-c240l24-hg4-ppn-pde-rl", "gluon-n128s2-c240l24-hg4-ppn-pdo-rl-ro-ltt"):
        with pytest.raises(UsageError, match="only -pd is written with a ping-pong"):
            GluonConfig.from_label(bad)
    pd, ppn = (_compile("bf16", "A0", lab) for lab in ("gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf", label))
    assert ppn["loop_bar_sync"] == 1 and pd["loop_bar_sync"] == 0, (pd, ppn)
    same = ("loop_gmma", "loop_gmma_waits", "shared_bytes", "spill_loads", "global_atomics")
    assert {k: ppn[k] for k in same} == {k: pd[k] for k in same}, (pd, ppn)
    assert ppn["ptxas_advisories"] == [], ppn
    first, second = ga.TURN_BARRIERS
    bars = ppn["named_barriers"]
    assert bars[f"arrive {first}/256"] == bars[f"sync {second}/256"] + 1, bars
    assert bars[f"arrive {second}/256"] == bars[f"sync {first}/256"], bars


def test_k_ahead_loads_read_back_and_change_only_the_producer():
    """-ka (GluonConfig.loads "k-ahead"): the label's last suffix, read back alone and after -sq and -e<N>; plain()
    drops it (the same tiles into the same slots); the kernel gets K_AHEAD. Cross-compiled one-block and under the
    16-bit default's -pd: the producer's loop issues one K and one V copy per tile as before, and the first K and
    the last V of each block are issued outside it (two more TMA copies in the TTGIR); the consumers' key loop,
    registers, spills and shared memory stay as they were, with no ptxas advisory."""
    for label in ("gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf-ka", "gluon-n128s2-c240l24-hg8-sq-ka",
                  "gluon-n128s2-c240l24-hg8-g1-e16-ka"):
        cfg = GluonConfig.from_label(label)
        assert cfg.loads == "k-ahead" and cfg.label() == label
        assert cfg.plain().loads == "paired"
        assert ga.kernel_constants(cfg, 8192, 128, True, False, "A0")["K_AHEAD"] is True
    assert ga.kernel_constants(DEFAULT, 8192, 128, True, False, "A0")["K_AHEAD"] is True  # since 17:40
    assert ga.kernel_constants(DEFAULT_FP8, 8192, 128, True, True, "A0")["K_AHEAD"] is False
    with pytest.raises(UsageError, match="orders its loads"):
        GluonConfig(loads="v-ahead")
    same = ("loop_instructions", "loop_gmma", "loop_gmma_waits", "registers", "spill_loads", "spill_stores",
            "shared_bytes")
    for paired_label in ("gluon-n128s2-c240l24-hg8", "gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf"):
        paired, ahead = _compile("bf16", "A0", paired_label), _compile("bf16", "A0", paired_label + "-ka")
        assert {k: ahead[k] for k in same} == {k: paired[k] for k in same}, (paired, ahead)
        assert ahead["tma_loads"] == paired["tma_loads"] + 2, (paired["tma_loads"], ahead["tma_loads"])
        assert ahead["ptxas_advisories"] == [], ahead


def test_v_ring_of_its_own_reads_back_and_adds_one_value_tile():
    """-v<N> (GluonConfig.v_stages): the label's last suffix, read back after -ka and alone; plain() drops it (the same
    tiles in the same order); the kernel gets V_STAGES, K's ring keeps STAGES; a V ring of one buffer, or of K's
    length spelled out, is refused. Cross-compiled under the 16-bit default (BF16) and the FP8 default: one more value
    tile of shared memory (and its two mbarriers) and nothing else of note: the same registers and spills, the same
    TMA copies, the key loop at most 4 instructions longer (V's slot and phase by a ring of 3, not a power of two),
    no ptxas advisory; the 16-bit default's blocks still fit an H200's 227 KiB, and so do K's three with V's two."""
    for label in ("gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf-ka-v3", "gluon-n128s2-c240l24-hg8-g1-v3"):
        cfg = GluonConfig.from_label(label)
        assert cfg.v_stages == 3 and cfg.value_stages == 3 and cfg.label() == label
        assert cfg.plain().v_stages == 0
        constants = ga.kernel_constants(cfg, 8192, 128, True, False, "A0")
        assert (constants["STAGES"], constants["V_STAGES"]) == (2, 3)
    assert ga.kernel_constants(DEFAULT, 8192, 128, True, False, "A0")["V_STAGES"] == 2
    for v_stages in (1, 2):
        with pytest.raises(UsageError, match="V's own ring"):
            GluonConfig(v_stages=v_stages)
    tile = {"bf16": 128 * 128 * 2, "fp8": 128 * 128}
    same = ("registers", "spill_loads", "spill_stores", "tma_loads", "loop_gmma", "loop_gmma_waits")
    for dtype, variant, base_label in (("bf16", "A0", "gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf-ka"),
                                       ("fp8", "h15-folded", "gluon-n128s2-c240l24-hg8-g1-pd-rla-lmt-tb-mlf")):
        two, three = _compile(dtype, variant, base_label), _compile(dtype, variant, base_label + "-v3")
        assert {k: three[k] for k in same} == {k: two[k] for k in same}, (two, three)
        assert tile[dtype] <= three["shared_bytes"] - two["shared_bytes"] <= tile[dtype] + 64, (two, three)
        assert 0 <= three["loop_instructions"] - two["loop_instructions"] <= 4, (two, three)
        assert three["ptxas_advisories"] == [], three
    v3 = _compile("bf16", "A0", "gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf-ka-v3")
    assert v3["shared_bytes"] <= 227 * 1024
    # the other way round, K's ring three long and V's two (the next lead after -v3, docs/hopper-notes.md): the same
    # bytes, registers and key loop
    k3 = _compile("bf16", "A0", "gluon-n128s3-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf-ka-v2")
    assert {k: k3[k] for k in ("shared_bytes", "registers", "spill_stores", "loop_instructions")} == {
        k: v3[k] for k in ("shared_bytes", "registers", "spill_stores", "loop_instructions")}, (v3, k3)


def test_dynamic_schedule_runs_with_one_or_two_consumers():
    """-pd at FP8 with two consumer warpgroups was refused from 06:10 to 07:35 on 2026-12-04: its outputs had
    differed from plain()'s on the H200. It is taken again since the cause was found elsewhere (-ro's row sums,
    test_rescale_at_pv_rounds_the_row_sums_as_at_the_tile_end): on the H200 the dynamic schedule was bit-equal to its
    one-block kernel in each form and launch checked."""
    two = GluonConfig.from_label("gluon-n128s2-c240l24-hg2-pd-rla-ro-lmt-tb")
    for fp8 in (True, False):
        assert ga.kernel_constants(two, 8192, 128, True, fp8, "A0")["PERSISTENT"] == 2
    one = GluonConfig.from_label("gluon-n128s2-c240l24-hg8-g1-pd-rla-lmt-tb-mlf")
    assert ga.kernel_constants(one, 8192, 128, True, True, "h15-folded")["PERSISTENT"] == 2
    assert ga.kernel_constants(replace(two, schedule="rounds"), 8192, 128, True, True, "A0")["PERSISTENT"] == 1


def test_rescale_at_pv_rounds_the_row_sums_as_at_the_tile_end():
    """-ro defers O's rescale to just before the next P.V; the tensor core's per-tile row sums (-lmt) keep theirs at
    the tile's end. Deferred too, the running sums' multiply met the next tile's add and the compiler fused the two
    into an FFMA (one rounding instead of two): on the H200 FP8 -hg2-rla-ro-lmt-tb then differed from -hg2-rla-lmt
    (2026-12-04, sessions/gluon-probe-h200-20261204-0723-pd-diagnose-probe-data). The same key loop's FFMA and FADD
    counts with -ro and without are the check here (130 and 12 against 128 and 14 before the fix)."""
    tail = _compile("fp8", "A0", "gluon-n128s2-c240l24-hg2-rla-lmt-tb")
    at_pv = _compile("fp8", "A0", "gluon-n128s2-c240l24-hg2-rla-ro-lmt-tb")
    assert (at_pv["loop_ffma"], at_pv["loop_fadd"]) == (tail["loop_ffma"], tail["loop_fadd"]), (tail, at_pv)
    assert at_pv["loop_fmul_among_gmma"] > tail["loop_fmul_among_gmma"], (tail, at_pv)  # O's rescale still moved


def test_gates_key_tile_takes_a_gluon_label():
    assert key_tile("triton", "bf16", 128, {"kernel": "gluon"}) == 128
    assert key_tile("triton", "bf16", 128, {"kernel": "gluon", "block_n": 64}) == 64


def test_backend_refuses_gluon_where_it_cannot_run(monkeypatch):
    """Asked for by name, the Gluon kernel is refused with the reason; never replaced by the other kernel."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    shape = Shape(dtype="bf16", seq=128, heads=2, head_dim=64)
    inputs = make_inputs(shape, 0, "cpu")
    b = TritonBackend(kernel="gluon", device="cpu")
    b.load("A0")
    with pytest.raises(UnsupportedError, match="interpreter"):
        b.build(shape, inputs)
    proved = TritonBackend(kernel="gluon", device="cpu")
    proved.load("h15-proved")  # both kernels have it now: refused for the machine, not for the variant
    with pytest.raises(UnsupportedError, match="interpreter"):
        proved.build(shape, inputs)


def test_both_kernels_implement_the_same_variants():
    """So that a sweep or a --triton-config label never changes which variants can run; anything else is refused
    by name, with the Triton labels as the way out."""
    from softbench.kernels.catalog import built_by

    assert ga.WEIGHT_MAPS == built_by("triton")
    for variant in ga.WEIGHT_MAPS:
        ga.check_variant(variant)
    with pytest.raises(UsageError, match="not 'exp2-poly'") as e:
        ga.check_variant("exp2-poly")
    assert "m128n64w8s2-tma-r128-hg16" in e.value.hint


@pytest.mark.parametrize("label", ["gluon-n128s2-c240l24-hg8", "gluon-n128s4-c240l24-hg8-pp",
                                   "gluon-n128s2-c240l24-hg8-ppn",
                                   "gluon-n128s2-c240l24-hg8-g1", "gluon-n128s2-c240l24-hg8-g1-rs-tb",
                                   "gluon-n128s2-c240l24-hg16-pt-rla-lmt-tb", "gluon-n128s2-c240l24-hg8-g1-pt",
                                   "m64n128w4s3-vk-tma-hg16"])
def test_every_label_reaches_the_backend_whole(label):
    """What --triton-config parses a label into is what each worker process builds its backend from: every field
    of either configuration must be taken (the -g1 label's `consumers` once was not) and give the label back."""
    from softbench.core.options import parse_triton_config

    backend = TritonBackend(**parse_triton_config(label), device="cpu")
    dtype = torch.float8_e4m3fn if "-vk" in label else torch.bfloat16
    assert resolve_config(dtype, 128, backend.overrides).label() == label


def test_backend_options_are_the_configurations_fields():
    """TritonBackend takes exactly the fields of the two configurations (listed in triton_backend so that it need not
    import triton to check them): a field added to a configuration must be added there, and anything else is
    refused as an option the backend lacks."""
    from dataclasses import fields

    from softbench.kernels.backends import make_backend
    from softbench.kernels.triton_backend import CONFIG_FIELDS, GLUON_FIELDS

    assert CONFIG_FIELDS == tuple(f.name for f in fields(KernelConfig))
    assert GLUON_FIELDS == tuple(f.name for f in fields(GluonConfig))
    with pytest.raises(UnsupportedError, match=r"does not take options .*'warps'"):
        make_backend("triton", warps=8, device="cpu")


def test_inputs_are_checked_before_any_launch():
    q = torch.zeros(1, 64, 4, 96, dtype=torch.bfloat16)
    with pytest.raises(UnsupportedError, match="head dims"):
        ga.check_inputs(q, q[:, :, :2], q[:, :, :2])
    q = torch.zeros(1, 64, 4, 64, dtype=torch.float32)
    with pytest.raises(UnsupportedError, match="float32"):
        ga.check_inputs(q, q, q)
    q = torch.zeros(1, 64, 3, 64, dtype=torch.bfloat16)
    with pytest.raises(UsageError, match="multiple of kv heads"):
        ga.check_inputs(q, q[:, :, :2], q[:, :, :2])


def test_cli_takes_gluon_labels(cli):
    r = cli("latency", "--backend", "fa4", "--triton-config", "gluon-n128s2-c240l24-hg8")
    assert r.returncode == 2 and "applies to --backend triton only" in r.stderr, r.stderr
    r = cli("energy", "--backend", "fa4", "--triton-config", "gluon-n128s2-c240l24-hg8")
    assert r.returncode == 2 and "applies to --backend triton only" in r.stderr, r.stderr
    r = cli("latency", "--backend", "triton", "--triton-config", "gluon-n96s2-c240l24-hg8")
    assert r.returncode == 2 and "key tiles of 64 or 128" in r.stderr, r.stderr


def _compile(dtype: str, variant: str, label: str) -> dict:
    """The cross-compile's report (a fresh dict each call; the compile itself runs once per argument set)."""
    return json.loads(_compiled_report(dtype, variant, label))


@functools.cache
def _compiled_report(dtype: str, variant: str, label: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-m", "softbench.kernels.triton_compile", dtype, "128", variant, "--causal",
                        "--label", label], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def test_hopper_compile_is_warp_specialized_without_spills():
    """Cross-compile the kernel for sm_90a (no GPU needed): what the H200 ran (BF16) and its FP8 path."""
    a0 = _compile("bf16", "A0", "gluon-n128s2-c240l24-hg8")
    a1 = _compile("bf16", "A1", "gluon-n128s2-c240l24-hg8")
    fp8 = _compile("fp8", "A1", "gluon-n128s3-c240l24-hg8")
    fp8_a0 = _compile("fp8", "A0", "gluon-n128s4-c240l24-hg8")
    pp = _compile("bf16", "A0", "gluon-n128s2-c240l24-hg8-pp")
    ppn = _compile("bf16", "A0", "gluon-n128s2-c240l24-hg8-ppn")
    for rep in (a0, a1, fp8, fp8_a0, pp, ppn):
        assert rep["warp_specialized"] and rep["tma_loads"] >= 3, rep
        assert rep["local_bytes"] == 0 and rep["stack_bytes"] == 0 and rep["spill_stores"] == 0, rep
        assert rep["shared_bytes"] <= 227 * 1024, rep
        assert rep["ptxas_advisories"] == [], rep  # no serialized wgmma
    assert a0["wgmma"] == a1["wgmma"] == pp["wgmma"] == ppn["wgmma"] == ["m64n128k16.f32.bf16.bf16"]
    # ping-pong adds the turn hand-over (an mbarrier wait and arrive per tile), nothing per element
    assert 0 < pp["loop_instructions"] - a0["loop_instructions"] < 32, (a0, pp)
    # through named barriers, FA3's way: one BAR.SYNC and one BAR.ARV per tile and consumer, on ids of their own
    # (Triton's barriers keep theirs), 256 threads each; the second consumer arrives once more, before its first
    # wait, to give the first consumer its first turn
    mine, theirs = ga.TURN_BARRIERS
    nb = ppn["named_barriers"]
    assert {k: v for k, v in nb.items() if k.split()[1].split("/")[0] in (str(mine), str(theirs))} == {
        f"sync {mine}/256": 2, f"sync {theirs}/256": 2, f"arrive {mine}/256": 3, f"arrive {theirs}/256": 2}, nb
    triton_ids = {int(k.split()[1].split("/")[0]) for k in a0["named_barriers"]}
    assert triton_ids and not triton_ids & {mine, theirs}, a0["named_barriers"]
    assert ppn["loop_instructions"] - a0["loop_instructions"] == 2, (a0, ppn)
    assert fp8["wgmma"] == ["m64n128k32.f32.e4m3.e4m3"]
    # P's FP8 operand: two conversions and one byte permute per four keys (carried across the loop as bytes it
    # took 108 PRMT, 64 LOP3 and 32 SHF more per tile)
    for rep in (fp8, fp8_a0):
        assert rep["loop_f2fp"] == 32 and rep["loop_prmt"] <= rep["loop_f2fp"] // 2, rep
    # the loop holds both branches (masked and not) of one tile, 64 weights per thread: A0 through MUFU.EX2, A1
    # through the magic add and the shift, with only the per-row rescale's ex2 left
    assert a0["loop_mufu_ex2"] >= 128, a0
    assert a1["loop_mufu_ex2"] <= 4 and a1["loop_shift"] >= 64 and a1["loop_fadd"] - a0["loop_fadd"] >= 64, (a0, a1)


def test_proved_variant_drops_the_clamp_from_unmasked_tiles_only():
    """h15-proved in the Gluon kernel: the unmasked branch is A1 without the clamp (64 FMNMX fewer per tile and
    thread), the masked branch keeps it; both dtypes, no spills."""
    for dtype, label in (("bf16", "gluon-n128s2-c240l24-hg8"), ("fp8", "gluon-n128s4-c240l24-hg8")):
        a1, proved = _compile(dtype, "A1", label), _compile(dtype, "h15-proved", label)
        assert proved["warp_specialized"] and proved["stack_bytes"] == 0 and proved["ptxas_advisories"] == []
        assert a1["loop_fmnmx"] - proved["loop_fmnmx"] == 64, (a1, proved)
        assert proved["loop_mufu_ex2"] <= 4 and proved["loop_shift"] == a1["loop_shift"], (a1, proved)


def test_sat_variant_folds_the_clamp_into_the_scaling_fma():
    """h15-sat: the weight in FFMA.SAT, FFMA and a shift (no clamp FMNMX, no magic FADD), both branches."""
    a0 = _compile("fp8", "A0", "gluon-n128s4-c240l24-hg8")
    sat = _compile("fp8", "h15-sat", "gluon-n128s4-c240l24-hg8")
    assert sat["stack_bytes"] == 0 and sat["ptxas_advisories"] == [], sat
    assert sat["loop_ffma_sat"] == 128 and sat["loop_fmnmx"] == a0["loop_fmnmx"], (a0, sat)
    assert sat["loop_mufu_ex2"] <= 4 and sat["loop_shift"] >= 64 and sat["loop_fadd"] - a0["loop_fadd"] < 16


def test_fp8_key_order_is_the_kernels_renumbering():
    """V's FP8 copy is stored in the key order _p_carry gives P: the same reshape and permute on key indices."""
    order = ga.fp8_key_order(128)
    assert sorted(order.tolist()) == list(range(128))
    kernel = torch.arange(128).reshape(1, 4, 2, 2, 4, 2).permute(0, 1, 2, 4, 3, 5).reshape(128)
    assert torch.equal(kernel, order)
    # thread t of a quad holds keys 2t, 2t+1 of every 8 in the accumulator; the operand wants four in a row
    assert order[:8].tolist() == [0, 1, 8, 9, 2, 3, 10, 11]
    # P.V is unchanged by renumbering both sides
    g = torch.Generator().manual_seed(0)
    p, v = torch.rand(3, 64, generator=g), torch.rand(64, 5, generator=g)
    o = ga.fp8_key_order(64)
    assert torch.allclose(p[:, o] @ v[o], p @ v)


def test_folded_variant_takes_two_instructions_per_score():
    """h15-folded: the magic add inside the FFMA that scales the scores, so each weight of the unmasked branch is
    that FFMA and the shift (A0's: the FFMA and MUFU.EX2), the shift shared with the masked branch after the join;
    the clamp (one FMNMX per score) is in the masked branch only; both dtypes, no spills."""
    for dtype, label in (("bf16", "gluon-n128s2-c240l24-hg8"), ("fp8", "gluon-n128s4-c240l24-hg8")):
        a0, folded = _compile(dtype, "A0", label), _compile(dtype, "h15-folded", label)
        assert folded["warp_specialized"] and folded["stack_bytes"] == 0 and folded["ptxas_advisories"] == [], folded
        assert folded["loop_mufu_ex2"] <= 4 and folded["loop_shift"] == 64, folded
        assert 0 <= folded["loop_ffma"] - a0["loop_ffma"] < 16, (a0, folded)  # per-row biases only
        assert folded["loop_fadd"] - a0["loop_fadd"] < 16, (a0, folded)  # no magic FADD
        assert folded["loop_fmnmx"] - a0["loop_fmnmx"] == 64, (a0, folded)
        assert folded["loop_instructions"] < a0["loop_instructions"], (a0, folded)


@pytest.mark.parametrize("dtype,variant,label", [("fp8", "h15-folded", "gluon-n128s2-c240l24-hg2-rla-lmt-tb"),
                                                   ("bf16", "A0", "gluon-n128s2-c240l24-hg8-rl-ltt-tb")])
def test_masked_tile_selects_each_score_once(dtype, variant, label):
    """Causal masking as one bound per row (triton_attn._kept): the masked branch selects each of a thread's 64
    scores once; with (key < seq) and (key <= row) tested apart it took a second select per score (130 FSEL in
    the loop of h15-folded at FP8). The loop's other selects are a few per row (the lazy maximum's choice)."""
    rep = _compile(dtype, variant, label)
    assert 64 <= rep["loop_fsel"] <= 64 + 8, rep
    assert rep["stack_bytes"] == 0 and rep["ptxas_advisories"] == [], rep


def test_skipped_rescale_asm_ties_o_and_reads_one_flag():
    """The asm that O's skippable rescale is: n elements out, the same n in (tied, so a jump copies nothing), one
    multiply per element by its own alpha, and a branch on the first flag operand only."""
    asm, constraints = ga._skippable_rescale_asm(4)
    parts = constraints.split(",")
    assert parts == ["=f"] * 4 + ["0", "1", "2", "3"] + ["f"] * 4 + ["r"] * 4
    assert [f"mul.f32 ${k}, ${k}, ${8 + k};" in asm for k in range(4)] == [True] * 4
    assert "setp.ne.u32 kept, $12, 0;" in asm and asm.count("bra.uni") == 1 and asm.count("mul.f32") == 4
    assert "vote.sync.all.pred" in ga._warp_kept_max_asm()


@pytest.mark.parametrize("dtype,label", [("fp8", "gluon-n128s2-c240l24-hg8-g1"), ("bf16", "gluon-n128s2-c240l24-hg8")])
def test_skipped_rescale_jumps_over_o_multiply(dtype, label):
    """-rs: one warp vote per tile and a predicated branch over O's 64 multiplies per thread (head dim 128), where
    the plain configuration multiplies every tile; nothing else in the loop changes beyond the vote's few
    instructions, and no spills."""
    plain, skip = _compile(dtype, "A0", label), _compile(dtype, "A0", label + "-rs")
    assert plain["loop_vote"] == 0 and plain["loop_fmul_jumped"] == 0, plain
    assert skip["loop_vote"] == 1 and skip["loop_fmul_jumped"] == 64, skip
    assert 0 < skip["loop_instructions"] - plain["loop_instructions"] <= 8, (plain, skip)
    assert skip["stack_bytes"] == 0 and skip["spill_stores"] == 0 and skip["ptxas_advisories"] == [], skip


@pytest.mark.parametrize("dtype,label", [("fp8", "gluon-n128s2-c240l24-hg8-g1"), ("bf16", "gluon-n128s2-c240l24-hg8")])
def test_trimmed_sync_leaves_no_barrier_in_the_key_loop(dtype, label):
    """-tb: the three partition barriers per tile (before K's ready wait and the K and V releases) are gone from the
    loop's SASS, and nothing else in it changed: the same instructions of every family counted, three fewer in all."""
    plain, trimmed = _compile(dtype, "A0", label), _compile(dtype, "A0", label + "-tb")
    assert plain["loop_bar_sync"] == 3 and trimmed["loop_bar_sync"] == 0, (plain, trimmed)
    # what makes dropping them safe in the loop: no ordinary shared-memory access there for a barrier to order
    assert plain["loop_shared_ld_st"] == trimmed["loop_shared_ld_st"] == 0
    assert plain["loop_instructions"] - trimmed["loop_instructions"] == 3, (plain, trimmed)
    same = [k for k in plain if k.startswith("loop_") and k not in ("loop_bar_sync", "loop_instructions")]
    assert same and {k: trimmed[k] for k in same} == {k: plain[k] for k in same}
    assert trimmed["stack_bytes"] == 0 and trimmed["spill_stores"] == 0 and trimmed["ptxas_advisories"] == []


@pytest.mark.parametrize("dtype,label", [("fp8", "gluon-n128s2-c240l24-hg8-g1-tb"),
                                         ("bf16", "gluon-n128s2-c240l24-hg8-tb")])
def test_thread_row_sums_leave_the_quad_exchange_out_of_the_loop(dtype, label):
    """-lt: the row sums' exchange inside the quad (two SHFL and two FADD per row, the thread's two rows) leaves the
    key loop, which keeps only the maximum's four SHFL per tile form; no other family of the loop grows, no
    spills."""
    rows, parts = _compile(dtype, "A0", label), _compile(dtype, "A0", label.replace("-tb", "-lt-tb"))
    assert rows["loop_shfl"] == 12 and parts["loop_shfl"] == 8, (rows, parts)
    assert rows["loop_fadd"] - parts["loop_fadd"] == 4, (rows, parts)
    # 8 fewer in all (4 SHFL, 4 FADD), give or take ptxas's scheduling of the rest (7 and 10 with the Triton 3.6 of
    # 2026-12: before and after the masked branch's one comparison per score)
    assert 0 < rows["loop_instructions"] - parts["loop_instructions"] <= 12, (rows, parts)
    counted = [k for k in rows if k.startswith("loop_") and isinstance(rows[k], int)]
    assert all(parts[k] <= rows[k] for k in counted), {k: (rows[k], parts[k]) for k in counted}
    assert parts["stack_bytes"] == 0 and parts["spill_stores"] == 0 and parts["ptxas_advisories"] == [], parts
    # the sums' chains of adds: 31 in the thread and 2 after the quad's shuffles, then 16 (the thread's 16 pairs of
    # keys one after another), then 5 with the pairs added level by level (-ltt: 1 + 4 levels), the same count
    tree = _compile(dtype, "A0", label.replace("-tb", "-ltt-tb"))
    assert (rows["loop_sum_chain"], parts["loop_sum_chain"], tree["loop_sum_chain"]) == (33, 16, 5), (rows, parts, tree)
    assert tree["loop_instructions"] == parts["loop_instructions"] and tree["loop_fadd"] == parts["loop_fadd"], tree
    assert tree["spill_stores"] == 0 and tree["ptxas_advisories"] == [], tree


@pytest.mark.parametrize("dtype,label,key_steps", [("fp8", "gluon-n128s2-c240l24-hg8-g1-tb", 4),
                                                   ("bf16", "gluon-n128s2-c240l24-hg8-tb", 8)])
def test_row_sums_on_the_tensor_core_take_the_adds_out_of_the_loop(dtype, label, key_steps):
    """-lm: P times a tile of ones, one m64n8 wgmma per key step beside P.V's, in place of the 64 adds per tile and
    thread of the per-thread sums (-ltt); the loop waits once more (the sums' group), no barrier enters it, and
    nothing spills."""
    tree, mma = (_compile(dtype, "A0", label.replace("-tb", suffix)) for suffix in ("-ltt-tb", "-lm-tb"))
    assert mma["loop_gmma"] - tree["loop_gmma"] == key_steps, (tree, mma)
    assert any(shape.startswith("m64n8k") for shape in mma["wgmma"]) and mma["loop_gmma_waits"] == 3, mma
    assert tree["loop_fadd"] - mma["loop_fadd"] >= 60 and mma["loop_sum_chain"] <= 1, (tree, mma)
    # the 62 adds less the sums' wgmmas and their operands' arithmetic (50 and 47 at BF16 with Triton 3.6)
    assert tree["loop_instructions"] - mma["loop_instructions"] >= 45, (tree, mma)
    assert mma["loop_bar_sync"] == 0 and mma["spill_stores"] == 0 and mma["ptxas_advisories"] == [], mma


@pytest.mark.parametrize("dtype,label", [("fp8", "gluon-n128s2-c240l24-hg8-g1-tb"), ("bf16", "gluon-n128s2-c240l24-hg8-tb")])
def test_row_sums_per_tile_on_the_tensor_core_add_two_fp32_adds(dtype, label):
    """-lmt: the same wgmmas as -lm, each tile's from a fresh accumulator, added to FP32 running sums that take
    one column per thread: two adds per tile and thread (its two rows), nothing spilled, no wait added."""
    whole, tile = (_compile(dtype, "A0", label.replace("-tb", suffix)) for suffix in ("-lm-tb", "-lmt-tb"))
    assert tile["loop_gmma"] == whole["loop_gmma"] and tile["loop_gmma_waits"] == whole["loop_gmma_waits"], tile
    assert tile["loop_fadd"] - whole["loop_fadd"] == 2 and abs(tile["loop_instructions"] - whole["loop_instructions"]) <= 4
    assert tile["spill_stores"] == 0 and tile["ptxas_advisories"] == [], tile


def test_lazy_rescale_is_a0s_alone_and_leaves_room_for_its_larger_weights():
    """-rl: A0's running maximum moves only past a threshold (2 octaves at FP8, FA4's 8 at 16 bits), and at FP8 the
    weights' offset is lowered by as much, so the largest weight stays within 2^8 (E4M3's largest normal is 448);
    every other variant keeps the exact maximum and its offset, and -rl is -rs for it. -rl changes A0's bits
    (P rounded at another scale), so it stays in the plain configuration its outputs are compared with."""
    lazy = GluonConfig.from_label("gluon-n128s2-c240l24-hg8-g1-rl-lmt-tb")
    assert lazy.rescale == "lazy" and lazy.plain().rescale == "lazy" and lazy.plain().sync == "membar"
    assert (ga.lazy_threshold(lazy, True, "A0"), ga.max_offset(lazy, True, "A0")) == (2.0, 6.0)
    assert (ga.lazy_threshold(lazy, False, "A0"), ga.max_offset(lazy, False, "A0")) == (8.0, 0.0)
    for variant in ("h15-folded", "h15-sat", "A1", "noexp"):
        assert (ga.lazy_threshold(lazy, True, variant), ga.max_offset(lazy, True, variant)) == (0.0, 8.0)
    moved = GluonConfig.from_label("gluon-n128s2-c240l24-hg8-g1-rs-lmt-tb")
    assert (ga.lazy_threshold(moved, True, "A0"), ga.max_offset(moved, True, "A0")) == (0.0, 8.0)
    constants = ga.kernel_constants(lazy, 8192, 128, True, True, "A0")
    assert constants["RESCALE_SKIP"] and constants["LAZY"] == 2.0 and constants["MAX_OFFSET"] == 6.0


def test_lazy_rescale_at_fp8_keeps_a0s_error_against_fp32():
    """The simulation of -rl's A0 at FP8 (threshold 2, offset 6: weights 2^6 to 2^8 at the top of each row, P
    rounded to E4M3) against exact FP32 attention, beside the kernel's usual A0 (exact maximum, offset 8): the
    same error to within 10%, on 2048 keys of random inputs, causal and not."""
    from softbench.kernels.refs import relative_error
    from softbench.kernels.sim import sim_attention
    from softbench.kernels.sim_weights import SIM_WEIGHTS
    from softbench.kernels.catalog import get_variant

    g = torch.Generator().manual_seed(11)
    q, k, v = (torch.randn(1, 2048, 2, 128, generator=g).to(torch.float8_e4m3fn) for _ in range(3))
    a0 = SIM_WEIGHTS.get(get_variant("A0").operator)
    for causal in (True, False):
        exact = torch.nn.functional.scaled_dot_product_attention(
            *(x.float().transpose(1, 2) for x in (q, k, v)), is_causal=causal).transpose(1, 2)
        usual = sim_attention(q, k, v, causal, a0, tile=128, out_dtype=torch.float32)
        lazy = sim_attention(q, k, v, causal, a0, tile=128, rescale_threshold=2.0, max_offset=6.0,
                             out_dtype=torch.float32)
        e_usual, e_lazy = relative_error(usual, exact), relative_error(lazy, exact)
        assert 0.9 * e_usual <= e_lazy <= 1.1 * e_usual, (causal, e_usual, e_lazy)
        assert not torch.equal(usual, lazy)  # another rounding of P: not the same bits


@pytest.mark.parametrize("dtype,moved_label,lazy_label", [
    ("fp8", "gluon-n128s2-c240l24-hg8-g1-rs-lmt-tb", "gluon-n128s2-c240l24-hg8-g1-rl-lmt-tb"),
    ("bf16", "gluon-n128s2-c240l24-hg8-rs-ltt-tb", "gluon-n128s2-c240l24-hg8-rl-ltt-tb")])
def test_lazy_rescale_compiles_to_the_skippable_rescale(dtype, moved_label, lazy_label):
    """-rl's loop (in both defaults, the labels here): the warp's vote and the 64 multiplies it jumps over, as
    -rs's, a few instructions for the threshold's compare per row, nothing spilled; h15-folded under -rl is
    h15-folded under -rs. At 16 bits the row sums stay -ltt's, five dependent adds at the tile's end."""
    moved, lazy = _compile(dtype, "A0", moved_label), _compile(dtype, "A0", lazy_label)
    assert lazy["loop_vote"] == moved["loop_vote"] == 1 and lazy["loop_fmul_jumped"] == 64, lazy
    if dtype == "bf16":
        assert lazy["loop_sum_chain"] == moved["loop_sum_chain"] == 5, (moved, lazy)
    assert 0 < lazy["loop_instructions"] - moved["loop_instructions"] <= 12, (moved, lazy)
    assert lazy["spill_stores"] == 0 and lazy["ptxas_advisories"] == [], lazy
    if dtype == "fp8":
        folded = [_compile("fp8", "h15-folded", label) for label in (moved_label, lazy_label)]
        assert folded[0]["loop_instructions"] == folded[1]["loop_instructions"], folded


def test_lazy_anchor_extends_the_lazy_maximum_to_h15_folded_alone():
    """-rla: A0 as under -rl, and h15-folded's anchor moved lazily too, with the same threshold and the lowered
    offset (its largest weight 1.5 x 2^8, inside E4M3's 448); every other variant keeps the exact maximum. The
    label reads back, and the option stays in the plain configuration (it changes h15-folded's bits)."""
    anchor = GluonConfig.from_label("gluon-n128s2-c240l24-hg8-g1-rla-lmt-tb")
    assert anchor.rescale == "lazy-anchor" and anchor.label() == "gluon-n128s2-c240l24-hg8-g1-rla-lmt-tb"
    assert anchor.plain().rescale == "lazy-anchor" and anchor.plain().sync == "membar"
    for variant in ("A0", "h15-folded"):
        assert (ga.lazy_threshold(anchor, True, variant), ga.max_offset(anchor, True, variant)) == (2.0, 6.0)
        assert ga.lazy_threshold(anchor, False, variant) == 8.0
    for variant in ("h15-sat", "A1", "noexp"):
        assert (ga.lazy_threshold(anchor, True, variant), ga.max_offset(anchor, True, variant)) == (0.0, 8.0)
    constants = ga.kernel_constants(anchor, 8192, 128, True, True, "h15-folded")
    assert constants["RESCALE_SKIP"] and constants["LAZY"] == 2.0 and constants["MAX_OFFSET"] == 6.0


def test_lazy_anchor_compiles_h15_folded_to_the_skippable_rescale():
    """h15-folded under -rla: the warp's vote and the 64 multiplies it jumps over, as under -rs, the threshold's
    compare per row added, still no clamp in the unmasked branch (h15-folded's FMNMX are the row maximum's and
    the masked branch's clamp: at most a few more), nothing spilled, the shift per score kept."""
    moved, anchor = (_compile("fp8", "h15-folded", label) for label in ("gluon-n128s2-c240l24-hg8-g1-rl-lmt-tb",
                                                                         "gluon-n128s2-c240l24-hg8-g1-rla-lmt-tb"))
    assert anchor["loop_vote"] == 1 and anchor["loop_fmul_jumped"] == 64, anchor
    assert 0 < anchor["loop_instructions"] - moved["loop_instructions"] <= 16, (moved, anchor)
    assert anchor["loop_shift"] == moved["loop_shift"] and anchor["loop_fmnmx"] - moved["loop_fmnmx"] <= 4
    assert anchor["spill_stores"] == 0 and anchor["ptxas_advisories"] == [], anchor


def test_near_anchor_moves_h15_foldeds_anchor_past_fp8s_threshold_at_16_bits():
    """-rlan (16 bits only): A0's maximum moved past FA4's 8 octaves as under -rl and -rla, h15-folded's anchor past
    2 octaves, the threshold under which -rla's h15-folded passes its gates at FP8; every other variant keeps the
    exact maximum. The label reads back, the option stays in the plain configuration (it changes h15-folded's
    bits), and at FP8, where it would be -rla under a second name, it is refused."""
    near = GluonConfig.from_label("gluon-n128s2-c240l24-hg4-pd-rlan-ro-ltt-pm-tb-mlf")
    assert near.rescale == "lazy-anchor-near" and near.label() == "gluon-n128s2-c240l24-hg4-pd-rlan-ro-ltt-pm-tb-mlf"
    assert near.plain().rescale == "lazy-anchor-near"
    assert (ga.lazy_threshold(near, False, "A0"), ga.lazy_threshold(near, False, "h15-folded")) == (8.0, 2.0)
    for variant in ("h15-sat", "h15-proved", "A1", "noexp"):
        assert ga.lazy_threshold(near, False, variant) == 0.0
    constants = ga.kernel_constants(near, 8192, 128, True, False, "h15-folded")
    assert constants["LAZY"] == 2.0 and constants["MAX_OFFSET"] == 0.0 and constants["RESCALE_SKIP"]
    assert ga.kernel_constants(near, 8192, 128, True, False, "A0")["LAZY"] == 8.0
    with pytest.raises(UnsupportedError, match="-rlan"):
        ga.kernel_constants(GluonConfig.from_label("gluon-n128s2-c240l24-hg8-g1-pd-rlan-lmt-tb-mlf"), 8192, 128,
                            True, True, "h15-folded")


def test_near_anchor_compiles_to_the_lazy_anchors_loop():
    """Under the 16-bit default with -rlan in place of -rl: h15-folded's loop is -rla's (the threshold is a
    constant of the compare) with the vote, the 64 jumped multiplies and the shift per score, and A0's is -rl's."""
    base = "gluon-n128s2-c240l24-hg4-pd-{}-ro-ltt-pm-tb-mlf"
    near, anchor = (_compile("bf16", "h15-folded", base.format(r)) for r in ("rlan", "rla"))
    keys = ("loop_instructions", "loop_vote", "loop_fmul_jumped", "loop_shift", "loop_mufu_ex2", "spill_stores")
    assert {k: near[k] for k in keys} == {k: anchor[k] for k in keys}, (near, anchor)
    assert near["loop_vote"] == 1 and near["loop_fmul_jumped"] == 64 and near["loop_shift"] == 64, near
    a0_near, a0_rl = (_compile("bf16", "A0", base.format(r)) for r in ("rlan", "rl"))
    assert {k: a0_near[k] for k in keys} == {k: a0_rl[k] for k in keys}, (a0_near, a0_rl)


@pytest.mark.parametrize("dtype, label", [("bf16", "gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf"),
                                          ("fp8", "gluon-n128s2-c240l24-hg8-g1-pd-rla-lmt-tb-mlf")])
def test_clamped_h15_folded_compiles_to_one_fmnmx_more_per_score(dtype, label):
    """h15-folded-clamped under each default: h15-folded's loop with one FMNMX per score more (the clamp in every
    tile; 64 per tile and thread) and nothing else changed, the shift per score and the skippable rescale kept,
    nothing spilled; it takes h15-folded's lazy anchor where the label moves it (-rla) and no key norms."""
    folded, clamped = (_compile(dtype, v, label) for v in ("h15-folded", "h15-folded-clamped"))
    assert clamped["loop_fmnmx"] - folded["loop_fmnmx"] == 64, (folded, clamped)
    assert clamped["loop_instructions"] - folded["loop_instructions"] == 64, (folded, clamped)
    same = ("loop_shift", "loop_ffma", "loop_fadd", "loop_f2fp", "loop_mufu_ex2", "loop_gmma", "loop_vote",
            "loop_fmul_jumped")
    assert {k: clamped[k] for k in same} == {k: folded[k] for k in same}, (folded, clamped)
    assert clamped["spill_stores"] == 0 and clamped["ptxas_advisories"] == [], clamped
    config = GluonConfig.from_label(label)
    fp8 = dtype == "fp8"
    assert ga.lazy_threshold(config, fp8, "h15-folded-clamped") == ga.lazy_threshold(config, fp8, "h15-folded")
    assert ga.kernel_constants(config, 8192, 128, True, fp8, "h15-folded-clamped")["KN_WIDTH"] == 1


def test_persistent_schedule_keeps_the_one_block_key_loop():
    """-pt at FP8 causal 8K, h15-folded under the FP8 default's options with two consumers and hg16 (b1 h16: one
    group, so the rounds run longest first across the whole launch), against the same label without -pt: the
    rounds and the next block's loads wrap around the key loop without entering it. Still warp specialized, no
    barrier in the loop (-tb holds), the same matrix instructions and waits, -rla's vote and jumped multiplies
    kept, and a loop at most a few instructions longer (869 and 875 when written: the loop's count of
    instructions is what an extra per-tile cost would show in)."""
    one, pt = (_compile("fp8", "h15-folded", label) for label in ("gluon-n128s2-c240l24-hg16-rla-lmt-tb",
                                                                   "gluon-n128s2-c240l24-hg16-pt-rla-lmt-tb"))
    assert pt["config"] == "gluon-n128s2-c240l24-hg16-pt-rla-lmt-tb" and pt["warp_specialized"], pt
    assert pt["loop_bar_sync"] == one["loop_bar_sync"] == 0, (one, pt)
    assert 0 <= pt["loop_instructions"] - one["loop_instructions"] <= 8, (one, pt)
    same = ("loop_gmma", "loop_gmma_waits", "loop_vote", "loop_fmul_jumped", "loop_mufu_ex2", "loop_f2fp")
    assert {k: pt[k] for k in same} == {k: one[k] for k in same}, (one, pt)
    assert pt["wgmma"] == one["wgmma"] and pt["ptxas_advisories"] == [], pt
    # Spills: the one-block kernel has none. The persistent one keeps a few values per program across its rounds
    # (the report counts STL in the whole kernel, not per loop): reading its SASS when this was written, its 3 STL
    # and 5 LDL (16 stack bytes) lie in the per-query-block code around the two consumers' key loops, none inside
    # either key loop. More than a handful would mean the key loop's registers no longer fit.
    assert one["spill_stores"] == 0, one
    assert pt["spill_stores"] <= 4, pt


def test_dynamic_schedule_keeps_the_key_loop_and_takes_its_blocks_from_one_counter():
    """-pd at BF16 causal 8K under the 16-bit default's options, against the same label without it: the key loop
    as it was (the same count of instructions within a few, the same matrix instructions, waits and exponentials,
    no barrier in it), the next block's number taken by one thread from the global counter and the counter put back
    to 0 by one thread (two predicated atomics, nothing else atomic), and O in a buffer of its own (the producer
    loads the next Q while O may still be leaving), which the one-block kernel at 16 bits does not have: two more
    64 x 128 BF16 tiles of shared memory."""
    one, pd = (_compile("bf16", "A0", label) for label in ("gluon-n128s2-c240l24-hg8-rl-ro-ltt-pm-tb-mlf",
                                                            "gluon-n128s2-c240l24-hg8-pd-rl-ro-ltt-pm-tb-mlf"))
    assert pd["warp_specialized"] and pd["loop_bar_sync"] == one["loop_bar_sync"] == 0, (one, pd)
    assert abs(pd["loop_instructions"] - one["loop_instructions"]) <= 4, (one, pd)
    same = ("loop_gmma", "loop_gmma_waits", "loop_mufu_ex2", "loop_f2fp", "loop_prmt", "loop_fmul_jumped")
    assert {k: pd[k] for k in same} == {k: one[k] for k in same}, (one, pd)
    assert one["global_atomics"] == [] and pd["global_atomics"] == ["gpu.acq_rel.add.u32 predicated",
                                                                    "gpu.acq_rel.exch.b32 predicated"], pd
    assert pd["shared_bytes"] - one["shared_bytes"] >= 2 * 64 * 128 * 2, (one, pd)
    assert one["spill_stores"] == 0 and pd["spill_stores"] <= 4 and pd["ptxas_advisories"] == [], pd


def test_deferred_epilogue_writes_o_under_the_next_blocks_first_qk():
    """-pde at BF16 causal 8K under the 16-bit default's options, against -pd: each block's O leaves through its TMA
    store while the next block's first Q.K^T is in the tensor core (two such stores in the SASS, one per copy of the
    first tile's code; none under -pd, whose O leaves after its last P.V's wait), with the key loop as it was, the
    same shared memory, and no wgmma wait injected by ptxas: O crosses into the next block normalized and in BF16,
    registers the FMA pipe wrote, where O's accumulator itself, read after the next wgmma's issue, made ptxas wait for
    that wgmma first (advisory C7517, found while this was written). -sq is refused with it."""
    pd, pde = (_compile("bf16", "A0", label) for label in ("gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf",
                                                            "gluon-n128s2-c240l24-hg4-pde-rl-ro-ltt-pm-tb-mlf"))
    assert pd["o_stores_under_gmma"] == 0 and pde["o_stores_under_gmma"] == 2, (pd, pde)
    assert pde["warp_specialized"] and pde["loop_bar_sync"] == pd["loop_bar_sync"] == 0, (pd, pde)
    assert abs(pde["loop_instructions"] - pd["loop_instructions"]) <= 4, (pd, pde)
    same = ("loop_gmma", "loop_gmma_waits", "loop_mufu_ex2", "loop_f2fp", "loop_prmt", "loop_fmul_jumped",
            "shared_bytes", "global_atomics")
    assert {k: pde[k] for k in same} == {k: pd[k] for k in same}, (pd, pde)
    assert pde["ptxas_advisories"] == [] and pde["spill_stores"] <= 4, pde
    for fp8 in (True, False):
        config = GluonConfig.from_label("gluon-n128s2-c240l24-hg8-g1-pde-rla-lmt-tb-mlf")
        assert ga.kernel_constants(config, 8192, 128, True, fp8, "A0")["PERSISTENT"] == 3
    with pytest.raises(UsageError, match="deferred epilogue"):
        GluonConfig(schedule="dynamic-deferred", split_qk=True)


def test_overlapped_boundary_labels_read_back_and_are_refused_where_unwritten():
    """-pdo: its place in the label (beside the other persistent schedules), read back; PERSISTENT 4 for the kernel;
    plain() drops it (the same output bit for bit, checked on the H200 against the one-block kernel); refused with
    -sq, the tensor core's row sums (-lm, -lmt) and without -ro, which it is not written for."""
    pdo = GluonConfig.from_label("gluon-n128s2-c240l24-hg4-pdo-rl-ro-ltt-pm-tb-mlf")
    assert pdo.schedule == "dynamic-overlap" and pdo.label() == "gluon-n128s2-c240l24-hg4-pdo-rl-ro-ltt-pm-tb-mlf"
    assert GluonConfig.from_label("gluon-n128s2-c240l24-hg8-g1-pdo-rla-ro-ltt-tb-mlf").consumers == 1
    assert pdo.plain() == GluonConfig.from_label("gluon-n128s2-c240l24-hg4-rl-ltt")
    assert ga.kernel_constants(pdo, 8192, 128, True, False, "A0")["PERSISTENT"] == 4
    assert ga.kernel_constants(replace(pdo, p_round="tail"), 8192, 128, True, True, "A0")["PERSISTENT"] == 4
    for label in ("gluon-n128s2-c240l24-hg4-pdo-rl-ro-lmt", "gluon-n128s2-c240l24-hg4-pdo-ro-lm",
                  "gluon-n128s2-c240l24-hg4-pdo-rl-ltt", "gluon-n128s2-c240l24-hg4-pdo-ro-sq"):
        with pytest.raises(UsageError, match="overlapped block boundary"):
            GluonConfig.from_label(label)
    with pytest.raises(UsageError, match="persistent schedules"):
        GluonConfig(pingpong=True, schedule="dynamic-overlap", rescale_at="pv")


def test_overlapped_boundary_waits_for_the_first_qk_beside_the_last_pv():
    """-pdo at BF16 causal 8K without -pm, against -pd with the same options: each consumer's first tile of a block
    waits for its Q.K^T with one wgmma group left in flight (the block before's last P.V), one such wait more per
    consumer than the key loop's; the key loop keeps its wgmmas and waits; two Q buffers more in shared memory (one
    per consumer); and no wgmma serialized by ptxas: a wgmma inside a branch on whether there is a block before
    (advisory C7518) and O's accumulator carried into the next block (C7517) each made it so while this was
    written."""
    pd, pdo = (_compile("bf16", "A0", label) for label in ("gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-tb-mlf",
                                                            "gluon-n128s2-c240l24-hg4-pdo-rl-ro-ltt-tb-mlf"))
    assert pdo["gmma_waits_leaving_one"] == pd["gmma_waits_leaving_one"] + 2, (pd, pdo)
    assert {k: pdo[k] for k in ("loop_gmma", "loop_gmma_waits", "global_atomics")} \
        == {k: pd[k] for k in ("loop_gmma", "loop_gmma_waits", "global_atomics")}, (pd, pdo)
    assert 2 * 64 * 128 * 2 <= pdo["shared_bytes"] - pd["shared_bytes"] < 2 * 64 * 128 * 2 + 1024, (pd, pdo)
    assert pdo["ptxas_advisories"] == [] and pdo["warp_specialized"], pdo


def test_rescale_at_pv_puts_os_multiply_beside_the_next_qk_at_fp8():
    """-ro: in the FP8 loop O's 64 multiplies per thread move from the tile's end to between the next Q.K^T's wgmmas
    and P.V's, with nothing added and nothing spilled. (At BF16 ptxas already hoists them to the end of the tile
    before, whichever the PTX's order, so -ro leaves that loop's order as it is.)"""
    tail, early = (_compile("fp8", "A0", label) for label in ("gluon-n128s2-c240l24-hg8-g1-lt-tb",
                                                               "gluon-n128s2-c240l24-hg8-g1-ro-lt-tb"))
    assert tail["loop_fmul_among_gmma"] == 0 and early["loop_fmul_among_gmma"] == 64, (tail, early)
    assert early["loop_instructions"] == tail["loop_instructions"] and early["loop_gmma_waits"] == 2, early
    assert early["spill_stores"] == 0 and early["ptxas_advisories"] == [], early


@pytest.mark.parametrize("dtype,label", [("fp8", "gluon-n128s2-c240l24-hg8-g1-tb"),
                                         ("bf16", "gluon-n128s2-c240l24-hg8-tb")])
def test_row_maximum_is_a_chain_of_33_dependent_fmnmx(dtype, label):
    """loop_max_chain, the latency of each row's maximum that every exponential of a tile waits for: Triton's
    reduction folds a thread's 32 columns of a row one after another (31 FMNMX), then 2 more after the quad's
    shuffles. (A tree inside the thread, 7, was built and timed on the H200 with no gain: docs/hopper-notes.md,
    "Where the warps wait"; its source was the tag src-b7d7098d, lost since with the repository's tags.)"""
    rep = _compile(dtype, "A0", label)
    assert rep["loop_max_chain"] == 33, rep


def test_max_chain_counts_dependent_fmnmx_and_restarts_at_branches_and_other_writers():
    from softbench.audit.sass import parse_instruction
    from softbench.kernels.triton_compile import _longest_chain

    def body(*lines):
        return [parse_instruction(t, 16 * k) for k, t in enumerate(lines)]

    fold = ["FMNMX R10, R0, R1, !PT", "FMNMX R10, R10, R2, !PT", "FMNMX R10, R10, R3, !PT",
            "SHFL.BFLY PT, R11, R10, 0x1, 0x1f", "FMNMX R10, R10, R11, !PT"]
    assert _longest_chain(body(*fold), "FMNMX") == 4  # three in the thread, one after the shuffle
    tree = ["FMNMX R10, R0, R1, !PT", "FMNMX R11, R2, R3, !PT", "FMNMX R10, R10, R11, !PT",
            "SHFL.BFLY PT, R11, R10, 0x1, 0x1f", "FMNMX R10, R10, R11, !PT"]
    assert _longest_chain(body(*tree), "FMNMX") == 3
    # a branch between two forms of the tile, or another instruction writing the register, breaks the chain
    assert _longest_chain(body(*fold[:2], "BRA 0x100", *fold[2:]), "FMNMX") == 2
    assert _longest_chain(body(*fold[:2], "FMUL R10, R10, R5", *fold[2:]), "FMNMX") == 2


def test_grid_dependency_overlaps_only_the_forwards_that_follow_the_key_norms():
    """-gdc (GluonConfig.grid_dependency): the label's last suffix, read back after -ka and -v<N>; plain() drops it
    (the same output); only h15-proved and h15-folded, whose call starts with the key norms' kernel, are launched with
    programmatic dependent launch and wait for that grid (GDC_WAIT). Cross-compiled: the FP8 default's h15-folded under
    -gdc launches with launch_pdl and its PTX waits for the grid (griddepcontrol.wait), with the same key loop,
    registers and spills as without; A0 under -gdc compiles to the kernel without it."""
    for label in ("gluon-n128s2-c240l24-hg8-g1-pd-rla-lmt-tb-mlf-gdc", "gluon-n128s2-c240l24-hg4-pd-rl-ro-ltt-pm-tb-mlf-ka-v3-gdc"):
        cfg = GluonConfig.from_label(label)
        assert cfg.grid_dependency and cfg.label() == label
        assert not cfg.plain().grid_dependency
    gdc = replace(DEFAULT_FP8, grid_dependency=True)
    for variant, waits in (("h15-folded", True), ("h15-proved", True), ("A0", False), ("h15-sat", False)):
        assert ga.kernel_constants(gdc, 8192, 128, True, True, variant)["GDC_WAIT"] is waits
        assert ga.launch_options(gdc, variant).get("launch_pdl", False) is waits
        assert ga.kernel_constants(DEFAULT_FP8, 8192, 128, True, True, variant)["GDC_WAIT"] is False
        assert "launch_pdl" not in ga.launch_options(DEFAULT_FP8, variant)
    base = "gluon-n128s2-c240l24-hg8-g1-pd-rla-lmt-tb-mlf"
    plain, over = _compile("fp8", "h15-folded", base), _compile("fp8", "h15-folded", base + "-gdc")
    assert (plain["launch_pdl"], plain["grid_dependency_waits"]) == (False, 0), plain
    assert over["launch_pdl"] is True and over["grid_dependency_waits"] >= 1, over
    same = ("loop_instructions", "loop_gmma", "registers", "spill_loads", "spill_stores", "shared_bytes")
    assert {k: over[k] for k in same} == {k: plain[k] for k in same}, (plain, over)
    assert over["ptxas_advisories"] == [], over
    a0 = _compile("fp8", "A0", base + "-gdc")
    assert (a0["launch_pdl"], a0["grid_dependency_waits"]) == (False, 0), a0


def test_key_norms_let_the_next_kernel_launch_only_when_asked():
    """The key norms' kernel (triton_attn._key_norm_max), cross-compiled for sm_90a: with LAUNCH_DEPENDENTS its
    programs trigger the dependent launch (griddepcontrol.launch_dependents) before anything else; without it, as
    every variant but -gdc's runs it, no trigger."""
    code = """
import json, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from softbench.kernels import triton_attn as ta
from softbench.kernels.triton_compile import _signature
out = {}
for flag in (False, True):
    sig, consts, attrs = _signature(ta._key_norm_max.arg_names, {"K": "*bf16", "KN": "*fp32"},
                                    {"seq": 8192, "kv_heads": 16, "stride_kb": 8192 * 16 * 128,
                                     "stride_ks": 16 * 128, "stride_kh": 128})
    consts.update(HEAD_DIM=128, BLOCK=ta.KEY_NORM_BLOCK, LAUNCH_DEPENDENTS=flag)
    ptx = triton.compile(ASTSource(fn=ta._key_norm_max, signature=sig, constexprs=consts, attrs=attrs),
                         target=GPUTarget("cuda", 90, 32), options={"num_warps": 4}).asm["ptx"]
    body = ptx[ptx.index("{", ptx.index(".entry")):]
    out[str(flag)] = {"triggers": body.count("griddepcontrol.launch_dependents"),
                      "first": body.index("griddepcontrol.launch_dependents") < body.index("ld.global")
                      if "griddepcontrol.launch_dependents" in body else None}
print(json.dumps(out))
"""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got["False"] == {"triggers": 0, "first": None}, got
    assert got["True"] == {"triggers": 1, "first": True}, got
