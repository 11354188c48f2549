"""`softbench trace`: kernel duration against call latency (paper B.3 "Kernel duration", Table B4)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from softbench.core.options import (SECONDS, SEED, WARMUP_CALLS, CommandGroup, backend_option, check_triton_config,
                                    nonempty, shape_options, shapes_from, triton_config_option, variant_names)
from softbench.core.protocol import MAX_WINDOW_CALLS


@click.group("trace", cls=CommandGroup)
def command():
    """Trace kernels with Nsight Systems (or torch.profiler), or read Nsight exports."""


@command.command("run")
@shape_options()
@backend_option("fa4: FlashAttention-4; triton: softbench's own forward; sim: the pure-torch simulation, traced "
                "on a CUDA GPU as well (a trace records GPU kernels, so every backend needs one; on a CPU machine "
                "read exports with `trace ingest`)")
@click.option("--variants", default="A0,A1", show_default=True, help="comma-separated; the first is the baseline")
@click.option("--warmup", type=WARMUP_CALLS, default=50, show_default=True, help="untimed calls per process")
@click.option("--calls", type=click.IntRange(1, MAX_WINDOW_CALLS), default=None,
              help="timed calls per process [default: as many as fill --window-s, at least 200]")
@click.option("--window-s", type=SECONDS, default=2.0, show_default=True,
              help="the timed window's length when --calls is not given, sized by the warm-up's time per call: "
                   "long enough to average over a power controller's swings (windows of 0.1 s moved by up to 16% "
                   "between their halves on an H100)")
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--settle/--no-settle", default=True, show_default=True,
              help="before its traced calls each process runs until the board's power and SM clock level off (2-15 "
                   "s), so each kernel is traced at its own equilibrium under the power cap; --no-settle: the "
                   "warm-up calls alone, as the paper's traces (the clock may still be falling inside the window)")
@click.option("--no-nsys", is_flag=True, help="use torch.profiler even where Nsight Systems exists")
@triton_config_option()
@click.option("--out", "out_dir", default="sessions", show_default=True, type=click.Path(file_okay=False))
def run(dtype, seqs, causal, batch, heads, kv_heads, head_dim, backend, variants, warmup, calls, window_s, seed, settle,
        no_nsys, triton_config, out_dir):
    """Each variant and length in its own process under `nsys profile --trace=cuda`; kernel medians and host
    call latency side by side.

    Example: softbench trace run --seq 4K --seq 8K --seq 16K --variants A0,A1"""
    from softbench.core.checks import check_memory, check_out_dir
    from softbench.core.console import RichProgress, err, out, table
    from softbench.core.errors import UnsupportedError
    from softbench.kernels.capability import detect_device, unsupported_reason
    from softbench.runtime.settle import SettleRule
    from softbench.trace.engine import TraceOptions, find_nsys, run_trace
    from softbench.trace.render import B4_COLUMNS, POINT_COLUMNS, b4_table_rows, point_notes, point_rows, quantity

    names = variant_names(variants, backend, distinct=True)  # each variant traces into a folder of its own
    check_triton_config(triton_config, backend)
    shapes = shapes_from(dtype, seqs, causal, batch, heads, kv_heads, head_dim)
    check_out_dir(out_dir)
    for shape in shapes:
        check_memory(shape, backend)
    device = detect_device()
    if device.kind != "cuda":
        raise UnsupportedError("kernel durations need a CUDA GPU and none is visible here",
                               hint="trace on the GPU machine, then read its exports here: softbench trace ingest FILE...")
    if backend != "sim":
        for shape in shapes:
            reason = unsupported_reason(backend, shape, device)
            if reason:
                raise UnsupportedError(f"{shape.tag()}: {reason}")
    nsys = None if no_nsys else find_nsys()
    if nsys:
        err.print(f"Nsight Systems: {nsys}")
    else:
        err.print("Nsight Systems not found (PATH, /opt/nvidia/nsight-systems/*/bin, /opt/nvidia/nsight-compute/*/host/"
                  "target-linux-x64, /usr/local/cuda/bin)" if not no_nsys else "--no-nsys given",
                  "; kernel durations come from torch.profiler (CUPTI)")
    opts = TraceOptions(shapes=shapes, variants=names, backend=backend, warmup=warmup, calls=calls,
                        window_s=window_s, seed=seed,
                        nsys=nsys, out_dir=Path(out_dir), backend_options=dict(triton_config),
                        settle=SettleRule().to_dict() if settle else None,
                        command_line="softbench " + " ".join(shlex.quote(a) for a in sys.argv[1:]))
    with RichProgress() as progress:
        session = run_trace(opts, progress)
    summary = session.read_json("summary.json")
    out.print(table(f"traced points (source: {summary['source']})", POINT_COLUMNS, point_rows(summary)))
    if summary["table"]:
        out.print(table(f"Table B4 form: {names[0]} against {', '.join(names[1:])}", B4_COLUMNS, b4_table_rows(summary)))
        out.print(quantity(summary))
    for note in point_notes(summary):
        err.print(f"note: {note}")
    err.print(f"session: {session.path}")


for _p in run.params:  # the shared option's help speaks of one session per length; a trace holds them all
    if _p.name == "seqs":
        _p.help = "sequence length(s), e.g. --seq 4K --seq 8K; all lengths in one session"


@command.command("ingest")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False),
                callback=nonempty("report_cuda_gpu_kern_sum.csv"))
@click.option("--json", "as_json", is_flag=True, help="print the kernels as JSON instead of tables")
def ingest(files, as_json):
    """Read Nsight Systems exports: cuda_gpu_kern_sum CSV, SQLite (nsys export --type sqlite), or a
    torch.profiler Chrome trace; print each kernel's instances and median duration."""
    import json

    from softbench.core.console import out, table
    from softbench.trace.ingest import read_any
    from softbench.trace.render import KERNEL_COLUMNS, kernel_rows

    results = []
    for f in files:
        t = read_any(f)
        if as_json:
            results.append({"path": t.path, "source": t.source, "attention_kernel": t.dominant().name,
                            "kernels": [r.to_dict() for r in t.by_total()]})
            continue
        out.print(table(f"{f} ({t.source}); largest total time: {t.dominant().name[:60]}", KERNEL_COLUMNS,
                        kernel_rows(t)))
    if as_json:
        click.echo(json.dumps(results, indent=2))
