"""The units text is laid out in: grid cells, clusters, and the grid's metrics at a font size.

A cell is one cluster (or a merged right-to-left run) on the monospace grid; a cluster is a
cell with where it starts in the source text and how wrapping treats it. SHAPED marks a whole
paragraph laid out on shaped widths instead (paragraph.py), which wrapping places line by line.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

from tokenreel.renderer.text import fonts, shaping

LINE_SPACING = 1.45  # line height / font size
GLYPH, SPACE, TAB, NEWLINE, BREAK, SHAPED = range(6)
HANGUL_PROBE = "가"  # a Hangul syllable: every syllable of a coding font has its advance


class Cell(NamedTuple):
    """One cluster placed on the grid; font None draws a replacement box."""

    text: str
    font: str | None
    width: int
    style: str


class Cluster(NamedTuple):
    """A cell with where it starts in the source text; kind says how wrapping treats it
    (for SHAPED, cell is the paragraph.ShapedParagraph)."""

    start: int  # offset of its first character in the source text
    kind: int
    cell: Any


@lru_cache(maxsize=None)
def cell_metrics(size: int) -> tuple[int, int, int]:
    """(cell width, line height, baseline from the line's top) of the grid at a font size."""
    regular = fonts.load(fonts.REGULAR, size)
    line_h = max(2, round(size * LINE_SPACING))
    ascent, descent = regular.getmetrics()
    return max(1, round(regular.getlength("M"))), line_h, (line_h - ascent - descent) // 2 + ascent


@lru_cache(maxsize=None)
def glyph_size64(font: str, size: int) -> int:
    """The size (1/64 px) shaped glyphs of a font are drawn at on a grid of this font size.

    Hangul is drawn so a syllable fills its two cells, as a coding font draws it in a
    terminal (its syllables are two of its own half-width cells, which are narrower than the
    grid's); every other font at the grid's size."""
    if font != fonts.HANGUL:
        return size * 64
    advance = shaping.advance(HANGUL_PROBE, font)
    return (2 * cell_metrics(size)[0] * shaping.units_per_em(font) * 64 + advance // 2) // advance
