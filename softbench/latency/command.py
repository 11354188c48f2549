"""`softbench latency`: the speed-up of a kernel variant over its baseline, each kernel in its own process, under
one of three protocols (interleaved: at equal clock, the default; sustained; paper: the paper's rounds)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from softbench.core.options import (check_triton_config, null_asked, protocol_from_cli, references_asked,
                                    rescale_threshold_option, run_design_options, shape_options, shapes_from,
                                    triton_config_option, variant_config_option)
from softbench.kernels.backends import BACKENDS


@click.command("latency")
@shape_options()
@click.option("--backend", type=click.Choice(["auto", *BACKENDS]), default="auto", show_default=True,
              help="fa4: FlashAttention-4 on a CUDA GPU; triton: softbench's own Triton/Gluon forward (BF16/FP16 "
                   "and FP8 on Hopper); sim: the pure-torch simulation (any machine; CPU timings, not kernel "
                   "timings); auto: fa4 where it runs every shape, else triton")
@click.option("--baseline", default="A0", show_default=True, help="variant timed as the baseline")
@click.option("--variant", default="A1", show_default=True,
              help="variant timed against it (A1, h15-sat, noexp, ...; the baseline again for an A/A run alone)")
@run_design_options
@rescale_threshold_option()
@triton_config_option()
@variant_config_option()
@click.option("--gpus", default=None, metavar="LIST",
              help="the cells in parallel on these GPUs (indices, e.g. 0,1): torchrun with one rank and one set of "
                   "kernel workers per GPU, pinned by CUDA_VISIBLE_DEVICES, cells dealt round-robin; rank 0 "
                   "writes an index of the sessions (on a CPU: --backend sim only)")
@click.option("--control", is_flag=True,
              help="with --gpus: instead of the cells, the first cell's A/A (baseline against itself) on every GPU "
                   "at once, then on each GPU alone: whether neighbours disturb each other")
@click.option("--out", "out_dir", default="sessions", show_default=True, type=click.Path(file_okay=False))
def command(dtype, seqs, causal, batch, heads, kv_heads, head_dim, backend, baseline, variant, protocol_name,
            rounds, calls, window_ms, target_pp, budget_s, cycles, measure_s, windows, warmup, order, seed, null,
            references, start_order, processes, null_in_process, rescale_threshold, triton_config, variant_config,
            gpus, control, out_dir):
    """Time BASELINE against VARIANT, each kernel in its own process.

    The default protocol, interleaved, alternates single windows of every kernel (8 ms each, every cycle in a
    random order) after a warm-up that ends when power and SM clock settle, until the paired speed-up's 95%
    interval is within +-0.25 pp: the speed-up at equal clock. --protocol sustained gives the speed-up with each
    kernel at its own equilibrium under the power cap. A second process of the baseline gives the A/A null of the
    same run (--no-null leaves it out); --reference times the fastest exact kernels.

    Example: softbench latency --dtype fp8 --seq 16384 --rounds 3"""
    from softbench.core.console import RichProgress, err, out, table
    from softbench.core.checks import check_memory, check_out_dir, check_sim_time
    from softbench.core.errors import UnsupportedError, UsageError
    from softbench.kernels.capability import detect_device, unsupported_reason
    from softbench.kernels.catalog import check as check_variant
    from softbench.kernels.references import resolve_references
    from softbench.latency.across import launch_command_line
    from softbench.latency.engine import LatencyOptions, run_latency
    from softbench.latency.gpus import check_gpus, parse_gpus, pin_this_process
    from softbench.latency.render import latency_headline, latency_rows, paired_columns, paired_rows
    from softbench.runtime.distributed import from_env
    from softbench.runtime.launch import refuse_in_launch

    gpu_list = parse_gpus(gpus) if gpus is not None else None
    ranks = pin = None
    if "WORLD_SIZE" in os.environ:  # a rank of torchrun: pinned to its GPU before anything touches CUDA
        if gpu_list is not None:
            refuse_in_launch()
        ranks = from_env()
        pin = pin_this_process(ranks)
    if control and variant_config:
        raise UsageError("--control times the baseline against itself on every GPU; --variant-config has no "
                         "variant to configure there")
    if control and gpu_list is None and ranks is None:
        raise UsageError("--control compares GPUs measuring together and alone; it needs --gpus (or torchrun)")
    quiet = ranks is not None and not ranks.main  # rank 0 speaks for the launch
    ctx = click.get_current_context()
    given = {n for n in ("dtype", "seqs", "causal", "batch", "heads", "kv_heads", "head_dim", "backend", "baseline",
                         "variant") if ctx.get_parameter_source(n) == click.core.ParameterSource.COMMANDLINE}
    plan, proto = protocol_from_cli(ctx)
    if plan.cells:
        clash = sorted(given & {"dtype", "seqs", "causal", "batch", "heads", "kv_heads", "head_dim"})
        if clash:
            flags = {p.name: p.opts[0] for p in ctx.command.params}
            raise UsageError(f"{protocol_name} lists its own cells; drop {', '.join(flags[c] for c in clash)}")
        shapes = plan.shapes()
    else:
        shapes = shapes_from(dtype, seqs, causal, batch, heads, kv_heads, head_dim)
    repeats = sorted({s.tag() for s in shapes if sum(t.tag() == s.tag() for t in shapes) > 1})
    if repeats:
        raise UsageError(f"the same cell is asked for more than once: {', '.join(repeats)}")
    # the file names the pair and backend it is for; the command line wins
    backend = backend if "backend" in given or not plan.backend else plan.backend
    baseline = baseline if "baseline" in given or not plan.baseline else plan.baseline
    variant = variant if "variant" in given or not plan.variant else plan.variant
    null = null_asked(ctx, proto, baseline, (variant,))
    if gpu_list is not None:
        import torch

        check_gpus(gpu_list, gpus, backend, torch.cuda.device_count())
    if control:
        from softbench.latency.across import control_cell

        shapes, variant, null, references = control_cell(ctx, shapes, baseline)
    if backend != "sim" and rescale_threshold:
        raise click.BadParameter("--rescale-threshold applies to --backend sim only", param_hint="--rescale-threshold")
    check_out_dir(out_dir)
    for shape in shapes:  # before any worker allocates them
        check_memory(shape, backend)
    device = detect_device() if backend != "sim" else None
    if backend == "auto":
        backend = choose_backend(shapes, device)
        if not quiet:
            err.print(f"backend: {backend} (auto)")
    check_variant(backend, baseline)
    check_variant(backend, variant)
    if backend == "sim":  # after the names: a mistyped variant is the first thing to hear about, not the estimate
        check_sim_time(shapes, proto)
    backend_options = {"rescale_threshold": rescale_threshold} if backend == "sim" else {}
    check_triton_config(triton_config, backend)
    check_triton_config(variant_config, backend, "--variant-config")
    if triton_config:
        backend_options = dict(triton_config)
    refs, skipped = resolve_references(references if control else references_asked(ctx, proto), shapes, backend,
                                       device or detect_device(prefer_cuda=False))

    def check(shape):
        # refuse before any worker starts or any session folder is made
        if backend != "sim":
            reason = unsupported_reason(backend, shape, device)
            if reason:
                raise UnsupportedError(f"{shape.tag()}: {reason}")

    opts = LatencyOptions(shapes=shapes, protocol=proto, backend=backend, baseline=baseline, variant=variant,
                          out_dir=Path(out_dir), backend_options=backend_options, null=null, references=refs,
                          command_line=launch_command_line(ranks), start_order=start_order,
                          processes=processes, null_in_process=null_in_process,
                          variant_options=dict(variant_config or {}))
    if gpu_list is not None or ranks is not None:
        from softbench.latency.across import run_across

        return run_across(opts, gpu_list, ranks, pin, control, protocol_name, check)
    with RichProgress() as progress:
        sessions = run_latency(opts, progress, check=check)
    for s in sessions:
        summary = s.read_json("summary.json")
        title = f"{summary['shape_tag']} ({backend}, {proto.kind} protocol)"
        if summary.get("protocol_kind") in ("interleaved", "sustained"):
            out.print(table(title, paired_columns(summary), paired_rows(summary)))
        else:
            out.print(table(title, ["kernel", "median ms/call", "TFLOP/s", "windows", "SM MHz", "throttled"],
                            latency_rows(summary)))
        out.print(latency_headline(summary), soft_wrap=True)
        if skipped and not refs and backend != "sim":
            out.print("no reference kernel timed: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()),
                      soft_wrap=True)
        for label, sm in summary["smoke"].items():
            out.print(f"  smoke {label}: rel. error vs FP32 {sm['rel_error_vs_fp32']:.3e}, "
                      f"activation mean {sm['activation_mean']:.6f}")
        err.print(f"session: {s.path}", soft_wrap=True)


def choose_backend(shapes, device) -> str:
    """--backend auto: FlashAttention-4 where it runs every shape, else softbench's Triton/Gluon forward; on a
    machine with no GPU, refuse and point at the simulation rather than time the CPU silently."""
    from softbench.core.errors import UnsupportedError
    from softbench.kernels.capability import unsupported_reason

    for name in ("fa4", "triton"):
        if all(unsupported_reason(name, s, device) is None for s in shapes) and _installed(name):
            return name
    raise UnsupportedError(
        f"no kernel backend can run {', '.join(s.tag() for s in shapes)} here "
        f"({device.arch_label if device else 'no GPU'}): {unsupported_reason('triton', shapes[0], device)}",
        hint="--backend sim runs the pure-torch simulation on any machine (CPU timings, not kernel timings)")


def _installed(backend: str) -> bool:
    import importlib.util

    return importlib.util.find_spec({"fa4": "flash_attn", "triton": "triton"}[backend]) is not None
