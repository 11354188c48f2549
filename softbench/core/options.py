"""What several commands share on the command line: click option groups (shape options, protocol options), types
and callbacks for values, and the group class of commands with subcommands."""

from __future__ import annotations

import functools
import math

import click

from softbench.core.numbers import finite
from softbench.core.protocol import MAX_REPEATS, MAX_SECONDS, MAX_SEED, MAX_WINDOW_CALLS
from softbench.core.shapes import DTYPES, Shape, parse_seq


def shape_options(default_seq: str = "8192", dtype_help: str | None = None, seq_help: str | None = None):
    """The shape's options. `dtype_help` replaces the shown bf16 default, for a command whose default depends on
    the GPU."""
    def deco(fn):
        @click.option("--dtype", type=click.Choice(DTYPES), default="bf16", show_default=dtype_help is None,
                      help=dtype_help)
        @click.option("--seq", "seqs", multiple=True, default=[default_seq], show_default=True,
                      help=seq_help or "sequence length(s), e.g. --seq 4K --seq 8192; one session per length")
        @click.option("--causal/--no-causal", default=True, show_default=True)
        @click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True)
        @click.option("--heads", type=click.IntRange(min=1), default=16, show_default=True)
        @click.option("--kv-heads", type=click.IntRange(min=1), default=None, help="default: same as --heads")
        @click.option("--head-dim", type=click.IntRange(min=8), default=128, show_default=True)
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)

        return wrapper

    return deco


def shapes_from(dtype, seqs, causal, batch, heads, kv_heads, head_dim) -> tuple[Shape, ...]:
    """One shape per --seq; a length given twice (8K and 8192 too) is refused rather than run twice unasked."""
    from softbench.core.errors import UsageError

    seen: dict[int, str] = {}
    for text in seqs:
        n = parse_seq(text)
        if n in seen:
            raise UsageError(f"--seq {seen[n]} and --seq {text} are the same length ({n}); each length runs once",
                             hint="give each sequence length once")
        seen[n] = text
    return tuple(Shape(dtype=dtype, seq=n, causal=causal, batch=batch, heads=heads, kv_heads=kv_heads,
                       head_dim=head_dim) for n in seen)


def check_triton_config(triton_config: dict, backend: str, flag: str = "--triton-config") -> None:
    """--triton-config (or --variant-config) names a configuration of --backend triton's kernels: refused with any
    other backend."""
    if triton_config and backend != "triton":
        raise click.BadParameter(f"{flag} applies to --backend triton only", param_hint=flag)


def parse_triton_config(label: str) -> dict:
    """A configuration label (m128n64w8s4-vk-tma-r128 for the Triton kernel, gluon-n128s2-c240l24-hg8 for the Gluon
    one) as TritonBackend's options: every field of that kernel's configuration and the kernel's name. Raises
    UsageError for a label neither kernel reads, ImportError without triton."""
    from dataclasses import asdict

    if label.strip().startswith("gluon"):
        from softbench.kernels.gluon_config import GluonConfig

        return {"kernel": "gluon", **asdict(GluonConfig.from_label(label))}
    from softbench.kernels.triton_attn import KernelConfig

    return {"kernel": "triton", **asdict(KernelConfig.from_label(label))}


def backend_option(help: str | None = None, only: tuple[str, ...] | None = None):
    """--backend, its choices the names of the backends registry (softbench.kernels.backends.BACKENDS), or those
    of them in `only` for a command that runs fewer; fa4 is the default."""
    from softbench.kernels.backends import BACKENDS

    names = [n for n in BACKENDS if only is None or n in only]
    return click.option("--backend", type=click.Choice(names), default="fa4", show_default=True, help=help)


BACKEND_HELP = ("fa4: FlashAttention-4 on a CUDA GPU; sim: the pure-torch simulation (any machine); "
                "triton: softbench's own Triton forward (BF16/FP16 and FP8 on Hopper)")


def _parse_config_label(ctx, param, value):
    """A click callback: a configuration label as parse_triton_config's options, {} when the option is not given."""
    if value is None:
        return {}
    from softbench.core.errors import UsageError

    try:
        return parse_triton_config(value)
    except ImportError as e:
        raise click.BadParameter(f"needs the triton package ({e})") from None
    except UsageError as e:
        raise click.BadParameter(str(e)) from None


SEED = click.IntRange(0, MAX_SEED)  # what every consumer of a seed takes (core.protocol.MAX_SEED)


class Finite(click.FloatRange):
    """click's FloatRange, finite: click's takes nan (it fails no comparison with a bound, so no bound refuses it)
    and inf, which a protocol then refused in its own field's words rather than the option's, or ran with until
    killed. `unit` follows the range in --help and in a refusal."""

    def __init__(self, min: float | None = None, max: float | None = None, min_open: bool = False, unit: str = ""):
        super().__init__(min=min, max=max, min_open=min_open)
        self.unit = unit

    def convert(self, value, param, ctx):
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)

    def _describe_range(self) -> str:
        return f"{super()._describe_range()} {self.unit}".strip()


# a duration on the command line: more than 0 s (or 0 and more), at most core.protocol.MAX_SECONDS (a day)
SECONDS = Finite(0, MAX_SECONDS, min_open=True, unit="s")
SECONDS_OR_ZERO = Finite(0, MAX_SECONDS, unit="s")
# warm-up calls: bounded as a window's calls are (a count past it is a typo that holds the GPU for hours)
WARMUP_CALLS = click.IntRange(0, MAX_WINDOW_CALLS)


def _refuse_empty_value(value, ctx, param, example: str) -> None:
    """core.checks.refuse_empty, naming the option (or the command whose argument it is) as the user wrote it."""
    from softbench.core.checks import refuse_empty

    if isinstance(param, click.Option):
        name, hint = param.opts[0], f"give {param.opts[0]} a value, e.g. {param.opts[0]} {example}"
    else:
        name, hint = f"an argument of {ctx.command_path}", f"e.g. {ctx.command_path} {example}"
    refuse_empty(value, name, hint)


def nonempty(example: str):
    """A click callback that refuses an empty value (core.checks.refuse_empty) while the command line is read,
    before any check of the machine; `example` is a value to offer in the hint."""
    def callback(ctx, param, value):
        for v in value if isinstance(value, tuple) else (value,):
            _refuse_empty_value(v, ctx, param, example)
        return value

    return callback


class ExistingPath(click.Path):
    """click.Path(exists=True) for a path to read from, which says that an empty value is empty: click's own check
    would say that the path '' does not exist (callbacks such as nonempty's run only after that check)."""

    def __init__(self, example: str, **kwargs):
        super().__init__(exists=True, **kwargs)
        self.example = example

    def convert(self, value, param, ctx):
        _refuse_empty_value(value, ctx, param, self.example)
        return super().convert(value, param, ctx)


# processes per kernel: each holds its own inputs and CUDA context, and the process offset it measures is read from a
# few (3 on the H200); the bound keeps a typo from starting thousands of workers
MAX_PROCESSES = 16


# what a conditional-rescale threshold may be, for the option and for options read back from a session's file
TAU_RULE = "a finite number of octaves, zero or more"


def valid_tau(tau: float) -> bool:
    """A threshold the kernels read as given: NaN slips past `< 0` (every comparison with it is false) and
    negatives act as 0 while the session records the bad value; NaN and infinity are no JSON either."""
    return finite(tau) is not None and tau >= 0


class _Tau(click.ParamType):
    """A conditional-rescale threshold (TAU_RULE). click's float takes nan, inf and negatives."""

    name = "tau"

    def convert(self, value, param, ctx):
        try:
            tau = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not valid_tau(tau):
            self.fail(f"{value!r} is not {TAU_RULE}", param, ctx)
        return tau


def rescale_threshold_option(help: str = "sim only: FA4's conditional-rescale threshold tau (8.0 mimics sm_100 at "
                                         "16-bit)"):
    return click.option("--rescale-threshold", type=_Tau(), default=0.0, show_default=True, help=help)


def triton_config_option():
    """--triton-config LABEL: run softbench's Triton backend with a named kernel configuration instead of the
    default's (labels as sessions record them). Parsed by parse_triton_config into TritonBackend's overrides."""
    return click.option("--triton-config", "triton_config", default=None, callback=_parse_config_label,
                        metavar="LABEL",
                        help="triton only: the kernel configuration by label (e.g. m128n64w8s4-vk-tma-r128, "
                             "gluon-n128s2-c240l24-hg8) [default: the Gluon kernel's configuration for the dtype "
                             "on sm_90, else the Triton kernel's table for the dtype and head dim]")


def variant_config_option():
    """--variant-config LABEL (latency): the variant's kernels in a configuration of their own, while the baseline
    and its null keep --triton-config's (or the default): each kernel at its best configuration in one run, so
    that the fastest form of a variant is timed against the fastest exact kernels at the same clock."""
    return click.option("--variant-config", "variant_config", default=None, callback=_parse_config_label,
                        metavar="LABEL",
                        help="triton only: the variant's kernel configuration when it differs from the "
                             "baseline's (e.g. the variant's fastest configuration against the baseline's "
                             "fastest); the baseline and the A/A null keep --triton-config's [default: the "
                             "baseline's]")


# --- latency protocols on the command line (latency, sweep variants) ------------------------------------------

# option name -> (protocol field, the protocols that have it)
PROTOCOL_FLAGS = {
    "rounds": ("rounds", ("interleaved", "paper")),
    "windows": ("windows", ("paper",)),
    "calls": ("calls", ("interleaved", "sustained", "paper")),
    "warmup": ("warmup", ("paper",)),
    "order": ("order", ("paper",)),
    "seed": ("seed", ("interleaved", "sustained", "paper")),
    "window_ms": ("window_ms", ("interleaved",)),
    "target_pp": ("target_pp", ("interleaved",)),
    "budget_s": ("budget_s", ("interleaved",)),
    "cycles": ("cycles", ("sustained",)),
    "measure_s": ("measure_s", ("sustained",)),
}


def protocol_options(fn):
    """The protocol and its knobs. Each knob belongs to the protocols that have it; giving one to another
    protocol is refused by `apply_protocol_flags` rather than silently ignored."""
    opts = [
        click.option("--protocol", "protocol_name", default="interleaved", show_default=True, metavar="NAME|FILE",
                     callback=nonempty("sustained"),
                     help="interleaved (the speed-up at equal clock: windows of every kernel alternated ABBA), "
                          "sustained (each kernel in settled blocks: the speed-up under the board's power cap), "
                          "paper (the paper's rounds, B.3: both effects mixed), or a YAML protocol file"),
        click.option("--rounds", type=click.IntRange(1, MAX_REPEATS), default=None,
                     help="interleaved: repetitions of the whole measurement, each with its own stopping rule "
                          "[default: 1]; paper: rounds [default: 3]"),
        click.option("--calls", type=click.IntRange(1, MAX_WINDOW_CALLS), default=None,
                     help="calls per window [default: interleaved: as many as fill --window-ms; others: 100]"),
        click.option("--window-ms", type=Finite(0, min_open=True, unit="ms"), default=None,
                     help="interleaved: the length of a window in milliseconds of the baseline's calls, when "
                          "--calls is not given [default: 8]"),
        click.option("--target-pp", type=Finite(0, min_open=True), default=None,
                     help="interleaved: stop when every 95% interval is within +-this many points [default: 0.25]"),
        click.option("--budget-s", type=SECONDS, default=None,
                     help="interleaved: seconds of measuring per round at most [default: 30]"),
        click.option("--cycles", type=click.IntRange(2, MAX_REPEATS), default=None,
                     help="sustained: blocks per kernel, in ABBA order [default: 4]"),
        click.option("--measure-s", type=SECONDS, default=None,
                     help="sustained: measured seconds per block, after settling [default: 4]"),
        click.option("--windows", type=click.IntRange(1, MAX_REPEATS), default=None,
                     help="paper: windows per kernel per round [default: 7]"),
        click.option("--warmup", type=WARMUP_CALLS, default=None,
                     help="paper: warm-up calls per round [default: 50]"),
        click.option("--order", type=click.Choice(["alternate", "fixed"]), default=None,
                     help="paper: [default: alternate]"),
        click.option("--seed", type=SEED, default=None, help="input seed [default: 0]"),
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn


def apply_protocol_flags(proto, flags: dict):
    """`proto` with the knobs given on the command line; a knob the protocol does not have is refused."""
    from softbench.core.errors import UsageError

    given = {k: v for k, v in flags.items() if v is not None}
    wrong = [k for k in given if proto.kind not in PROTOCOL_FLAGS[k][1]]
    if wrong:
        names = ", ".join("--" + k.replace("_", "-") for k in wrong)
        owners = sorted({p for k in wrong for p in PROTOCOL_FLAGS[k][1]})
        raise UsageError(f"{names} {'does' if len(wrong) == 1 else 'do'} not apply to the {proto.kind} protocol",
                         hint=f"{'it belongs' if len(wrong) == 1 else 'they belong'} to: {', '.join(owners)} "
                              f"(choose one with --protocol)")
    if "calls" in given and "window_ms" in given:
        raise UsageError("--calls and --window-ms both set the length of a window",
                         hint="give one: --calls N for a fixed count, --window-ms MS to size it in time")
    return proto.with_overrides(**{PROTOCOL_FLAGS[k][0]: v for k, v in given.items()})


def protocol_from_cli(ctx: click.Context):
    """(plan, protocol) of a command with `protocol_options`: the protocol named or read from a file by
    --protocol, with the knobs given on the command line (`ctx.params`) applied by `apply_protocol_flags`."""
    from softbench.core.protocol import latency_plan_from_mapping, load_yaml_mapping

    name = ctx.params["protocol_name"]
    plan = latency_plan_from_mapping(load_yaml_mapping(name), name)
    return plan, apply_protocol_flags(plan.protocol, {k: ctx.params[k] for k in PROTOCOL_FLAGS})


def references_asked(ctx: click.Context, proto) -> str:
    """--reference as given, except that the paper's rounds time none unless one was named on the command line:
    they pair exactly two kernels."""
    if proto.kind == "paper" and ctx.get_parameter_source("references") != click.core.ParameterSource.COMMANDLINE:
        return "none"
    return ctx.params["references"]


def _references(ctx, param, value: str) -> str:
    """A click callback: --reference neither empty (read as not given, it ran the default) nor auto or none
    beside kernel names (each of them stands for the whole list). The names themselves are checked against the
    machine by softbench.kernels.references.resolve_references."""
    nonempty("auto")(ctx, param, value)
    items = [v.strip().lower() for v in value.split(",")]
    alone = [v for v in items if v in ("auto", "none")]
    if alone and len(items) > 1:
        from softbench.core.errors import UsageError

        raise UsageError(f"--reference {value}: {' and '.join(alone)} stand{'s' if len(alone) == 1 else ''} alone "
                         "and cannot be combined with other kernels",
                         hint="give --reference auto or --reference none alone, or kernel names, e.g. "
                              "--reference fa3,sdpa")
    return value


def reference_option(fn):
    return click.option(
        "--reference", "references", default="auto", show_default=True, metavar="LIST", callback=_references,
        help="exact reference kernels timed in the same run, comma-separated from fa3, fa4, sdpa; 'auto' (alone): "
             "the fastest exact kernel this machine has (FlashAttention-3 on Hopper where installed); 'none' "
             "(alone)")(fn)


def null_option(fn):
    return click.option("--null/--no-null", "null", default=None,
                        help="a second process of the baseline in the run: the A/A null beside every speed-up. On "
                             "by default under the interleaved and sustained protocols (--no-null leaves it out); "
                             "the paper's rounds pair two kernels and take none")(fn)


def null_asked(ctx: click.Context, proto, baseline: str, variants: tuple[str, ...]) -> bool:
    """--null as given, else on wherever a null can run: a speed-up without the A/A null of its own run is not a
    result one can read (on the H200 the nulls of separate runs scattered by 0.25 pp, twice what one run's interval
    implies). Not under the paper's rounds, which pair exactly two kernels, nor in an A/A run, which is the null."""
    if ctx.params.get("null") is not None:
        return ctx.params["null"]
    return proto.kind in ("interleaved", "sustained") and any(v != baseline for v in variants)


def processes_option(fn):
    return click.option(
        "--processes", type=click.IntRange(1, MAX_PROCESSES), default=1, show_default=True,
        help="processes per kernel (interleaved protocol): the windows rotate over them, and the headline adds the "
             "speed-up across the pairs of processes with a t interval, which holds the offset between two "
             "processes of one kernel (a few tenths of a percent on the H200) that a run's interval over window "
             "pairs cannot see")(fn)


def null_in_process_option(fn):
    return click.option(
        "--null-in-process", is_flag=True,
        help="add the baseline a second time inside its own process, on a separate allocation of the same inputs "
             "(label A0~): an A/A null that shares the process, beside --null's between two processes; which of "
             "them scatters tells an offset of the process from one of where the inputs lie")(fn)


def start_order_option(fn):
    return click.option(
        "--start-order", type=click.Choice(["listed", "shuffled"]), default="listed", show_default=True,
        help="the order in which the kernels' processes start and allocate their inputs: listed (baseline, "
             "variants, null, references) or shuffled (a fresh random order per run, recorded in env.json): "
             "whether an offset belongs to a kernel's role or to its place in that order")(fn)


def run_design_options(fn):
    """The options that shape a latency run and its comparisons, in the order --help lists them: the protocol,
    the A/A nulls, the reference kernels, the start order and the processes per kernel (latency and sweep)."""
    for option in reversed((protocol_options, null_option, reference_option, start_order_option, processes_option,
                            null_in_process_option)):
        fn = option(fn)
    return fn


def split_names(text: str | tuple[str, ...], option: str = "--variants", example: str = "A0,A1") -> tuple[str, ...]:
    """A comma-separated list of kernel names (or the names already split, as a protocol file gives them), each
    stripped; none at all, or an empty item ('A1,,noexp': a name left out, perhaps one that was meant), refused."""
    from softbench.core.errors import UsageError

    items = text if isinstance(text, tuple) else str(text).split(",")
    names = tuple(str(v).strip() for v in items if str(v).strip())
    if not names:
        raise UsageError(f"{option} names no variant", hint=f"e.g. {option} {example}")
    if len(names) != len(items):
        raise UsageError(f"{option} {','.join(map(str, items))!r} has an empty item", hint=f"e.g. {option} {example}")
    return names


def variant_names(text: str | tuple[str, ...], backend: str, option: str = "--variants",
                  example: str = "A0,A1", distinct: bool = False) -> tuple[str, ...]:
    """A comma-separated list of kernel variants (or the names already split, as a protocol file gives them), each
    one the backend builds (checked before anything starts). `distinct`: a name may come once (a list of kernels
    to measure, each into a folder of its own), unlike energy's --order, which repeats them on purpose."""
    from softbench.kernels.catalog import check as check_variant

    names = split_names(text, option, example)
    for name in names:
        check_variant(backend, name)
    if distinct:
        refuse_repeats(names, option, example)
    return names


def refuse_repeats(names: tuple[str, ...], where: str, example: str = "A0,A1") -> None:
    """The one refusal of a list of kernels to measure that names one twice: each is measured under its own name
    (a folder, a label, a column), so the second would overwrite or be confused with the first. `where`: the
    option or file that gave the list, as the user wrote it."""
    from softbench.core.errors import UsageError

    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise UsageError(f"{where} names {', '.join(repeated)} more than once", hint=f"e.g. {where} {example}"
                         if where.startswith("--") else "name each variant once")


def refuse_baseline_after_first(baseline: str, variants: tuple[str, ...]) -> None:
    """Kernels that share one run are labelled A0 (the baseline), A1 (the first variant: A0' where it is the
    baseline again, its A/A run) and then by their names: the baseline named after the first variant would take
    the baseline's label A0 a second time."""
    from softbench.core.errors import UsageError

    if baseline in variants[1:]:
        raise UsageError(f"--variants names the baseline {baseline} after another variant; in one run only the "
                         "first variant can be the baseline again (its A/A run)",
                         hint=f"list {baseline} first, or leave it out and let --null time the A/A null")


class CommandGroup(click.Group):
    """A group of commands (softbench itself, sweep, trace): given none, one sentence naming them rather than the
    whole help as an error (click raises its help text as the usage error)."""

    def parse_args(self, ctx, args):
        if not args and not ctx.resilient_parsing:
            from softbench.core.errors import UsageError
            from softbench.core.wording import listed

            raise UsageError(f"{ctx.command_path} needs a {'sub' if ctx.parent else ''}command: "
                             f"{listed(self.list_commands(ctx), 'or')}",
                             hint=f"{ctx.command_path} --help says what each does")
        return super().parse_args(ctx, args)
