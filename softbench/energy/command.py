"""`softbench energy`: GPU board energy per attention forward over sustained loops (paper B.3, Table B5f)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from softbench.core.options import backend_option, check_triton_config, shape_options, shapes_from, triton_config_option


@click.command("energy")
@shape_options(default_seq="16384")
@backend_option("fa4: FlashAttention-4; triton: softbench's own forward; sim: the pure-torch simulation on a CUDA "
                "GPU (energy is the GPU board's, read through NVML, so every backend needs a GPU; on a CPU "
                "machine `softbench latency --backend sim` runs instead)")
@click.option("--order", default="A0,A1,A1,A0", show_default=True,
              help="loops in this order, comma-separated; one worker per kernel serves all its loops")
@click.option("--seconds", type=click.FloatRange(min=0, min_open=True), default=45.0, show_default=True,
              help="length of each timed loop")
@click.option("--interval-ms", type=click.FloatRange(min=1), default=100.0, show_default=True,
              help="requested NVML sampling interval")
@click.option("--trim-start", type=click.IntRange(min=0), default=20, show_default=True,
              help="samples dropped at the start of each loop's stream (the paper's trim)")
@click.option("--trim-end", type=click.IntRange(min=0), default=10, show_default=True,
              help="samples dropped at the end of each loop's stream")
@click.option("--idle-s", type=click.FloatRange(min=0), default=5.0, show_default=True,
              help="idle power sampled before every loop (0: none)")
@click.option("--pre-s", type=click.FloatRange(min=0), default=2.0, show_default=True,
              help="sampling starts this long before the loop")
@click.option("--post-s", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="and stops this long after it")
@click.option("--warmup", type=click.IntRange(min=0), default=30, show_default=True)
@click.option("--chunk", type=click.IntRange(min=1), default=50, show_default=True,
              help="calls between synchronizations")
@click.option("--ramp-fraction", type=click.FloatRange(min=0, max=1, min_open=True), default=0.9, show_default=True,
              help="start-up ramp: leading kept samples below this share of the kept median")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--protocol", "protocol_file", type=click.Path(dir_okay=False), default=None,
              help="YAML file of these options (a path, or a packaged protocol by name: energy); options given here override it")
@triton_config_option()
@click.option("--out", "out_dir", default="sessions", show_default=True, type=click.Path(file_okay=False))
@click.pass_context
def command(ctx, dtype, seqs, causal, batch, heads, kv_heads, head_dim, backend, order, seconds, interval_ms,
            trim_start, trim_end, idle_s, pre_s, post_s, warmup, chunk, ramp_fraction, seed, protocol_file,
            triton_config, out_dir):
    """Energy per forward of each kernel over sustained loops, by sampled NVML power and by the NVML energy counter.

    The dtype defaults to FP8 where FA4 has it (sm_100) and to BF16 elsewhere.

    Example: softbench energy --seconds 45 --order A0,A1,A1,A0"""
    from softbench.core.checks import check_memory, check_out_dir
    from softbench.core.console import RichProgress, err, out, table
    from softbench.core.errors import UnsupportedError, UsageError
    from softbench.kernels.capability import detect_device, unsupported_reason
    from softbench.kernels.catalog import check as check_variant
    from softbench.energy.engine import (EnergyOptions, default_dtype, open_power_source, refuse_cpu_backend,
                                          run_energy)
    from softbench.energy.render import LOOP_COLUMNS, VARIANT_COLUMNS, loop_rows, ratio_lines, variant_rows

    if protocol_file:
        given = _from_protocol_file(ctx, protocol_file)
        dtype, seqs, causal, batch, heads, kv_heads, head_dim = (given[k] for k in (
            "dtype", "seqs", "causal", "batch", "heads", "kv_heads", "head_dim"))
        order, seconds, interval_ms, trim_start, trim_end, idle_s, pre_s, post_s, warmup, chunk, ramp_fraction, seed = (
            given[k] for k in ("order", "seconds", "interval_ms", "trim_start", "trim_end", "idle_s", "pre_s",
                               "post_s", "warmup", "chunk", "ramp_fraction", "seed"))
    check_triton_config(triton_config, backend)
    names = tuple(v.strip() for v in str(order).split(",") if v.strip())
    if not names:
        raise UsageError("--order names no kernels", hint="e.g. --order A0,A1,A1,A0")
    for n in names:
        check_variant(backend, n)
    if len(seqs) != 1:
        raise UsageError("energy takes one --seq (run it once per length)")
    check_out_dir(out_dir)
    power = open_power_source()  # first: without NVML there is nothing to measure
    device = detect_device()
    refuse_cpu_backend(device.kind, backend)
    if ctx.get_parameter_source("dtype") == click.core.ParameterSource.DEFAULT and not _in_file(ctx, "dtype"):
        dtype, note = default_dtype(backend, device)
    else:
        note = "from the protocol file" if _in_file(ctx, "dtype") else "chosen on the command line"
    shape = shapes_from(dtype, seqs, causal, batch, heads, kv_heads, head_dim)[0]
    check_memory(shape, backend)
    if backend != "sim":
        reason = unsupported_reason(backend, shape, device)
        if reason:
            raise UnsupportedError(f"{shape.tag()}: {reason}")
    err.print(f"dtype: {dtype} ({note})")
    opts = EnergyOptions(shape=shape, order=names, backend=backend, seconds=seconds, interval_s=interval_ms / 1e3,
                         warmup=warmup, chunk=chunk, pre_s=pre_s, post_s=post_s, idle_s=idle_s, trim_start=trim_start,
                         trim_end=trim_end, ramp_fraction=ramp_fraction, seed=seed, out_dir=Path(out_dir),
                         dtype_note=note, backend_options=dict(triton_config or {}),
                         command_line="softbench " + " ".join(shlex.quote(a) for a in sys.argv[1:]))
    with RichProgress() as progress:
        session = run_energy(opts, power, progress)
    summary = session.read_json("summary.json")
    out.print(f"energy, {summary['shape_tag']} ({backend}); dtype {dtype}: {note}")
    out.print(table("per loop", LOOP_COLUMNS, loop_rows(summary)))
    out.print(table("per kernel (mean over its loops), mJ per forward", VARIANT_COLUMNS, variant_rows(summary)))
    for line in ratio_lines(summary):
        out.print(line)
    err.print(f"session: {session.path}")


def _from_protocol_file(ctx, path: str) -> dict:
    """The command's parameters, with the file's values wherever the command line left an option at its default."""
    from softbench.core.errors import UsageError
    from softbench.core.protocol import load_yaml_mapping

    data = load_yaml_mapping(path)
    params = {p.name: p for p in ctx.command.params if p.name not in ("protocol_file", "out_dir", "backend")}
    values = dict(ctx.params)
    from_file = set()
    for key, value in data.items():
        name = "seqs" if key == "seq" else key
        if name not in params:
            known = sorted("seq" if n == "seqs" else n for n in params)
            raise UsageError(f"{path}: unknown key {key!r}", hint=f"known: {', '.join(known)}")
        if ctx.get_parameter_source(name) != click.core.ParameterSource.DEFAULT:
            continue  # given on the command line: that wins
        if name == "seqs":
            values[name] = tuple(str(v) for v in (value if isinstance(value, list) else [value]))
        else:
            if name == "order" and isinstance(value, list):
                value = ",".join(map(str, value))
            try:
                values[name] = params[name].type_cast_value(ctx, value)
            except click.BadParameter as e:
                raise UsageError(f"{path}: {key}: {e.message}") from None
        from_file.add(name)
    ctx.meta["softbench_energy_file_keys"] = from_file
    return values


def _in_file(ctx, name: str) -> bool:
    return name in ctx.meta.get("softbench_energy_file_keys", set())


# the shared --dtype option shows bf16 as its default; here the default depends on the GPU (see default_dtype)
for _p in command.params:
    if _p.name == "dtype":
        _p.show_default = False
        _p.help = "default: fp8 with FA4 on sm_100, else bf16"
    elif _p.name == "seqs":
        _p.help = "sequence length, e.g. 16K (one per session)"
