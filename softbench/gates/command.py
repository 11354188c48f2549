"""`softbench gates`: correctness gates of a patched kernel (paper B.2), probabilities read back through one-hot V."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from softbench.core.options import (SEED, BACKEND_HELP, ExistingPath, backend_option, check_triton_config,
                                    rescale_threshold_option, triton_config_option)
from softbench.core.shapes import DTYPES


@click.command("gates")
@backend_option(BACKEND_HELP)
@click.option("--variant", default="A1", show_default=True, help="the kernel under test")
@click.option("--baseline", default="A0", show_default=True, help="the stock kernel it is compared with")
@click.option("--dtype", type=click.Choice(DTYPES), default="bf16", show_default=True)
@click.option("--causal/--no-causal", default=True, show_default=True)
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--heads", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--kv-heads", type=click.IntRange(min=1), default=None, help="default: same as --heads")
@click.option("--head-dim", type=click.IntRange(min=8), default=128, show_default=True)
@click.option("--single-seq", type=click.IntRange(min=1), default=None,
              help="sequence length of the single-tile gate, at most one key tile [default: one key tile of the "
                   "kernel: the Triton configuration's BLOCK_N, 128 for FA4]")
@click.option("--multi-seq", type=click.IntRange(min=2), default=512, show_default=True,
              help="sequence length of the multi-tile gates (more than one key tile)")
@click.option("--seed", type=SEED, default=0, show_default=True, help="input seed")
@rescale_threshold_option()
@triton_config_option()
@click.option("--reevaluate", "source", type=ExistingPath("sessions/<gates session>", file_okay=False), default=None,
              help="run no kernel: evaluate the gates again from the readbacks a gates session kept (its folder), "
                   "with this version's gate model, into a new session that names its source")
@click.option("--out", "out_dir", default="sessions", show_default=True, type=click.Path(file_okay=False))
def command(backend, variant, baseline, dtype, causal, batch, heads, kv_heads, head_dim, single_seq, multi_seq,
            seed, rescale_threshold, triton_config, source, out_dir):
    """Read VARIANT's and BASELINE's probabilities back through one-hot V and check them: L1 against a
    reference of the variant's weight map at one tile (Rowmax-H15 for A1; h15-folded's phase-shifted lattice
    and the hybrids' mix are their own); the error envelope, row sums and row maximum over several tiles.
    Exits non-zero when a gate fails.

    Example: softbench gates --backend fa4 --dtype bf16 --no-causal"""
    from softbench.core.checks import check_out_dir

    check_out_dir(out_dir)  # before the engine's imports (torch): a refusal should not wait for them
    from softbench.core.console import err
    from softbench.gates.engine import run_gates
    from softbench.gates.options import GatesOptions, resolve_options
    from softbench.gates.render import print_gates

    command_line = "softbench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    if source:
        ctx = click.get_current_context()
        given = [p.opts[0] for p in ctx.command.params if p.name not in ("source", "out_dir")
                 and ctx.get_parameter_source(p.name) == click.core.ParameterSource.COMMANDLINE]
        if given:
            raise click.BadParameter(f"the source session fixes the kernels and shapes; drop {', '.join(given)}",
                                     param_hint="--reevaluate")
        from softbench.gates.reevaluate import reevaluate_gates

        session, summary = reevaluate_gates(Path(source), Path(out_dir), command_line)
        return print_gates(session, summary)
    if backend != "sim" and rescale_threshold:
        raise click.BadParameter("--rescale-threshold applies to --backend sim only", param_hint="--rescale-threshold")
    check_triton_config(triton_config, backend)
    backend_options = {"rescale_threshold": rescale_threshold} if backend == "sim" else {}
    if backend == "triton":
        # TritonBackend's keyword arguments. No fallback: the single-tile gate is sized to this configuration's
        # key tile, and a silently substituted one would span another number of tiles
        backend_options = {**triton_config, "fallback": False}
    from softbench.kernels.catalog import check as check_variant

    check_variant(backend, baseline)
    check_variant(backend, variant)
    opts = GatesOptions(backend=backend, variant=variant, baseline=baseline, dtype=dtype, causal=causal, batch=batch,
                        heads=heads, kv_heads=kv_heads, head_dim=head_dim, single_seq=single_seq,
                        multi_seq=multi_seq, seed=seed, out_dir=Path(out_dir), backend_options=backend_options,
                        command_line=command_line)
    _check_memory(opts)
    # The multi-tile shape first: its refusal (no GPU, a head dim the kernel lacks) must come before the kernel's
    # configuration table is asked for the key tile that the single-tile length defaults to.
    _refuse_unsupported(opts, opts.multi_seq)
    opts = resolve_options(opts)
    _refuse_unsupported(opts, opts.single_seq)
    with err.status("starting") as status:
        session, summary = run_gates(opts, progress=status.update)
    print_gates(session, summary)


def _check_memory(opts) -> None:
    """The multi-tile gate's inputs, plus both kernels' probabilities read back (b x s x h x s, float32 as the
    worker saves them and float64 as the gates load them), must fit in this machine's memory."""
    from softbench.core.checks import check_memory

    shape = opts.shape(opts.multi_seq)
    readbacks = 2 * (4 + 8) * shape.batch * shape.heads * shape.seq * shape.seq
    check_memory(shape, opts.backend, extra_bytes=readbacks, what="the multi-tile gate",
                 hint="use a shorter --multi-seq, fewer --heads or a smaller --batch")


def _refuse_unsupported(opts, seq: int) -> None:
    """Refuse, before any process starts, a shape the backend cannot run here (the simulation runs anywhere)."""
    if opts.backend == "sim":
        return
    from softbench.core.errors import UnsupportedError
    from softbench.kernels.capability import detect_device, unsupported_reason

    shape = opts.shape(seq)
    reason = unsupported_reason(opts.backend, shape, detect_device())
    if reason:
        raise UnsupportedError(f"{shape.tag()}: {reason}")
