"""The latency command across GPUs, its console side: `--gpus` starts torchrun (softbench.runtime.launch) after
every check has passed in this one process; each rank then runs softbench.latency.matrix, and rank 0 prints the
index it wrote."""

from __future__ import annotations

import os
import shlex
import sys

from softbench.latency.engine import LatencyOptions

FAILED_HINT = ("the sessions the ranks finished are kept, and rank 0's index (a *-matrix-* session folder) "
               "lists them with the cells that have none")


def run_across(opts: LatencyOptions, gpu_list, ranks, pin, control: bool, source: str, check) -> None:
    from softbench.core.console import RichProgress, err, out, table
    from softbench.latency.gpus import GPUS_ENV
    from softbench.latency.matrix import run_matrix
    from softbench.latency.render import (CONTROL_COLUMNS, MATRIX_COLUMNS, control_overlap, control_rows,
                                          matrix_rows)
    from softbench.runtime.launch import command_args, launch

    for shape in opts.shapes:  # refused here, once, rather than by every rank
        check(shape)
    if ranks is None:
        launch(len(gpu_list), "latency", command_args(sys.argv[1:], "latency"), hint=FAILED_HINT,
               extra_env={GPUS_ENV: ",".join(map(str, gpu_list))})
        return
    if not ranks.main:
        run_matrix(opts, ranks, pin, control, source, opts.command_line)
        return
    if control:
        err.print(f"control: {opts.shapes[0].tag()}, {opts.baseline} against itself, on {ranks.world} GPU(s) at "
                  f"once, then on each alone", soft_wrap=True)
    with RichProgress() as progress:
        index = run_matrix(opts, ranks, pin, control, source, opts.command_line, progress)
    data = index.read_json("index.json")
    # the session names are in the index; too long for a terminal's table
    out.print(table(f"{data['kind']} on {ranks.world} GPU(s) ({opts.backend}, {opts.protocol.kind} protocol)",
                    MATRIX_COLUMNS[:-1], [row[:-1] for row in matrix_rows(data)]))
    if control:
        out.print(table("control: together against alone", CONTROL_COLUMNS, control_rows(data)))
        out.print(control_overlap(data), soft_wrap=True)
    err.print(f"index: {index.path}", soft_wrap=True)


def control_cell(ctx, shapes, baseline):
    """--control: (shapes, variant, null, references) of its A/A cell: the first cell, the baseline against itself,
    no other kernel in the rotation; the options that would add one are refused rather than ignored."""
    import click

    from softbench.core.errors import UsageError

    flags = {"variant": "--variant", "null": "--null" if ctx.params.get("null") else "--no-null",
             "references": "--reference"}
    clash = [f for n, f in flags.items() if ctx.get_parameter_source(n) == click.core.ParameterSource.COMMANDLINE]
    if clash:
        raise UsageError(f"--control times the baseline against itself alone; drop {', '.join(clash)}")
    return shapes[:1], baseline, False, "none"


def launch_command_line(ranks) -> str:
    """The command as the user gave it, also in a rank of a --gpus launch (whose arguments lack --gpus)."""
    from softbench.latency.gpus import GPUS_ENV

    line = "softbench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    if ranks is None:
        return line
    if os.environ.get(GPUS_ENV):
        return f"{line} --gpus {os.environ[GPUS_ENV]}"
    return f"torchrun --nproc-per-node {ranks.world} -m {line}"
