"""HarfBuzz shaping of one run of text (one font, one direction): which glyphs, and where.

uharfbuzz's wheels carry HarfBuzz itself, so shaping needs no system library and gives the
same glyphs and positions on every machine with the pinned version. Positions are in font
units (the font's scale is its units per em), so they scale exactly to any pixel size; text is
added as codepoints, so a glyph's cluster is the index of its first character in the run.
A right-to-left run comes back in visual order (left to right), mirrored characters mirrored.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import uharfbuzz as hb

from tokenreel import assets


class Glyph(NamedTuple):
    gid: int
    cluster: int  # index in the run of the first character it draws
    x_advance: int  # font units
    x_offset: int
    y_offset: int


@lru_cache(maxsize=None)
def _font(filename: str) -> hb.Font:
    return hb.Font(hb.Face(assets.file("fonts", filename).read_bytes()))


def units_per_em(filename: str) -> int:
    upem: int = _font(filename).face.upem
    return upem


@lru_cache(maxsize=16384)
def shape(text: str, filename: str, rtl: bool = False) -> tuple[Glyph, ...]:
    """The glyphs of text in the font, in visual order; default features (kerning, ligatures,
    the joining forms and mark positioning a script needs)."""
    buffer = hb.Buffer()
    buffer.add_codepoints([ord(c) for c in text])
    buffer.direction = "rtl" if rtl else "ltr"
    buffer.guess_segment_properties()
    hb.shape(_font(filename), buffer, {})
    return tuple(
        Glyph(info.codepoint, info.cluster, pos.x_advance, pos.x_offset, pos.y_offset)
        for info, pos in zip(buffer.glyph_infos, buffer.glyph_positions, strict=False)
    )


def advance(text: str, filename: str, rtl: bool = False) -> int:
    """The shaped run's width, in font units."""
    return sum(g.x_advance for g in shape(text, filename, rtl))


def color_png(filename: str, gid: int, ppem: int) -> bytes:
    """The PNG a colour bitmap font (CBDT, as Noto Color Emoji) holds for a glyph at a strike."""
    font = _font(filename)
    font.ppem = (ppem, ppem)
    return bytes(font.get_glyph_color_png(gid).data)


def versions() -> dict[str, str]:
    return {"harfbuzz": hb.version_string(), "uharfbuzz": hb.__version__}
