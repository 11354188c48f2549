"""Compile softbench's Triton forward for a GPU that is not here (default sm_90a, Hopper) and say what came out:
registers and local-memory (spill) bytes per thread, shared memory, the matrix instructions, and whether V
reaches shared memory through asynchronous copies (the pipelined path) or through registers.

Triton ships ptxas and cuobjdump, so this runs on a CPU-only machine; it is how the configuration table in
triton_attn was checked without a GPU. It needs the real compiler: run it in a process without TRITON_INTERPRET.

    python -m softbench.kernels.triton_compile fp8 128 A1 [--causal]"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from softbench.errors import UnsupportedError
from softbench.shapes import Shape

_PTR = {"bf16": "*bf16", "fp16": "*fp16", "fp8": "*fp8e4nv"}


def _int_arg(name: str, value: int, index: int, sig: dict, consts: dict, attrs: dict) -> None:
    """Specialise an integer argument as Triton's launcher does: 1 becomes a constant, multiples of 16 are
    marked divisible by 16 (what lets the compiler vectorise loads)."""
    if value == 1:
        sig[name] = "constexpr"
        consts[name] = 1
        return
    sig[name] = "i32"
    if value % 16 == 0:
        attrs[(index,)] = [["tt.divisibility", 16]]


def cross_compile(shape: Shape, variant: str, config, arch: int = 90) -> dict:
    """Compile the kernel for `shape` and `config` (softbench.kernels.triton_attn.KernelConfig) for sm_`arch`."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        raise UnsupportedError("cross-compiling needs Triton's compiler; unset TRITON_INTERPRET for this process")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from softbench.kernels import triton_attn as ta

    s, h, hk, d = shape.seq, shape.heads, shape.n_kv_heads, shape.head_dim
    # strides exactly as prepare_operands lays the tensors out
    if config.v_kmajor:
        v_strides = (hk * d * s, 1, d * s, s)  # (batch, seq, head, dim) of the (b, hk, d, s) copy
    else:
        v_strides = (s * hk * d, hk * d, d, 1)
    ints = dict(seq=s, heads=h, group=h // hk,
                stride_qb=s * h * d, stride_qs=h * d, stride_qh=d,
                stride_kb=s * hk * d, stride_ks=hk * d, stride_kh=d,
                stride_vb=v_strides[0], stride_vs=v_strides[1], stride_vh=v_strides[2], stride_vd=v_strides[3],
                stride_ob=s * h * d, stride_os=h * d, stride_oh=d)
    sig: dict = {}
    consts: dict = {}
    attrs: dict = {}
    for i, name in enumerate(ta._attn_fwd.arg_names):
        if name in ("Q", "K", "V"):
            sig[name] = _PTR[shape.dtype]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name == "O":
            sig[name] = "*bf16" if shape.dtype == "fp8" else _PTR[shape.dtype]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name in ("qk_scale", "v_scale"):
            sig[name] = "fp32"
        elif name in ints:
            _int_arg(name, ints[name], i, sig, consts, attrs)
        else:
            sig[name] = "constexpr"
    consts.update(HEAD_DIM=d, BLOCK_M=config.block_m, BLOCK_N=config.block_n, CAUSAL=shape.causal, WEIGHT=variant,
                  MAX_OFFSET=ta.FP8_MAX_OFFSET if shape.dtype == "fp8" else 0.0,
                  EVEN_M=s % config.block_m == 0, EVEN_N=s % config.block_n == 0)
    compiled = triton.compile(ASTSource(fn=ta._attn_fwd, signature=sig, constexprs=consts, attrs=attrs),
                              target=GPUTarget("cuda", arch, 32),
                              options={"num_warps": config.num_warps, "num_stages": config.num_stages})
    ptx, ttgir = compiled.asm["ptx"], compiled.asm["ttgir"]
    report = {
        "arch": f"sm_{arch}", "config": config.label(), "variant": variant, "shape": shape.tag(),
        "shared_bytes": int(compiled.metadata.shared),
        "wgmma": sorted(set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(\S+?)\s", ptx))),
        "mma": sorted(set(re.findall(r"\bmma\.sync\.aligned\.(\S+?)\s", ptx))),
        "ex2_instructions": len(re.findall(r"\bex2\.approx", ptx)),
        # V copied global -> shared asynchronously (pipelined) rather than stored from registers each tile
        "v_async_copy": bool(re.search(r"%v\w*\s*=\s*ttg\.async_copy_global_to_local", ttgir)),
        "v_through_registers": bool(re.search(r"ttg\.local_alloc %v\w* :", ttgir)),
    }
    report.update(_resource_usage(compiled.asm["cubin"]))
    return report


def _resource_usage(cubin: bytes) -> dict:
    """Registers and local memory per thread from cuobjdump (bundled with Triton); empty if it is missing."""
    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not tool.exists():
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        text = subprocess.run([str(tool), "--dump-resource-usage", str(path)], capture_output=True, text=True,
                              check=True).stdout
    found = dict(re.findall(r"(REG|LOCAL|STACK):(\d+)", text))
    return {"registers": int(found["REG"]), "local_bytes": int(found.get("LOCAL", 0)),
            "stack_bytes": int(found.get("STACK", 0))} if "REG" in found else {}


def main(argv: list[str]) -> int:
    import argparse
    import json

    from softbench.kernels.inputs import TORCH_DTYPES
    from softbench.kernels.triton_attn import KernelConfig, default_config

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dtype", choices=sorted(_PTR))
    p.add_argument("head_dim", type=int)
    p.add_argument("variant")
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--arch", type=int, default=90)
    p.add_argument("--config", help="block_m,block_n,num_warps,num_stages[,v_kmajor 0/1] (default: the table's)")
    a = p.parse_args(argv)
    shape = Shape(dtype=a.dtype, seq=a.seq, causal=a.causal, head_dim=a.head_dim)
    if a.config:
        parts = [int(x) for x in a.config.split(",")]
        config = KernelConfig(*parts[:4], v_kmajor=bool(parts[4]) if len(parts) > 4 else a.dtype == "fp8")
    else:
        config = default_config(TORCH_DTYPES[a.dtype], a.head_dim)
    print(json.dumps(cross_compile(shape, a.variant, config, a.arch), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
