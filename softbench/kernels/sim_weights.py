"""The simulation backend builds a variant from its operator (softbench.kernels.catalog): the weight map of each
operator it implements (a function of x, or a softbench.kernels.sim.TileMap)."""

from softbench import operators
from softbench.core.registry import Registry
from softbench.kernels.catalog import check
from softbench.kernels.sim import H15_FOLDED, HYBRIDS

SIM_WEIGHTS = Registry("simulation operator")
SIM_WEIGHTS.register("exp2", operators.exact_exp2)
SIM_WEIGHTS.register("rowmax-h15", operators.rowmax_h15)
SIM_WEIGHTS.register("rowmax-h15-sat", operators.rowmax_h15_sat)
SIM_WEIGHTS.register("rowmax-h15-folded", H15_FOLDED)  # needs the running maximum itself: a TileMap
SIM_WEIGHTS.register("rowmax-h15-1of2", HYBRIDS[2])  # by key: TileMaps too
SIM_WEIGHTS.register("rowmax-h15-1of4", HYBRIDS[4])
SIM_WEIGHTS.register("identity", operators.no_exp)


def weight_fn(variant: str):
    """The weight map of `variant`, refused unless the catalog says the simulation builds it."""
    return SIM_WEIGHTS.get(check("sim", variant).operator)
