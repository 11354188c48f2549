"""Attention for the fidelity runs, routed through transformers' attention interface.

One attention function, registered once under the name "softbench", serves every layer of a model loaded with
attn_implementation="softbench"; it calls whatever implementation the router currently holds, so one loaded model
runs every condition of a block in turn. transformers builds no mask for an implementation it does not know, so
the function receives attention_mask=None and applies the causal mask itself (batch 1, no padding).

Implementations take transformers' layout, q (b, h, s, d) and k/v (b, kv_h, s, d), and return (b, s, h, d):
- ExactAttention: scores in FP32, causal mask, FP32 softmax, P cast to V's dtype before P.V (paper A.2);
- RowAttention: the same with an operator from the zoo on the whole row (final row maximum), the offline path;
- SimAttention: softbench.kernels.sim.sim_attention, the tile-wise semantics of the kernel;
- FA4Attention: flash_attn.cute.flash_attn_func of the variant loaded in this process;
- TritonAttention: softbench's own forward through the Triton backend's kernel choice (the Gluon kernel on an
  sm_90 GPU, the Triton-language kernel elsewhere and under the interpreter), variant A0, A1 or h15-sat.
Queries are processed in chunks of 512 rows on the FP32 paths, which does not change any row's statistics.

The FP32 paths (exact, row) honour a model's attention-logit softcap (cap * tanh(s / cap), applied to the
scores before the weight map, as the model's own attention does before its softmax) and its sliding windows
(query i sees keys j with i - window < j <= i, transformers' convention). The tile-wise simulation and the
kernels do neither: a softcap, or a window shorter than the block, is refused there, never silently dropped; so
are an explicit attention mask and a KV cache (query and key lengths differ)."""

from __future__ import annotations

import math
from typing import Callable, Protocol

import torch

from softbench.core.errors import UnsupportedError
from softbench.fidelity.operator_zoo import LOG2_E, Operator
from softbench.kernels.sim import TileMap

IMPL_NAME = "softbench"
Q_CHUNK = 512


class Impl(Protocol):
    label: str

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor: ...


def _causal_rows(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                 weights: Callable[[torch.Tensor], torch.Tensor], q_chunk: int = Q_CHUNK,
                 softcap: float | None = None, window: int | None = None) -> torch.Tensor:
    """softmax-like attention with `weights` mapping a block of masked FP32 score rows (-inf masked) to
    unnormalized weights (0 where masked). Causal, query i sees keys 0..i (same length), or only the last
    `window` of them; `softcap` caps the scaled scores first. Returns (b, s, h, d)."""
    b, h, sq, d = q.shape
    hk = k.shape[1]
    rep = h // hk
    kf = k.float().repeat_interleave(rep, dim=1)
    vf = v.float().repeat_interleave(rep, dim=1)
    out = torch.empty((b, h, sq, vf.shape[-1]), dtype=torch.float32, device=q.device)
    for i0 in range(0, sq, q_chunk):
        i1 = min(i0 + q_chunk, sq)
        s = (q[:, :, i0:i1].float() @ kf[:, :, :i1].transpose(-1, -2)) * scale  # keys past i1 are all masked
        if softcap:
            s = torch.tanh(s / softcap) * softcap
        q_idx = torch.arange(i0, i1, device=q.device).view(-1, 1)
        k_idx = torch.arange(0, i1, device=q.device).view(1, -1)
        masked = k_idx > q_idx
        if window is not None:
            masked |= k_idx <= q_idx - window
        s = s.masked_fill(masked, -math.inf)
        w = weights(s)
        p = w / w.sum(dim=-1, keepdim=True)
        p = p.to(v.dtype).float()  # probabilities stored in the value dtype before P.V, as in a fused kernel
        out[:, :, i0:i1] = p @ vf[:, :, :i1]
    return out.transpose(1, 2).to(q.dtype)


class ExactAttention:
    label = "exact"
    honours_softcap_and_window = True

    def __call__(self, q, k, v, scale, softcap=None, window=None):
        return _causal_rows(q, k, v, scale, lambda s: torch.softmax(s, dim=-1), softcap=softcap, window=window)


class RowAttention:
    """An operator on the whole row: element operators get x = (s - final row max) * log2(e)."""

    honours_softcap_and_window = True

    def __init__(self, op: Operator):
        self.op = op
        self.label = f"row:{op.canonical}"

    def weights(self, s: torch.Tensor) -> torch.Tensor:
        if self.op.scope == "row":
            w = self.op.fn(s)
        else:
            m = s.amax(dim=-1, keepdim=True)  # every causal row has at least one valid key
            if isinstance(self.op.fn, TileMap):  # an anchored lattice: the scores and the anchor, c = log2(e)
                w = self.op.fn.weights(s, m, LOG2_E, 0.0)
            else:
                w = self.op.fn((s - m) * LOG2_E)
        return torch.where(torch.isneginf(s), torch.zeros_like(w), w)

    def __call__(self, q, k, v, scale, softcap=None, window=None):
        return _causal_rows(q, k, v, scale, self.weights, softcap=softcap, window=window)


def e4m3_stored(weight_fn: Callable[[torch.Tensor], torch.Tensor] | TileMap):
    """Weights rounded to E4M3 as the FP8 kernel stores P. Applied through the weight function, so the row sum
    sees the rounded values too (the kernel sums the FP32 weights): a documented approximation."""

    def e4m3(w: torch.Tensor) -> torch.Tensor:
        return w.to(torch.float8_e4m3fn).to(torch.float32)

    if isinstance(weight_fn, TileMap):
        return TileMap(lambda *args: e4m3(weight_fn.weights(*args)), weight_fn.rescale)
    return lambda x: e4m3(weight_fn(x))


def _kernel_operands(q, k, v, fp8: bool):
    """The model's (batch, heads, seq, dim) Q, K and V as the kernels and their simulation take them, (batch, seq,
    heads, dim), with the descale factors: at FP8 scaled into E4M3 one tensor at a time (kernels.fp8_scaling), as
    the kernel path's FP8 forward and the simulation's --fp8-operands both get them."""
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if not fp8:
        return q, k, v, (1.0, 1.0, 1.0)
    from softbench.kernels.fp8_scaling import operands

    return operands(q, k, v)


class SimAttention:
    """The semantic simulation: 128-key tiles, running max, rescale threshold tau, operator on x from the running
    max, row sum and P.V from the same weights. `max_offset` 8 gives FA4's FP8 semantics; fp8_operands also takes
    Q, K and V through E4M3 as the kernel path's FP8 forward gets them (kernels.fp8_scaling, TritonAttention)."""

    def __init__(self, op: Operator, tile: int = 128, rescale_threshold: float = 0.0, max_offset: float = 0.0,
                 fp8_storage: bool = False, fp8_operands: bool = False):
        if op.scope != "element":
            raise UnsupportedError(f"{op.name} needs the whole row; the tile-wise simulation cannot run it")
        self.op = op
        self.tile = tile
        self.rescale_threshold = rescale_threshold
        self.max_offset = max_offset
        self.weight_fn = e4m3_stored(op.fn) if fp8_storage else op.fn
        self.fp8_operands = fp8_operands
        self.label = f"sim:{op.canonical}"

    def __call__(self, q, k, v, scale):
        from softbench.kernels.sim import sim_attention

        out_dtype = q.dtype
        q, k, v, descale = _kernel_operands(q, k, v, self.fp8_operands)
        return sim_attention(q, k, v, True, self.weight_fn, softmax_scale=scale, tile=self.tile,
                             rescale_threshold=self.rescale_threshold, max_offset=self.max_offset,
                             out_dtype=out_dtype, descale=descale)


class FA4Attention:
    """flash_attn.cute of this process (stock or patched, whichever FA4Backend loaded). FA4 takes GQA natively."""

    def __init__(self, fa, variant: str):
        self.fa = fa
        self.label = f"fa4:{variant}"

    def __call__(self, q, k, v, scale):
        out, _lse = self.fa.flash_attn_func(q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous(),
                                            v.transpose(1, 2).contiguous(), causal=True, softmax_scale=scale)
        return out


class TritonAttention:
    """softbench's Triton-backend forward with one variant's weight map (A0 exact exp2, A1 Rowmax-H15, h15-sat).
    GQA is native. One kernel and configuration for the whole run, the one `softbench latency --backend triton`
    times for the model's dtype and head dim (triton_backend.resolve_config: the Gluon kernel on sm_90 at head
    dims 64 and 128, the Triton-language kernel's table elsewhere and at head dim 256, Gemma-3's, on every
    machine); configure(), called by the worker at load, puts it on record before any block. fp8: the model stays
    in BF16 and each call's Q, K and V go to E4M3, one scale per tensor (softbench.kernels.fp8_scaling), into the
    FP8 forward with their descales, as a user of FP8 attention would feed it."""

    QUANTIZATION = "per tensor and call: x / (max|x| / 448) rounded to E4M3, the scale passed as the descale"

    def __init__(self, variant: str, fp8: bool = False):
        self.variant = variant
        self.fp8 = fp8
        self.label = f"triton:{variant}" + (":fp8" if fp8 else "")
        self.config = None

    def configure(self, dtype: torch.dtype, head_dim: int):
        from softbench.kernels import triton_attn
        from softbench.kernels.capability import dims_text

        if head_dim not in triton_attn.HEAD_DIMS:
            raise UnsupportedError(f"this model's attention head dim is {head_dim}; softbench's Triton forward "
                                   f"implements head dims {dims_text(triton_attn.HEAD_DIMS)} only",
                                   hint="--backend fa4 on a GPU, or --path sim (the same semantics in PyTorch)")
        from softbench.kernels.fp8_scaling import E4M3
        from softbench.kernels.triton_backend import resolve_config

        self.config = resolve_config(E4M3 if self.fp8 else dtype, head_dim, {})
        return self.config

    def __call__(self, q, k, v, scale):
        from softbench.kernels import triton_attn
        from softbench.kernels.triton_backend import kernel_of

        if self.config is None or q.shape[-1] not in triton_attn.HEAD_DIMS:
            self.configure(q.dtype, q.shape[-1])  # not configured yet, or a refusal that names the head dim
        if kernel_of(self.config) == "gluon":
            from softbench.kernels import gluon_attn as kernel
        else:
            kernel = triton_attn
        q, k, v, descale = _kernel_operands(q, k, v, self.fp8)
        return kernel.attention(q, k, v, causal=True, variant=self.variant, config=self.config, softmax_scale=scale,
                                descale=descale)


class SdpaAttention:
    """PyTorch's own scaled_dot_product_attention (GQA expanded): the wiring check against a path softbench
    did not write."""

    label = "sdpa"

    def __call__(self, q, k, v, scale):
        rep = q.shape[1] // k.shape[1]
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1), is_causal=True, scale=scale)
        return out.transpose(1, 2)


class Router:
    """Holds the implementation that the registered function calls; switch it between forwards."""

    def __init__(self):
        self.impl: Impl | None = None
        self.calls = 0

    def use(self, impl: Impl) -> None:
        self.impl = impl

    def forward(self, module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        if self.impl is None:
            raise UnsupportedError("softbench attention was called with no implementation selected")
        sq, sk = query.shape[2], key.shape[2]
        softcap = kwargs.get("softcap") or None
        window = kwargs.get("sliding_window")
        window = window if window is not None and window < sk else None  # a window as long as the block is none
        if (softcap or window) and not getattr(self.impl, "honours_softcap_and_window", False):
            if softcap:
                raise UnsupportedError(f"this model softcaps attention logits (softcap={softcap}); {self.impl.label} "
                                       "applies the weight map to plain scores and would drop it",
                                       hint="--path row applies the softcap before the weight map")
            raise UnsupportedError(f"layer uses a sliding window of {window} keys, shorter than the {sk}-token "
                                   f"block; {self.impl.label} is full causal attention",
                                   hint=f"use --block-len {window} or less, or --path row (which honours windows)")
        if attention_mask is not None:
            raise UnsupportedError("an explicit attention mask reached softbench's attention (padding or a "
                                   "custom mask); only plain causal attention over one sequence is supported")
        if sq != sk:
            raise UnsupportedError("query and key lengths differ (a KV cache?); the fidelity run uses none")
        if dropout:
            raise UnsupportedError("attention dropout is on; evaluate the model in eval mode")
        scale = scaling if scaling is not None else query.shape[-1] ** -0.5
        self.calls += 1
        if softcap or window:
            return self.impl(query, key, value, float(scale), softcap=softcap, window=window), None
        return self.impl(query, key, value, float(scale)), None


ROUTER = Router()
_registered = False


def register() -> str:
    """Register the routed attention with transformers once per process; returns its attn_implementation name."""
    global _registered
    if not _registered:
        from transformers import AttentionInterface

        AttentionInterface.register(IMPL_NAME, ROUTER.forward)
        _registered = True
    return IMPL_NAME
