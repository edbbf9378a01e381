"""Non-decreasing offsets into a text (where each cluster starts, where each unit ends) kept as
their steps, a byte each while every step fits one: a long answer's 4 bytes a cluster become 1.
They are read back whole (absolute) only while a layout needs them, or walked from a known
offset for the few units a frame draws."""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from itertools import accumulate, chain
from operator import sub


class Offsets:
    def __init__(self) -> None:
        self.steps = array("B")
        self.last = 0

    def append(self, value: int) -> None:
        if value - self.last > 0xFF and self.steps.typecode == "B":
            self.steps = array("I", self.steps)
        self.steps.append(value - self.last)
        self.last = value

    def extend(self, values: Sequence[int]) -> None:
        if not values:
            return
        steps = map(sub, values, chain((self.last,), values))
        if self.steps.typecode == "B":
            try:
                self.steps.extend(array("B", steps))
            except OverflowError:  # a step of 256 or more: every step takes 4 bytes from now on
                self.steps = array("I", self.steps)
                steps = map(sub, values, chain((self.last,), values))
        if self.steps.typecode == "I":
            self.steps.extend(array("I", steps))
        self.last = values[-1]

    def follow(self, other: Offsets, shift: int = 0) -> None:
        """Append other's offsets (read from 0, as every Offsets is), less shift."""
        if not other.steps:
            return
        self.append(other.steps[0] - shift)
        rest = other.steps[1:]
        if self.steps.typecode == "B":
            try:  # other's steps may be 4 bytes for its first alone (where it starts)
                rest = array("B", rest)
            except OverflowError:
                self.steps = array("I", self.steps)
        self.steps.extend(array(self.steps.typecode, rest))
        self.last = other.last - shift

    @property
    def first(self) -> int:
        return self.steps[0]

    def absolute(self) -> array[int]:
        return array("I", accumulate(self.steps))

    def __iter__(self) -> Iterator[int]:
        return accumulate(self.steps)

    def __len__(self) -> int:
        return len(self.steps)
