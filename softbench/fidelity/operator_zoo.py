"""The named weight maps that replace the exponential of softmax, for the simulation and offline paths.

Two kinds (`scope`):
- element: a map from the base-2 exponent x = (s - anchor) * log2(e) of each score s to a weight. The anchor is the
  row maximum; which row maximum depends on the path: the simulation passes the kernel's running maximum (per
  128-key tile), the offline whole-row path the final row maximum.
- row: a map from a whole row of natural-log scores to weights. These need the row's final extremes (minimum,
  maximum), which a one-pass online softmax never has, so they run only in the offline whole-row path.

Each operator also names its `anchor`: "running" where its definition is the kernel's (Rowmax-H15, exact exp2,
temperature, which is shift invariant), "row" where the paper defines it on the final row maximum. A row-anchored
operator asked for on the simulation path is evaluated on the whole-row path, and its condition says so.
Three element operators need more than x: rowmax-h15-folded the anchor's own value (its lattice is shifted by
the anchor's phase), the hybrids rowmax-h15-1of2 and -1of4 each score's key (they choose Rowmax-H15 or exp2 by
it). Their `fn` is a softbench.kernels.sim.TileMap of the scores and the anchor, which the simulation and the
whole-row path (where the anchor is the final row maximum and c = log2(e)) call as such.

Masked scores arrive as -inf. Element maps return weight 0 there, except Rowmax-H15 (and h15-sat), which keeps
the kernel's own behaviour (the clamp at x = -126 gives 2^-126, negligible against any valid weight), so the
simulation matches the patched kernel. The whole-row path zeroes masked entries for every operator.

Parameters are written name:key=value,key=value, e.g. `rowmax-pot:kmax=20,tail=drop`, `grid:K=32,R=4,recon=lerp`."""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from softbench import operators as ops
from softbench.core.errors import UsageError
from softbench.core.registry import Registry

LOG2_E = math.log2(math.e)
H15_CLAMP_X = ops.CLAMP_DOUBLED / 2  # -126: Rowmax-H15's lower clamp, reused by the Schraudolph family (paper B.2)


@dataclass(frozen=True)
class Param:
    kind: type
    default: Any = None  # None: the parameter must be given
    choices: tuple = ()
    check: Callable[[Any], str | None] | None = None  # returns a reason when the value is not allowed
    help: str = ""


@dataclass(frozen=True)
class OperatorDef:
    name: str
    scope: str  # "element" or "row"
    anchor: str  # "running" or "row"
    section: str
    summary: str
    build: Callable[..., Callable[[torch.Tensor], torch.Tensor]]
    params: dict[str, Param] = field(default_factory=dict)


@dataclass(frozen=True)
class Operator:
    """One operator with its parameters resolved; `fn` maps x (element) or scores (row) to weights."""

    definition: OperatorDef
    params: dict
    fn: Callable[[torch.Tensor], torch.Tensor]

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def scope(self) -> str:
        return self.definition.scope

    @property
    def anchor(self) -> str:
        return self.definition.anchor

    @property
    def whole_row(self) -> bool:
        """True when the definition needs the final row maximum (or the whole row): offline whole-row path."""
        return self.scope == "row" or self.anchor == "row"

    @property
    def canonical(self) -> str:
        if not self.params:
            return self.name
        return self.name + ":" + ",".join(f"{k}={_fmt_value(v)}" for k, v in sorted(self.params.items()))

    def describe(self) -> dict:
        d = self.definition
        return {"name": self.canonical, "operator": d.name, "params": dict(self.params), "scope": d.scope,
                "anchor": d.anchor, "section": d.section, "definition": d.summary}


def _fmt_value(v) -> str:
    return repr(v) if isinstance(v, float) else str(v)


ZOO: Registry[OperatorDef] = Registry("operator")


def _operator(name: str, scope: str, anchor: str, section: str, summary: str, params: dict | None = None):
    """Register the decorated builder as operator `name`: each definition stands on the function that builds it
    (the catalog's order is the order of the builders below)."""

    def register(build):
        ZOO.register(name, OperatorDef(name, scope, anchor, section, summary, build, params or {}))
        return build

    return register


def _positive(v) -> str | None:
    return None if v > 0 else "must be positive"


def _at_least(n):
    return lambda v: None if v >= n else f"must be at least {n}"


def _zero_masked(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isneginf(x), torch.zeros_like(w), w)


# --- element operators: x is the base-2 exponent from the anchor (x <= 0 while the anchor is current) ---------

@_operator(
    "exp2", "element", "running", "Sec. 3.1 Eq. 1; A.1 Eq. 6",
    "exact softmax weights 2^x (FP32); through the simulation it tests the tiling, rescale and storage alone")
def _build_exp2():
    def exp2(x: torch.Tensor) -> torch.Tensor:
        """Exact exp2 in FP32: the softmax itself (the condition that must reproduce the baseline)."""
        return torch.exp2(x.to(torch.float32))

    return exp2


@_operator(
    "rowmax-h15", "element", "running", "Sec. 5.2 Eq. 5; B.1 Eq. 28",
    "n = rne(2x), w = (1 + (n mod 2)/2) 2^floor(n/2), clamp x >= -126; the kernel's add-and-shift construction")
def _build_h15():
    """Rowmax-H15 (Sec. 5.2 Eq. 5, B.1 Eq. 28): n = rne(2x), w = (1 + (n mod 2)/2) 2^floor(n/2), computed with
    the kernel's clamp/add/shift construction (softbench.operators), masked -inf -> 2^-126 as in the kernel."""
    return ops.rowmax_h15


@_operator(
    "rowmax-h15-sat", "element", "running", "Sec. 5.2 Eq. 5 (softbench's Hopper construction)",
    "rowmax-h15 with the clamp as the saturation of u = (2x + 252)/512: 2x resolved to 2^-15 before n = rne(2x)")
def _build_h15_sat():
    """Rowmax-H15 with the clamp as an FMA's saturation (kernel variant h15-sat, softbench.operators)."""
    return ops.rowmax_h15_sat


@_operator(
    "rowmax-h15-folded", "element", "running", "Sec. 5.2 Eq. 5 (softbench's two-instruction construction)",
    "n = rne(2cs - rne(2cm)) for raw scores s, anchor m: rowmax-h15 on the lattice shifted by the anchor's phase "
    "2cm - rne(2cm), the anchor's weight exact; weight 0 from n = -254 down")
def _build_h15_folded():
    """Rowmax-H15 with the magic add folded into the scaling FMA (kernel variant h15-folded, softbench.operators):
    n = rne(2cs - rne(2cm)), the anchor's weight exact, the rescale between two anchors' lattices."""
    from softbench.kernels.sim import H15_FOLDED

    return H15_FOLDED


def _build_hybrid(every: int):
    """FA4's hybrids (kernel variants h15-1of2, h15-1of4): Rowmax-H15 on the keys softbench.operators.hybrid_picks
    chooses, exact exp2 on the others."""
    from softbench.kernels.sim import HYBRIDS

    return lambda: HYBRIDS[every]


for _every, _which in ((2, "the odd keys"), (4, "keys 9, 11, 13, 15 of every 16")):
    _operator(f"rowmax-h15-1of{_every}", "element", "running",
              "Sec. 5.2 Eq. 5 on part of the keys (FA4's sm_90 hybrids)",
              f"rowmax-h15 on {_which} (one in {_every}), exact exp2 on the others")(_build_hybrid(_every))


@_operator(
    "pot-m", "element", "row", "A.6 Eq. 18",
    "power-of-two perturbation w = 2^(-round(m Delta/ln2)/m), no tail cutoff; |log error| <= ln2/(2m)",
    params={"m": Param(int, 1, check=_at_least(1), help="steps per octave (1, 2, ...)")})
def _build_pot_m(m: int):
    def pot_m(x: torch.Tensor) -> torch.Tensor:
        """w = 2^(-round(m*Delta/ln2)/m) with Delta/ln2 = -x; round to nearest even (torch.round)."""
        xf = x.to(torch.float32)
        w = torch.exp2(-torch.round(-m * xf) / m)
        return _zero_masked(xf, w)

    return pot_m


@_operator(
    "rowmax-pot", "element", "row", "A.6 Eq. 20",
    "d = min(K_max, floor(Delta/ln2 + 1/2)), w = 2^-d; tail=drop gives keys beyond K_max weight 0",
    params={"kmax": Param(int, 20, check=_at_least(0), help="largest octave index K_max"),
            "tail": Param(str, "clamp", choices=("clamp", "drop"))})
def _build_rowmax_pot(kmax: int, tail: str):
    def rowmax_pot(x: torch.Tensor) -> torch.Tensor:
        """d = min(K_max, floor(-x + 1/2)); w = 2^-d (clamp) or 0 beyond K_max (drop)."""
        xf = x.to(torch.float32)
        d = torch.floor(-xf + 0.5)
        w = torch.exp2(-torch.clamp(d, max=float(kmax)))
        if tail == "drop":
            w = torch.where(d > kmax, torch.zeros_like(w), w)
        return _zero_masked(xf, w)

    return rowmax_pot


def schraudolph_unshifted(x: torch.Tensor) -> torch.Tensor:
    """S(x) = 2^floor(x) * (1 + x - floor(x)): the unshifted base-2 idealization of Schraudolph (1999)."""
    f = torch.floor(x)
    return torch.ldexp(1.0 + (x - f), f.to(torch.int32))


@_operator(
    "schraudolph", "element", "row", "B.1; B.2 exponential-map ablation",
    "unshifted Schraudolph S(x) = 2^floor(x) (1 + x - floor(x)) on max(x, -126)")
def _build_schraudolph():
    def s_of_x(x: torch.Tensor) -> torch.Tensor:
        """Unshifted Schraudolph S(x) on max(x, -126) (B.1; the unquantized-input reference of B.2)."""
        xf = x.to(torch.float32)
        w = schraudolph_unshifted(torch.clamp(xf, min=H15_CLAMP_X))
        return _zero_masked(xf, w)

    return s_of_x


@_operator(
    "schraudolph-q", "element", "row", "B.1; B.2 exponential-map ablation",
    "S(Q_{2^-k}(x)), Q_{2^-k}(x) = 2^-k rne(2^k x), on max(x, -126); k = 1 is the ideal Rowmax-H15",
    params={"k": Param(int, 2, check=lambda v: None if 0 <= v <= 13 else "must be in 0..13")})
def _build_schraudolph_q(k: int):
    step = 2.0 ** k

    def s_of_q(x: torch.Tensor) -> torch.Tensor:
        """S(Q_{2^-k}(x)) with Q_{2^-k}(x) = 2^-k * rne(2^k x), after the clamp max(x, -126)."""
        xf = x.to(torch.float32)
        q = torch.round(torch.clamp(xf, min=H15_CLAMP_X) * step) / step  # both scalings are exact powers of two
        return _zero_masked(xf, schraudolph_unshifted(q))

    return s_of_q


@_operator(
    "temperature", "element", "running", "A.7 Eq. 22",
    "softmax of alpha-scaled scores, w = 2^(alpha x); alpha < 1 flattens, alpha > 1 sharpens",
    params={"alpha": Param(float, None, check=_positive)})
def _build_temperature(alpha: float):
    def temperature(x: torch.Tensor) -> torch.Tensor:
        """w = 2^(alpha x): softmax of alpha-scaled scores (a shift of every score cancels on normalization)."""
        xf = x.to(torch.float32)
        return _zero_masked(xf, torch.exp2(alpha * xf))

    return temperature


# --- row operators: s is a row of natural-log scores (-inf masked), weights are returned relative to the max ---

def _row_extremes(s: torch.Tensor):
    valid = torch.isfinite(s)
    hi = torch.where(valid, s, torch.full_like(s, -math.inf)).amax(dim=-1, keepdim=True)
    lo = torch.where(valid, s, torch.full_like(s, math.inf)).amin(dim=-1, keepdim=True)
    return valid, hi, lo


def grid_boundaries(K: int, R: float) -> torch.Tensor:
    """Normalized boundaries e_a / C of paper Eq. 2: (1 - rho^a) / (1 - rho^K), rho = R^(-1/(K-1)); R = 1 uniform.
    Computed in float64: the interval at the row maximum is R times narrower than the lowest one."""
    a = torch.arange(K + 1, dtype=torch.float64)
    if R == 1.0:
        return a / K
    rho = R ** (-1.0 / (K - 1))
    return (1.0 - rho ** a) / (1.0 - rho ** K)


@_operator(
    "grid", "row", "row", "Sec. 3.2 Eq. 2; A.4; A.5 Eq. 17",
    "full-range grid: [0, C] of u = s - min s in K intervals, interval at the maximum R times narrower; "
    "weight exp of the reconstructed boundary (nearest: ties to the lower; upper edge) or LERP of the two "
    "boundary weights; weight=linear uses the upper bin index instead (weighting-geometry control)",
    params={"K": Param(int, 32, check=_at_least(1)), "R": Param(float, 4.0, check=_positive),
            "recon": Param(str, "nearest", choices=("nearest", "upper", "lerp")),
            "weight": Param(str, "exp", choices=("exp", "linear"))})
def _build_grid(K: int, R: float, recon: str, weight: str):
    bounds64 = grid_boundaries(K, R)

    def grid(s: torch.Tensor) -> torch.Tensor:
        """Full-range grid (Sec. 3.2 Eq. 2, A.4, A.5): per row u = s - min s in [0, C], K intervals with the one at
        the maximum R times narrower than the lowest; the weight is exp of the reconstructed score (nearest
        boundary, ties to the lower; upper edge) or the LERP of the two boundary weights (Eq. 17)."""
        sf = s.to(torch.float32)
        valid, hi, lo = _row_extremes(sf)
        C = hi - lo
        degenerate = ~(C > 0)  # one valid key or equal scores: every valid key gets the row maximum's weight
        Csafe = torch.where(degenerate, torch.ones_like(C), C)
        u = torch.where(valid, sf - lo, torch.zeros_like(sf))  # in [0, C]
        b = bounds64.to(device=sf.device, dtype=torch.float32)
        # bin a holds [e_a, e_{a+1}); u = C falls in the last bin
        idx = torch.searchsorted(b[1:-1].contiguous(), (u / Csafe).contiguous(), right=True)
        e_lo = b[idx] * Csafe
        e_hi = b[idx + 1] * Csafe
        if weight == "linear":
            w = (idx + 1).to(torch.float32)  # the upper bin index l_j in 1..K
        elif recon == "upper":
            w = torch.exp(e_hi - Csafe)
        elif recon == "nearest":
            u_rec = torch.where(u - e_lo <= e_hi - u, e_lo, e_hi)  # ties go to the lower boundary
            w = torch.exp(u_rec - Csafe)
        else:  # lerp of the weights (paper Eq. 17)
            t = (u - e_lo) / (e_hi - e_lo)
            w = (1.0 - t) * torch.exp(e_lo - Csafe) + t * torch.exp(e_hi - Csafe)
        w = torch.where(degenerate, torch.ones_like(w), w)
        return torch.where(valid, w, torch.zeros_like(w))

    return grid


def _on_k_grid(z: torch.Tensor, K: int, recon: str, weight_at: Callable[[torch.Tensor], torch.Tensor],
               midpoint_up: bool) -> torch.Tensor:
    """K-interval attention's reconstruction: z in [0, K] on a grid of K + 1 points at the integers, `weight_at(g)`
    the weight of grid point g. Nearest: the weight of the closest point (at the midpoint the upper index when
    `midpoint_up`, else the lower); LERP: the two neighbouring points' weights interpolated."""
    r = torch.clamp(torch.floor(z), 0, K - 1)
    t = z - r
    if recon == "nearest":
        up = t >= 0.5 if midpoint_up else t > 0.5
        return weight_at(r + up.to(z.dtype))
    return (1.0 - t) * weight_at(r) + t * weight_at(r + 1.0)


@_operator(
    "kint-minmax", "row", "row", "companion paper (pretraining with quantized softmax), MinMax calibration",
    "K-interval attention, forward: K+1 grid values from the row minimum to the maximum, h = (M - m)/K; "
    "Nearest (midpoint rounds up) or LERP of the grid weights; equal scores give uniform weights",
    params={"K": Param(int, 4, check=_at_least(1)),
            "recon": Param(str, "nearest", choices=("nearest", "lerp"))})
def _build_kint_minmax(K: int, recon: str):
    def kint_minmax(s: torch.Tensor) -> torch.Tensor:
        """K-interval attention with MinMax calibration (companion paper, forward): grid m + a h, h = (M - m)/K,
        a = 0..K; Nearest rounds to a grid value (midpoint up), LERP interpolates the two grid weights."""
        sf = s.to(torch.float32)
        valid, hi, lo = _row_extremes(sf)
        span = hi - lo
        degenerate = ~(span > 0)
        h = torch.where(degenerate, torch.ones_like(span), span) / K
        z = torch.where(valid, (sf - lo) / h, torch.zeros_like(sf))  # in [0, K], grid points at integers
        # grid point g sits at the score m + g h; the midpoint rounds up, to the heavier point
        w = _on_k_grid(z, K, recon, lambda g: torch.exp((g - K) * h), midpoint_up=True)
        w = torch.where(degenerate, torch.ones_like(w), w)
        return torch.where(valid, w, torch.zeros_like(w))

    return kint_minmax


@_operator(
    "kint-fwm", "row", "row", "companion paper (pretraining with quantized softmax), FWM calibration",
    "K-interval attention, forward: a fixed-width window [M - tau, M] anchored at the row maximum, h = tau/K, "
    "weight 0 below the window; Nearest (midpoint to the higher value) or LERP of the grid weights",
    params={"K": Param(int, 4, check=_at_least(1)), "tau": Param(float, 6.0, check=_positive),
            "recon": Param(str, "nearest", choices=("nearest", "lerp"))})
def _build_kint_fwm(K: int, tau: float, recon: str):
    h = tau / K

    def kint_fwm(s: torch.Tensor) -> torch.Tensor:
        """K-interval attention with fixed-window (FWM) calibration (companion paper, forward): grid M - a h,
        h = tau/K, a = 0..K, zero weight below M - tau; Nearest (midpoint to the higher value) or LERP."""
        sf = s.to(torch.float32)
        valid, hi, _ = _row_extremes(sf)
        z = torch.where(valid, (hi - sf) / h, torch.zeros_like(sf))  # 0 at the row maximum, K at the window edge
        inside = valid & (z <= K)
        # grid point g sits at the score M - g h; the midpoint goes to the higher grid value (the lower index)
        w = _on_k_grid(z, K, recon, lambda g: torch.exp(-g * h), midpoint_up=False)
        return torch.where(inside, w, torch.zeros_like(w))

    return kint_fwm


def _convert(op: str, key: str, p: Param, text: str):
    try:
        value = p.kind(text)
    except ValueError:
        raise UsageError(f"operator {op}: {key}={text!r} is not a {p.kind.__name__}") from None
    if p.choices and value not in p.choices:
        raise UsageError(f"operator {op}: {key} must be one of {', '.join(p.choices)}, not {text!r}")
    if p.check:
        reason = p.check(value)
        if reason:
            raise UsageError(f"operator {op}: {key} {reason} (got {text})")
    return value


def parse_operator(text: str) -> Operator:
    """`name` or `name:key=value,key=value` -> Operator, every parameter checked; unknown names and keys are
    answered with the closest known ones."""
    name, _, rest = text.strip().partition(":")
    definition = ZOO.get(name)
    given: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise UsageError(f"operator {name}: parameter {item!r} is not key=value")
        if key not in definition.params:
            close = difflib.get_close_matches(key, list(definition.params), n=2, cutoff=0.3)
            known = ", ".join(definition.params) or "none"
            raise UsageError(f"operator {name} has no parameter {key!r} (parameters: {known})",
                             hint=f"did you mean {', '.join(close)}?" if close else None)
        if key in given and given[key] != value:  # which one was meant? the last would win without a word
            raise UsageError(f"operator {name}: parameter {key} is given twice ({given[key]} and {value})")
        given[key] = value
    params = {}
    for key, p in definition.params.items():
        if key in given:
            params[key] = _convert(name, key, p, given[key])
        elif p.default is None:
            raise UsageError(f"operator {name} needs {key}=... ({p.help or p.kind.__name__})")
        else:
            params[key] = p.default
    if name == "grid":
        if params["K"] == 1 and params["R"] != 1.0:
            raise UsageError("operator grid: K=1 is one interval, so R has no meaning; use R=1")
        if params["weight"] == "linear" and params["recon"] != "upper":
            raise UsageError("operator grid: weight=linear is defined with recon=upper (paper A.4)")
    return Operator(definition, params, definition.build(**params))


def list_operators() -> list[dict]:
    return [{"name": d.name, "scope": d.scope, "anchor": d.anchor, "section": d.section, "definition": d.summary,
             "params": {k: p.default for k, p in d.params.items()}} for _, d in ZOO.items()]
