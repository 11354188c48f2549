"""Inputs that tell a once-rounded FMA from a multiply and an add (h15-folded's tests)."""

import torch


def beside_ties(c2: float, halves: torch.Tensor) -> torch.Tensor:
    """FP32 scores s whose exact s * c2 lies off a half-integer of `halves` by less than half an FP32 step of the
    product: FP32's own product rounds them onto the tie, so only a once-rounded FMA sends each to the side it
    lies on. c2 is an FP32 value; none exist when it is a power of two (every product exact)."""
    s0 = (halves.double() / c2).float()
    near = torch.cat([s0, torch.nextafter(s0, s0 + 1), torch.nextafter(s0, s0 - 1)])
    h = halves.double().repeat(3)
    rounded_onto = (near * torch.tensor(c2, dtype=torch.float32)).double() == h
    return near[rounded_onto & (near.double() * c2 != h)]
