"""The readback files: one kernel's probabilities read back through one-hot V blocks in its worker process
(write_readback, the `probabilities` op) and loaded in the parent with the exact exponents of their scores (load_readback)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from softbench.core.errors import MeasurementError
from softbench.core.session import file_label
from softbench.core.shapes import Shape
from softbench.gates.references import ExactScores, exact_exponents
from softbench.gates.tolerances import ACCUM_U, ACCUM_U_FP8, FP8_MMA_K, Storage, p_dtype_for


def write_readback(backend, req: dict) -> dict:
    """Worker side of the `probabilities` op: build the inputs for req["shape"] and req["seed"], read the kernel's
    probabilities back through one-hot V blocks, and save them (with q, k and the scale) to req["path"]."""
    from softbench.kernels.inputs import Inputs, make_inputs
    from softbench.kernels.sim import probabilities_via_one_hot

    shape = Shape(**req["shape"])
    seed = int(req.get("seed", 0))
    device = "cuda" if backend.device.kind == "cuda" else "cpu"
    inputs = make_inputs(shape, seed, device)
    out_dtypes: list[torch.dtype] = []

    def run(v: torch.Tensor) -> torch.Tensor:
        out = backend.build(shape, Inputs(inputs.q, inputs.k, v, inputs.descale))()
        out_dtypes.append(out.dtype)
        return out

    with torch.inference_mode():
        p = probabilities_via_one_hot(run, shape.seq, inputs.v)
        if device == "cuda":
            torch.cuda.synchronize()
    p = p.cpu()
    payload = {
        "p": p, "q": inputs.q.cpu(), "k": inputs.k.cpu(), "descale": list(inputs.descale),
        "softmax_scale": 1.0 / math.sqrt(shape.head_dim),  # FA4's default, and the simulation's
        "out_dtype": str(out_dtypes[0]).replace("torch.", ""), "shape": shape.to_dict(), "seed": seed,
    }
    path = Path(req["path"])
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)  # a reader never sees a half-written file
    return {"path": str(path), "forwards": len(out_dtypes), "non_finite": int((~torch.isfinite(p)).sum()),
            "out_dtype": payload["out_dtype"], "shape": shape.to_dict()}


@dataclass(frozen=True)
class Readback:
    """One kernel's probabilities with the scores' exact exponents. Layout (b, h, s_q, s_k)."""

    p: torch.Tensor  # float64 readback
    x: torch.Tensor  # float64 base-2 exponent from the exact scores, relative to the row maximum (-inf masked)
    valid: torch.Tensor  # bool: not masked
    eta: torch.Tensor  # float64 bound on |x_kernel - x| (the kernel's FP32 arithmetic)
    storage: Storage
    q: torch.Tensor
    k: torch.Tensor
    scaled_max: torch.Tensor | None = None  # float64 (b, h, s_q, 1): the exact row maximum times scale_log2

    @property
    def exact(self) -> ExactScores:
        """The exact scores' exponents, as the references take them (scaled_max None: no h15-folded reference)."""
        return ExactScores(self.x, self.valid, self.eta, self.scaled_max)

    @property
    def argmax(self) -> torch.Tensor:
        """Index of the exact scores' row maximum, where x = 0 and Rowmax-H15 is exact."""
        return self.x.argmax(dim=-1, keepdim=True)


def readback_path(folder: Path, label: str, seq: int) -> Path:
    """Where a gates session keeps one kernel's probabilities at one length."""
    return Path(folder) / f"readback-{file_label(label)}-{seq}.pt"


def load_readback(path: Path, causal: bool) -> Readback:
    from softbench.kernels.inputs import TORCH_DTYPES

    data = torch.load(path, map_location="cpu", weights_only=False)
    shape = Shape(**data["shape"])
    in_dtype = TORCH_DTYPES[shape.dtype]
    fp8 = in_dtype in (torch.float8_e4m3fn, torch.float8_e5m2)
    storage = Storage(p_dtype_for(in_dtype), getattr(torch, data["out_dtype"]), shape.seq,
                      max_offset=8.0 if fp8 else 0.0, accum_u=ACCUM_U_FP8 if fp8 else ACCUM_U,
                      accum_chunk=FP8_MMA_K if fp8 else 1)  # FA4's and the simulation's offset for FP8
    x, valid, eta, scaled_max = exact_exponents(data["q"], data["k"], causal, data["softmax_scale"],
                                                tuple(data["descale"]), accum_u=storage.accum_u,
                                                accum_chunk=storage.accum_chunk)
    p = data["p"].double().permute(0, 2, 1, 3)
    expected = tuple(x.shape)
    if tuple(p.shape) != expected:
        raise MeasurementError(f"{path}: readback has shape {tuple(p.shape)}, the scores {expected}")
    return Readback(p=p, x=x, valid=valid, eta=eta, storage=storage, q=data["q"], k=data["k"],
                    scaled_max=scaled_max)


def same_inputs(a: Readback, b: Readback) -> bool:
    """Both processes must have drawn the same q and k (same seed, same CPU generator)."""
    return torch.equal(a.q.float(), b.q.float()) and torch.equal(a.k.float(), b.k.float())
