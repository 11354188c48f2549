"""A small registry for named things (kernel variants, operators, exporters).

Duplicates are refused; an unknown name is answered with the known names, and the close ones
(softbench.core.suggest) when there are any."""

from __future__ import annotations

from typing import Generic, Iterator, TypeVar

from softbench.core.errors import UsageError
from softbench.core.suggest import did_you_mean

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = item
        return item

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            hint = did_you_mean(name, self._items)
            known = ", ".join(sorted(self._items))
            raise UsageError(f"unknown {self.kind} {name!r} (known: {known})", hint=hint) from None

    def __contains__(self, name: str) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def items(self):
        return self._items.items()
