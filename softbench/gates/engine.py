"""Correctness gates of a patched kernel (paper B.2): its probabilities read back through one-hot value matrices
and checked against the Rowmax-H15 envelope (paper B.1), the row sums and the row maximum.

Readback. With V = columns j0..j0+d of the identity (V[:, j0 + c, :, c] = 1) the output is O[..., c] = P[..., j0 + c],
so seq_k / head_dim forwards of the unchanged kernel expose its whole probability matrix. Each kernel runs in its own
worker process (`probabilities` op, `write_readback`), which saves P (float32, (b, s_q, h, s_k)) with the q and k it
came from; the parent computes every reference and gate from those files (pure functions below).

Gates (all in the parent):
  readback          stock kernel at one tile vs exact softmax from FP64 scores: checks the readback itself.
  single_tile       patched kernel at one tile vs a Rowmax-H15 reference built from FP64 scores (L1 per row).
  normalized_ratio  multi-tile log2(P1/P0) within +-(b - a), the envelope width.
  recovered_error   log2(P1/P0) minus the shift read at the row maximum, within the envelope [a, b].
  row_sums          sum_j P1 within storage rounding of 1.
  row_max_attained  the stock kernel's row-maximum entry holds the patched row maximum.
  masked            (causal) masked entries carry at most the operator's floor weight.

Why the recovered error is well defined (tile-wise running max). The kernel computes the weights of each key tile
against the running row maximum m_t that already includes that tile, so x <= 0 when the weight is made; weights of
earlier tiles are later multiplied by the exact rescale factor 2^((m_t - m_final) scale_log2). With y_j the exponent
relative to the final maximum, a key quantized against m_t ends with weight H(x_j) 2^(y_j - x_j) = 2^(y_j + eps(x_j)),
eps = log2 H(x) - x in [a, b] whatever m_t was: the rescale preserves each element's error. The final maximum's own
tile computes x = 0 for it, where H is exact, so its weight is exactly 2^0 and log2(P1/P0) at the row maximum is the
pure normalization shift -log2 sum_k p_k 2^eps_k; subtracting it recovers eps_j. This needs the rescale to happen
whenever the maximum grows (tau = 0: FA4 on sm_90 always rescales; sm_100 does at FP8). Under FA4's deferred rescale
(tau > 0, sm_100 at 16-bit) the running maximum may lag, x can be positive, the row maximum's own weight H(x) is no
longer exact, and the recovered error and the row-maximum gate have no fixed bound: they are reported as not
applicable. The normalized ratio holds for any tau, since every eps_j stays in [a, b].

Storage rounding. The readbacks pass through the kernel's storage dtypes: the stock P is rounded to the P dtype
before P.V (relative error <= u_p, the dtype's unit roundoff), and every output to the output dtype (<= u_out).
Rowmax-H15 weights {1, 1.5} x 2^k are exact in the P dtype, so the patched P carries only the output rounding
(E4M3 excepted below 2^-6, where its subnormals round the smallest weights: the reference rounds them the same
way). FP8 scores come from tensor cores that keep about 14 bits while summing (ACCUM_U_FP8 per wgmma), which widens eta.
Each tolerance below is the sum, in octaves, of the roundings the compared values went through, plus a small FP32
allowance for the kernel's own normalization; gates.json lists the parts."""

from __future__ import annotations

import concurrent.futures
import math
import os
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import torch

from softbench import operators
from softbench.core.errors import MeasurementError, SoftbenchError, UsageError
from softbench.core.tables import md_heading, md_table
from softbench.core.shapes import Shape

ENVELOPE = operators.half_octave_error_bounds()  # (a, b) = (-1/4, log2(1.5) - 1/4), paper B.1
ENVELOPE_WIDTH = ENVELOPE[1] - ENVELOPE[0]  # log2(1.5): the normalized ratio's bound, [a - b, b - a]
FP32_U = 2.0 ** -24  # unit roundoff of FP32 (round to nearest)
# Tensor-core FP32 accumulation is not promised to round to nearest; allow truncation (one ulp per addition).
ACCUM_U = 2.0 ** -23
# FP8 products on Hopper's tensor cores are summed keeping only about 14 significant bits, not FP32's 24 (DeepSeek-V3
# technical report, section 3.3.2, measured on H800; the reason it promotes partial sums to FP32 every 128 terms).
# Model: each FP8 wgmma adds the sum of its K = 32 products to the accumulator with a truncation of 2^-13 relative,
# so a score over d products carries ceil(d / 32) such errors (FP32: d errors of ACCUM_U). On the H200 the Triton
# FP8 kernel's Rowmax-H15 lattice choices that differ from exact FP64 scores all lie within 1.2e-4 * sum|q_i k_i|
# of a rounding boundary (sessions 20261130T1458*), under this model's 4 * 2^-13 = 4.9e-4 and far above FP32's.
ACCUM_U_FP8 = 2.0 ** -13
FP8_MMA_K = 32  # products per Hopper FP8 wgmma instruction (k dimension)
READBACK_FILE = "readbacks.jsonl"
GATES_FILE = "gates.json"


class GatesFailed(SoftbenchError):
    """At least one correctness gate failed. The session is complete; the kernel is what failed."""

    exit_code = 1


# ---------------------------------------------------------------------------------------------------------------
# Storage model and tolerances
# ---------------------------------------------------------------------------------------------------------------

def unit_roundoff(dtype: torch.dtype) -> float:
    """Largest relative error of rounding to nearest into `dtype` (normal range): half its machine epsilon."""
    return torch.finfo(dtype).eps / 2.0


def rounding_octaves(u: float) -> float:
    """Largest |log2(1 + delta)| over |delta| <= u; the lower side, -log2(1 - u), is the larger one."""
    return -math.log2(1.0 - u)


def fp32_slack(seq_k: int) -> float:
    """Worst-case relative error of the kernel's FP32 normalization of one row: the row sum adds seq_k terms
    (seq_k roundings), each weight is rescaled at most once per later tile (at most seq_k roundings), and the
    reciprocal, the final product and ex2.approx (within 2 ulp) add four more."""
    return (2 * seq_k + 4) * FP32_U


@dataclass(frozen=True)
class Storage:
    """The dtypes a readback passed through: P before P.V, and the output."""

    p_dtype: torch.dtype
    out_dtype: torch.dtype
    seq_k: int
    max_offset: float = 0.0  # the kernel stores P * 2^max_offset (FP8: FA4 spends the E4M3 range on the tail)
    accum_u: float = ACCUM_U  # relative error per accumulation step of the tensor cores' scores
    accum_chunk: int = 1  # products per accumulation step (FP8 wgmma: 32)

    def stored(self, w: torch.Tensor) -> torch.Tensor:
        """Unnormalized weights as P holds them: w * 2^max_offset rounded to the P dtype, scaled back. Rowmax-H15
        weights are exact there in the normal range; E4M3's subnormals (below 2^-6) round the smallest ones."""
        if self.p_dtype not in (torch.float8_e4m3fn, torch.float8_e5m2):
            return w
        scale = 2.0 ** self.max_offset
        return (w * scale).to(self.p_dtype).double() / scale

    @property
    def u_p(self) -> float:
        return unit_roundoff(self.p_dtype)

    @property
    def u_out(self) -> float:
        return unit_roundoff(self.out_dtype)

    @property
    def slack(self) -> float:
        return fp32_slack(self.seq_k)

    @property
    def slack_octaves(self) -> float:
        return rounding_octaves(self.slack)

    def to_dict(self) -> dict:
        name = lambda dt: str(dt).replace("torch.", "")  # noqa: E731
        return {"p_dtype": name(self.p_dtype), "out_dtype": name(self.out_dtype), "u_p": self.u_p,
                "u_out": self.u_out, "fp32_slack": self.slack, "max_offset": self.max_offset,
                "accum_u": self.accum_u, "accum_chunk": self.accum_chunk}


def p_dtype_for(dtype: torch.dtype) -> torch.dtype:
    """The P operand of P.V has V's dtype in FA4 and in the simulation; FP32 inputs keep P in FP32."""
    return dtype if dtype in (torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2) else torch.float32


# ---------------------------------------------------------------------------------------------------------------
# Readback (runs in the worker process)
# ---------------------------------------------------------------------------------------------------------------

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
        p = probabilities_via_one_hot(run, shape.seq, inputs.v, shape.head_dim)
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


# ---------------------------------------------------------------------------------------------------------------
# References from the inputs (parent)
# ---------------------------------------------------------------------------------------------------------------

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

    @property
    def argmax(self) -> torch.Tensor:
        """Index of the exact scores' row maximum, where x = 0 and Rowmax-H15 is exact."""
        return self.x.argmax(dim=-1, keepdim=True)


def causal_valid(sq: int, sk: int) -> torch.Tensor:
    """(sq, sk) True where key j is visible to query i (bottom-right aligned, as FA4)."""
    q_idx = torch.arange(sq).view(-1, 1) + (sk - sq)
    return torch.arange(sk).view(1, -1) <= q_idx


def exact_exponents(q: torch.Tensor, k: torch.Tensor, causal: bool, softmax_scale: float,
                    descale=(1.0, 1.0, 1.0), accum_u: float = ACCUM_U, accum_chunk: int = 1
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x = (S - rowmax S) * scale_log2 in FP64 from the stored inputs (products of BF16/FP16/FP8 values are exact
    in FP64 and their sums far more precise than the kernel's FP32), the validity mask, and eta: a worst-case
    bound on how far the kernel's FP32 x can be from it.

    eta: the kernel's scores carry <= ceil(d / accum_chunk) * accum_u * sum_i |q_i k_i| (one rounding per
    accumulation step: every product in FP32, accum_chunk = 1; every FP8 wgmma, accum_chunk = 32), its row
    maximum carries the largest such error of the row, and forming x = S*scale_log2 - m*scale_log2 in FP32 rounds
    the product, the scaled maximum and the difference (each <= 2 FP32_U relative, counted on |S| and |m|)."""
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    qf = q.double().transpose(1, 2) * descale[0]
    kf = k.double().transpose(1, 2).repeat_interleave(h // hk, dim=1) * descale[1]
    s = qf @ kf.transpose(-1, -2)
    abs_dot = qf.abs() @ kf.abs().transpose(-1, -2)
    valid = causal_valid(sq, sk).expand(b, h, sq, sk) if causal else torch.ones(b, h, sq, sk, dtype=torch.bool)
    s = s.masked_fill(~valid, -math.inf)
    m = s.amax(dim=-1, keepdim=True)
    scale_log2 = softmax_scale * math.log2(math.e)
    x = (s - m) * scale_log2
    err_s = (math.ceil(d / accum_chunk) * accum_u) * abs_dot.masked_fill(~valid, 0.0)
    err_m = err_s.amax(dim=-1, keepdim=True)
    eta = scale_log2 * (err_s + err_m + 2 * FP32_U * (s.abs().masked_fill(~valid, 0.0) + m.abs()))
    return x, valid, eta


def readback_path(folder: Path, label: str, seq: int) -> Path:
    """Where a gates session keeps one kernel's probabilities at one length (A0' written A0b)."""
    return Path(folder) / f"readback-{label.replace(chr(39), 'b')}-{seq}.pt"


def load_readback(path: Path, causal: bool) -> Readback:
    from softbench.kernels.inputs import TORCH_DTYPES

    data = torch.load(path, map_location="cpu", weights_only=False)
    shape = Shape(**data["shape"])
    in_dtype = TORCH_DTYPES[shape.dtype]
    fp8 = in_dtype in (torch.float8_e4m3fn, torch.float8_e5m2)
    storage = Storage(p_dtype_for(in_dtype), getattr(torch, data["out_dtype"]), shape.seq,
                      max_offset=8.0 if fp8 else 0.0, accum_u=ACCUM_U_FP8 if fp8 else ACCUM_U,
                      accum_chunk=FP8_MMA_K if fp8 else 1)  # FA4's and the simulation's offset for FP8
    x, valid, eta = exact_exponents(data["q"], data["k"], causal, data["softmax_scale"], tuple(data["descale"]),
                                    accum_u=storage.accum_u, accum_chunk=storage.accum_chunk)
    p = data["p"].double().permute(0, 2, 1, 3)
    expected = tuple(x.shape)
    if tuple(p.shape) != expected:
        raise MeasurementError(f"{path}: readback has shape {tuple(p.shape)}, the scores {expected}")
    return Readback(p=p, x=x, valid=valid, eta=eta, storage=storage, q=data["q"], k=data["k"])


def same_inputs(a: Readback, b: Readback) -> bool:
    """Both processes must have drawn the same q and k (same seed, same CPU generator)."""
    return torch.equal(a.q.float(), b.q.float()) and torch.equal(a.k.float(), b.k.float())


def rowmax_h15_probabilities(x: torch.Tensor, valid: torch.Tensor, eta: torch.Tensor,
                             kernel_weights: torch.Tensor | None = None,
                             storage: "Storage | None" = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Whole-row Rowmax-H15 probabilities from exact exponents. Uses softbench.operators.rowmax_h15_reference,
    the arithmetic definition (paper Eq. 28) in FP64, not the bit construction the kernel and the simulation
    share, so that the gate does not inherit a fault of the thing it checks.

    Where the kernel's x may lie on the other side of a rounding boundary of 2x (within eta of it) both lattice
    points are legal; `kernel_weights` (the kernel's unnormalized weights, P / P[row max]) then picks the one the
    kernel chose. With `storage`, the numerators are the weights as P stores them (E4M3 rounds the smallest) while
    the row sum keeps the unrounded ones, as the kernel sums before it rounds P. Returns (probabilities, ambiguous
    mask)."""
    lo = operators.rowmax_h15_reference(x - eta).double()
    hi = operators.rowmax_h15_reference(x + eta).double()
    ambiguous = valid & (lo != hi)
    w = lo
    if kernel_weights is not None and bool(ambiguous.any()):
        with torch.no_grad():
            pick_hi = (torch.log2(kernel_weights / hi).abs() < torch.log2(kernel_weights / lo).abs())
        w = torch.where(ambiguous & pick_hi, hi, lo)
    w = torch.where(valid, w, torch.zeros_like(w))
    numerator = storage.stored(w) if storage is not None else w
    return numerator / w.sum(dim=-1, keepdim=True), ambiguous


# ---------------------------------------------------------------------------------------------------------------
# Gates (pure functions)
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Gate:
    """One correctness gate: the observed range of a quantity and the closed interval it must lie in."""

    name: str
    what: str
    observed: tuple[float, float]  # smallest and largest value over the gated elements or rows
    bound: tuple[float, float]
    unit: str = ""
    applicable: bool = True
    details: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool | None:
        if not self.applicable:
            return None
        lo, hi = self.observed
        return bool(lo >= self.bound[0] and hi <= self.bound[1])  # NaN compares False: it fails

    def to_dict(self) -> dict:
        return json_safe({"name": self.name, "what": self.what, "value": list(self.observed),
                          "bound": list(self.bound), "unit": self.unit, "applicable": self.applicable,
                          "passed": self.passed, "details": self.details})


def json_safe(v):
    """NaN (a broken kernel's readback) becomes null: JSON has no NaN, and strict readers refuse it."""
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, dict):
        return {k: json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_safe(x) for x in v]
    return v


def _range(t: torch.Tensor) -> tuple[float, float]:
    if t.numel() == 0:
        return (math.nan, math.nan)
    return (float(t.min()), float(t.max()))


def _row_l1(p: torch.Tensor, ref: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    return torch.where(valid, (p - ref).abs(), torch.zeros_like(p)).sum(dim=-1).flatten()


def readback_gate(stock: Readback) -> Gate:
    """The stock kernel against exact softmax, both at one tile: if this fails, the readback itself is broken.
    Per element the stock P went through the P rounding, the output rounding and an exponent off by at most eta
    (the normalization can move it by eta of the other elements again): L1 <= (1+u_p)(1+u_out) 2^(2 eta_max) - 1."""
    st = stock.storage
    exact = torch.softmax(stock.x * math.log(2.0), dim=-1).masked_fill(~stock.valid, 0.0)
    l1 = _row_l1(stock.p, exact, stock.valid)
    eta_max = float(stock.eta.masked_fill(~stock.valid, 0.0).max())
    bound = (1 + st.u_p) * (1 + st.u_out) * 2.0 ** (2 * eta_max) * (1 + st.slack) - 1
    return Gate("readback", "stock kernel vs exact softmax, L1 per row (one tile)", _range(l1), (0.0, bound),
                details={"mean": float(l1.mean()), "rows": l1.numel(), "elements": int(stock.valid.sum()),
                         "eta_max_octaves": eta_max, "storage": st.to_dict()})


def single_tile_gate(patched: Readback) -> Gate:
    """The patched kernel against whole-row Rowmax-H15 from the exact scores, at one tile (its running maximum
    is the row maximum). Its weights are exact in the P dtype (the reference rounds E4M3's subnormal tail as the
    kernel does), so each element carries only the output rounding:
    L1 per row <= u_out * sum_j r_j + FP32 slack = u_out + slack (masked entries excluded)."""
    st = patched.storage
    at_max = patched.p.gather(-1, patched.argmax)
    ref, ambiguous = rowmax_h15_probabilities(patched.x, patched.valid, patched.eta, patched.p / at_max, st)
    l1 = _row_l1(patched.p, ref, patched.valid)
    bound = st.u_out + st.slack
    return Gate("single_tile", "patched kernel vs Rowmax-H15 reference from exact scores, L1 per row (one tile)",
                _range(l1), (0.0, bound),
                details={"mean": float(l1.mean()), "rows": l1.numel(), "elements": int(patched.valid.sum()),
                         "ambiguous_elements": int(ambiguous.sum()), "storage": st.to_dict()})


def multi_tile_gates(stock: Readback, patched: Readback, rescale_threshold: float = 0.0) -> list[Gate]:
    """The gates that compare the patched kernel with the stock one over several key tiles (paper B.2)."""
    a, b = ENVELOPE
    st = patched.storage
    r_out, r_p = rounding_octaves(st.u_out), rounding_octaves(st.u_p)
    p0, p1, valid = stock.p, patched.p, patched.valid
    # Elements resolved in both storage formats: the stock value clear of the output dtype's subnormals and its
    # unnormalized weight clear of the P dtype's, each by the envelope width and one octave; smaller ones lose
    # their relative precision. Chosen from the stock readback only, so a patched value of 0 cannot hide.
    spare = 2.0 ** (ENVELOPE_WIDTH + 1)
    p0_max = p0.amax(dim=-1, keepdim=True)
    resolved = valid & (p0 >= torch.finfo(st.out_dtype).tiny * spare) & \
        (p0 / p0_max * 2.0 ** st.max_offset >= torch.finfo(st.p_dtype).tiny * spare)
    ratio = torch.log2(p1 / p0)
    r = ratio[resolved]
    gates: list[Gate] = []

    # normalized ratio: eps in [a, b] gives only log2(p1/p0) = eps_j - log2 sum_k p_k 2^eps_k in [a - b, b - a];
    # P1 went through one rounding, P0 through two
    tol_norm = 2 * r_out + r_p + st.slack_octaves
    gates.append(Gate(
        "normalized_ratio", "log2(P1/P0) over all resolved elements (multi-tile)", _range(r),
        (a - b - tol_norm, b - a + tol_norm), "octave",
        details={"envelope": [a - b, b - a], "tolerance": tol_norm, "elements": int(r.numel()),
                 "unresolved_elements": int((valid & ~resolved).sum()),
                 "fraction_outside_before_tolerance": float(((r < a - b) | (r > b - a)).double().mean())
                 if r.numel() else math.nan}))

    # recovered error: subtract the shift read at the exact row maximum; its two readings add two output
    # roundings. The kernel's maximum may be another element within 2 eta of the exact one: then the exact one
    # still has Rowmax-H15 weight 1, its stock weight is 2^(-2 eta) at worst and takes a P rounding.
    idx = stock.argmax
    shift = ratio.gather(-1, idx)
    eps = (ratio - shift)[resolved]
    eta_max = float(stock.eta.masked_fill(~valid, 0.0).max())
    tol_rec = tol_norm + 2 * r_out + r_p + 2 * eta_max
    deferred = rescale_threshold > 0
    why_not = (f"rescale threshold {rescale_threshold:g} > 0: the running maximum can lag, so the row maximum's "
               "weight is not exact and the shift cannot be read there" if deferred else "")
    gates.append(Gate(
        "recovered_error", "log2(P1/P0) minus the per-row shift at the row maximum (multi-tile)", _range(eps),
        (a - tol_rec, b + tol_rec), "octave", applicable=not deferred,
        details={"envelope": [a, b], "tolerance": tol_rec, "elements": int(eps.numel()),
                 "fraction_below_before_tolerance": float((eps < a).double().mean()) if eps.numel() else math.nan,
                 "fraction_above_before_tolerance": float((eps > b).double().mean()) if eps.numel() else math.nan,
                 "shift_min": float(shift.min()), "shift_max": float(shift.max()), "shift_mean": float(shift.mean()),
                 **({"not_applicable": why_not} if deferred else {})}))

    # row sums: each P1 carries the output rounding; masked entries add at most the operator's floor weight each
    floor = float(operators.rowmax_h15(torch.tensor(-math.inf)))
    n_masked = (~valid).sum(dim=-1)
    sums = p1.sum(dim=-1).flatten()
    tol_sum = st.u_out + st.slack + int(n_masked.max()) * floor
    gates.append(Gate("row_sums", "sum of P1 per row (multi-tile)", _range(sums), (1 - tol_sum, 1 + tol_sum),
                      details={"tolerance": tol_sum, "rows": sums.numel()}))

    # the stock kernel's row-maximum entry attains the patched row maximum. Two P1 readings compare (two output
    # roundings); the stock argmax is known only to within two stock readings (2 (r_p + r_out)), an element that
    # close to the maximum lies on the same lattice point
    p1_max = p1.amax(dim=-1, keepdim=True)
    at_stock_max = torch.log2(p1.gather(-1, p0.argmax(dim=-1, keepdim=True)) / p1_max).flatten()
    tol_att = 2 * r_out + 2 * (r_p + r_out) + st.slack_octaves
    ties = (valid & (p1 >= p1_max * 2.0 ** (-2 * r_out))).sum(dim=-1).flatten().tolist()
    gates.append(Gate(
        "row_max_attained", "log2(P1 at the stock row maximum / P1 row maximum) (multi-tile)", _range(at_stock_max),
        (-tol_att, 0.0), "octave", applicable=not deferred,
        details={"tolerance": tol_att, "rows": len(ties), "rows_attained": int((at_stock_max >= -tol_att).sum()),
                 "lattice_ties_median": statistics.median(ties) if ties else None,
                 "lattice_ties_max": max(ties) if ties else None,
                 **({"not_applicable": why_not} if deferred else {})}))

    # masked entries: Rowmax-H15 clamps -inf to its floor weight 2^-126. The row sum holds the row maximum's
    # weight, 1 (or, under a deferred rescale, H(x) with x >= 0, at least 2^a), so a masked probability is at most
    # floor * 2^-a, plus the output rounding
    if bool((~valid).any()):
        masked = p1[~valid]
        gates.append(Gate("masked", "P1 on masked entries (multi-tile, causal)", _range(masked),
                          (0.0, floor * 2.0 ** (-a) * (1 + st.u_out)),
                          details={"elements": masked.numel(), "floor_weight": floor,
                                   "stock_max": float(p0[~valid].max())}))
    return gates


# ---------------------------------------------------------------------------------------------------------------
# Engine
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GatesOptions:
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
    out_dir: Path = Path("sessions")
    backend_options: dict = field(default_factory=dict)
    command_line: str = ""

    def shape(self, seq: int) -> Shape:
        return Shape(dtype=self.dtype, seq=seq, causal=self.causal, batch=self.batch, heads=self.heads,
                     kv_heads=self.kv_heads, head_dim=self.head_dim)

    def labels(self) -> tuple[str, str]:
        return (self.baseline, self.variant) if self.baseline != self.variant else (self.baseline, self.variant + "'")

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
    if arch is not None and arch // 10 in (10, 11) and dtype != "fp8":
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


def default_runner(label: str, backend: str, variant: str, options: dict):
    """A worker process per kernel (FA4 can hold one flash_attn per process)."""
    from softbench.runtime.client import WorkerProcess

    return WorkerProcess(label, backend, variant, options)


def evaluate(single: dict[str, Readback], multi: dict[str, Readback], base: str, var: str, tau: float) -> list[Gate]:
    for seq_pair in (single, multi):
        if not same_inputs(seq_pair[base], seq_pair[var]):
            raise MeasurementError("the two kernel processes built different inputs from the same seed")
    return [readback_gate(single[base]), single_tile_gate(single[var]),
            *multi_tile_gates(multi[base], multi[var], rescale_threshold=tau)]


def run_gates(opts: GatesOptions, progress: Callable[[str], None] | None = None,
              runner: Callable[..., object] | None = None):
    """Run both kernels' readbacks at one tile and at several, evaluate the gates and record a session.
    Returns (session, summary). `runner(label, backend, variant, options)` makes a worker (a process by default)."""
    from softbench.core.envinfo import collect_env
    from softbench.core.session import Session, utc_iso

    say = progress or (lambda _msg: None)
    runner = runner or default_runner  # looked up at call time, so a test can swap it
    opts = resolve_options(opts)
    base, var = opts.labels()
    session = Session.create(opts.out_dir, "gates", opts.tag())
    session.write_yaml("protocol.yaml", {
        "command": "gates", "command_line": opts.command_line, "backend": opts.backend,
        "backend_options": opts.backend_options, "baseline": opts.baseline, "variant": opts.variant,
        "labels": [base, var], "seed": opts.seed,
        "shapes": {"single_tile": opts.shape(opts.single_seq).to_dict(),
                   "multi_tile": opts.shape(opts.multi_seq).to_dict()},
        "envelope": list(ENVELOPE), "started_utc": utc_iso(),
    })
    workers = {}
    summary = {"command": "gates", "backend": opts.backend, "baseline": opts.baseline, "variant": opts.variant,
               "tag": opts.tag(), "complete": False}
    try:
        workers = {base: runner(base, opts.backend, opts.baseline, opts.backend_options),
                   var: runner(var, opts.backend, opts.variant, opts.backend_options)}
        say(f"loading {opts.backend} {opts.baseline} and {opts.variant}, one process each")
        with concurrent.futures.ThreadPoolExecutor(len(workers)) as pool:  # both import at once
            list(pool.map(lambda w: w.load(), workers.values()))
        info = {label: w.info for label, w in workers.items()}
        session.write_json("env.json", {**collect_env(gpu=True), "workers": info})
        tau = rescale_threshold(opts.backend, info[var].get("device", {}).get("arch"), opts.dtype,
                                opts.backend_options)
        readbacks: dict[int, dict[str, Readback]] = {}
        non_finite: dict[str, dict[int, int]] = {label: {} for label in workers}
        for seq in (opts.single_seq, opts.multi_seq):
            shape = opts.shape(seq)
            readbacks[seq] = {}
            for label, w in workers.items():
                say(f"{shape.tag()}: reading back {label}'s probabilities ({math.ceil(seq / opts.head_dim)} forwards)")
                path = readback_path(session.path, label, seq)
                res = w.request("probabilities", shape=shape.to_dict(), seed=opts.seed, path=str(path))["result"]
                # non-finite probabilities are the kernel's fault: they make the gates fail (NaN never passes)
                session.append(READBACK_FILE, {"label": label, "variant": w.variant, "utc": utc_iso(), **res})
                non_finite[label][seq] = res["non_finite"]
                readbacks[seq][label] = load_readback(path, opts.causal)
        say("evaluating the gates")
        gates = evaluate(readbacks[opts.single_seq], readbacks[opts.multi_seq], base, var, tau)
    except BaseException as exc:
        reason = "interrupted by the user" if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}: {exc}"
        summary.update({"incomplete_reason": reason, "finished_utc": utc_iso()})
        session.write_json("summary.json", summary)
        session.write_text("summary.md", gates_markdown(summary, session.path.name))
        session.set_status(complete=False, state="partial", reason=reason)
        for label, w in workers.items():
            if hasattr(w, "copy_log"):
                w.copy_log(session.path / f"worker-{label.replace(chr(39), 'b')}.log")
        raise
    finally:
        for w in workers.values():
            w.close()
    summary["non_finite_readback_values"] = non_finite
    record_gates(session, summary, gates, tau, readbacks[opts.multi_seq][var].storage,
                 {"single_tile": opts.shape(opts.single_seq).tag(), "multi_tile": opts.shape(opts.multi_seq).tag()})
    return session, summary


def record_gates(session, summary: dict, gates: list[Gate], tau: float, storage: Storage, shapes: dict) -> None:
    """Write gates.json, the summary and the status of a completed gates session."""
    from softbench.core.session import utc_iso

    session.write_json(GATES_FILE, {"gates": [g.to_dict() for g in gates], "rescale_threshold": tau,
                                    "envelope": list(ENVELOPE)})
    applicable = [g for g in gates if g.applicable]
    summary.update({
        "complete": True, "finished_utc": utc_iso(), "rescale_threshold": tau,
        "all_passed": all(g.passed for g in applicable) and bool(applicable),
        "failed": [g.name for g in applicable if not g.passed],
        "not_applicable": [g.name for g in gates if not g.applicable],
        "gates": {g.name: json_safe({"value": list(g.observed), "bound": list(g.bound), "passed": g.passed,
                                     "unit": g.unit, "what": g.what, **_headline_details(g)}) for g in gates},
        "storage": storage.to_dict(),
        "shapes": shapes,
    })
    session.write_json("summary.json", summary)
    session.write_text("summary.md", gates_markdown(summary, session.path.name))
    session.set_status(complete=True, state="complete")


_HEADLINE_KEYS = ("mean", "fraction_outside_before_tolerance", "fraction_below_before_tolerance",
                  "fraction_above_before_tolerance", "shift_min", "shift_max", "shift_mean", "lattice_ties_median",
                  "lattice_ties_max", "ambiguous_elements", "elements", "rows", "not_applicable")


def _headline_details(g: Gate) -> dict:
    return {k: g.details[k] for k in _HEADLINE_KEYS if k in g.details}


# ---------------------------------------------------------------------------------------------------------------
# Printers (read a summary; never measure)
# ---------------------------------------------------------------------------------------------------------------

def _num(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, int):
        return str(v)
    return f"{v:.4g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.3e}"


def verdict(passed: bool | None) -> str:
    return {True: "pass", False: "FAIL", None: "n/a"}[passed]


GATE_COLUMNS = ["gate", "observed", "bound", "unit", "result", "notes"]


def gate_rows(summary: dict) -> list[list[str]]:
    rows = []
    for name, g in summary.get("gates", {}).items():
        lo, hi = g["value"]
        observed = _num(lo) if lo == hi else f"[{_num(lo)}, {_num(hi)}]"
        notes = []
        if "mean" in g:
            notes.append(f"mean {_num(g['mean'])}")
        for key, text in (("fraction_outside_before_tolerance", "outside envelope"),
                          ("fraction_below_before_tolerance", "below"), ("fraction_above_before_tolerance", "above")):
            if g.get(key) is not None:
                notes.append(f"{text} {100 * g[key]:.3f}%")
        if "shift_min" in g:
            notes.append(f"shift [{_num(g['shift_min'])}, {_num(g['shift_max'])}]")
        if "lattice_ties_max" in g:
            notes.append(f"ties median {_num(g['lattice_ties_median'])}, max {_num(g['lattice_ties_max'])}")
        if g.get("ambiguous_elements"):
            notes.append(f"{g['ambiguous_elements']} near a rounding boundary")
        if "not_applicable" in g:
            notes.append(g["not_applicable"])
        unit = {"octave": "oct"}.get(g.get("unit", ""), g.get("unit", ""))
        rows.append([name, observed, f"[{_num(g['bound'][0])}, {_num(g['bound'][1])}]", unit,
                     verdict(g["passed"]), "; ".join(notes)])
    return rows


def gates_headline(summary: dict) -> str:
    if not summary.get("complete"):
        return f"gates not finished: {summary.get('incomplete_reason', 'interrupted')}"
    if summary["all_passed"]:
        return f"all gates passed ({summary['variant']} against {summary['baseline']}, {summary['backend']})"
    return f"FAILED gates: {', '.join(summary['failed'])} ({summary['variant']}, {summary['backend']})"


def gates_markdown(summary: dict, title: str) -> str:
    lines = md_heading(title, summary)
    lines += [f"- backend: `{summary.get('backend')}`; {summary.get('variant')} against {summary.get('baseline')}",
              f"- shapes: {summary.get('shapes', {})}", f"- storage: {summary.get('storage', {})}",
              f"- rescale threshold tau: {summary.get('rescale_threshold')}", "", gates_headline(summary), ""]
    lines += md_table(GATE_COLUMNS, gate_rows(summary))
    a, b = ENVELOPE
    lines += ["", f"Envelope of Rowmax-H15's octave error: [{a:g}, {b:.5f}] (paper B.1); the normalized ratio may "
              f"span [a - b, b - a]. Each bound adds the storage rounding the compared readings went through "
              f"(gates.json lists each tolerance). The gates are checks, not a proof, and do not replace model-level "
              f"NLL.", ""]
    return "\n".join(lines)
