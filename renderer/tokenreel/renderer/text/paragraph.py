"""A prose paragraph with right-to-left text in it, laid out as its readers expect.

The monospace grid suits code and left-to-right prose; Arabic and Hebrew on it read wrong
(joined letters spread over cells, runs in the wrong order, gaps between them). So a paragraph
of prose holding right-to-left text is laid out on shaped widths instead: its direction from
its first strong character (UAX #9 P2-P3), levels from bidi.py, lines broken greedily at spaces
(and beside wide characters, as on the grid) where the shaped width passes the column, then
per line L1-L2 put its runs in display order and HarfBuzz shapes each. A right-to-left
paragraph is right-aligned. It is laid out once from the final text: a frame shows the glyphs
of the clusters that have arrived, so a line grows from its start edge as tokens arrive and
nothing already shown moves. Emoji and replacement boxes keep their grid tiles (2 and 1 cells).
"""

from __future__ import annotations

import unicodedata
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import NamedTuple

from tokenreel.renderer.text import bidi, fonts, raster, shaping
from tokenreel.renderer.text.cells import SPACE, TAB, Cell, Cluster, cell_metrics, glyph_size64
from tokenreel.renderer.text.highlight import CODE_STYLES
from tokenreel.renderer.text.offsets import Offsets
from tokenreel.renderer.text.palette import Palette

SHAPED_FONT = "shaped"  # the font of a ShapedLine: drawn from its pieces, not from one font
TILE_FONTS = frozenset({fonts.EMOJI, None})  # clusters drawn as their grid tile, not shaped
Q = raster.SUBPIXEL


class Piece(NamedTuple):
    """One drawn thing of a line: a shaped glyph, or a cell drawn as its tile at x4."""

    order: int  # index in the line of the cluster it belongs to
    style: str
    glyph: raster.Placed | None
    cell: Cell | None
    x4: int  # quarter px from the line's left edge (a tile's left; a glyph's pen is in glyph)


class ShapedLine:
    """A line of a shaped paragraph, as wide as the grid; text, font, width and style read as
    a Cell's do. cursor[k] is where the cursor's left edge goes once k clusters show.

    It is a line number of its paragraph's packed lines, made when read: two reads of one line
    are equal and share its pieces and cursor, shaped when a frame first draws the line and kept
    for the last LINES_KEPT lines drawn. A long answer costs a few bytes a character and nothing
    a line but its two offsets, not its glyphs nor an object."""

    __slots__ = ("laid", "number")
    font = SHAPED_FONT

    def __init__(self, laid: _Laid, number: int) -> None:
        self.laid, self.number = laid, number

    @property
    def width(self) -> int:
        return self.laid.geometry.cols

    @property
    def rtl(self) -> bool:
        return self.laid.geometry.base == 1

    @property
    def style(self) -> str:
        units, first, end = self.laid.units, self.laid.firsts[self.number], self.laid.firsts[self.number + 1]
        return units.palette[units.kinds[first]][1] if end > first else "text"

    @property
    def text(self) -> str:
        return self.laid.units.text[self.laid.ats[self.number] : self.laid.ats[self.number + 1]]

    @property
    def pieces(self) -> tuple[Piece, ...]:
        return _drawn(self)[0]

    @property
    def cursor(self) -> tuple[int, ...]:
        return _drawn(self)[1]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShapedLine) and other.laid is self.laid and other.number == self.number

    def __hash__(self) -> int:
        return hash((id(self.laid), self.number))


class ShapedParagraph(NamedTuple):
    laid: _Laid
    starts: Offsets  # per cluster: where it starts in the source text

    @property
    def lines(self) -> list[ShapedLine]:
        return [ShapedLine(self.laid, k) for k in range(len(self.laid.firsts) - 1)]

    def carets(self) -> Iterator[tuple[int, int]]:
        """Per cluster: (line of the paragraph, clusters of it shown)."""
        firsts = self.laid.firsts
        for number in range(len(firsts) - 1):
            for k in range(firsts[number + 1] - firsts[number]):
                yield number, k + 1


class Held:
    """A paragraph's clusters while its end tells whether it is shaped, packed: per cluster
    where it starts (a step from the last, a byte) and an index into a palette of distinct
    (kind, cell) (1 byte while there are few), not an object."""

    def __init__(self) -> None:
        self.clusters: Palette[tuple[int, Cell]] = Palette()
        self.starts = Offsets()
        self.code = self.rtl = False

    def append(self, item: Cluster) -> None:
        known = len(self.clusters.keys)
        self.clusters.append((item.kind, item.cell))
        if len(self.clusters.keys) > known:
            self.code = self.code or item.cell.style in CODE_STYLES
            self.rtl = self.rtl or item.cell.font in fonts.RTL
        self.starts.append(item.start)

    def __len__(self) -> int:
        return len(self.clusters.ids)

    def __iter__(self) -> Iterator[Cluster]:
        keys = self.clusters.keys
        for i, start in zip(self.clusters.ids, self.starts, strict=True):
            kind, cell = keys[i]
            yield Cluster(start, kind, cell)

    def wants_shaping(self) -> bool:
        """Prose (no code) with a right-to-left cluster in it."""
        return self.rtl and not self.code


class _Unit(NamedTuple):
    text: str
    font: str | None  # the font it is shaped with (a neutral takes its RTL neighbour's)
    style: str
    level: int
    space: bool
    wide: bool


class _Packed(NamedTuple):
    """A paragraph's units in about 3 bytes each: their text, where each ends in it (steps), their
    levels, and an index into the paragraph's palette of (font, style, space, wide)."""

    text: str
    ends: Offsets
    levels: bytearray
    kinds: array[int]
    palette: list[tuple[str | None, str, bool, bool]]

    def units(self, start: int, end: int, at: int) -> list[_Unit]:
        """Units [start, end), the first starting at `at` in text."""
        out, steps = [], self.ends.steps
        for k in range(start, end):
            font, style, space, wide = self.palette[self.kinds[k]]
            out.append(_Unit(self.text[at : at + steps[k]], font, style, self.levels[k], space, wide))
            at += steps[k]
        return out


class _Geometry(NamedTuple):
    """What every line of a paragraph is laid out with."""

    size: int
    base: int
    cols: int
    grid4: int


class _Laid(NamedTuple):
    """A laid-out paragraph: its units, and per line (one more at the end) its first unit and
    where that starts in the units' text."""

    units: _Packed
    firsts: array[int]
    ats: array[int]
    geometry: _Geometry


def _units(held: Held, source: str) -> tuple[_Packed, str, array[int], int, int]:
    """The paragraph's clusters with their levels and shaping fonts, packed; its text, where each
    unit ends in it (whole, while it is laid out) and where it starts in the packed text (the
    source the clusters were read from when it is that text unchanged: one string, not two);
    and its base level.

    A character that is not strongly directional (a space, punctuation, a digit) is shaped in
    the font of the right-to-left script beside it when that font has it, so a run of words
    stays one run and its punctuation matches its letters instead of the grid's coding font."""
    clusters, ids = held.clusters.keys, held.clusters.ids
    texts = [" " if kind in (SPACE, TAB) else cell.text for kind, cell in clusters]
    strong = [_strong(text) for text in texts]
    joined = "".join(map(texts.__getitem__, ids))
    base = 1 if bidi.is_rtl_paragraph(joined) else 0
    levels = bidi.levels(joined)
    first = next((clusters[i][1].font for i in ids if strong[i]), None)
    near = first if first in fonts.RTL else None  # the RTL font of the nearest strong unit before (else after)
    units: Palette[tuple[str | None, str, bool, bool]] = Palette()
    kind_of: dict[tuple[int, str | None], int] = {}  # (cluster's index, near) -> unit kind's index
    lengths = [len(text) for text in texts]
    ends, unit_levels = array("I"), bytearray()
    at = 0
    for i in ids:
        if strong[i]:
            font = clusters[i][1].font
            near = font if font in fonts.RTL else None
        kind = kind_of.get((i, near))
        if kind is None:
            kind = kind_of[i, near] = units.id(_unit_kind(clusters[i], texts[i], near))
        units.ids.append(kind)
        unit_levels.append(levels[at])
        at += lengths[i]
        ends.append(at)
    steps = Offsets()
    steps.extend(ends)
    shared = bool(held.starts) and source.startswith(joined, held.starts.first)
    shift = held.starts.first if shared else 0
    return _Packed(source if shared else joined, steps, unit_levels, units.ids, units.keys), joined, ends, shift, base


def _unit_kind(cluster: tuple[int, Cell], text: str, near: str | None) -> tuple[str | None, str, bool, bool]:
    """(font, style, space, wide) of a unit: a neutral takes the RTL font near it when it has it."""
    kind, cell = cluster
    space = kind in (SPACE, TAB)
    font = fonts.REGULAR if space else cell.font
    if font not in TILE_FONTS and near is not None and not _strong(text) and all(ord(c) in fonts.coverage(near) for c in text):
        font = near
    return font, cell.style, space, cell.width > 1


def _strong(text: str) -> bool:
    return unicodedata.bidirectional(text[0]) in ("L", "R", "AL")


def _runs(keys: Iterable[tuple[str | None, int]]) -> Iterator[tuple[int, int]]:
    """[start, end) of maximal runs of units with one (font, level); tile units alone."""
    start, last = 0, None
    for k, key in enumerate(keys):
        if k and (key[0] in TILE_FONTS or key != last):
            yield start, k
            start = k
        last = key
    if last is not None:
        yield start, k + 1


class _Glyph(NamedTuple):
    placed: raster.Placed
    unit: int  # index in the run of the unit it belongs to
    pen4: int  # its pen (before its offset), quarter px from the run's left
    advance4: int


class _Shaper:
    """Shapes runs of units at one grid size: glyph positions, and widths in quarter px."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.cell_w = cell_metrics(size)[0]

    def tile_w4(self, font: str | None, wide: bool) -> int:
        return (2 if wide or font == fonts.EMOJI else 1) * self.cell_w * Q

    def glyphs(self, units: Sequence[_Unit], rtl: bool) -> tuple[list[_Glyph], int]:
        """A run's glyphs, in display order, placed from x 0; and the run's width."""
        font: str = units[0].font  # type: ignore[assignment]
        text = "".join(u.text for u in units)
        owner: list[int] = []
        for index, unit in enumerate(units):
            owner.extend([index] * len(unit.text))
        shaped = shaping.shape(text, font, rtl)
        size64 = glyph_size64(font, self.size)
        placed, width = raster.place(shaped, font, size64)
        out, pen = [], 0
        for p, g in zip(placed, shaped, strict=False):
            pen4 = raster.scale4(pen, font, size64)
            pen += g.x_advance
            out.append(_Glyph(p, owner[g.cluster], pen4, raster.scale4(pen, font, size64) - pen4))
        return out, width

    def widths(self, units: _Packed, text: str, ends: array[int]) -> array[int]:
        """Each unit's share of its run's shaped width, quarter px (for breaking lines); ends:
        where each unit ends in the paragraph's text."""
        out = array("i", bytes(4 * len(ends)))
        fonts_ = (units.palette[kind][0] for kind in units.kinds)
        for start, end in _runs(zip(fonts_, units.levels, strict=True)):
            font, _, _, wide = units.palette[units.kinds[start]]
            if font in TILE_FONTS:
                out[start] = self.tile_w4(font, wide)
                continue
            assert font is not None
            first = ends[start - 1] if start else 0
            size64 = glyph_size64(font, self.size)
            pen4 = pen = 0
            run = text[first : ends[end - 1]]
            for cluster, x_advance in shaping.advances(run, font, units.levels[start] % 2 == 1):
                pen += x_advance
                after = raster.scale4(pen, font, size64)
                out[bisect_right(ends, first + cluster, start, end)] += after - pen4
                pen4 = after
        return out


def _break(units: _Packed, widths: array[int], limit: int) -> list[tuple[int, int]]:
    """Greedy lines [start, end): break after a space or beside a wide cluster, where the width
    (trailing spaces not counted) would pass limit; a word longer than a line is cut."""
    lines: list[tuple[int, int]] = []
    start, used, last_break = 0, 0, None
    for k, kind in enumerate(units.kinds):
        _, _, space, wide = units.palette[kind]
        if space:
            used += widths[k]
            last_break = k + 1
            continue
        if wide and k > start:
            last_break = k
        if used + widths[k] > limit and k > start:
            cut = last_break if last_break is not None and last_break > start else k
            lines.append((start, cut))
            start = cut
            used = sum(widths[start:k])
            last_break = None
        used += widths[k]
        if wide:
            last_break = k + 1
    lines.append((start, len(units.kinds)))
    return lines


def layout(held: Held, cols: int, size: int, source: str = "") -> ShapedParagraph:
    """Lay out one paragraph (no line breaks in it) into lines cols cells wide at a font size;
    source: the text its clusters were read from, if at hand."""
    shaper = _Shaper(size)
    units, text, ends, shift, base = _units(held, source)
    geometry = _Geometry(size, base, cols, cols * shaper.cell_w * Q)
    firsts, ats = array("I"), array("I")
    for start, _ in _break(units, shaper.widths(units, text, ends), geometry.grid4):
        firsts.append(start)
        ats.append(shift + (ends[start - 1] if start else 0))
    firsts.append(len(units.kinds))
    ats.append(shift + len(text))
    return ShapedParagraph(_Laid(units, firsts, ats, geometry), held.starts)


LINES_KEPT = 256  # shaped lines kept drawn (a frame shows a few dozen per column)


@lru_cache(maxsize=LINES_KEPT)
def _drawn(line: ShapedLine) -> tuple[tuple[Piece, ...], tuple[int, ...]]:
    laid, k = line.laid, line.number
    geometry = laid.geometry
    units = laid.units.units(laid.firsts[k], laid.firsts[k + 1], laid.ats[k])
    return _line(_Shaper(geometry.size), units, geometry.base, geometry.grid4)


def _line(shaper: _Shaper, units: Sequence[_Unit], base: int, grid4: int) -> tuple[tuple[Piece, ...], tuple[int, ...]]:
    """One line's pieces and cursor: L1, runs in display order (L2), shaped and placed, aligned
    to its start edge."""
    shown = len(units)
    while shown and units[shown - 1].space:
        shown -= 1  # trailing spaces are not drawn and take no room (L1 puts them at the end)
    levels = bidi.line_levels("".join(u.text[0] for u in units[:shown]), [u.level for u in units[:shown]], base)
    runs = list(_runs(zip((u.font for u in units[:shown]), levels, strict=True)))
    placed: list[tuple[int, raster.Placed | None, Cell | None, int]] = []  # (unit, glyph, tile cell, x4)
    extents: dict[int, tuple[int, int]] = {}  # unit -> (left, right) quarter px
    x4 = 0
    for r in bidi.visual_order([levels[start] for start, _ in runs]):
        start, end = runs[r]
        unit = units[start]
        if unit.font in TILE_FONTS:
            width = shaper.tile_w4(unit.font, unit.wide)
            placed.append((start, None, Cell(unit.text, unit.font, width // (shaper.cell_w * Q), unit.style), x4))
            extents[start] = (x4, x4 + width)
        else:
            glyphs, width = shaper.glyphs(units[start:end], levels[start] % 2 == 1)
            for g in glyphs:
                k = start + g.unit
                placed.append((k, g.placed._replace(x4=g.placed.x4 + x4), None, 0))
                left, right = extents.get(k, (x4 + g.pen4, x4 + g.pen4))
                extents[k] = (min(left, x4 + g.pen4), max(right, x4 + g.pen4 + g.advance4))
        x4 += width
    shift = grid4 - x4 if base else 0  # right-aligned when the paragraph is right to left
    pieces = tuple(
        Piece(k, units[k].style, glyph._replace(x4=glyph.x4 + shift) if glyph else None, cell, at + shift)
        for k, glyph, cell, at in placed
    )
    cursor_w = max(1, shaper.cell_w // 2)
    right_edge = grid4 // Q - cursor_w
    edge = right_edge if base else 0
    cursor = [edge]
    for k in range(len(units)):
        if k in extents:
            left, right = extents[k]
            edge = (left + shift) // Q - cursor_w if levels[k] % 2 else (right + shift + Q - 1) // Q
        cursor.append(min(max(edge, 0), right_edge))
    return pieces, tuple(cursor)


def place_bidi(text: str, font: str, size64: int) -> tuple[list[raster.Placed], int]:
    """One line of one font (a merged right-to-left run on the grid) in display order: its level
    runs (a number in Arabic text is a left-to-right run) shaped each in its direction and
    placed left to right. The glyphs, and the line's width in quarter px."""
    levels = bidi.levels(text)
    runs: list[tuple[int, int]] = []
    for k in range(len(text)):
        if runs and levels[k] == levels[k - 1]:
            runs[-1] = (runs[-1][0], k + 1)
        else:
            runs.append((k, k + 1))
    placed: list[raster.Placed] = []
    x4 = 0
    for r in bidi.visual_order([levels[start] for start, _ in runs]):
        start, end = runs[r]
        glyphs, x4 = raster.place(shaping.shape(text[start:end], font, levels[start] % 2 == 1), font, size64, x4)
        placed.extend(glyphs)
    return placed, x4
