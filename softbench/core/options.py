"""Click option groups shared by several commands (shape options, protocol options)."""

from __future__ import annotations

import functools

import click

from softbench.core.shapes import DTYPES, Shape, parse_seq


def shape_options(default_seq: str = "8192"):
    def deco(fn):
        @click.option("--dtype", type=click.Choice(DTYPES), default="bf16", show_default=True)
        @click.option("--seq", "seqs", multiple=True, default=[default_seq], show_default=True,
                      help="sequence length(s), e.g. --seq 4K --seq 8192; one session per length")
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


def check_triton_config(triton_config: dict, backend: str) -> None:
    """--triton-config names a configuration of --backend triton's kernels: refused with any other backend."""
    if triton_config and backend != "triton":
        raise click.BadParameter("--triton-config applies to --backend triton only", param_hint="--triton-config")


def parse_triton_config(label: str) -> dict:
    """A configuration label (m128n64w8s4-vk-tma-r128 for the Triton kernel, gluon-n128s2-c240l24-hg8 for the Gluon
    one) as TritonBackend's options: every field of that kernel's configuration and the kernel's name. Raises
    UsageError for a label neither kernel reads, ImportError without triton."""
    from dataclasses import asdict

    if label.strip().startswith("gluon"):
        from softbench.kernels.gluon_attn import GluonConfig

        return {"kernel": "gluon", **asdict(GluonConfig.from_label(label))}
    from softbench.kernels.triton_attn import KernelConfig

    return {"kernel": "triton", **asdict(KernelConfig.from_label(label))}


def triton_config_option():
    """--triton-config LABEL: run softbench's Triton backend with a named kernel configuration instead of the
    default's (labels as sessions record them). Parsed by parse_triton_config into TritonBackend's overrides."""

    def parse(ctx, param, value):
        if value is None:
            return {}
        from softbench.core.errors import UsageError

        try:
            return parse_triton_config(value)
        except ImportError as e:
            raise click.BadParameter(f"needs the triton package ({e})") from None
        except UsageError as e:
            raise click.BadParameter(str(e)) from None

    return click.option("--triton-config", "triton_config", default=None, callback=parse, metavar="LABEL",
                        help="triton only: the kernel configuration by label (e.g. m128n64w8s4-vk-tma-r128, "
                             "gluon-n128s2-c240l24-hg8) [default: the Gluon kernel's configuration for the dtype "
                             "on sm_90, else the Triton kernel's table for the dtype and head dim]")
