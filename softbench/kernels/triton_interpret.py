"""Make Triton's CPU interpreter (TRITON_INTERPRET=1) run softbench's Triton kernel faithfully.

Triton 3.6's interpreter, with NumPy 2.4, gets four things wrong that the kernel depends on:
- scalars (program ids, integer arguments) are 1-element arrays, and a loop bound becomes a Python int through
  int(array), which NumPy >= 2.4 refuses;
- tl.dot multiplies BF16 operands as their raw 16-bit storage integers;
- float down-conversions (FP32 -> BF16/FP16/E4M3) round half-up on one cut-off bit and can carry into the
  exponent wrongly; the GPU rounds to nearest even (E4M3 with saturation to +-448: cvt.rn.satfinite);
- tl.fma multiplies and adds in FP32 with two roundings; FFMA rounds once, which h15-folded's weights rely on.
`apply()` patches those four places with exact conversions done by torch (round to nearest even, as the GPU) and
softbench.operators.fma_fp32, once per process. Compiled kernels are untouched: this only changes what the
interpreter computes."""

from __future__ import annotations

import numpy as np
import torch

_applied = False
E4M3_MAX = 448.0


def _dtype_maps():
    import triton.language as tl

    to_torch = {tl.float32: torch.float32, tl.float16: torch.float16, tl.bfloat16: torch.bfloat16,
                tl.float8e4nv: torch.float8_e4m3fn, tl.float8e5: torch.float8_e5m2}
    # how the interpreter stores each type in NumPy (BF16 and FP8 as unsigned integers of the same width)
    storage = {torch.float32: (torch.float32, np.float32), torch.float16: (torch.float16, np.float16),
               torch.bfloat16: (torch.uint16, np.uint16), torch.float8_e4m3fn: (torch.uint8, np.uint8),
               torch.float8_e5m2: (torch.uint8, np.uint8)}
    return to_torch, storage


def _to_torch(data: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    _, storage = _dtype_maps()
    _, np_type = storage[dtype]
    arr = np.ascontiguousarray(data).view(np_type)
    return torch.from_numpy(arr.copy()).view(dtype)


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    _, storage = _dtype_maps()
    as_int, np_type = storage[t.dtype]
    return t.contiguous().view(as_int).numpy().view(np_type)


def convert_exact(data: np.ndarray, src: torch.dtype, dst: torch.dtype) -> np.ndarray:
    """Float-to-float conversion as the GPU does it: round to nearest even; E4M3 saturates to +-448."""
    t = _to_torch(data, src)
    if dst == torch.float8_e4m3fn:
        t = t.float().clamp(-E4M3_MAX, E4M3_MAX)  # NaN stays NaN
    return _to_numpy(t.to(dst))


def apply() -> None:
    global _applied
    if _applied:
        return
    import triton.language as tl
    from triton.runtime import interpreter

    from softbench.operators import fma_fp32

    to_torch, _ = _dtype_maps()
    builder = interpreter.InterpreterBuilder
    patch_tensor = interpreter._patch_lang_tensor
    dot, fma = builder.create_dot, builder.create_fma
    trunc, ext, fp_to_fp = builder.create_fp_trunc, builder.create_fp_ext, builder.create_fp_to_fp
    Handle = interpreter.TensorHandle

    def patched_patch_tensor(tensor, scope):
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    def widen_bf16(h):
        if to_torch.get(h.dtype.scalar) is torch.bfloat16:
            return Handle(convert_exact(h.data, torch.bfloat16, torch.float32), tl.float32)
        return h

    def patched_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return dot(self, widen_bf16(a), widen_bf16(b), d, input_precision, max_num_imprecise_acc)

    def exact(fallback):
        def convert(self, src, dst_type, *rest):
            s, t = to_torch.get(src.dtype.scalar), to_torch.get(dst_type.scalar)
            if s is None or t is None:
                return fallback(self, src, dst_type, *rest)
            return Handle(convert_exact(src.data, s, t), dst_type.scalar)

        return convert

    def fused_fma(self, x, y, z):
        if not (x.dtype.scalar == y.dtype.scalar == z.dtype.scalar == tl.float32):
            return fma(self, x, y, z)
        a, b, c = (torch.tensor(np.asarray(h.data, dtype=np.float32)) for h in (x, y, z))
        return Handle(fma_fp32(a, b, c).numpy(), z.dtype.scalar)

    interpreter._patch_lang_tensor = patched_patch_tensor
    builder.create_fma = fused_fma
    builder.create_dot = patched_dot
    builder.create_fp_trunc = exact(trunc)
    builder.create_fp_ext = exact(ext)
    builder.create_fp_to_fp = exact(fp_to_fp)
    _applied = True
