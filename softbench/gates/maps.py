"""The weight map the gates hold a variant to: which reference its probabilities are compared with, and what that
map's weights are allowed to be. One record per map the gates know (GATE_MAPS), chosen from the catalog's operator.

  rowmax-h15      A1 and every bit-exact form (h15-proved, h15-noclamp) and h15-sat, whose near-tie flips lie
                  within the scores' own error bound: n = rne(2x) on the lattice anchored at the row maximum.
  h15-folded      the lattice anchored at r = rne(2cm) instead: n = rne(2x + phi), phi = 2cm - r in [-1/2, 1/2] a
                  per-row phase (c = scale_log2, m the row maximum); the maximum's weight is still exactly 1. Each
                  weight's error against 2^x is then eps + phi/2 with eps in Rowmax-H15's envelope [a, b]: the
                  normalized ratio keeps its bound (a row constant cancels), the recovered error is taken after
                  subtracting the row's phi/2. Under the kernel's anchor-to-anchor rescale, 2^((r_old - r_new)/2), a
                  weight made against an earlier maximum keeps an error in [a, b] + phi/2 (the parity of its step is
                  the earlier anchor's, its offset the final one's), so the same bounds hold over several tiles.
  h15-1of2/1of4   the hybrids: Rowmax-H15 on the keys operators.hybrid_picks chooses, the exact exp2 on the rest;
                  those weights are not exact in P's dtype, so the patched P carries P's rounding on them too.
  exp2            the exact exponential (A0 against A0): the stock kernel's own bounds.

A variant whose operator has no map here (the timing controls, FA4's warpgroup split) is gated against Rowmax-H15,
the operator the gates exist for, and the session says so."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from softbench import operators


@dataclass(frozen=True)
class GateMap:
    name: str
    description: str
    row_phase: bool = False  # h15-folded: the lattice is anchored at rne(2cm), not at the row maximum
    hybrid_every: int | None = None  # the hybrids: Rowmax-H15 on hybrid_picks(keys, every), exp2 elsewhere
    exact: bool = False  # every weight the exact exp2

    @property
    def rounds_p(self) -> bool:
        """Whether some patched weights are not exact in P's dtype (so P's rounding reaches the patched readback)."""
        return self.exact or self.hybrid_every is not None

    def lattice_keys(self, seq_k: int, device=None) -> torch.Tensor:
        """(seq_k,) True for the keys whose weight is on the Rowmax-H15 lattice."""
        keys = torch.arange(seq_k, device=device)
        if self.exact:
            return torch.zeros(seq_k, dtype=torch.bool, device=device)
        if self.hybrid_every is not None:
            return operators.hybrid_picks(keys, self.hybrid_every)
        return torch.ones(seq_k, dtype=torch.bool, device=device)

    def to_dict(self) -> dict:
        return {"name": self.name, "description": self.description}


H15 = GateMap("rowmax-h15", "n = rne(2x) on the lattice anchored at the row maximum (paper Eq. 5)")
GATE_MAPS: dict[str, GateMap] = {m.name: m for m in (
    H15,
    GateMap("rowmax-h15-folded", "n = rne(2x + phi), the lattice anchored at rne(2cm): a per-row phase "
            "phi = 2cm - rne(2cm), the maximum's weight exact", row_phase=True),
    GateMap("rowmax-h15-1of2", "Rowmax-H15 on the odd keys, exact exp2 on the others", hybrid_every=2),
    GateMap("rowmax-h15-1of4", "Rowmax-H15 on keys 9, 11, 13, 15 of every 16, exact exp2 on the others",
            hybrid_every=4),
    GateMap("exp2", "the exact exponential", exact=True),
)}
# catalog operators whose weights are a known map's within the gates' error bounds
SAME_AS = {"rowmax-h15-sat": "rowmax-h15"}


def gate_map_for(variant: str) -> tuple[GateMap, str]:
    """The map `variant` (a catalog name) is gated against, and a note when that is not its own operator's."""
    from softbench.kernels.catalog import get_variant

    operator = get_variant(variant).operator
    name = SAME_AS.get(operator, operator)
    if name in GATE_MAPS:
        return GATE_MAPS[name], ""
    return H15, (f"{variant}'s operator {operator} has no gate reference of its own: it is gated against "
                 "Rowmax-H15")


def gate_map_named(name: str | None) -> GateMap:
    """A recorded map name back to its record (a gates session written before maps were recorded has none: it was
    gated against Rowmax-H15)."""
    from softbench.core.errors import UsageError

    if name is None:
        return H15
    if not isinstance(name, str) or name not in GATE_MAPS:  # a list edited into a session is no key either
        raise UsageError(f"this softbench has no gate reference {name!r}",
                         hint=f"known: {', '.join(GATE_MAPS)}")
    return GATE_MAPS[name]
