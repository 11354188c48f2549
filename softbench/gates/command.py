"""`softbench gates`: correctness gates of a patched kernel (paper B.2), probabilities read back through one-hot V."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from softbench.core.options import check_triton_config, triton_config_option
from softbench.core.shapes import DTYPES


def _check_variant(backend: str, name: str) -> None:
    """Each backend builds its own set of variants; an unknown one is refused before any process starts."""
    if backend == "sim":
        from softbench.kernels.sim_weights import SIM_OPERATORS as known
    elif backend == "triton":
        from softbench.kernels.variants import get_variant

        get_variant(name)  # unknown names answered with the closest ones
        try:
            from softbench.kernels.triton_attn import check_variant
        except ImportError:
            return  # the backend's own load says that triton is missing
        check_variant(name)
        return
    else:
        from softbench.kernels.fa4_patches import FA4_PATCHES as known
    known.get(name)


def _table(title: str, rows: list[list[str]]):
    """The gates as a table; each gate's notes follow it as lines, so the numbers fit a narrow terminal."""
    from rich.table import Table

    t = Table(title=title)
    for name in ("gate", "observed", "bound", "unit", "result"):
        t.add_column(name, no_wrap=True)
    for r in rows:
        t.add_row(*r[:5], style="red" if r[4] == "FAIL" else None)
    return t


@click.command("gates")
@click.option("--backend", type=click.Choice(["fa4", "triton", "sim"]), default="fa4", show_default=True,
              help="fa4: FlashAttention-4 on a CUDA GPU; sim: the pure-torch simulation (any machine); "
                   "triton: softbench's own Triton forward (BF16/FP16 and FP8 on Hopper)")
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
@click.option("--seed", type=int, default=0, show_default=True, help="input seed")
@click.option("--rescale-threshold", type=float, default=0.0, show_default=True,
              help="sim only: FA4's conditional-rescale threshold tau (8.0 mimics sm_100 at 16-bit)")
@triton_config_option()
@click.option("--reevaluate", "source", type=click.Path(file_okay=False, exists=True), default=None,
              help="run no kernel: evaluate the gates again from the readbacks a gates session kept (its folder), "
                   "with this version's gate model, into a new session that names its source")
@click.option("--out", "out_dir", default="sessions", show_default=True, type=click.Path(file_okay=False))
def command(backend, variant, baseline, dtype, causal, batch, heads, kv_heads, head_dim, single_seq, multi_seq,
            seed, rescale_threshold, triton_config, source, out_dir):
    """Read VARIANT's and BASELINE's probabilities back through one-hot V and check them: L1 against a
    Rowmax-H15 reference at one tile; the error envelope, row sums and row maximum over several tiles.
    Exits non-zero when a gate fails.

    Example: softbench gates --backend fa4 --dtype bf16 --no-causal"""
    from softbench.core.checks import check_out_dir

    check_out_dir(out_dir)  # before the engine's imports (torch): a refusal should not wait for them
    from softbench.core.console import err
    from softbench.gates.engine import GatesOptions, resolve_options, run_gates

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
        return _report(session, summary)
    if backend != "sim" and rescale_threshold:
        raise click.BadParameter("--rescale-threshold applies to --backend sim only", param_hint="--rescale-threshold")
    check_triton_config(triton_config, backend)
    backend_options = {"rescale_threshold": rescale_threshold} if backend == "sim" else {}
    if backend == "triton":
        # TritonBackend's keyword arguments. No fallback: the single-tile gate is sized to this configuration's
        # key tile, and a silently substituted one would span another number of tiles
        backend_options = {**triton_config, "fallback": False}
    _check_variant(backend, baseline)
    _check_variant(backend, variant)
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
    _report(session, summary)


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


def _report(session, summary) -> None:
    """The gates table and headline; a failed gate ends the command with GatesFailed (exit 1)."""
    from softbench.core.console import err, out
    from softbench.gates.engine import GatesFailed, gate_rows, gates_headline

    rows = gate_rows(summary)
    out.print(_table(f"correctness gates: {summary['tag']}", rows))
    for r in rows:
        if r[5]:
            out.print(f"  {r[0]}: {r[5]}", highlight=False)
    out.print(gates_headline(summary))
    err.print(f"session: {session.path}")
    if not summary["all_passed"]:
        raise GatesFailed(f"{len(summary['failed'])} gate(s) failed: {', '.join(summary['failed'])}",
                          hint=f"per-element details in {session.path}/gates.json")
