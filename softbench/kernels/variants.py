"""The named kernel variants. One registry holds every variant's metadata; each backend says which it builds."""

from __future__ import annotations

from dataclasses import dataclass

from softbench.core.registry import Registry


@dataclass(frozen=True)
class Variant:
    name: str
    role: str  # "baseline", "candidate" or "control"
    operator: str  # the exponential map in softbench.operators terms
    description: str
    correct: bool = True  # False: results are wrong on purpose (timing controls)


VARIANTS: Registry[Variant] = Registry("kernel variant")
for _v in (
    Variant("A0", "baseline", "exp2", "stock kernel, exact exponential (hardware ex2 and, on sm_100, FA4's own emulation mix)"),
    Variant("A1", "candidate", "rowmax-h15", "Rowmax-H15 in the exponential path only (one clamp, one FP32 add, one shift)"),
    Variant("h15-1of2", "candidate", "mixed", "sm_90: Rowmax-H15 on every second element, hardware exp2 on the rest"),
    Variant("h15-1of4", "candidate", "mixed", "sm_90: Rowmax-H15 on one element in four, hardware exp2 on the rest"),
    Variant("h15-wg", "candidate", "mixed", "sm_90: Rowmax-H15 in the first MMA warpgroup, hardware exp2 in the second"),
    Variant("h15-proved", "candidate", "rowmax-h15", "Triton and Gluon: A1 with the clamp left out of the unmasked tiles of programs whose rows provably never reach it (Cauchy-Schwarz bound; key norms found inside the call); bit-identical to A1"),
    Variant("h15-sat", "candidate", "rowmax-h15-sat", "Triton/Gluon: Rowmax-H15 with the clamp as the saturation of the FMA that scales the scores (FFMA.SAT, FFMA, shift: three instructions, A1 takes four); A1 wherever 2x + 252 is exact in FP32 at 2^-15, else n can differ by one within that step of a rounding tie"),
    Variant("h15-noclamp", "control", "rowmax-h15", "Rowmax-H15 without its clamp (add and shift): what a proof that every 2x >= -252 would save; equal to A1 on such inputs (the benchmark's), wrong below"),
    Variant("noexp", "control", "identity", "exponential removed: a timing ceiling, results wrong on purpose", correct=False),
):
    VARIANTS.register(_v.name, _v)


def get_variant(name: str) -> Variant:
    return VARIANTS.get(name)
