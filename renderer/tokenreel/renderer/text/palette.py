"""Interning for long runs of few distinct values: the distinct values once, in order of first
use, and per item an index into them in the narrowest array that holds it.

A long answer's characters, clusters and placed cells repeat a few hundred distinct values; as
objects in a list they cost 8 bytes an item plus each object, as indices 1 byte (2 past 256
distinct values, 4 past 65,536).
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

# The array type that holds indices up to its limit, narrowest first.
WIDTHS = (("B", 0xFF), ("H", 0xFFFF), ("I", 0xFFFFFFFF))


class Palette(Generic[K]):
    """`keys`: the distinct values in order of first use; `ids`: per item appended, its index
    into `keys`, widened (1, 2, then 4 bytes) as `keys` grows."""

    def __init__(self) -> None:
        self.keys: list[K] = []
        self._index: dict[K, int] = {}
        self.ids = array("B")

    def id(self, key: K) -> int:
        """key's index, added to `keys` at first use (`ids` widened to hold it), not appended."""
        i = self._index.get(key)
        if i is None:
            i = self._index[key] = len(self.keys)
            self.keys.append(key)
            if i > _limit(self.ids.typecode):
                self.ids = array(_typecode(i), self.ids)
        return i

    def append(self, key: K) -> int:
        """Append key as one more item; its index."""
        i = self._index.get(key)
        if i is None:
            i = self.id(key)
        self.ids.append(i)
        return i


def _limit(typecode: str) -> int:
    return next(limit for code, limit in WIDTHS if code == typecode)


def _typecode(index: int) -> str:
    """The narrowest array type that holds index."""
    return next(code for code, limit in WIDTHS if index <= limit)
