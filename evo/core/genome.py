"""Genomes: immutable knob -> value mappings with a canonical key."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any


class Genome(Mapping[str, Any]):
    """An immutable mapping knob -> value.

    Two genomes with the same items are equal and share one ``key``, whatever
    order the items were given in; the key is what the ledger de-duplicates on.
    """

    __slots__ = ("_items", "_key")

    def __init__(self, items: Mapping[str, Any]):
        self._items = dict(sorted(items.items()))
        self._key = json.dumps(self._items, sort_keys=True, separators=(",", ":"))

    @property
    def key(self) -> str:
        return self._key

    @classmethod
    def from_key(cls, key: str) -> Genome:
        return cls(json.loads(key))

    def replace(self, **changes: Any) -> Genome:
        d = dict(self._items)
        d.update(changes)
        return Genome(d)

    def diff(self, other: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
        """Knobs whose value differs: name -> (other's value, this value)."""
        return {k: (other.get(k), v) for k, v in self._items.items() if other.get(k) != v}

    def describe_change(self, other: Mapping[str, Any]) -> str:
        d = self.diff(other)
        if not d:
            return "no change"
        return ", ".join(f"{k} {a}->{b}" for k, (a, b) in sorted(d.items()))

    def __getitem__(self, k: str) -> Any:
        return self._items[k]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Genome):
            return self._key == other._key
        if isinstance(other, Mapping):
            return self._items == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"Genome({self._key})"
