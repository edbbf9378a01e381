"""Glyphs by id into pixels: FreeType for outlines, the font's own PNGs for colour emoji.

Shaped text is a list of glyph ids, which Pillow cannot draw; freetype-py's wheels carry
FreeType, so outlines rasterise the same everywhere with the pinned version, and colour
bitmaps (CBDT) come out of HarfBuzz as the PNGs they are stored as, decoded by Pillow. Glyphs
are drawn unhinted, as HarfBuzz positions them, at a quarter-pixel horizontal phase, so joined
scripts connect; positions are computed in integers from font units, so no float rounding can
differ between machines. Every glyph image is cached.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from functools import lru_cache
from importlib.metadata import version
from typing import NamedTuple

import freetype
import numpy as np
from PIL import Image

from tokenreel import assets
from tokenreel.renderer.text import shaping

SUBPIXEL = 4  # horizontal glyph positions are kept to a quarter pixel
_IDENTITY = freetype.Matrix(0x10000, 0, 0, 0x10000)
_LOAD = freetype.FT_LOAD_NO_HINTING | freetype.FT_LOAD_RENDER


class GlyphImage(NamedTuple):
    coverage: np.ndarray  # (h, w) uint8
    left: int  # px from the pen position to the image's left edge
    top: int  # px from the baseline up to the image's top edge


class Placed(NamedTuple):
    """A glyph where it goes: x in quarter pixels from the left edge, y offset in pixels (up)."""

    font: str
    size64: int  # the font's size in 1/64 px
    gid: int
    x4: int
    dy: int


@lru_cache(maxsize=64)
def _face(filename: str, size64: int) -> freetype.Face:
    face = freetype.Face(str(assets.file("fonts", filename)))
    face.set_char_size(size64)
    return face


@lru_cache(maxsize=32768)
def outline(filename: str, size64: int, gid: int, phase: int) -> GlyphImage:
    """A glyph's coverage at a size, its pen at `phase` quarter pixels right of a pixel edge."""
    face = _face(filename, size64)
    face.set_transform(_IDENTITY, freetype.Vector(phase * 64 // SUBPIXEL, 0))
    face.load_glyph(gid, _LOAD)
    slot = face.glyph
    bitmap = slot.bitmap
    if bitmap.rows:
        pixels = np.array(bitmap.buffer, dtype=np.uint8).reshape(bitmap.rows, bitmap.pitch)[:, : bitmap.width]
    else:
        pixels = np.zeros((0, 0), np.uint8)
    pixels.flags.writeable = False
    return GlyphImage(pixels, slot.bitmap_left, slot.bitmap_top)


@lru_cache(maxsize=1024)
def color(filename: str, gid: int, ppem: int) -> Image.Image:
    """A colour glyph's bitmap, RGBA, at its strike."""
    return Image.open(io.BytesIO(shaping.color_png(filename, gid, ppem))).convert("RGBA")


def scale4(units: int, font: str, size64: int) -> int:
    """Font units to quarter pixels at a size, rounded half up, in integers."""
    per = shaping.units_per_em(font) * 64
    return (units * size64 * SUBPIXEL + per // 2) // per


def place(glyphs: Iterable[shaping.Glyph], font: str, size64: int, x4: int = 0) -> tuple[list[Placed], int]:
    """Pen positions of shaped glyphs from x4 (quarter pixels) on; and where the pen ends."""
    placed, pen = [], 0
    for g in glyphs:
        dy = scale4(g.y_offset, font, size64)
        placed.append(Placed(font, size64, g.gid, x4 + scale4(pen + g.x_offset, font, size64), (dy + SUBPIXEL // 2) // SUBPIXEL))
        pen += g.x_advance
    return placed, x4 + scale4(pen, font, size64)


def draw(mask: np.ndarray, glyphs: Iterable[Placed], baseline: int, dx4: int = 0) -> tuple[int, int]:
    """Add glyphs' coverage into an L mask (h, w), over what is there, clipped to it; the
    columns [left, right) it inked (left >= right: none)."""
    height, width = mask.shape
    left, right = width, 0
    for g in glyphs:
        x4 = g.x4 + dx4
        image = outline(g.font, g.size64, g.gid, x4 % SUBPIXEL)
        h, w = image.coverage.shape
        if not h or not w:
            continue
        x, y = x4 // SUBPIXEL + image.left, baseline - g.dy - image.top
        x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + w, width), min(y + h, height)
        if x0 >= x1 or y0 >= y1:
            continue
        ink = image.coverage[y0 - y : y1 - y, x0 - x : x1 - x].astype(np.uint16)
        region = mask[y0:y1, x0:x1]
        region[...] = region + (ink * (255 - region.astype(np.uint16)) + 127) // 255
        left, right = min(left, x0), max(right, x1)
    return left, right


def versions() -> dict[str, str]:
    major, minor, patch = freetype.version()
    return {"freetype_shaped": f"{major}.{minor}.{patch}", "freetype-py": version("freetype-py")}
