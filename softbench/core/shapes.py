"""Attention shapes: one frozen description of what a kernel is asked to compute."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from softbench.core.errors import UsageError

DTYPES = ("bf16", "fp16", "fp8")
# a shape's fields, as a protocol or sweep file names them
SHAPE_KEYS = ("dtype", "seq", "causal", "batch", "heads", "kv_heads", "head_dim")


def mask_tag(causal: bool) -> str:
    """The mask in a tag or a session folder's name: one word without a hyphen, since hyphens part a tag's fields."""
    return "causal" if causal else "noncausal"


def mask_words(causal: bool) -> str:
    """The mask as a table or a sentence names it."""
    return "causal" if causal else "non-causal"


@dataclass(frozen=True)
class Shape:
    dtype: str = "bf16"
    seq: int = 8192
    causal: bool = True
    batch: int = 1
    heads: int = 16
    kv_heads: int | None = None  # None: same as heads
    head_dim: int = 128

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise UsageError(f"dtype {self.dtype!r} is not one of {', '.join(DTYPES)}")
        if not isinstance(self.causal, bool):  # a file's causal: "maybe" would read as true
            raise UsageError(f"causal must be true or false, got {self.causal!r}")
        for name in ("seq", "batch", "heads", "head_dim"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise UsageError(f"{name} must be a positive integer, got {v!r}")
        if self.kv_heads is not None and (not isinstance(self.kv_heads, int) or isinstance(self.kv_heads, bool)):
            raise UsageError(f"kv_heads must be a positive integer, got {self.kv_heads!r}")
        kv = self.n_kv_heads
        if kv < 1 or self.heads % kv:
            raise UsageError(f"heads ({self.heads}) must be a multiple of kv-heads ({kv})")
        if self.head_dim % 8:
            raise UsageError(f"head-dim must be a multiple of 8, got {self.head_dim}")

    @property
    def n_kv_heads(self) -> int:
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def flops(self) -> float:
        """Matrix-multiply FLOPs of one forward: 2 products of 2*s*s*d per head; causal counts half the square."""
        full = 4.0 * self.batch * self.heads * self.seq * self.seq * self.head_dim
        return full / 2.0 if self.causal else full

    def tag(self) -> str:
        mask = mask_tag(self.causal)
        kv = f"kv{self.n_kv_heads}" if self.n_kv_heads != self.heads else ""
        return f"{self.dtype}-{seq_label(self.seq)}-{mask}-b{self.batch}h{self.heads}{kv}d{self.head_dim}"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["kv_heads"] = self.n_kv_heads
        return d


def seq_label(seq: int) -> str:
    return f"{seq // 1024}K" if seq % 1024 == 0 else str(seq)


def parse_seq(text: str) -> int:
    """'16384', '16K' or '16k' -> 16384."""
    t = str(text).strip()
    try:
        seq = int(t[:-1]) * 1024 if t[-1:] in ("k", "K") else int(t)
    except ValueError:
        raise UsageError(f"sequence length {text!r} is not an integer (e.g. 8192 or 8K)") from None
    if seq < 1:  # a scope of seq 0 would seal a prediction no session can match
        raise UsageError(f"sequence length {text!r} must be a positive integer (e.g. 8192 or 8K)")
    return seq


def check_shape_mapping(data, where: str) -> None:
    """A shape as a file gives it must be a mapping of SHAPE_KEYS: anything else once reached Shape(**data) and
    came back as Python's words ("argument after ** must be a mapping"). `where` names it in the refusal."""
    if not isinstance(data, dict):
        raise UsageError(f"{where} must be a mapping of the shape's fields ({', '.join(SHAPE_KEYS)}), not {data!r}")
    unknown = sorted(set(data) - set(SHAPE_KEYS))
    if unknown:
        raise UsageError(f"{where} has unknown keys {unknown} (known: {', '.join(SHAPE_KEYS)})")


def shape_from_mapping(data, where: str) -> Shape:
    """The Shape a file's mapping describes, its seq as 8192 or 8K (check_shape_mapping's refusals first); a
    refusal names `where`."""
    check_shape_mapping(data, where)
    values = dict(data)
    try:
        if "seq" in values:
            values["seq"] = parse_seq(values["seq"])
        return Shape(**values)
    except UsageError as e:
        raise UsageError(f"{where}: {e}", hint=e.hint) from None
