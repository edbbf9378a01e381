"""A stream's layout made a block at a time, as frames read it: a frame late in a long answer
lays out the few blocks its rows show, not the answer before them.

sections.py cuts the text into blocks at restart points; wrap.py lays out each block on its
own. The stream's lines are the blocks' lines in order, each block starting on the last line of
the one before when that line is empty (after a line break it always is), else on the next:
the lines one pass over the whole text makes. A column numbers lines from the first block it
lays out, up or down as its frames need the blocks beside it, so a number never changes; it
holds the last KEPT blocks it read, and one read again is laid out again (the same lines).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import overload

from tokenreel.renderer.text.cells import Cell
from tokenreel.renderer.text.sections import BLOCK, SECTION, sections
from tokenreel.renderer.text.style_ids import StyleIds, style_ids
from tokenreel.renderer.text.wrap import Block, Carets, lay_block

KEPT = 4  # blocks a column holds: the two or three its rows show
SHARED = 64  # blocks laid out last that the columns streaming one text share: all of most answers
READ = 2  # blocks a column holds its cluster starts read back for


class _Recent(OrderedDict[int, Block]):
    """The last `size` blocks put in (None: every one), by block number."""

    def __init__(self, size: int | None) -> None:
        super().__init__()
        self.size = size

    def find(self, k: int) -> Block | None:
        found = self.get(k)
        if found is not None:
            self.move_to_end(k)
        return found

    def put(self, k: int, block: Block) -> None:
        if self.size == 0:
            return
        self[k] = block
        if self.size is not None and len(self) > self.size:
            self.popitem(last=False)


class StreamLayout:
    """What the columns streaming one text at one width and font size share: where its blocks
    start, and the blocks laid out last (`stream_layout`)."""

    def __init__(
        self, text: str, styles: StyleIds, cols: int, size: int, shared: int | None = SHARED, section: int = SECTION, block: int = BLOCK
    ) -> None:
        """shared: how many blocks to keep for other columns (None: every one); section, block:
        see sections.py."""
        self.text, self.styles, self.cols, self.size = text, styles, cols, size
        self.cuts, self.bounds = sections(text, section, block)
        self._recent = _Recent(shared)

    @property
    def count(self) -> int:
        return len(self.bounds) - 1

    def block(self, k: int) -> Block:
        found = self._recent.find(k)
        if found is None:
            found = lay_block(self.text, self.styles, self.bounds[k], self.bounds[k + 1], self.cuts, self.cols, self.size)
            self._recent.put(k, found)
        return found


@lru_cache(maxsize=4)
def stream_layout(text: str, styles: StyleIds, cols: int, size: int) -> StreamLayout:
    """The one layout of a text at a width and size: arms that stream the same answer (a
    lossless drafter gives its target's) share the blocks laid out; only where their chunks end
    differs."""
    return StreamLayout(text, styles, cols, size)


class ArmLayout:
    """One column's lines of a stream: where each of its chunks ends in the text, and its lines
    numbered from the first block it laid out."""

    def __init__(self, stream: StreamLayout, chunk_ends: Sequence[int], kept: int | None = KEPT) -> None:
        """kept: how many blocks to hold (None: every one read)."""
        self.stream, self.ends = stream, chunk_ends
        self._blocks = _Recent(kept)
        self._read: OrderedDict[int, tuple[Block, array[int]]] = OrderedDict()
        self.lo = 0  # numbers[i] is the number of block lo + i's first line, where known
        self.numbers: list[int] = []

    def block(self, k: int) -> Block:
        found = self._blocks.find(k)
        if found is None:
            found = self.stream.block(k)
            self._blocks.put(k, found)
        return found

    def _span(self, k: int) -> int:
        """Lines block k adds before block k + 1's first: its last one is that one when empty."""
        lines = self.block(k).lines
        return len(lines) - (1 if k + 1 < self.stream.count and lines.last_empty() else 0)

    def first_line(self, k: int) -> int:
        """The number of block k's first line, laying out the blocks between it and those known."""
        if not self.numbers:
            self.lo, self.numbers = k, [0]
        while k < self.lo:
            self.lo -= 1
            self.numbers.insert(0, self.numbers[0] - self._span(self.lo))
        while k >= self.lo + len(self.numbers):
            self.numbers.append(self.numbers[-1] + self._span(self.lo + len(self.numbers) - 1))
        return self.numbers[k - self.lo]

    def _starts(self, k: int, block: Block) -> array[int]:
        """Where block k's clusters start (from its start), read back whole for the last few
        blocks a caret was found in; a block keeps them as 1-byte steps."""
        found = self._read.get(k)
        if found is None or found[0] is not block:
            found = self._read[k] = (block, block.starts.absolute())
            if len(self._read) > READ:
                self._read.popitem(last=False)
        self._read.move_to_end(k)
        return found[1]

    def _caret_after(self, end: int) -> tuple[int, int]:
        """(line, col) once text[:end] shows: after the last cluster that starts before end."""
        bounds = self.stream.bounds
        k = max(0, bisect_right(bounds, end - 1, 0, self.stream.count) - 1) if end > 0 else 0
        first = self.first_line(k)
        block = self.block(k)
        shown = bisect_left(self._starts(k, block), end - bounds[k])
        if not shown:
            return first, 0
        line, col = block.after[shown - 1]
        return first + line, col

    def _end(self, visible: int) -> int:
        if not 0 <= visible <= len(self.ends):
            raise IndexError("chunk count out of range")
        return self.ends[visible - 1] if visible else 0

    def caret(self, visible: int) -> tuple[int, int]:
        """(line, col) after the first `visible` chunks."""
        return self._caret_after(self._end(visible))

    def window(self, visible: int, rows: int) -> tuple[int, int, int]:
        """(top line, caret line, caret col) of a rows-line view ending at the caret after the
        first `visible` chunks: blocks above are laid out until it is full or the text starts."""
        line, col = self.caret(visible)
        top = line - rows + 1
        while self.lo > 0 and top < self.numbers[0]:
            self.first_line(self.lo - 1)
        return max(top, self.numbers[0]), line, col

    def line(self, n: int) -> tuple[Cell, ...]:
        """Line n, of a block whose first line's number is known (`first_line`)."""
        i = bisect_right(self.numbers, n) - 1
        if i < 0:
            raise IndexError("line not laid out")
        k = self.lo + i
        if k + 1 < self.stream.count and n - self.numbers[i] >= self._span(k):  # the next block's
            self.first_line(k + 1)
            return self.line(n)
        return self.block(k).lines[n - self.numbers[i]]


class AllLines(Sequence[tuple[Cell, ...]]):
    """Every line of a column's stream, indexed from the first (every block laid out)."""

    def __init__(self, layout: ArmLayout) -> None:
        self.layout = layout
        self.base = layout.first_line(0)
        last = layout.stream.count - 1
        self.total = layout.first_line(last) + len(layout.block(last).lines) - self.base

    def __len__(self) -> int:
        return self.total

    @overload
    def __getitem__(self, k: int) -> tuple[Cell, ...]: ...

    @overload
    def __getitem__(self, k: slice) -> list[tuple[Cell, ...]]: ...

    def __getitem__(self, k: int | slice) -> tuple[Cell, ...] | list[tuple[Cell, ...]]:
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(self.total))]
        if k < 0:
            k += self.total
        if not 0 <= k < self.total:
            raise IndexError("line index out of range")
        return self.layout.line(self.base + k)

    def __iter__(self) -> Iterator[tuple[Cell, ...]]:
        return (self[k] for k in range(self.total))


@dataclass
class TextLayout:
    """Wrapped lines of a whole stream, and where the caret is after each prefix of it.

    caret[v] is (line, col) after the first v chunks; every cell of lines before the caret's
    line, and of the caret's line left of col, is visible at that point.
    """

    lines: Sequence[tuple[Cell, ...]]
    caret: Sequence[tuple[int, int]]


def layout_stream(text: str, styles: Sequence[str], chunk_ends: Sequence[int], cols: int, size: int = 18) -> TextLayout:
    """The whole layout of a stream at once, every block held (chunk_ends[v]: where the first
    v+1 chunks end in text; size: the font size in px shaped paragraphs are laid out at)."""
    layout = ArmLayout(StreamLayout(text, style_ids(styles), cols, size, shared=0), chunk_ends, kept=None)
    lines = AllLines(layout)
    caret = Carets()
    for visible in range(len(chunk_ends) + 1):
        caret.append(*layout.caret(visible))
    return TextLayout(lines, caret)
