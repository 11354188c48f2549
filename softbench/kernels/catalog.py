"""The one catalog of kernel variants: each name's role, operator, description and the backends that build it.

Adding a variant touches this file and the kernels that build it, nothing else: the commands refuse a variant a
backend does not build through `check`, before any worker starts, and each backend takes its list of names from
here (the FA4 patches, the Triton and Gluon weight maps, the simulation's operators are checked against it by
tests/test_catalog.py). The backends: fa4 (FlashAttention-4 patches), triton (softbench's Triton-language and
Gluon kernels, which implement the same variants), sim (the pure-torch simulation, which builds a variant from
its operator).

Besides the named variants, FA4's exp2-emulation settings are variants by name (`emu-f8-s1`, `emu-f8-s1-r2`:
softbench.sweep.emulation), built by the fa4 backend only."""

from __future__ import annotations

import re
from dataclasses import dataclass

from softbench.core.errors import UsageError
from softbench.core.registry import Registry

ROLES = ("baseline", "candidate", "control")


@dataclass(frozen=True)
class Variant:
    name: str
    role: str  # one of ROLES
    operator: str  # the exponential map in softbench.operators terms; the simulation builds the variant from it
    description: str
    backends: tuple[str, ...]  # the backends that build it (names of softbench.kernels.backends.BACKENDS)
    correct: bool = True  # False: results are wrong on purpose (timing controls)
    fidelity_kernel: bool = False  # the variant `softbench fidelity --path kernel` runs for its operator

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"variant {self.name}: role {self.role!r} is not one of {', '.join(ROLES)}")
        if not self.backends:
            raise ValueError(f"variant {self.name}: no backend builds it")


ALL = ("fa4", "triton", "sim")
FA4 = ("fa4",)

VARIANTS: Registry[Variant] = Registry("kernel variant")
for _v in (
    Variant("A0", "baseline", "exp2", "stock kernel, exact exponential (hardware ex2 and, on sm_100, FA4's own "
            "emulation mix)", ALL),
    Variant("A1", "candidate", "rowmax-h15", "Rowmax-H15 in the exponential path only (one clamp, one FP32 add, "
            "one shift)", ALL, fidelity_kernel=True),
    Variant("h15-1of2", "candidate", "rowmax-h15-1of2", "sm_90 and Triton/Gluon: Rowmax-H15 (A1's) on every "
            "second element (the odd keys), hardware exp2 on the rest", ALL, fidelity_kernel=True),
    Variant("h15-1of4", "candidate", "rowmax-h15-1of4", "sm_90 and Triton/Gluon: Rowmax-H15 (A1's) on one element "
            "in four (keys 9, 11, 13, 15 of every 16), hardware exp2 on the rest", ALL, fidelity_kernel=True),
    Variant("h15-wg", "candidate", "mixed", "sm_90: Rowmax-H15 in the first MMA warpgroup, hardware exp2 in the "
            "second", FA4),
    Variant("h15-proved", "candidate", "rowmax-h15", "Triton and Gluon: A1 with the clamp left out of the unmasked "
            "tiles of programs whose rows provably never reach it (Cauchy-Schwarz bound; key norms found inside the "
            "call); bit-identical to A1", ("triton",)),
    Variant("h15-sat", "candidate", "rowmax-h15-sat", "Triton/Gluon: Rowmax-H15 with the clamp as the saturation "
            "of the FMA that scales the scores (FFMA.SAT, FFMA, shift: three instructions, A1 takes four); A1 "
            "wherever 2x + 252 is exact in FP32 at 2^-15, else n can differ by one within that step of a rounding "
            "tie", ("triton", "sim"), fidelity_kernel=True),
    Variant("h15-folded", "candidate", "rowmax-h15-folded", "Triton/Gluon: the magic add folded into the FFMA "
            "that scales the scores (B = fp32(MAGIC_FOLDED - 2cm) per row, weight = bits(fma(s, 2c, B)) << 22: two "
            "instructions where h15-proved's bound holds, a clamp elsewhere); the maximum's weight exact (1; 2^8 at "
            "FP8), the others on the lattice shifted by the row's phase 2cm - rne(2cm); rescaled by "
            "2^((r_old - r_new)/2), r = rne(2cm)",
            ("triton", "sim"), fidelity_kernel=True),
    Variant("h15-folded-clamped", "candidate", "rowmax-h15-folded", "Triton/Gluon: h15-folded's weights with the "
            "clamp in every tile (FFMA, FMNMX, shift: three instructions per score) instead of the key-norm pass "
            "that proves it idle: no second kernel per call, the same weights",
            ("triton", "sim")),
    Variant("h15-noclamp", "control", "rowmax-h15", "Rowmax-H15 without its clamp (add and shift): what a proof "
            "that every 2x >= -252 would save; equal to A1 on such inputs (the benchmark's), wrong below",
            ("fa4", "triton")),
    Variant("noexp", "control", "identity", "exponential removed: a timing ceiling, results wrong on purpose",
            ALL, correct=False),
):
    VARIANTS.register(_v.name, _v)

# FA4's exp2-emulation settings as variant names: freq, start fragment and, when not the default 4, res
EMULATION_NAME = re.compile(r"^emu-f(\d+)-s(\d+)(?:-r(\d+))?$")


def get_variant(name: str) -> Variant:
    """The catalog's record of `name`; an unknown name is answered with the closest known ones."""
    if name not in VARIANTS and EMULATION_NAME.match(name):
        return Variant(name, "candidate", "exp2-emulation",
                       "stock FA4 with its exp2 emulation forced to one setting (softbench sweep)", FA4)
    return VARIANTS.get(name)


def built_by(backend: str) -> tuple[str, ...]:
    """The named variants `backend` builds, in catalog order (emulation settings are not listed)."""
    return tuple(name for name, v in VARIANTS.items() if backend in v.backends)


def check(backend: str, name: str) -> Variant:
    """The variant, when `backend` builds it; else a UsageError in one sentence that names the backends that do.
    Every command calls this for each variant it will run before any worker starts."""
    variant = get_variant(name)
    if backend not in variant.backends:
        which = " and ".join(variant.backends)
        raise UsageError(f"variant {name} is built by the {which} backend{'s' if len(variant.backends) > 1 else ''}, "
                         f"not by {backend}", hint=f"--backend {variant.backends[0]}")
    return variant


def fidelity_variants(backend: str) -> dict[str, str]:
    """operator -> the variant `softbench fidelity --path kernel` runs for it on `backend`."""
    return {v.operator: name for name, v in VARIANTS.items() if v.fidelity_kernel and backend in v.backends}
