"""One style name per character, a byte each: an index into the distinct styles.

A long answer's styles pass from markdown through highlighting to the wrap; as a list they cost
8 bytes a character at every step (and a copy at each). Built by runs and painted by ranges, they
cost 1 (2 past 256 distinct styles), and equal styles hash equal, so a cached wrap can be keyed
on them.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from tokenreel.renderer.text.palette import Palette


class StyleIds(Palette[str], Sequence[str]):
    """Per character an index into `keys`, the distinct style names; grown by runs, painted by
    ranges, read as strings. Read-only once handed on: hashing reads its bytes."""

    def __init__(self, styles: Iterable[str] = ()) -> None:
        super().__init__()
        ids = array("I", map(self.id, styles))  # id widens self.ids as the names grow
        self.ids = array(self.ids.typecode, ids)

    def run(self, style: str, count: int) -> None:
        """Append count characters of one style."""
        if count > 0:
            i = self.id(style)
            self.ids.extend(array(self.ids.typecode, [i]) * count)

    def paint(self, start: int, end: int, style: str) -> None:
        """Give the characters [start, end) one style."""
        if end > start:
            i = self.id(style)
            self.ids[start:end] = array(self.ids.typecode, [i]) * (end - start)

    def extend_from(self, other: StyleIds, start: int, end: int) -> None:
        """Append other's styles of characters [start, end)."""
        if other.keys == self.keys[: len(other.keys)]:
            for name in other.keys[len(self.keys) :]:
                self.id(name)
            part = other.ids[start:end]
            self.ids.extend(part if part.typecode == self.ids.typecode else array(self.ids.typecode, part))
            return
        remap = array("H", map(self.id, other.keys))
        self.ids.extend(array(self.ids.typecode, (remap[i] for i in other.ids[start:end])))

    def copy(self) -> StyleIds:
        out = StyleIds()
        out.extend_from(self, 0, len(self))
        return out

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, k: int) -> str: ...

    @overload
    def __getitem__(self, k: slice) -> list[str]: ...

    def __getitem__(self, k: int | slice) -> str | list[str]:
        if isinstance(k, slice):
            return [self.keys[i] for i in self.ids[k]]
        return self.keys[self.ids[k]]

    def __iter__(self) -> Iterator[str]:
        return map(self.keys.__getitem__, self.ids)

    def __hash__(self) -> int:
        """Of the styles read as strings (equal ones hash equal whatever their ids): the ids
        renumbered in order of first use, and the names in that order."""
        firsts = {}
        for i in range(len(self.keys)):
            try:
                firsts[i] = self.ids.index(i)
            except ValueError:
                continue
        ranked = sorted(firsts, key=firsts.__getitem__)
        rank = dict(zip(ranked, range(len(ranked)), strict=True))
        if self.ids.typecode == "B":
            key = self.ids.tobytes().translate(bytes(rank.get(i, 0) for i in range(256)))
        else:
            key = array(self.ids.typecode, map(rank.__getitem__, self.ids)).tobytes()
        return hash((tuple(self.keys[i] for i in ranked), key))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StyleIds):
            if self.keys == other.keys:
                return self.ids == other.ids
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented


def style_ids(styles: Sequence[str]) -> StyleIds:
    """styles as StyleIds, itself when it is one already."""
    return styles if isinstance(styles, StyleIds) else StyleIds(styles)
