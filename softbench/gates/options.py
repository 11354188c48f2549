"""What one gates run measures (GatesOptions) and the settings it derives from the backend: the key tile the
single-tile gate is sized to and the rescale threshold the multi-tile gates assume."""

from __future__ import annotations

from dataclasses import dataclass, replace

from softbench.core.errors import UsageError
from softbench.core.runoptions import RunOptions
from softbench.core.session import pair_labels
from softbench.core.shapes import Shape
from softbench.kernels.capability import SM100_FAMILIES, arch_family


@dataclass(frozen=True)
class GatesOptions(RunOptions):
    backend: str = "sim"
    variant: str = "A1"
    baseline: str = "A0"
    dtype: str = "bf16"
    causal: bool = True
    batch: int = 1
    heads: int = 4
    kv_heads: int | None = None
    head_dim: int = 128
    single_seq: int | None = None  # None: one whole key tile of the kernel (resolve_options)
    multi_seq: int = 512
    seed: int = 0

    def shape(self, seq: int) -> Shape:
        return Shape(dtype=self.dtype, seq=seq, causal=self.causal, batch=self.batch, heads=self.heads,
                     kv_heads=self.kv_heads, head_dim=self.head_dim)

    def labels(self) -> tuple[str, str]:
        return pair_labels(self.baseline, self.variant)

    def tag(self) -> str:
        return f"{self.shape(self.multi_seq).tag()}-{self.backend}-{self.variant}-vs-{self.baseline}"


def key_tile(backend: str, dtype: str, head_dim: int, backend_options: dict) -> int:
    """Keys per tile of the kernel (dtype as softbench names it: bf16, fp16, fp8). The single-tile gate must stay
    inside one tile: Rowmax-H15 weights depend on where the running maximum is re-anchored, which a second tile
    moves. The simulation's tile is an option. softbench's Triton forward uses its configuration's BLOCK_N, the
    table's for the dtype and head dim or the one the backend options override (resolve_config, which its
    build() uses too; 64 at BF16/FP16 d128). FA4 on sm_90 uses 128 keys per tile up to head dim 128 and fewer
    above (its _tile_size_fwd_sm90 table: 64 to 128); sm_100 uses 128 at head dims <= 128."""
    if backend == "sim":
        return int(backend_options.get("tile", 128))
    if backend == "triton":
        from softbench.kernels.inputs import TORCH_DTYPES
        from softbench.kernels.triton_backend import resolve_config  # imports triton: only when asked

        return resolve_config(TORCH_DTYPES[dtype], head_dim, backend_options).block_n
    return 128 if head_dim <= 128 else 64


def rescale_threshold(backend: str, arch: int | None, dtype: str, backend_options: dict) -> float:
    """FA4 skips the online rescale while the maximum grows by less than tau: 0 on sm_90 (always rescales), 8.0 on
    sm_100 at 16-bit, 0 at FP8. The simulation takes tau as an option."""
    if backend == "sim":
        return float(backend_options.get("rescale_threshold", 0.0))
    if arch_family(arch) in SM100_FAMILIES and dtype != "fp8":
        return 8.0
    return 0.0


def resolve_options(opts: GatesOptions) -> GatesOptions:
    """opts with the single-tile length filled in (None: one whole key tile of the kernel, the most keys the gate
    can check), checked. Done before protocol.yaml is written, so that a session records the length that ran."""
    tile = key_tile(opts.backend, opts.dtype, opts.head_dim, opts.backend_options)
    if opts.single_seq is None:
        opts = replace(opts, single_seq=tile)
    check_options(opts, tile)
    return opts


def check_options(opts: GatesOptions, tile: int) -> None:
    """Refuse lengths that do not fit the gates' premises: the single-tile gate at most one key tile of `tile`
    keys, the multi-tile gates more than one."""
    if opts.single_seq > tile:
        raise UsageError(f"the single-tile gate needs at most {tile} keys (one key tile of {opts.backend} at "
                         f"{opts.dtype} head dim {opts.head_dim}), not {opts.single_seq}",
                         hint=f"use a single-tile length <= {tile}, or leave it out for one whole tile")
    if opts.multi_seq <= tile:
        raise UsageError(f"the multi-tile gate needs more than one key tile ({tile} keys), not {opts.multi_seq}")
    for seq in (opts.single_seq, opts.multi_seq):
        opts.shape(seq)  # raises UsageError for a bad shape
