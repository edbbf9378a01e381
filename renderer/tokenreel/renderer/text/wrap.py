"""Clusters into lines: greedy word wrap of a stream, laid out from its final text a block at a
time (blocks.py).

A prose paragraph holding right-to-left text (Arabic, Hebrew) leaves the grid: paragraph.py lays
it out on shaped widths in bidi order, right-aligned when it reads right to left, and wrapping
places its lines whole; on the grid (code, one-line UI text) RTL runs are merged (rtl_runs.py).
A frame shows a prefix of the layout, so words never jump while they stream and no frame
re-wraps anything. Wrapped code keeps a hanging indent: a code line's continuation rows start
right of its own indentation, behind one blank cell. Clusters stream through the wrap and the
layout keeps palette indices and int arrays, so a long run costs a few bytes per character, not
an object.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple, cast, overload

from tokenreel.renderer.text import fonts, paragraph
from tokenreel.renderer.text.cells import BREAK, GLYPH, NEWLINE, SHAPED, SPACE, TAB, Cell, Cluster
from tokenreel.renderer.text.clusters import NEWLINES, clusters, iter_clusters, lone_cell
from tokenreel.renderer.text.highlight import CODE_STYLES
from tokenreel.renderer.text.markup import BULLET, PAD, RULE
from tokenreel.renderer.text.offsets import Offsets
from tokenreel.renderer.text.palette import Palette
from tokenreel.renderer.text.rtl_runs import RtlRuns, merge_rtl_runs
from tokenreel.renderer.text.style_ids import StyleIds

TAB_STOP = 4
# Wrapped rows of a code line start this many cells right of the line's indentation: off the
# 4-cell grid most answers' code is indented on (Python, the default language, uses 4), so a
# continuation cannot be mistaken for a nested block or the next statement, and cheap enough
# for a 51-column third of a 1080p frame.
HANGING_INDENT = 2


class CellLines(Sequence[tuple[Cell, ...]]):
    """Wrapped lines stored compactly: per placed cell an index into a palette of distinct cells
    (1, 2 or 4 bytes: `Palette`), per line where its cells start; a shaped paragraph's line as its paragraph
    and number (made again when read). Indexing gives the line's cells as a tuple."""

    def __init__(self) -> None:
        self.cells: Palette[Cell] = Palette()
        self.starts = array("I", [0])  # starts[k]..starts[k+1] are line k's cells; the last line is open
        self.laids: list[paragraph._Laid] = []  # the shaped paragraphs placed
        self._shaped_at = array("I")  # lines holding a shaped paragraph's line, in order
        self._shaped_laid = array("I")  # which paragraph (an index into laids)
        self._shaped_number = array("I")  # and which of its lines

    def place(self, cell: Cell) -> None:
        """Append a cell to the last line."""
        if isinstance(cell, paragraph.ShapedLine):
            if not self.laids or self.laids[-1] is not cell.laid:
                self.laids.append(cell.laid)
            self._shaped_at.append(len(self.starts) - 1)
            self._shaped_laid.append(len(self.laids) - 1)
            self._shaped_number.append(cell.number)
            return
        self.cells.append(cell)

    def new_line(self) -> None:
        self.starts.append(len(self.cells.ids))

    def last_empty(self) -> bool:
        """Whether the last line holds nothing (after a line break it does not, yet)."""
        shaped = bool(self._shaped_at) and self._shaped_at[-1] == len(self.starts) - 1
        return self.starts[-1] == len(self.cells.ids) and not shaped

    def __len__(self) -> int:
        return len(self.starts)

    @overload
    def __getitem__(self, k: int) -> tuple[Cell, ...]: ...

    @overload
    def __getitem__(self, k: slice) -> list[tuple[Cell, ...]]: ...

    def __getitem__(self, k: int | slice) -> tuple[Cell, ...] | list[tuple[Cell, ...]]:
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        n = len(self.starts)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError("line index out of range")
        end = self.starts[k + 1] if k + 1 < n else len(self.cells.ids)
        cells = tuple(map(self.cells.keys.__getitem__, self.cells.ids[self.starts[k] : end]))
        s = bisect_left(self._shaped_at, k)
        if s < len(self._shaped_at) and self._shaped_at[s] == k:
            line = paragraph.ShapedLine(self.laids[self._shaped_laid[s]], self._shaped_number[s])
            return (cast(Cell, line), *cells)  # read as a Cell is (paragraph.ShapedLine)
        return cells

    def __iter__(self) -> Iterator[tuple[Cell, ...]]:
        return (self[k] for k in range(len(self)))


class Carets(Sequence[tuple[int, int]]):
    """(line, col) pairs appended with lines never decreasing, in a byte each while cols fit
    one: the cols, and per line the index of its first caret (a line's carets are contiguous)."""

    def __init__(self) -> None:
        self.firsts = array("I")  # firsts[line]: the first caret on that line or after it
        self.cols = array("B")

    def append(self, line: int, col: int) -> None:
        while len(self.firsts) <= line:
            self.firsts.append(len(self.cols))
        if col > 0xFF and self.cols.typecode == "B":
            self.cols = array("I", self.cols)
        self.cols.append(col)

    def __len__(self) -> int:
        return len(self.cols)

    @overload
    def __getitem__(self, v: int) -> tuple[int, int]: ...

    @overload
    def __getitem__(self, v: slice) -> list[tuple[int, int]]: ...

    def __getitem__(self, v: int | slice) -> tuple[int, int] | list[tuple[int, int]]:
        if isinstance(v, slice):
            return [self[j] for j in range(*v.indices(len(self)))]
        if v < 0:
            v += len(self.cols)
        if not 0 <= v < len(self.cols):
            raise IndexError("caret index out of range")
        return bisect_right(self.firsts, v) - 1, self.cols[v]


def continuation_indent(lead: int, cols: int) -> int:
    """Where the wrapped rows of a code line indented by lead cells start, in a cols-cell column.

    Its own indentation plus HANGING_INDENT, so a continuation never reads as the next
    statement; at most half the column (and none below 3 cols), so at least half the width,
    and never less than 2 cells (a wide glyph), is left for text.
    """
    return min(lead + HANGING_INDENT, cols // 2, max(0, cols - 2))


def _wrap(
    items: Iterable[Cluster],
    cols: int,
    place: Callable[[Cell], None],
    new_line: Callable[[], None],
    caret: Callable[[int, int], None],
) -> None:
    """Greedy word wrap into cols cells, told cell by cell: place(cell) on the last line,
    new_line(), and caret(line, col) once per cluster, in order, with the caret after it.

    A source line whose first glyph is code (highlight.CODE_STYLES) continues its wrapped rows
    behind a blank cell at its own indentation plus HANGING_INDENT (see continuation_indent); a
    list item's (its first glyph a markdown.BULLET marker) behind a blank cell as wide as its
    indentation and marker, so they start under the item's text (at most half the column).
    That depends only on the line's own start, so the layout stays a function of the text and
    cols, and cells already placed never move."""
    line = col = line_start = 0
    start = 0  # where the current row's text starts: 0, or a continuation row's indent
    pending = False  # a space overflowed: the next word starts a new line
    word: list[Cell] = []
    leading = True  # still in the source line's leading whitespace
    lead = 0  # width of that whitespace, in cells
    hang: Cell | None = None  # the blank cell continuation rows of this source line start with
    marker = False  # in a list item's marker (markdown.BULLET): its text, and its rows, start after it

    def break_line(continued: bool = True) -> None:
        """End the row; a continued source line carries on behind its hanging indent."""
        nonlocal line, col, start
        new_line()
        line += 1
        col = start = 0
        if continued and hang is not None:
            place(hang)
            col = start = hang.width

    def new_source_line() -> None:
        nonlocal leading, lead, hang, marker
        leading, lead, hang, marker = True, 0, None, False

    def place_word() -> None:
        nonlocal col, pending
        if not word:
            return
        if pending:
            break_line()
            pending = False
        width = sum(cell.width for cell in word)
        if col > start and col + width > cols:
            break_line()
        # A word wider than the row breaks between its tokens (`tokens`), never inside one that
        # fits a row: "day.replace(" wraps as "day." / "replace(", not "day.re" / "place(".
        for piece in tokens(word) if col + width > cols else (word,):
            if col > start and col + sum(cell.width for cell in piece) > cols:
                break_line()
            for cell in piece:
                if col > start and col + cell.width > cols:
                    break_line()
                place(cell)
                col += cell.width
                caret(line, col)
        word.clear()

    for item in items:
        kind, cell = item.kind, item.cell
        if kind == SHAPED:  # a whole paragraph, laid out already: its lines, then its carets
            place_word()
            if col:
                break_line(continued=False)
            first = line
            for number, shaped_line in enumerate(cell.lines):
                if number:
                    break_line(continued=False)
                place(shaped_line)
            for number, shown in cell.carets():
                caret(first + number, shown)
            col = cols  # the paragraph's last line counts as full: a stream break after it starts a new one
            continue
        if marker and cell.style != BULLET:
            marker = False
            place_word()
            indent = min(col, cols // 2, max(0, cols - 2)) if line_start == line else 0
            hang = Cell(" ", fonts.REGULAR, indent, "text") if indent else None
        if leading and kind in (SPACE, TAB):
            lead += TAB_STOP - lead % TAB_STOP if kind == TAB else 1
        elif leading and kind == GLYPH:
            leading = False
            marker = cell.style == BULLET
            line_start = line
            indent = continuation_indent(lead, cols) if cell.style in CODE_STYLES else 0
            hang = Cell(" ", fonts.REGULAR, indent, "code") if indent else None  # blank: one tile per width
        if kind == GLYPH:
            if cell.width > 1:
                place_word()
                word.append(cell)
                place_word()
            else:
                word.append(cell)
            continue
        if word:
            place_word()
        if kind == NEWLINE:
            pending = False
            new_source_line()
            break_line(continued=False)
        elif kind == BREAK:
            new_source_line()
            if col or pending:
                pending = False
                break_line(continued=False)
        elif not pending:
            width = TAB_STOP - col % TAB_STOP if kind == TAB else 1
            if col + width > cols:
                pending = True
            else:
                place(cell if cell.width == width else cell._replace(width=width))
                col += width
        caret(line, col)
    place_word()


# Closing punctuation stays with what it closes: no row starts with it where a token break is free.
_CLOSERS = frozenset(")]}>,;:")


def _identifier(cell: Cell) -> bool:
    return cell.text.isalnum() or cell.text == "_"


def tokens(word: Sequence[Cell]) -> list[list[Cell]]:
    """A word (glyphs between spaces) cut where a row may end: between an identifier (letters,
    digits, _) and punctuation, or between two punctuation marks, but never before a closer."""
    pieces: list[list[Cell]] = []
    for cell in word:
        if pieces:
            last = pieces[-1][-1]
            joined = (_identifier(last) and _identifier(cell)) or cell.text in _CLOSERS
            if joined:
                pieces[-1].append(cell)
                continue
        pieces.append([cell])
    return pieces


def wrap(items: Iterable[Cluster], cols: int) -> tuple[list[tuple[Cell, ...]], list[tuple[int, int]]]:
    """Greedy word wrap into cols cells; words longer than a line are hard-wrapped.

    Returns the lines and the caret after each cluster. A space or tab that does not fit ends
    the line and is not drawn. Wrapped rows of a code line start with one blank cell as wide as
    their hanging indent; prose rows start at column 0.
    """
    lines: list[list[Cell]] = [[]]
    carets: list[tuple[int, int]] = []
    runs = RtlRuns(lambda cell: lines[-1].append(cell), lambda: lines.append([]))
    _wrap(items, cols, runs.place, runs.new_line, lambda line, col: carets.append((line, col)))
    runs.flush()
    return [tuple(line) for line in lines], carets


def fit_tables(items: Iterable[Cluster], cols: int) -> Iterator[Cluster]:
    """The clusters as they are, but a markdown table row wider than the column (markdown.py
    pads every row to the table's width) loses its alignment padding (markdown.PAD), and its
    header rule (markdown.RULE) is cut to the column: rows without the pipes, wrapped as prose.
    Only those styles are ever dropped, so a line is held back from its first one to its end."""
    held: list[Cluster] = []
    width = 0
    for item in items:
        if item.kind in (NEWLINE, BREAK):
            yield from _fit_row(held, width > cols, cols - (width - sum(i.cell.width for i in held)))
            yield item
            held.clear()
            width = 0
            continue
        width += item.cell.width if item.kind != SHAPED else 0
        if held or item.cell.style in (PAD, RULE):
            held.append(item)
        else:
            yield item
    yield from _fit_row(held, width > cols, cols - (width - sum(i.cell.width for i in held)))


def _fit_row(items: list[Cluster], wide: bool, room: int) -> list[Cluster]:
    """A row's clusters from its first PAD or RULE on: as they are when the row fits, else
    without the padding and with the rule cut to the room left on the line."""
    if not wide:
        return items
    out = []
    for item in items:
        if item.cell.style == PAD:
            continue
        if item.cell.style == RULE:
            room -= item.cell.width
            if room < 0:
                continue
        out.append(item)
    return out


def shape_paragraphs(items: Iterable[Cluster], cols: int, size: int, source: str = "") -> Iterator[Cluster]:
    """The clusters as they are, but each prose paragraph that holds right-to-left text as one
    SHAPED cluster laid out on shaped widths at the font size (paragraph.py). A paragraph ends
    at a line break or where the stream changes kind; it is held packed until then. source: the
    text the clusters were read from, which a paragraph shares when it is that text unchanged."""
    held = paragraph.Held()
    for item in items:
        if item.kind not in (NEWLINE, BREAK):
            held.append(item)
            continue
        yield from _paragraph(held, cols, size, source)
        held = paragraph.Held()
        yield item
    yield from _paragraph(held, cols, size, source)


def _paragraph(held: paragraph.Held, cols: int, size: int, source: str) -> Iterable[Cluster]:
    if held.wants_shaping():
        return [Cluster(held.starts.first, SHAPED, paragraph.layout(held, cols, size, source))]
    return held


class Block(NamedTuple):
    """A block of a stream (sections.py) laid out on its own: its lines, where each of its
    clusters starts (counted from the block's start), and the caret after each (lines counted
    from the block's first)."""

    lines: CellLines
    starts: Offsets
    after: Carets


_CUT = Cell("", fonts.REGULAR, 1, "text")


def lay_block(text: str, styles: StyleIds, start: int, end: int, cuts: Sequence[int], cols: int, size: int) -> Block:
    """Lay out text[start:end], which starts at a restart point (sections.py), at cols cells and
    a font size; cuts: where a long paragraph's lines are cut (those inside the block count).

    Clusters stream through the wrap and the lines are kept compactly, so memory grows by a few
    bytes per character, not by an object per character (only the current paragraph's clusters
    are held, until its end tells whether it holds right-to-left text)."""
    starts = Offsets()
    after = Carets()
    lines = CellLines()

    def tap(items: Iterable[Cluster]) -> Iterator[Cluster]:
        for item in items:
            if item.kind == SHAPED:
                starts.follow(item.cell.starts, start)
            else:
                starts.append(item.start - start)
            yield item

    def cut(items: Iterable[Cluster]) -> Iterator[Cluster]:
        inside = cuts[bisect_right(cuts, start) : bisect_left(cuts, end)]
        k = 0
        for item in items:
            while k < len(inside) and item.start >= inside[k]:
                yield Cluster(inside[k], BREAK, _CUT)
                k += 1
            yield item

    runs = RtlRuns(lines.place, lines.new_line)
    items = shape_paragraphs(fit_tables(cut(iter_clusters(text, styles, start=start, end=end)), cols), cols, size, text)
    _wrap(tap(items), cols, runs.place, runs.new_line, after.append)
    runs.flush()
    return Block(lines, starts, after)


def fit(text: str, cols: int, style: str, primary: str = fonts.REGULAR) -> list[Cell]:
    """One line of UI text: newlines and tabs become spaces, overflow ends with an ellipsis."""
    if cols <= 0:
        return []
    flat = "".join(" " if c in NEWLINES or c in "\r\t" else c for c in text)
    lone = [lone_cell(c, style, primary) for c in flat]
    merged: Callable[[list[Cell]], list[Cell]] = list  # no right-to-left cell: nothing to merge
    if any(cell is None for cell in lone):
        lone = [item.cell for item in clusters(flat, [style] * len(flat), primary) if item.kind != BREAK]
        merged = merge_rtl_runs
    cells = cast(list[Cell], lone)
    if sum(c.width for c in cells) <= cols:
        return merged(cells)
    out: list[Cell] = []
    used = 0
    for cell in cells:
        if used + cell.width > cols - 1:
            break
        out.append(cell)
        used += cell.width
    return [*merged(out), Cell("…", fonts.REGULAR, 1, style)]

