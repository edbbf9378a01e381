"""Clusters into pixels: glyphs drawn once per (text, font, colours) into cell-sized tiles.

Lines are rows of tiles, because Pillow's per-frame text drawing is far too slow for real-time
rendering. Clusters that need shaping are drawn by the text engine (HarfBuzz, then FreeType by
glyph id), merged RTL runs and shaped paragraph lines as a whole.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw

from tokenreel.base.theme import RGB
from tokenreel.renderer.text import fonts, paragraph, raster, shaping
from tokenreel.renderer.text.cells import Cell, cell_metrics, glyph_size64
from tokenreel.renderer.text.clusters import needs_shaping
from tokenreel.renderer.text.paragraph import ShapedLine

EMOJI_FILL = 0.86  # emoji height / line height
RESAMPLE = Image.Resampling.LANCZOS  # fixed, so scaled glyphs are the same pixels everywhere
RUN_TILE_CACHE = 512  # merged RTL runs are big tiles: a cache of their own, so memory stays bounded


class GlyphPainter:
    """Draws clusters into cell-sized RGB tiles on a solid background, once per distinct tile."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.cell_w, self.line_h, self.baseline = cell_metrics(size)
        self.tile = lru_cache(maxsize=16384)(self._tile)
        self.run_tile = lru_cache(maxsize=RUN_TILE_CACHE)(self._tile)  # merged RTL runs, wide

    def _mask(self, text: str, font: str, width: int) -> Image.Image:
        if not needs_shaping(text, font):
            face = fonts.load(font, self.size)
            advance = face.getlength(text)
            canvas_w = max(width, math.ceil(advance))
            mask = Image.new("L", (canvas_w, self.line_h), 0)
            ImageDraw.Draw(mask).text(((canvas_w - int(advance)) // 2, self.baseline), text, font=face, fill=255, anchor="ls")
        else:
            size64 = glyph_size64(font, self.size)
            rtl = font in fonts.RTL  # a merged run: numbers in it keep their order
            placed, end4 = paragraph.place_bidi(text, font, size64) if rtl else raster.place(shaping.shape(text, font), font, size64)
            canvas_w = max(width, -(-end4 // raster.SUBPIXEL))
            coverage = np.zeros((self.line_h, canvas_w), dtype=np.uint8)
            raster.draw(coverage, placed, self.baseline, (canvas_w * raster.SUBPIXEL - end4) // 2)
            mask = Image.fromarray(coverage)
        return mask if canvas_w == width else mask.resize((width, self.line_h), RESAMPLE)

    def _emoji(self, text: str, width: int) -> Image.Image:
        if needs_shaping(text, fonts.EMOJI):
            big = self._emoji_sequence(text)
        else:
            big = Image.new("RGBA", (fonts.EMOJI_SIZE * 2, fonts.EMOJI_SIZE * 2), (0, 0, 0, 0))
            ImageDraw.Draw(big).text((0, 0), text, font=fonts.load(fonts.EMOJI, fonts.EMOJI_SIZE), embedded_color=True)
        box = big.getbbox()
        out = Image.new("RGBA", (width, self.line_h), (0, 0, 0, 0))
        if box is None:
            return out
        big = big.crop(box)
        scale = min(width / big.width, self.line_h * EMOJI_FILL / big.height)
        small = big.resize((max(1, round(big.width * scale)), max(1, round(big.height * scale))), RESAMPLE)
        out.paste(small, ((width - small.width) // 2, (self.line_h - small.height) // 2))
        return out

    @staticmethod
    def _emoji_sequence(text: str) -> Image.Image:
        """A shaped emoji sequence (ZWJ, flag, skin tone, keycap) at the font's one strike: its
        glyphs' PNGs side by side at their advances (one glyph when the font ligates it)."""
        glyphs = shaping.shape(text, fonts.EMOJI)
        upem, ppem = shaping.units_per_em(fonts.EMOJI), fonts.EMOJI_SIZE
        images = [raster.color(fonts.EMOJI, g.gid, ppem) for g in glyphs]
        pens = [sum(g.x_advance for g in glyphs[:k]) * ppem // upem for k in range(len(glyphs))]
        width = max([p + i.width for p, i in zip(pens, images, strict=False)] + [1])
        big = Image.new("RGBA", (width, max([i.height for i in images] + [1])), (0, 0, 0, 0))
        for pen, image in zip(pens, images, strict=False):
            big.alpha_composite(image, (pen, 0))
        return big

    def _box(self, width: int) -> Image.Image:
        mask = Image.new("L", (width, self.line_h), 0)
        inset = max(1, self.cell_w // 6)
        top = self.baseline - round(self.size * 0.7)
        ImageDraw.Draw(mask).rectangle((inset, top, width - 1 - inset, self.baseline), outline=200)
        return mask

    def _tile(self, text: str, font: str | None, width: int, fg: RGB, bg: RGB) -> np.ndarray:
        pixels = width * self.cell_w
        if font == fonts.EMOJI:
            rgba = np.asarray(self._emoji(text, pixels), dtype=np.uint16)
            alpha, fore = rgba[..., 3:], rgba[..., :3]
        else:
            image = self._box(pixels) if font is None else self._mask(text, font, pixels)
            alpha, fore = np.asarray(image, dtype=np.uint16)[..., None], np.array(fg, dtype=np.uint16)
        back = np.array(bg, dtype=np.uint16)
        tile = ((back * (255 - alpha) + fore * alpha + 127) // 255).astype(np.uint8)
        tile.flags.writeable = False  # shared through the cache
        return tile

    def paint(self, cells: Sequence[Cell], color: Callable[[str], RGB], bg: RGB) -> np.ndarray:
        """A row of tiles, (line_h, cells' width x cell_w, 3); a shaped line as a whole."""
        if not cells:
            return np.empty((self.line_h, 0, 3), dtype=np.uint8)
        if isinstance(cells[0], ShapedLine):
            return self.shaped(cells[0], len(cells[0].cursor), color, bg)
        return np.concatenate(
            [(self.run_tile if c.font in fonts.RTL else self.tile)(c.text, c.font, c.width, color(c.style), bg) for c in cells],
            axis=1,
        )

    def shaped(self, line: ShapedLine, shown: int, color: Callable[[str], RGB], bg: RGB) -> np.ndarray:
        """A shaped line with its first `shown` clusters drawn: tiles (emoji, boxes) first, then
        each style's glyphs as one coverage mask over them."""
        tile = np.empty((self.line_h, line.width * self.cell_w, 3), dtype=np.uint8)
        tile[...] = bg
        masks: dict[str, tuple[np.ndarray, int, int]] = {}  # style -> (coverage, inked columns)
        for piece in line.pieces:
            if piece.order >= shown:
                continue
            if piece.cell is not None:
                x = piece.x4 // raster.SUBPIXEL
                cell = piece.cell
                part = self.tile(cell.text, cell.font, cell.width, color(piece.style), bg)[:, : max(0, tile.shape[1] - x)]
                tile[:, x : x + part.shape[1]] = part
                continue
            mask, left, right = masks.get(piece.style) or (np.zeros(tile.shape[:2], dtype=np.uint8), tile.shape[1], 0)
            x0, x1 = raster.draw(mask, (piece.glyph,), self.baseline)  # type: ignore[arg-type]
            masks[piece.style] = (mask, min(left, x0), max(right, x1))
        for style, (mask, left, right) in masks.items():
            if left >= right:
                continue
            alpha = mask[:, left:right, None].astype(np.uint16)
            fore = np.array(color(style), dtype=np.uint16)
            region = tile[:, left:right]
            region[...] = (region.astype(np.uint16) * (255 - alpha) + fore * alpha + 127) // 255
        return tile
