"""Deliberately wrong variants of the simulation only, for tests that must see a check fail: each is registered
under its own name as both the catalog variant and its operator, visible to in-process workers only."""

from softbench.kernels.catalog import VARIANTS, Variant
from softbench.kernels.sim_weights import SIM_WEIGHTS


def register_wrong_variant(name: str, weights) -> str:
    """Register `name` (once per process) with `weights` (a function of x, or a TileMap) as its operator."""
    if name not in VARIANTS:
        SIM_WEIGHTS.register(name, weights)
        VARIANTS.register(name, Variant(name, "control", name, "deliberately wrong (tests)", ("sim",)))
    return name
