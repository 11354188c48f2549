"""`softbench latency`: paired baseline/variant attention-forward call latency (paper B.3)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from softbench.core.options import (BACKEND_HELP, backend_option, check_triton_config, shape_options, shapes_from,
                                    triton_config_option)


@click.command("latency")
@shape_options()
@backend_option(BACKEND_HELP)
@click.option("--baseline", default="A0", show_default=True, help="variant timed as the baseline")
@click.option("--variant", default="A1", show_default=True,
              help="variant timed against it (A1, noexp; the baseline again for the A/A null)")
@click.option("--rounds", type=click.IntRange(min=1), default=None, help="[default: 3]")
@click.option("--windows", type=click.IntRange(min=1), default=None, help="windows per kernel per round [default: 7]")
@click.option("--calls", type=click.IntRange(min=1), default=None, help="back-to-back calls per window [default: 100]")
@click.option("--warmup", type=click.IntRange(min=0), default=None, help="warm-up calls per round [default: 50]")
@click.option("--order", type=click.Choice(["alternate", "fixed"]), default=None, help="[default: alternate]")
@click.option("--seed", type=int, default=None, help="input seed [default: 0]")
@click.option("--protocol", "protocol_file", type=click.Path(dir_okay=False), default=None,
              help="YAML protocol file; command-line options override it")
@click.option("--rescale-threshold", type=float, default=0.0, show_default=True,
              help="sim only: FA4's conditional-rescale threshold tau (8.0 mimics sm_100 at 16-bit)")
@triton_config_option()
@click.option("--out", "out_dir", default="sessions", show_default=True, type=click.Path(file_okay=False))
def command(dtype, seqs, causal, batch, heads, kv_heads, head_dim, backend, baseline, variant, rounds, windows,
            calls, warmup, order, seed, protocol_file, rescale_threshold, triton_config, out_dir):
    """Time BASELINE against VARIANT in alternating rounds, each kernel in its own process.

    Example: softbench latency --dtype bf16 --seq 8K --seq 16K --rounds 3"""
    from softbench.core.console import RichProgress, err, out, table
    from softbench.core.errors import UnsupportedError
    from softbench.kernels.capability import detect_device, unsupported_reason
    from softbench.kernels.catalog import check as check_variant
    from softbench.latency.engine import LatencyOptions, run_latency
    from softbench.core.errors import UsageError
    from softbench.core.protocol import LatencyPlan, LatencyProtocol, latency_plan_from_mapping, load_yaml_mapping
    from softbench.latency.render import latency_headline, latency_rows

    ctx = click.get_current_context()
    given = {n for n in ("dtype", "seqs", "causal", "batch", "heads", "kv_heads", "head_dim", "backend", "baseline",
                         "variant") if ctx.get_parameter_source(n) == click.core.ParameterSource.COMMANDLINE}
    plan = (latency_plan_from_mapping(load_yaml_mapping(protocol_file), protocol_file) if protocol_file
            else LatencyPlan(LatencyProtocol(), {}, ()))
    proto = plan.protocol.with_overrides(rounds=rounds, windows=windows, calls=calls, warmup=warmup, order=order,
                                         seed=seed)
    if plan.cells:
        clash = sorted(given & {"dtype", "seqs", "causal", "batch", "heads", "kv_heads", "head_dim"})
        if clash:
            flags = {p.name: p.opts[0] for p in ctx.command.params}
            raise UsageError(f"{protocol_file} lists its own cells; drop {', '.join(flags[c] for c in clash)}")
        shapes = plan.shapes()
    else:
        shapes = shapes_from(dtype, seqs, causal, batch, heads, kv_heads, head_dim)
    # the file names the pair and backend it is for; the command line wins
    backend = backend if "backend" in given or not plan.backend else plan.backend
    baseline = baseline if "baseline" in given or not plan.baseline else plan.baseline
    variant = variant if "variant" in given or not plan.variant else plan.variant
    check_variant(backend, baseline)
    check_variant(backend, variant)
    backend_options = {"rescale_threshold": rescale_threshold} if backend == "sim" else {}
    check_triton_config(triton_config, backend)
    if triton_config:
        backend_options = dict(triton_config)
    if backend == "fa4" and rescale_threshold:
        raise click.BadParameter("--rescale-threshold applies to --backend sim only", param_hint="--rescale-threshold")

    def check(shape):
        # refuse before any worker starts or any session folder is made
        if backend != "sim":
            reason = unsupported_reason(backend, shape, detect_device())
            if reason:
                raise UnsupportedError(f"{shape.tag()}: {reason}")

    opts = LatencyOptions(shapes=shapes, protocol=proto, backend=backend, baseline=baseline, variant=variant,
                          out_dir=Path(out_dir), backend_options=backend_options,
                          command_line="softbench " + " ".join(shlex.quote(a) for a in sys.argv[1:]))
    with RichProgress() as progress:
        sessions = run_latency(opts, progress, check=check)
    for s in sessions:
        summary = s.read_json("summary.json")
        out.print(table(f"{summary['shape_tag']} ({backend})",
                        ["kernel", "median ms/call", "TFLOP/s", "windows", "SM MHz", "throttled"],
                        latency_rows(summary)))
        out.print(latency_headline(summary))
        for label, sm in summary["smoke"].items():
            out.print(f"  smoke {label}: rel. error vs FP32 {sm['rel_error_vs_fp32']:.3e}, "
                      f"activation mean {sm['activation_mean']:.6f}")
        err.print(f"session: {s.path}")
