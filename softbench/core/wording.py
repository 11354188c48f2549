"""Lists of names inside a sentence, for messages that name several things at once."""

from __future__ import annotations

from typing import Sequence


def listed(items: Sequence[str], conjunction: str = "and") -> str:
    """'a', 'a and b', 'a, b and c' (or 'a, b or c'): how a sentence names several things (no serial comma)."""
    if not items:
        raise ValueError("listed() needs at least one item")
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {conjunction} {items[-1]}"
