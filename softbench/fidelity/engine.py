"""The fidelity engine: resolve, load, tokenize, evaluate block by block, summarize; resumable.

Phases: check (options, conditions; nothing heavy before the options are known to be valid), prepare (the
model's name and file, the corpus text and its checks, then config and model support, tokenizer, BOS regime,
blocks, token signature: every input error is found before the weights load), the wiring gate on block 0, blocks (every
condition on one block, its rows appended to blocks.jsonl at once; blocks.csv and summary.json rewritten after
each block, so a killed run loses at most the block in progress), summarize.

Session files: options.json (as run), env.json, run.json (model, corpus, signature, conditions, gate),
blocks.jsonl (raw rows), blocks.csv, summary.json, summary.md, status.json; worker-A0/A1.log on the kernel path,
whose kernel (--backend fa4 or triton) is recorded in run.json `kernel` and summary.json `backend`.
`--resume DIR` reopens a session with its own options, checks that the token signature is unchanged, and
evaluates only the blocks that are not complete for every condition.

Under torchrun every rank runs these phases on its own copy of the model and its share of the blocks; rank 0
alone writes the session (softbench.runtime.distributed deals the blocks round-robin; `_run` gathers them), and
run.json `launches` records each launch's world size, ranks and devices. The ranks work in rounds, one block
each, and rank 0 gathers every round's rows before the next one starts; round-robin rather than contiguous
ranges keeps what is finished a prefix of the block order. What a dead rank costs ("nothing lost"): rank 0
appends its own block before the round's gather, and every other rank's rows once gathered, so a rank that dies
loses only the block it was on and the others only their block of that round; rank 0 writes the partial
session, and `--resume` evaluates what is missing with any number of ranks."""

from __future__ import annotations

import os
import time
import types
import typing
from dataclasses import asdict, dataclass, field
from pathlib import Path

from softbench.core.errors import MeasurementError, SoftbenchError, UnsupportedError, UsageError
from softbench.core.options import SEED, TAU_RULE, valid_tau
from softbench.core.shapes import DTYPES
from softbench.runtime import distributed
from softbench.fidelity.conditions import Condition, build_conditions
from softbench.fidelity.limits import MIN_BLOCK_LEN
from softbench.core.session import Session
from softbench.core.utc import utc_iso
from softbench.core.numbers import is_real

COMMAND = "fidelity"
# Fault injection for the tests of a dying rank: "R:N" makes rank R exit, as a crashed process would, when it
# is about to start its (N+1)-th block. Unset in normal use.
FAULT_ENV = "SOFTBENCH_FAULT_RANK_AFTER_BLOCKS"
FAULT_DELAY_S = 2.0
ROWS_FILE = "blocks.jsonl"
GATE_TOLERANCE_NATS = 0.02  # baseline NLL through softbench's attention and head vs the model's own loss


def _fits(value, hint) -> bool:
    """Whether a JSON value fits a field's type: the types FidelityOptions uses (str, int, float, bool, None and
    tuple[str, ...] read back as a list). A bool is no number here, though Python counts it as an int."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_fits(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if typing.get_origin(hint) is tuple:
        return isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value)
    if hint is float:
        return is_real(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _type_words(hint) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_type_words(h) for h in typing.get_args(hint))
    if typing.get_origin(hint) is tuple:
        return "list of names"
    return {str: "string", int: "whole number", float: "number", bool: "true or false",
            type(None): "null"}.get(hint, str(hint))


@dataclass(frozen=True)
class FidelityOptions:
    model: str
    gguf_file: str | None = None
    corpus: str = "wikitext-103"
    block_len: int = 2048
    max_blocks: int = 97
    path: str = "sim"
    operators: tuple[str, ...] = ("rowmax-h15",)
    dtype: str = "bf16"
    bootstrap: int = 5000
    seed: int = 0
    rescale_threshold: float = 0.0
    device: str | None = None  # None: CUDA where available, else the CPU
    out_dir: str = "sessions"
    tile: int = 128
    bos: str = "auto"  # auto: a BOS first in every block where the tokenizer adds one (corpus.resolve_bos)
    offline: bool = False  # the Hub cache only, no request (HF_HUB_OFFLINE=1 does the same)
    fp8_storage: bool = False
    fp8_operands: bool = False  # sim, --dtype fp8: Q, K and V scaled into E4M3 as the kernel path's FP8 forward does
    threads: int | None = None
    patch_cache: str | None = None
    backend: str = "fa4"  # the kernel path's kernel: FA4, or softbench's Triton forward
    device_map: str | None = None  # "auto": accelerate places the layers across the visible GPUs
    # as RunOptions.command_line; FidelityOptions is no RunOptions: its out_dir is a str (options.json, read back by
    # --resume) and it takes no backend_options
    command_line: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        d["operators"] = list(self.operators)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "FidelityOptions":
        """Options read back from a session's options.json (--resume): a value of the wrong type, or a missing
        model, is refused in one sentence rather than failing later inside a comparison."""
        if not isinstance(d, dict):
            raise UsageError("it holds no mapping of option names to values")
        hints = typing.get_type_hints(cls)
        kw = {k: v for k, v in d.items() if k in hints}
        if not isinstance(kw.get("model"), str):
            raise UsageError("it names no model")
        for name, value in kw.items():
            if not _fits(value, hints[name]):
                raise UsageError(f"its {name} is {value!r}, which is no {_type_words(hints[name])}")
        kw["operators"] = tuple(kw.get("operators", ()))
        return cls(**kw)

    def check(self) -> list[Condition]:
        if self.block_len < MIN_BLOCK_LEN:
            raise UsageError(f"--block-len must be at least {MIN_BLOCK_LEN} (the wiring check's mean needs that "
                             "many predictions)")
        if self.bos not in ("auto", "block", "stream"):
            raise UsageError(f"--bos must be auto, block or stream, not {self.bos!r}")
        if self.max_blocks < 1:
            raise UsageError("--max-blocks must be at least 1")
        if self.bootstrap < 100:
            raise UsageError("--bootstrap needs at least 100 replicates for a 95% percentile interval")
        if self.tile < 1:
            raise UsageError("--tile must be positive")
        # the options' click types refuse these on the command line; options.json read back by --resume comes here
        if self.dtype not in DTYPES:
            raise UsageError(f"--dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r}")
        if self.device not in (None, "cpu", "cuda"):
            raise UsageError(f"--device must be cpu or cuda, not {self.device!r}")
        if self.threads is not None and self.threads < 1:
            raise UsageError(f"--threads must be at least 1, not {self.threads}")
        if not SEED.min <= self.seed <= SEED.max:
            raise UsageError(f"--seed must be from {SEED.min} to {SEED.max}, not {self.seed}")
        # the option's type refuses a bad value on the command line; this is for options.json read back by --resume
        # (_open_resume names the file)
        if not valid_tau(self.rescale_threshold):
            raise UsageError(f"--rescale-threshold {self.rescale_threshold} is not {TAU_RULE}")
        if self.fp8_storage and self.dtype != "fp8":
            raise UsageError("--fp8-storage applies to --dtype fp8 only")
        if self.fp8_operands and (self.dtype != "fp8" or self.path != "sim"):
            raise UsageError("--fp8-operands applies to --path sim --dtype fp8 only (the kernel path at FP8 always "
                             "scales its operands into E4M3)")
        if self.device_map not in (None, "auto"):
            raise UsageError(f"--device-map must be auto, not {self.device_map!r}")
        if self.device_map and self.path == "kernel":
            raise UnsupportedError("--device-map places the model this process loads; the kernel path's worker "
                                   "processes load their own copies on one GPU",
                                   hint="use --device-map with --path sim or row")
        if self.backend != "fa4" and self.path != "kernel":
            raise UsageError(f"--backend {self.backend} chooses the kernel of --path kernel; --path {self.path} "
                             "runs no kernel", hint="add --path kernel, or drop --backend")
        if self.path == "kernel":
            if self.rescale_threshold:
                raise UsageError("--rescale-threshold is the simulation's; the kernel uses its own rule",
                                 hint="drop --rescale-threshold with --path kernel")
            if self.device == "cpu" and self.backend == "fa4":
                raise UnsupportedError("--path kernel runs FA4 on a CUDA GPU, not on the CPU",
                                       hint="use --path sim (the kernel's semantics in PyTorch) on the CPU")
            if self.dtype == "fp8" and self.backend != "triton":
                # softbench's Triton forward scales the model's BF16 Q, K and V into E4M3 itself
                # (attention.TritonAttention, kernels.fp8_scaling); FA4's FP8 forward is an sm_100 kernel, and the
                # FA4 attention function passes the model's tensors as they are: the run would be BF16 attention
                # recorded under an fp8 label
                raise UnsupportedError(f"--path kernel --backend {self.backend} runs bf16 or fp16 attention; at FP8 "
                                       "the kernel path runs softbench's Triton forward",
                                       hint="add --backend triton, or use --path sim --dtype fp8 for FA4's FP8 "
                                            "semantics")
        return build_conditions(self.path, self.operators, self.backend)


class Progress:
    """What the engine tells the outside world; the command passes a rich-backed implementation."""

    def start(self, total: int, done: int, label: str) -> None: ...
    def message(self, text: str) -> None: ...
    def warning(self, text: str) -> None: ...
    def block(self, index: int, rows: list[dict]) -> None: ...


@dataclass
class Prepared:
    model_source: object
    config: object
    block_len: int
    blocks: object  # numpy (n, L)
    run: dict = field(default_factory=dict)


def _device(opts: FidelityOptions) -> str:
    import torch

    if opts.device == "cuda" and not torch.cuda.is_available():
        raise UnsupportedError("--device cuda: no CUDA GPU is visible here", hint="use --device cpu")
    if opts.device:
        return opts.device
    return "cuda" if torch.cuda.is_available() else "cpu"


def _run_device(opts: FidelityOptions) -> str:
    """FA4 runs on CUDA only (a CPU-only machine is refused by check_supported). The Triton forward runs on CUDA
    where present, otherwise on the CPU, which check_supported allows only through the interpreter (tests)."""
    if opts.path == "kernel" and opts.backend == "fa4":
        return "cuda"
    return _device(opts)


def prepare(opts: FidelityOptions, conditions: list[Condition], progress: Progress, device: str) -> Prepared:
    from softbench.fidelity import corpus as corpora
    from softbench.fidelity import models
    from softbench.kernels.capability import detect_device

    from softbench.fidelity import hub

    if opts.offline:
        hub.go_offline()
    src = models.resolve_model(opts.model, opts.gguf_file)
    # the corpus first: its errors (missing, empty, binary, not UTF-8, tagged) need no model
    progress.message(f"corpus {opts.corpus}")
    text = corpora.load_corpus(opts.corpus)
    progress.message(f"config and tokenizer of {src.label}")
    config = models.load_config(src)
    ctx = models.context_length(config)
    block_len = min(opts.block_len, ctx) if ctx else opts.block_len
    models.check_supported(config, opts.path, block_len, opts.dtype, detect_device(prefer_cuda=device.startswith("cuda")),
                           opts.backend, {c.path for c in conditions})
    tokenizer = models.load_tokenizer(src)
    adds_bos = corpora.adds_bos(tokenizer)
    tokenizer_check = None
    if src.kind == "gguf":  # transformers rebuilt the tokenizer from the file: is it the file's tokenizer?
        from softbench.fidelity.gguf_tokenizer import check_gguf_tokenizer

        tokenizer_check = check_gguf_tokenizer(tokenizer, Path(src.location) / src.gguf_file, text.text, adds_bos)
    bos, bos_note, warning = corpora.resolve_bos(opts.bos, adds_bos)
    if warning:
        progress.warning(warning)
    t0 = time.monotonic()
    stream = corpora.tokenize(tokenizer, text.text)
    blocks = corpora.make_blocks(stream, block_len, opts.max_blocks, bos, tokenizer.bos_token_id)
    run = {
        "model": {**src.to_dict(), "label": src.label, "model_type": getattr(config, "model_type", None),
                  "context_length": ctx, **models.attention_geometry(config)},
        "corpus": {**text.describe(), "tokens": int(stream.size), "tokenize_s": round(time.monotonic() - t0, 2)},
        "block_len_requested": opts.block_len, "block_len": block_len,
        "blocks_available": int(stream.size // (block_len if bos == "stream" else block_len - 1)),
        "n_blocks": int(blocks.shape[0]), "bos": bos, "bos_requested": opts.bos, "bos_note": bos_note,
        "bos_token_id": tokenizer.bos_token_id, "warnings": [warning] if warning else [],
        "tokenizer_check": tokenizer_check,
        "token_signature": corpora.token_signature(blocks),
        "conditions": [c.describe() for c in conditions],
    }
    return Prepared(src, config, block_len, blocks, run)


def _evaluator(opts: FidelityOptions, prep: Prepared, conditions: list[Condition], session: Session, device: str):
    if opts.path == "kernel":
        from softbench.fidelity.kernel_eval import KernelEvaluator

        return KernelEvaluator(conditions, prep.model_source.to_dict(), opts.dtype, session.path, opts.patch_cache,
                               backend=opts.backend, device=device)
    from softbench.fidelity import attention, models
    from softbench.fidelity.local_eval import LocalEvaluator, SimSettings

    name = attention.register()
    model = models.load_model(prep.model_source, opts.dtype, device, name, device_map=opts.device_map)
    sim = SimSettings(tile=opts.tile, rescale_threshold=opts.rescale_threshold,
                      max_offset=8.0 if opts.dtype == "fp8" else 0.0, fp8_storage=opts.fp8_storage,
                      fp8_operands=opts.fp8_operands)
    return LocalEvaluator(model, conditions, sim, device)


def _summary(opts: FidelityOptions, run: dict, rows: list[dict], complete: bool, reason: str | None,
             device: str) -> dict:
    from softbench.fidelity.summary import summarize

    s = summarize(rows, run["conditions"], n_boot=opts.bootstrap, seed=opts.seed)
    return {"command": COMMAND, "complete": complete, "incomplete_reason": reason, "updated_utc": utc_iso(),
            "model": run["model"], "corpus": run["corpus"], "path": opts.path,
            "backend": opts.backend if opts.path == "kernel" else None, "dtype": opts.dtype,
            "device": device, "rescale_threshold": opts.rescale_threshold, "tile": opts.tile,
            "bos": run.get("bos", opts.bos), "bos_note": run.get("bos_note"), "warnings": run.get("warnings", []),
            "fp8_storage": opts.fp8_storage, "fp8_operands": opts.fp8_operands, "block_len": run["block_len"],
            "block_len_requested": run["block_len_requested"], "blocks_planned": run["n_blocks"],
            "token_signature": run["token_signature"], "gate": run.get("gate"),
            "tokenizer_check": run.get("tokenizer_check"),
            "world_sizes": [launch["world_size"] for launch in run.get("launches", [])],
            "kernels": _worker_kernels(run), **s}


def _worker_kernels(run: dict) -> dict:
    """variant -> the kernel and configuration its worker ran (the Triton backend's choice: gluon or triton, and the
    label), for the summary; empty for FA4 workers and the other paths."""
    workers = run.get("kernel", {}).get("workers", {})
    return {v: f"{w['kernel']} {w['config']['label']}" for v, w in workers.items() if "kernel" in w and "config" in w}


def _write_tables(session: Session, opts: FidelityOptions, run: dict, complete: bool, reason: str | None,
                  device: str) -> dict:
    from softbench.fidelity.report import fidelity_markdown
    from softbench.fidelity.summary import blocks_csv

    rows = session.read_records(ROWS_FILE)
    session.write_text("blocks.csv", blocks_csv(rows, [c["name"] for c in run["conditions"]]))
    summary = _summary(opts, run, rows, complete, reason, device)
    session.write_json("summary.json", summary)
    session.write_text("summary.md", fidelity_markdown(summary))
    return summary


def _keep_partial(session: Session, opts: FidelityOptions, run: dict, device: str, summary_reason: str,
                  status_reason: str) -> None:
    from softbench.runtime.session_runner import sigterm_deferred

    with sigterm_deferred():
        try:
            _write_tables(session, opts, run, False, summary_reason, device)
        except Exception as e:
            # the tables re-read blocks.jsonl, and whatever stopped the run (a damaged file, a full disk) may stop
            # them too: the session must still be marked partial, not left "running" with no process behind it,
            # and the caller's error, not this one, is what the user sees
            why = f"{type(e).__name__}: {e}"
            status_reason = (f"{status_reason}; blocks.csv and summary.json could not be rewritten "
                             f"({'the same error' if why == status_reason else why})")
        session.set_status(complete=False, state="partial", reason=status_reason)


def _open_resume(resume: Path) -> tuple[Session, FidelityOptions]:
    session = Session.open(resume)
    if session.command != COMMAND or not session.has("options.json"):
        raise UsageError(f"{resume} is not a fidelity session")
    stored = session.read_mapping("options.json")  # its own sentence, naming the file, where it does not parse
    try:
        opts = FidelityOptions.from_dict(stored)
        opts.check()
    except SoftbenchError as e:
        # the options are the session's, not the command line's: say which file holds the value refused, keeping
        # the kind of refusal (bad input, or what this machine cannot do) and so its exit code
        raise type(e)(f"{session.path / 'options.json'} holds an option that is refused: {e}", hint=e.hint) from None
    _check_recorded_run(session)
    from softbench.fidelity.summary import check_rows

    # the resumed run builds its summary on these rows: checked now, before the model loads
    check_rows(session.read_records(ROWS_FILE), str(session.path / ROWS_FILE))
    return session, opts


def _whole_gate(gate) -> bool:
    """A recorded wiring check as _run reads it back: passed or not, and the two losses its refusal quotes (the
    model's own under either name, older sessions' native_sdpa_loss or native_loss)."""
    return (isinstance(gate, dict) and isinstance(gate.get("passed"), bool)
            and is_real(gate.get("softbench_baseline_nll"))
            and is_real(gate.get("native_loss", gate.get("native_sdpa_loss"))))


def _check_recorded_run(session: Session) -> None:
    """run.json as _open_session and _run read it back on --resume: checked before the model loads, so that a file
    damaged or edited by hand is refused in one sentence that names it, not in an internal error minutes later."""
    path = session.path / "run.json"
    if not session.has("run.json"):
        raise UsageError(f"{session.path} has no run.json: it stopped before its first block, so there is nothing "
                         "to resume", hint="start a new session with the same options")
    recorded = session.read_mapping("run.json")  # its own sentence where it does not parse or is no mapping
    signature = recorded.get("token_signature")
    if not (isinstance(signature, str) and signature):
        refusal = f"its token_signature is {signature!r}, not the token stream's hash"
    elif not isinstance(recorded.get("launches", []), list):
        refusal = f"its launches are {recorded['launches']!r}, not a list"
    elif "gate" in recorded and not _whole_gate(recorded["gate"]):
        refusal = "its wiring check (gate) does not say whether it passed, and with which losses"
    else:
        return
    raise UsageError(f"{path} is not the record of a fidelity run: {refusal}")


def fault_check(ranks: distributed.Ranks, blocks_done: int) -> None:
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    rank, _, after = spec.partition(":")
    if int(rank) == ranks.rank and blocks_done >= int(after):
        # die as a rank dies in the middle of a block, not the instant the last gather returns: rank 0 is then still
        # appending that round's rows when torchrun stops it, and a test of "nothing lost" would race the monitor
        time.sleep(FAULT_DELAY_S)
        os._exit(17)


def _refuse_distributed(opts: FidelityOptions, ranks: distributed.Ranks) -> None:
    if ranks.world == 1:
        return
    if opts.path == "kernel":
        # each rank's A0/A1 worker processes would have to be pinned to the rank's GPU; not built (issue 19)
        raise UnsupportedError(f"--path kernel runs in one process (its kernel workers are not pinned to a rank's "
                               f"GPU); this is rank {ranks.rank} of {ranks.world}",
                               hint="run the kernel path without torchrun, or --path sim under torchrun")
    if opts.device_map:
        raise UsageError("--device-map spreads one model over the GPUs and torchrun gives every rank its own copy "
                         "of it; use one or the other")


def run_fidelity(opts: FidelityOptions | None = None, progress: Progress | None = None,
                 resume: Path | str | None = None) -> Session | None:
    """One process, or every rank of a torchrun launch (softbench.runtime.distributed): each rank evaluates its
    share of the blocks; rank 0 alone writes the session and returns it, the other ranks return None."""
    ranks = distributed.from_env()
    progress = progress or Progress()
    session = None
    if resume is not None:
        # every rank reads the session's options (torchrun --nproc-per-node: one host, one folder); rank 0 alone
        # writes to it
        session, opts = _open_resume(Path(resume))
    if opts is None:
        raise UsageError("no options and no session to resume")
    conditions = opts.check()
    _refuse_distributed(opts, ranks)
    if opts.threads:
        import torch

        torch.set_num_threads(opts.threads)
    device = distributed.rank_device(_run_device(opts), ranks)
    prep = prepare(opts, conditions, progress, device)
    group = distributed.Group(ranks, device)
    try:
        return _run(opts, conditions, prep, session if ranks.main else None, progress, device, group)
    finally:
        group.close()


def _open_session(opts: FidelityOptions, prep: Prepared, session: Session | None, device: str,
                  members: list[dict], backend: str | None) -> Session:
    """Rank 0: a new session, or the resumed one after its token signature is checked; this launch's ranks and
    devices appended to run.json's `launches` (a resumed session may have had another world size)."""
    launch = {"started_utc": utc_iso(), "world_size": len(members), "backend": backend, "ranks": members}
    if session is None:
        from softbench.core.envinfo import collect_env

        kernel = f"-{opts.backend}" if opts.path == "kernel" else ""
        session = Session.create(opts.out_dir, COMMAND, tag=f"{prep.run['model']['label']}-{opts.path}{kernel}")
        session.write_json("options.json", opts.to_dict())
        session.write_json("env.json", collect_env(gpu=device.startswith("cuda")))
        prep.run["created_utc"] = utc_iso()
        prep.run["launches"] = [launch]
        session.write_json("run.json", prep.run)
        return session
    recorded = session.read_json("run.json")
    if recorded["token_signature"] != prep.run["token_signature"]:
        raise UsageError(f"{session.path}: the token stream differs from the recorded one (signature "
                         f"{prep.run['token_signature'][:12]} vs {recorded['token_signature'][:12]}); "
                         "same model, tokenizer and corpus are needed to resume")
    prep.run = {**prep.run, **{k: recorded[k] for k in ("gate", "created_utc") if k in recorded},
                "launches": [*recorded.get("launches", []), launch]}
    session.resume()
    return session


def _run(opts: FidelityOptions, conditions: list[Condition], prep: Prepared, session: Session | None,
         progress: Progress, device: str, group: distributed.Group) -> Session | None:
    ranks = group.ranks
    members = group.all_gather({**group.describe(device), "token_signature": prep.run["token_signature"]})
    if len({m.pop("token_signature") for m in members}) > 1:
        raise MeasurementError("the ranks tokenized the corpus differently (their token signatures differ); "
                               "every rank needs the same model files, tokenizer and corpus")
    if ranks.main:
        session = _open_session(opts, prep, session, device, members, group.backend)
    else:
        progress = Progress()  # rank 0 reports for the launch
    run = prep.run
    evaluator = None
    try:
        kernel = f" {opts.backend}" if opts.path == "kernel" else ""
        progress.message(f"loading {run['model']['label']} ({opts.path} path{kernel}, {device}, "
                         f"{ranks.world} rank(s))")
        evaluator = _evaluator(opts, prep, conditions, session, device)
        if opts.path == "kernel":  # which kernel produced the numbers: backend, versions, patch or configuration
            run["kernel"] = {"backend": opts.backend, "workers": evaluator.info}
        if opts.device_map:  # where accelerate put each module (transformers names none when all is on one device)
            placement = getattr(evaluator.model, "hf_device_map", None) or {"": evaluator.model.device}
            run["device_map"] = {k: str(v) for k, v in placement.items()}
        if ranks.main and "gate" not in run:
            progress.message("wiring check on block 0")
            gate = evaluator.gate(prep.blocks[0])
            gate["tolerance_nats"] = GATE_TOLERANCE_NATS
            gate["passed"] = abs(gate["difference"]) <= GATE_TOLERANCE_NATS
            run["gate"] = gate
        run["gate"] = group.broadcast(run.get("gate"))
        if ranks.main:
            session.write_json("run.json", run)
        if not run["gate"]["passed"]:
            g = run["gate"]
            native = g.get("native_loss", g.get("native_sdpa_loss"))  # older sessions: the SDPA reference
            raise MeasurementError(
                f"wiring check failed: the baseline NLL through softbench's attention and head "
                f"({g['softbench_baseline_nll']:.5f}) differs from the model's own loss with its own attention "
                f"({native:.5f}) by more than {GATE_TOLERANCE_NATS} nats")
        from softbench.fidelity.summary import complete_blocks, latest_rows

        names = [c.name for c in conditions]
        n = int(prep.blocks.shape[0])
        todo = None
        if ranks.main:
            done = set(complete_blocks(latest_rows(session.read_records(ROWS_FILE)), names))
            todo = [i for i in range(n) if i not in done]
        todo = group.broadcast(todo)
        progress.start(n, n - len(todo), f"{run['model']['label']}: {len(names) - 1} condition(s)")
        evaluated = 0
        for rnd in distributed.rounds(todo, ranks.world):
            rows = []
            if ranks.rank < len(rnd):
                fault_check(ranks, evaluated)
                i = rnd[ranks.rank]
                rows = [{**r, "rank": ranks.rank} for r in evaluator.evaluate(i, prep.blocks[i])]
                evaluated += 1
            if ranks.main:  # rank 0's block is kept even if a peer dies before the gather
                for r in rows:
                    session.append(ROWS_FILE, r)
            gathered = group.gather(rows)
            if not ranks.main:
                continue
            for other in gathered[1:]:
                for r in other:
                    session.append(ROWS_FILE, r)
            _write_tables(session, opts, run, False, "running", device)
            for block_rows in gathered:
                if block_rows:
                    progress.block(block_rows[0]["block"], block_rows)
        if not ranks.main:
            return None
        _write_tables(session, opts, run, True, None, device)
        session.set_status(complete=True, state="complete")
        return session
    except KeyboardInterrupt as e:
        if session is not None:
            _keep_partial(session, opts, run, device, "interrupted", "interrupted; resume with --resume")
            e.session_path = str(session.path)  # the command prints it with the --resume line
        raise
    except Exception as e:
        if session is not None:
            reason = f"{type(e).__name__}: {e}"
            _keep_partial(session, opts, run, device, reason, reason)
        raise
    finally:
        if evaluator is not None:
            evaluator.close()
