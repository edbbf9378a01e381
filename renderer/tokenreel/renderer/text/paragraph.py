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
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import NamedTuple

from tokenreel.renderer.text import bidi, fonts, raster, shaping
from tokenreel.renderer.text.cells import SPACE, TAB, Cell, Cluster, cell_metrics, glyph_size64
from tokenreel.renderer.text.highlight import CODE_STYLES

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

    Its pieces and cursor are shaped when a frame first draws the line and kept for the last
    LINES_KEPT lines drawn: a long answer costs its lines' units, packed, not their glyphs."""

    __slots__ = ("text", "width", "style", "rtl", "_units", "_geometry")
    font = SHAPED_FONT

    def __init__(self, units: _Packed, geometry: _Geometry, width: int, style: str) -> None:
        self.text, self.width, self.style, self.rtl = units.text, width, style, geometry.base == 1
        self._units, self._geometry = units, geometry

    @property
    def pieces(self) -> tuple[Piece, ...]:
        return _drawn(self)[0]

    @property
    def cursor(self) -> tuple[int, ...]:
        return _drawn(self)[1]


class ShapedParagraph(NamedTuple):
    lines: tuple[ShapedLine, ...]
    counts: array[int]  # clusters on each line
    starts: array[int]  # per cluster: where it starts in the source text

    def carets(self) -> Iterator[tuple[int, int]]:
        """Per cluster: (line of the paragraph, clusters of it shown)."""
        for number, count in enumerate(self.counts):
            for k in range(count):
                yield number, k + 1


def wants_shaping(items: Sequence[Cluster]) -> bool:
    """Prose (no code) with a right-to-left cluster in it."""
    rtl = False
    for item in items:
        if item.cell.style in CODE_STYLES:
            return False
        rtl = rtl or item.cell.font in fonts.RTL
    return rtl


class _Unit(NamedTuple):
    text: str
    font: str | None  # the font it is shaped with (a neutral takes its RTL neighbour's)
    style: str
    level: int
    space: bool
    wide: bool


class _Packed(NamedTuple):
    """A line's units in a few bytes each: their text, where each ends in it, their levels,
    and an index into the paragraph's palette of (font, style, space, wide)."""

    text: str
    ends: array[int]
    levels: bytes
    kinds: array[int]
    palette: list[tuple[str | None, str, bool, bool]]

    def units(self) -> list[_Unit]:
        out, at = [], 0
        for end, level, kind in zip(self.ends, self.levels, self.kinds, strict=True):
            font, style, space, wide = self.palette[kind]
            out.append(_Unit(self.text[at:end], font, style, level, space, wide))
            at = end
        return out


def _pack(units: Sequence[_Unit], palette: dict[tuple[str | None, str, bool, bool], int]) -> _Packed:
    ends, at = array("I"), 0
    for unit in units:
        at += len(unit.text)
        ends.append(at)
    kinds = array("H", (palette.setdefault((u.font, u.style, u.space, u.wide), len(palette)) for u in units))
    return _Packed("".join(u.text for u in units), ends, bytes(u.level for u in units), kinds, list(palette))


class _Geometry(NamedTuple):
    """What every line of a paragraph is laid out with."""

    size: int
    base: int
    cols: int
    grid4: int


def _units(items: Sequence[Cluster]) -> tuple[list[_Unit], int]:
    """The paragraph's clusters with their levels and shaping fonts; and its base level.

    A character that is not strongly directional (a space, punctuation, a digit) is shaped in
    the font of the right-to-left script beside it when that font has it, so a run of words
    stays one run and its punctuation matches its letters instead of the grid's coding font."""
    texts = [" " if item.kind in (SPACE, TAB) else item.cell.text for item in items]
    joined = "".join(texts)
    base = 1 if bidi.is_rtl_paragraph(joined) else 0
    levels = bidi.levels(joined)
    strong = [unicodedata.bidirectional(text[0]) in ("L", "R", "AL") for text in texts]
    first = next((item.cell.font for item, s in zip(items, strong, strict=False) if s), None)
    near = first if first in fonts.RTL else None  # the RTL font of the nearest strong unit before (else after)
    units, at = [], 0
    for k, (item, text) in enumerate(zip(items, texts, strict=False)):
        font = fonts.REGULAR if item.kind in (SPACE, TAB) else item.cell.font
        if strong[k]:
            near = font if font in fonts.RTL else None
        elif font not in TILE_FONTS:
            if near is not None and all(ord(c) in fonts.coverage(near) for c in text):
                font = near
        units.append(_Unit(text, font, item.cell.style, levels[at], item.kind in (SPACE, TAB), item.cell.width > 1))
        at += len(text)
    return units, base


def _runs(units: Sequence[_Unit], levels: Sequence[int]) -> list[tuple[int, int]]:
    """[start, end) of maximal runs of units with one font and level; tile units alone."""
    runs: list[tuple[int, int]] = []
    for k, unit in enumerate(units):
        joins = k and unit.font not in TILE_FONTS and units[k - 1].font == unit.font and levels[k - 1] == levels[k]
        if joins:
            runs[-1] = (runs[-1][0], k + 1)
        else:
            runs.append((k, k + 1))
    return runs


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

    def tile_w4(self, unit: _Unit) -> int:
        return (2 if unit.wide or unit.font == fonts.EMOJI else 1) * self.cell_w * Q

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

    def widths(self, units: Sequence[_Unit], levels: Sequence[int]) -> list[int]:
        """Each unit's share of its run's shaped width, quarter px (for breaking lines)."""
        out = [0] * len(units)
        for start, end in _runs(units, levels):
            if units[start].font in TILE_FONTS:
                out[start] = self.tile_w4(units[start])
                continue
            run = units[start:end]
            font: str = run[0].font  # type: ignore[assignment]
            owner = array("I")
            for index, unit in enumerate(run):
                owner.extend([start + index] * len(unit.text))
            size64 = glyph_size64(font, self.size)
            pen4 = pen = 0
            for cluster, x_advance in shaping.advances("".join(u.text for u in run), font, levels[start] % 2 == 1):
                pen += x_advance
                after = raster.scale4(pen, font, size64)
                out[owner[cluster]] += after - pen4
                pen4 = after
        return out


def _break(units: Sequence[_Unit], widths: Sequence[int], limit: int) -> list[tuple[int, int]]:
    """Greedy lines [start, end): break after a space or beside a wide cluster, where the width
    (trailing spaces not counted) would pass limit; a word longer than a line is cut."""
    lines: list[tuple[int, int]] = []
    start, used, last_break = 0, 0, None
    for k, unit in enumerate(units):
        if unit.space:
            used += widths[k]
            last_break = k + 1
            continue
        if unit.wide and k > start:
            last_break = k
        if used + widths[k] > limit and k > start:
            cut = last_break if last_break is not None and last_break > start else k
            lines.append((start, cut))
            start = cut
            used = sum(widths[start:k])
            last_break = None
        used += widths[k]
        if unit.wide:
            last_break = k + 1
    lines.append((start, len(units)))
    return lines


def layout(items: Sequence[Cluster], cols: int, size: int) -> ShapedParagraph:
    """Lay out one paragraph (no line breaks in it) into lines cols cells wide at a font size."""
    shaper = _Shaper(size)
    units, base = _units(items)
    levels = [u.level for u in units]
    geometry = _Geometry(size, base, cols, cols * shaper.cell_w * Q)
    palette: dict[tuple[str | None, str, bool, bool], int] = {}
    lines, counts = [], array("I")
    for start, end in _break(units, shaper.widths(units, levels), geometry.grid4):
        lines.append(ShapedLine(_pack(units[start:end], palette), geometry, cols, units[start].style if end > start else "text"))
        counts.append(end - start)
    return ShapedParagraph(tuple(lines), counts, array("I", (item.start for item in items)))


LINES_KEPT = 256  # shaped lines kept drawn (a frame shows a few dozen per column)


@lru_cache(maxsize=LINES_KEPT)
def _drawn(line: ShapedLine) -> tuple[tuple[Piece, ...], tuple[int, ...]]:
    geometry: _Geometry = line._geometry
    return _line(_Shaper(geometry.size), line._units.units(), geometry.base, geometry.grid4)


def _line(shaper: _Shaper, units: Sequence[_Unit], base: int, grid4: int) -> tuple[tuple[Piece, ...], tuple[int, ...]]:
    """One line's pieces and cursor: L1, runs in display order (L2), shaped and placed, aligned
    to its start edge."""
    shown = len(units)
    while shown and units[shown - 1].space:
        shown -= 1  # trailing spaces are not drawn and take no room (L1 puts them at the end)
    levels = bidi.line_levels("".join(u.text[0] for u in units[:shown]), [u.level for u in units[:shown]], base)
    runs = _runs(units[:shown], levels)
    placed: list[tuple[int, raster.Placed | None, Cell | None, int]] = []  # (unit, glyph, tile cell, x4)
    extents: dict[int, tuple[int, int]] = {}  # unit -> (left, right) quarter px
    x4 = 0
    for r in bidi.visual_order([levels[start] for start, _ in runs]):
        start, end = runs[r]
        unit = units[start]
        if unit.font in TILE_FONTS:
            width = shaper.tile_w4(unit)
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
