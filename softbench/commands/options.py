"""Click option groups shared by several commands (shape options, protocol options)."""

from __future__ import annotations

import functools

import click

from softbench.shapes import DTYPES, Shape, parse_seq


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
    return tuple(Shape(dtype=dtype, seq=parse_seq(s), causal=causal, batch=batch, heads=heads,
                       kv_heads=kv_heads, head_dim=head_dim) for s in seqs)
