"""`softbench fidelity`: next-token NLL of a frozen causal LM with exact vs approximate attention (paper 3.1,
5.4, A.2-A.9, B.2, C.4), paired over aligned blocks."""

from __future__ import annotations

import shlex
import sys

import click

from softbench.core.console import RichProgress
from softbench.core.options import SEED, ExistingPath, nonempty, rescale_threshold_option
from softbench.core.shapes import DTYPES
from softbench.fidelity.limits import MIN_BLOCK_LEN, MIN_BLOCKS

PATH_CHOICES = ("kernel", "sim", "row")
# the parameters --resume goes with: how to run (offline, on how many GPUs), or no run at all; every other option
# is the session's own, read back from its options.json
WITH_RESUME = ("resume", "offline", "gpus", "list_operators")
KERNEL_BACKENDS = ("fa4", "triton")  # as softbench.fidelity.conditions (not imported here: --help stays light)


@click.command("fidelity")
@click.option("--model", default=None, help="alias (smollm2-135m, qwen2.5-1.5b, mistral-7b, llama-3.1-8b, "
              "gemma-2-2b, gemma-3-270m, ...), a local model folder, a .gguf file, or a Hugging Face id: from the "
              "local cache, else downloaded into it (HF_HUB_OFFLINE=1 or --offline: the cache only)")
@click.option("--gguf-file", default=None, callback=nonempty("model.Q4_K_M.gguf"),
              help="GGUF file inside --model's folder")
@click.option("--corpus", default="wikitext-103", show_default=True, callback=nonempty("austen"),
              help="wikitext-103 (through datasets), austen (make setup unpacks it), hf:OWNER/NAME[:CONFIG[:SPLIT]], "
                   "a UTF-8 text file, a .jsonl file (a 'text' field per line), or a folder saved by datasets")
@click.option("--offline", is_flag=True, help="the Hugging Face cache only: no request (as HF_HUB_OFFLINE=1)")
@click.option("--block-len", type=click.IntRange(min=MIN_BLOCK_LEN), default=2048, show_default=True,
              help=f"tokens per block (capped at the model's context; at least {MIN_BLOCK_LEN}, so the wiring "
                   "check's mean over the block is not dominated by single-token BF16 logit rounding)")
@click.option("--max-blocks", type=click.IntRange(min=1), default=97, show_default=True,
              help=f"blocks to evaluate; a 95% interval (and 'resolved') needs at least {MIN_BLOCKS} complete "
                   "blocks: below that the percentile bootstrap covers far less than 95% (81% at 4 blocks, 90% "
                   "at 10), so only the estimate is given")
@click.option("--path", type=click.Choice(PATH_CHOICES), default="sim", show_default=True,
              help="kernel: a real kernel's A0 vs A1 on a GPU (--backend); sim: the kernel's tile-wise semantics "
                   "in PyTorch; row: every operator on the whole row (offline)")
@click.option("--backend", type=click.Choice(KERNEL_BACKENDS), default="fa4", show_default=True,
              help="--path kernel: FA4, or softbench's own Triton forward (head dims 64, 128 and 256; on a machine "
                   "without CUDA only through Triton's CPU interpreter, TRITON_INTERPRET=1, for tests)")
@click.option("--operator", "operators", multiple=True, default=("rowmax-h15",), show_default=True,
              help="[path:]name[:key=value,...], repeatable, e.g. rowmax-pot:kmax=20 or row:rowmax-h15; "
                   "--list-operators shows them")
@click.option("--dtype", type=click.Choice(DTYPES), default="bf16", show_default=True,
              help="model and attention storage; fp8: BF16 model with FA4's FP8 attention semantics (sim: "
                   "probability offset 8; --path kernel --backend triton: the FP8 forward, Q, K and V scaled into "
                   "E4M3 one tensor at a time)")
@click.option("--fp8-storage", is_flag=True,
              help="sim, --dtype fp8: also round P to E4M3 before the row sums (P.V reads E4M3 P already where the "
                   "operands are E4M3)")
@click.option("--fp8-operands", is_flag=True,
              help="sim, --dtype fp8: also scale Q, K and V into E4M3 (one scale per tensor), as --path kernel "
                   "--backend triton does at FP8")
# each resample is a row of block indices: a million of them over 97 blocks are 0.8 GB of indices alone
@click.option("--bootstrap", type=click.IntRange(min=100, max=1_000_000), default=5000, show_default=True,
              help="bootstrap resamples of the blocks")
@click.option("--seed", type=SEED, default=0, show_default=True, help="bootstrap seed")
@rescale_threshold_option(help="sim: skip the rescale while the running max grows by less than tau (8.0: sm_100 at "
                               "16-bit)")
@click.option("--tile", type=click.IntRange(min=1), default=128, show_default=True, help="sim: keys per tile")
@click.option("--bos", type=click.Choice(["auto", "block", "stream"]), default="auto", show_default=True,
              help="auto: block where the tokenizer adds a BOS (the regime the model was trained for), else stream; "
                   "block: BOS first in every block; stream: tokenize once, BOS only before block 0 (warns when "
                   "the tokenizer adds one)")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None, help="default: cuda when present")
@click.option("--gpus", type=click.IntRange(min=1), default=None,
              help="data parallel on N GPUs of this host: starts torchrun --nproc-per-node N, one rank per GPU, each "
                   "with its own copy of the model and its share of the blocks; rank 0 writes the session (on "
                   "CPUs: torchrun --nproc-per-node N -m softbench fidelity ... runs the same over gloo)")
@click.option("--device-map", type=click.Choice(["auto"]), default=None,
              help="one model across the GPUs of this host (accelerate places the layers); sim and row paths")
# torch takes the count as a C int; far past any machine's cores it overflowed into an internal error
@click.option("--threads", type=click.IntRange(min=1, max=4096), default=None, help="CPU threads for torch")
@click.option("--out", "out_dir", default="sessions", show_default=True, type=click.Path(file_okay=False))
@click.option("--resume", type=ExistingPath("sessions/<fidelity session>", file_okay=False), default=None,
              help="continue an interrupted session with its own options (of the others only --offline and "
                   "--gpus go with it)")
@click.option("--list-operators", is_flag=True, help="list the operator zoo and exit")
def command(model, gguf_file, corpus, offline, block_len, max_blocks, path, backend, operators, dtype, fp8_storage,
            fp8_operands, bootstrap, seed, rescale_threshold, tile, bos, device, gpus, device_map, threads, out_dir,
            resume, list_operators):
    """Per-block NLL with exact and approximate attention; dNLL with a paired block bootstrap.

    Example (after make setup, offline, CPU, a few minutes): softbench fidelity --model smollm2-135m
    --corpus austen --block-len 256 --max-blocks 20 --offline

    The summary gives each operator's dNLL against exact attention and, beside it, against sim:exp2 (exact
    exp2 on the same tiles: the control, added to every run with a simulated operator).

    On a GPU: softbench fidelity --model smollm2-135m --path kernel --backend triton --operator rowmax-h15"""
    from softbench.core.console import err, out, table
    from softbench.core.errors import UsageError

    if list_operators:
        from softbench.fidelity.operator_zoo import list_operators as zoo

        out.print(table("operators", ["name", "scope", "anchor", "parameters", "section", "definition"],
                        [[o["name"], o["scope"], o["anchor"], ", ".join(f"{k}={v}" for k, v in o["params"].items()),
                          o["section"], o["definition"]] for o in zoo()]))
        return
    if resume is not None:
        _refuse_options_beside_resume(click.get_current_context(), resume)
    else:
        from softbench.core.checks import check_out_dir

        check_out_dir(out_dir)  # before torch is imported or a file read: a refusal should not wait for them
    if offline:  # before transformers or datasets is imported: they read HF_HUB_OFFLINE then (a resume too)
        from softbench.fidelity.hub import go_offline

        go_offline()
    from softbench.fidelity.engine import FidelityOptions, run_fidelity
    from softbench.runtime.distributed import from_env
    from softbench.fidelity.report import CONSOLE_COLUMNS, console_rows, headline, interval_note

    command_line = "softbench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    opts = None
    if resume is None:
        if not model:
            raise UsageError("--model is required (or --resume SESSION_DIR)")
        from softbench.fidelity.corpus import portable_spec
        from softbench.fidelity.models import portable_name

        # options.json keeps local paths absolute, so that --resume can run from any folder
        opts = FidelityOptions(model=portable_name(model), gguf_file=gguf_file, corpus=portable_spec(corpus),
                               block_len=block_len, max_blocks=max_blocks, path=path, operators=tuple(operators),
                               dtype=dtype, bootstrap=bootstrap, seed=seed, rescale_threshold=rescale_threshold,
                               device=device, out_dir=out_dir, tile=tile, bos=bos, fp8_storage=fp8_storage,
                               fp8_operands=fp8_operands, threads=threads, backend=backend, offline=offline,
                               device_map=device_map, command_line=command_line)
        opts.check()  # bad operators and combinations fail before anything is loaded
    if gpus:
        from softbench.fidelity.gpus import launch

        if device_map:
            raise UsageError("--gpus gives every GPU its own copy of the model and --device-map spreads one copy "
                             "over them; use one or the other")

        from softbench.runtime.launch import command_args

        # the ranks get this command's own arguments (those after `fidelity`), less --gpus
        launch(gpus, device, command_args(sys.argv[1:], "fidelity"))
        return
    ranks = from_env()
    if resume is not None and ranks.main:
        err.print(f"resuming {resume} with the options it was started with")
    if not ranks.main:  # rank 0 reports for the launch; the others print only their errors
        run_fidelity(opts, resume=resume)
        return
    try:
        with BlockProgress(err) as progress:
            session = run_fidelity(opts, progress, resume=resume)
    except KeyboardInterrupt as e:
        path = getattr(e, "session_path", None)  # set by the engine once a session exists
        if path:
            # unwrapped, unhighlighted: a path and a command to copy
            err.print(f"partial session: {path}\ncontinue it with: softbench fidelity --resume {shlex.quote(path)}",
                      soft_wrap=True, markup=False, highlight=False)
        raise
    summary = session.read_json("summary.json")
    out.print(headline(summary))
    for line in [interval_note(summary), *(summary.get("warnings") or [])]:
        if line:
            err.print(f"[yellow]note: {line}[/yellow]")
    kernel = f" {summary['backend']}" if summary.get("backend") else ""
    out.print(table(f"fidelity ({summary['path']} path{kernel}, {summary['dtype']})", CONSOLE_COLUMNS,
                    console_rows(summary)))
    err.print(f"session: {session.path}")


def _refuse_options_beside_resume(ctx: click.Context, resume: str) -> None:
    """A resumed session runs with the options it was started with: any other option given beside --resume would
    be ignored without a word, so it is refused (only those the user set; defaults are not theirs to drop)."""
    from softbench.core.errors import UsageError
    from softbench.core.wording import listed

    set_by_user = (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)
    given = [p.opts[0] for p in ctx.command.params
             if p.name not in WITH_RESUME and ctx.get_parameter_source(p.name) in set_by_user]
    if given:
        raise UsageError(f"--resume continues {resume} with the options it was started with, so {listed(given)} "
                         "cannot be combined with it",
                         hint="drop them to resume, or start a new session without --resume")


class BlockProgress(RichProgress):
    """softbench.fidelity.engine.Progress on a rich progress bar: one step per block, with an ETA."""

    def __init__(self, console):
        super().__init__(console=console, eta=True)

    def message(self, text: str) -> None:
        if self.task is None:
            self.console.print(f"[dim]{text}[/dim]")
        else:
            self.bar.update(self.task, description=text)

    def start(self, total: int, done: int, label: str) -> None:
        self.label = label
        self.add_task(label, total=total, completed=done)

    def warning(self, text: str) -> None:
        self.console.print(f"[yellow]warning: {text}[/yellow]")

    def block(self, index: int, rows: list[dict]) -> None:
        base = rows[0]["nll"]
        parts = [f"{r['condition']} {r['nll'] - base:+.5f}" for r in rows[1:]]
        self.bar.console.print(f"block {index}: baseline NLL {base:.5f}; dNLL " + "; ".join(parts))
        self.advance()
