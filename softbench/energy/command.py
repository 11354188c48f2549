"""`softbench energy`: GPU board energy per attention forward over sustained loops (paper B.3, Table B5f)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from softbench.core.options import (SECONDS, SECONDS_OR_ZERO, SEED, WARMUP_CALLS, Finite, backend_option,
                                    check_triton_config, nonempty, shape_options, shapes_from, triton_config_option,
                                    variant_names)
from softbench.core.protocol import MAX_WINDOW_CALLS, EnergyProtocol, load_energy_protocol


# the loop options: (flag, type, help), each named as its EnergyProtocol field; their defaults are the loops' own, so
# a protocol file and the command line start from the same values
LOOP_OPTIONS = (
    ("--order", str, "loops in this order, comma-separated; one worker per kernel serves all its loops"),
    ("--seconds", SECONDS, "length of each timed loop"),
    ("--interval-ms", Finite(1, unit="ms"), "requested NVML sampling interval"),
    ("--trim-start", click.IntRange(min=0), "samples dropped at the start of each loop's stream (the paper's trim)"),
    ("--trim-end", click.IntRange(min=0), "samples dropped at the end of each loop's stream"),
    ("--idle-s", SECONDS_OR_ZERO, "idle power sampled before every loop (0: none)"),
    ("--pre-s", SECONDS_OR_ZERO, "sampling starts this long before the loop"),
    ("--post-s", SECONDS_OR_ZERO, "and stops this long after it"),
    ("--warmup", WARMUP_CALLS, None),
    ("--chunk", click.IntRange(1, MAX_WINDOW_CALLS), "calls between synchronizations"),
    ("--ramp-fraction", Finite(0, 1, min_open=True),
     "start-up ramp: leading kept samples below this share of the kept median"),
    ("--seed", SEED, None),
)
# the shape as click passes it (seqs: the parsed --seq list); core.shapes.SHAPE_KEYS is a shape as files spell it
SHAPE_PARAMS = ("dtype", "seqs", "causal", "batch", "heads", "kv_heads", "head_dim")
LOOP_KEYS = tuple(EnergyProtocol().loop_settings())


def loop_options(fn):
    for flag, type_, help_ in reversed(LOOP_OPTIONS):
        if flag == "--interval-ms":  # milliseconds on the command line (as NVML's interval reads), seconds after it
            fn = click.option(flag, "interval_s", type=type_, default=EnergyProtocol.interval_s * 1e3, show_default=True,
                              callback=lambda _ctx, _param, ms: ms / 1e3, help=help_)(fn)
            continue
        default = getattr(EnergyProtocol, flag[2:].replace("-", "_"))
        default = ",".join(default) if flag == "--order" else default
        fn = click.option(flag, type=type_, default=default, show_default=True, help=help_)(fn)
    return fn


@click.command("energy")
@shape_options(default_seq="16384", dtype_help="default: fp8 with FA4 on sm_100, else bf16",
               seq_help="sequence length, e.g. 16K (one per session)")
@backend_option("fa4: FlashAttention-4; triton: softbench's own forward; sim: the pure-torch simulation on a CUDA "
                "GPU (energy is the GPU board's, read through NVML, so every backend needs a GPU; on a CPU "
                "machine `softbench latency --backend sim` runs instead)")
@loop_options
@click.option("--protocol", "protocol_file", type=click.Path(dir_okay=False), default=None,
              callback=nonempty("energy"),
              help="YAML file of these options (a path, or a packaged protocol by name: energy); options given here override it")
@triton_config_option()
@click.option("--out", "out_dir", default="sessions", show_default=True, type=click.Path(file_okay=False))
@click.pass_context
def command(ctx, protocol_file, triton_config, out_dir, **_given):
    """Energy per forward of each kernel over sustained loops, by sampled NVML power and by the NVML energy counter.

    The dtype defaults to FP8 where FA4 has it (sm_100) and to BF16 elsewhere.

    Example: softbench energy --seconds 45 --order A0,A1,A1,A0"""
    from softbench.core.checks import check_memory, check_out_dir
    from softbench.core.console import RichProgress, err, out, table
    from softbench.core.errors import UnsupportedError, UsageError
    from softbench.kernels.capability import detect_device, unsupported_reason
    from softbench.energy.engine import (EnergyOptions, default_dtype, open_power_source, refuse_cpu_backend,
                                          run_energy)
    from softbench.energy.render import LOOP_COLUMNS, VARIANT_COLUMNS, loop_rows, ratio_lines, variant_rows

    chosen, in_file = _with_protocol(ctx, protocol_file)
    dtype, seqs, causal, batch, heads, kv_heads, head_dim = (chosen[k] for k in SHAPE_PARAMS)
    backend = chosen["backend"]
    loops = {k: chosen[k] for k in LOOP_KEYS if k in chosen}  # the settle window: no option, its defaults
    check_triton_config(triton_config, backend)
    loops["order"] = variant_names(loops["order"], backend, option="--order", example="A0,A1,A1,A0")
    protocol = EnergyProtocol(**loops)
    protocol.check_trim()  # trims that leave no sample are bad input on any machine: heard before NVML's absence
    if len(seqs) != 1:
        raise UsageError("energy takes one --seq (run it once per length)")
    # the shape's own checks (a zero length, heads that do not divide) are bad input, to be heard before the
    # machine's lack of NVML; the dtype they are checked at may still change below with the device's default
    shapes_from(dtype, seqs, causal, batch, heads, kv_heads, head_dim)
    check_out_dir(out_dir)
    power = open_power_source()  # first of the machine's checks: without NVML there is nothing to measure
    device = detect_device()
    refuse_cpu_backend(device.kind, backend)
    if ctx.get_parameter_source("dtype") == click.core.ParameterSource.DEFAULT and "dtype" not in in_file:
        dtype, note = default_dtype(backend, device)
    else:
        note = "from the protocol file" if "dtype" in in_file else "chosen on the command line"
    shape = shapes_from(dtype, seqs, causal, batch, heads, kv_heads, head_dim)[0]
    check_memory(shape, backend)
    if backend != "sim":
        reason = unsupported_reason(backend, shape, device)
        if reason:
            raise UnsupportedError(f"{shape.tag()}: {reason}")
    err.print(f"dtype: {dtype} ({note})")
    opts = EnergyOptions(shape=shape, protocol=protocol, backend=backend, out_dir=Path(out_dir), dtype_note=note,
                         backend_options=dict(triton_config or {}),
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


def _with_protocol(ctx, protocol_file: str | None) -> tuple[dict, set]:
    """The command's values, with the protocol file's wherever the command line left an option at its default;
    and the names the file set."""
    chosen = dict(ctx.params)
    if not protocol_file:
        return chosen, set()
    in_file = set()
    for key, value in load_energy_protocol(protocol_file).settings().items():
        name = "seqs" if key == "seq" else key
        if ctx.get_parameter_source(name) == click.core.ParameterSource.DEFAULT:  # given on the command line: that wins
            chosen[name] = value
            in_file.add(name)
    return chosen, in_file
