"""Fixed-seed attention inputs, drawn on the CPU generator so that every machine gets the same values."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from softbench.core.shapes import Shape

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.float8_e4m3fn}


@dataclass
class Inputs:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    descale: tuple[float, float, float] = (1.0, 1.0, 1.0)


def make_inputs(shape: Shape, seed: int, device: str | torch.device) -> Inputs:
    g = torch.Generator().manual_seed(seed)
    dt = TORCH_DTYPES[shape.dtype]

    def draw(heads: int) -> torch.Tensor:
        x = torch.randn(shape.batch, shape.seq, heads, shape.head_dim, generator=g, dtype=torch.float32)
        return x.to(dt).to(device)  # standard normal values fit E4M3 (max 448) without a scale

    q = draw(shape.heads)
    k = draw(shape.n_kv_heads)
    v = draw(shape.n_kv_heads)
    return Inputs(q, k, v)
