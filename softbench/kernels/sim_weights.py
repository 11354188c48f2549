"""Which exponential map each variant uses in the simulation backend."""

from softbench import operators
from softbench.core.registry import Registry

SIM_OPERATORS = Registry("simulation operator")
SIM_OPERATORS.register("A0", operators.exact_exp2)
SIM_OPERATORS.register("A1", operators.rowmax_h15)
SIM_OPERATORS.register("h15-sat", operators.rowmax_h15_sat)
SIM_OPERATORS.register("noexp", operators.no_exp)

get = SIM_OPERATORS.get
