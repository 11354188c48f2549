"""Close-name suggestions for unknown names: offered only when a name is close to a known one, so that a
nonsense name gets the list of known names and no misleading "did you mean"."""

from __future__ import annotations

import difflib
from typing import Iterable

# 0.6 is difflib's own default: 'noxp' -> noexp and 'h15-sta' -> h15-sat pass, 'nonsense' -> noexp does not
CUTOFF = 0.6


def close_names(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    """Known names close to `name`, closest first; compared case-insensitively (a1 is close to A1)."""
    by_lower: dict[str, str] = {}
    for k in known:
        by_lower.setdefault(str(k).lower(), str(k))
    matches = difflib.get_close_matches(str(name).lower(), list(by_lower), n=n, cutoff=CUTOFF)
    return [by_lower[m] for m in matches]


def did_you_mean(name: str, known: Iterable[str]) -> str | None:
    """'did you mean X, Y?' when some known name is close, else None."""
    close = close_names(name, known)
    return f"did you mean {', '.join(close)}?" if close else None
