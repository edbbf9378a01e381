"""RGB frames to the yuv420p planes that H.264 and VP9 encode, converting only what changed.

ffmpeg's own bit-exact conversion (the only one of its conversions that gives the same bytes
on every CPU, REFERENCE.md §4) costs ~13 ms a 1080p frame, as much as x264 itself. Converting
here instead costs ~6 ms a whole frame in Pillow's C loops, and a replay frame redraws only a
few regions (the clock, each column's newest line, its figures: about a fifth of the frame on
average), so converting only those keeps the conversion near 2 ms a frame.

The conversion is BT.709, limited ("TV") range, what encode.py tags the streams with:
  Y  from each pixel;
  Cb, Cr from the mean of each 2x2 block (Pillow's reduce: integer, rounded), so chroma is
  sited at the block centre.
Y, Cb and Cr each come from Pillow's matrix conversion (single-precision, rounded, clipped):
a pure function of the pixels, computed by the same pinned Pillow binary on every machine of a
platform. Each Y sample depends on one pixel and each chroma sample on one 2x2 block, so
converting a region aligned to the 2x2 grid gives exactly the samples a whole-frame conversion
gives there: converting only what changed cannot change the bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image, _imaging

from tokenreel.renderer.layout import Rect, Shift

_CORE: Any = _imaging  # what Image.core is

KR, KB = 0.2126, 0.0722  # BT.709 luma weights of red and blue
KG = 1 - KR - KB
Y_SPAN, C_SPAN = 219 / 255, 224 / 255  # limited range: Y 16..235, Cb/Cr 16..240
Y_MATRIX = (KR * Y_SPAN, KG * Y_SPAN, KB * Y_SPAN, 16.0)
CB_MATRIX = (-KR * C_SPAN / (2 - 2 * KB), -KG * C_SPAN / (2 - 2 * KB), C_SPAN / 2, 128.0)
CR_MATRIX = (C_SPAN / 2, -KG * C_SPAN / (2 - 2 * KR), -KB * C_SPAN / (2 - 2 * KR), 128.0)


def frame_bytes(width: int, height: int) -> int:
    """Size of one yuv420p frame: a full-size Y plane and two quarter-size chroma planes."""
    return width * height * 3 // 2


class Yuv420Converter:
    """Holds the yuv420p planes of the last frame converted, for frames of one size.

    convert(rgb, changed, shifts) brings the planes to the new frame: it moves the planes within
    each shift (`Shift`: pixels the frame moved up whole), then converts the rectangles that
    `changed` names (None: the whole frame) but for what the shifts already brought. The caller
    guarantees that the pixels outside those rectangles are the same as in the previous frame it
    converted, and that each shift's pixels are the previous frame's moved.
    """

    def __init__(self, width: int, height: int) -> None:
        if width % 2 or height % 2:
            raise ValueError(f"yuv420p needs an even width and height, got {width}x{height}")
        self.width, self.height = width, height
        self.frame = np.zeros(frame_bytes(width, height), dtype=np.uint8)
        luma, chroma = width * height, width * height // 4
        self.y = self.frame[:luma].reshape(height, width)
        self.cb = self.frame[luma : luma + chroma].reshape(height // 2, width // 2)
        self.cr = self.frame[luma + chroma :].reshape(height // 2, width // 2)
        # Pillow's images over the planes' own memory: a converted region is pasted straight in.
        self._planes = tuple(_plane_core(plane) for plane in (self.y, self.cb, self.cr))
        self._whole = (Rect(0, 0, width, height),)
        self._started = False

    def convert(self, rgb: np.ndarray, changed: Sequence[Rect] | None, shifts: Sequence[Shift] = ()) -> np.ndarray:
        """The yuv420p bytes of rgb as a flat uint8 array, valid until the next call."""
        if rgb.shape != (self.height, self.width, 3) or rgb.dtype != np.uint8:
            raise ValueError(f"expected a uint8 frame of shape {(self.height, self.width, 3)}, got {rgb.dtype} {rgb.shape}")
        rgb = np.ascontiguousarray(rgb)
        if changed is None or not self._started:
            changed, shifts = self._whole, ()
            self._started = True
        moved = [self._move(shift) for shift in shifts]  # every move before any conversion
        kept = [rect for rect in moved if rect is not None]
        for edge in [edge for rect in kept for edge in _odd_edges(rect)]:
            self._convert(rgb, edge)
        for rect in changed:
            for part in _outside(rect, kept):
                self._convert(rgb, part)
        return self.frame

    def _move(self, shift: Shift) -> Rect | None:
        """Move the planes within a shift, up by its rows; the region then up to date but for its
        odd edges (chroma blocks it shares with its surroundings), or None where nothing moved."""
        rect, dy = shift.rect, shift.dy
        x0, y0 = max(0, rect.x), max(0, rect.y)
        x1, y1 = min(self.width, rect.right), min(self.height, rect.bottom, self.height - dy)
        if dy <= 0 or dy % 2 or x1 <= x0 or y1 <= y0:  # an odd move splits chroma blocks: convert instead
            return None
        self.y[y0:y1, x0:x1] = self.y[y0 + dy : y1 + dy, x0:x1]
        bx, by, half = slice((x0 + 1) // 2, x1 // 2), slice((y0 + 1) // 2, y1 // 2), dy // 2
        for plane in (self.cb, self.cr):
            plane[by, bx] = plane[by.start + half : by.stop + half, bx]
        return Rect(x0, y0, x1 - x0, y1 - y0)

    def _convert(self, rgb: np.ndarray, rect: Rect) -> None:
        # Widen to the 2x2 grid and cut to the frame; the widened pixels convert to what they hold.
        x0, y0 = max(0, rect.x) & ~1, max(0, rect.y) & ~1
        x1, y1 = min(self.width, (rect.right + 1) & ~1), min(self.height, (rect.bottom + 1) & ~1)
        if x1 <= x0 or y1 <= y0:
            return
        stride, width, height = self.width * 3, x1 - x0, y1 - y0
        start = y0 * stride + x0 * 3
        # Pillow's C core, called directly: the Image wrappers' checks cost as much as converting
        # a line of text. The region's rows are read in place from the frame.
        image = _CORE.new("RGB", (width, height))
        decoder = _CORE.raw_decoder("RGB", "RGB", stride, 1)
        decoder.setimage(image, (0, 0, width, height))
        decoder.decode(rgb.reshape(-1)[start : start + (height - 1) * stride + width * 3])
        luma, cb, cr = self._planes
        luma.paste(image.convert_matrix("L", Y_MATRIX), (x0, y0, x1, y1))
        blocks = image.reduce((2, 2), (0, 0, width, height))
        half = (x0 // 2, y0 // 2, x1 // 2, y1 // 2)
        cb.paste(blocks.convert_matrix("L", CB_MATRIX), half)
        cr.paste(blocks.convert_matrix("L", CR_MATRIX), half)


def _plane_core(plane: np.ndarray) -> Any:
    """Pillow's core image over a C-contiguous uint8 plane's own memory: pasting into it writes
    the plane."""
    return Image.frombuffer("L", (plane.shape[1], plane.shape[0]), plane, "raw", "L", 0, 1).im


def _odd_edges(rect: Rect) -> list[Rect]:
    """The one-pixel rows and columns of a moved region on odd edges: their chroma blocks take in
    pixels outside the region, which did not move with it."""
    edges = [Rect(rect.x, rect.y, 1, rect.h)] if rect.x % 2 else []
    edges += [Rect(rect.right - 1, rect.y, 1, rect.h)] if rect.right % 2 else []
    edges += [Rect(rect.x, rect.y, rect.w, 1)] if rect.y % 2 else []
    edges += [Rect(rect.x, rect.bottom - 1, rect.w, 1)] if rect.bottom % 2 else []
    return edges


def _outside(rect: Rect, kept: Sequence[Rect]) -> list[Rect]:
    """rect less the regions that are already up to date: above and below one that spans its
    width; the whole of it where one covers only part of its width (converting more than needed
    gives the same bytes)."""
    parts = [rect]
    for done in kept:
        rest = []
        for part in parts:
            across = done.x <= part.x and done.right >= part.right
            if not across or done.bottom <= part.y or done.y >= part.bottom:
                rest.append(part)
                continue
            if done.y > part.y:
                rest.append(Rect(part.x, part.y, part.w, done.y - part.y))
            if done.bottom < part.bottom:
                rest.append(Rect(part.x, done.bottom, part.w, part.bottom - done.bottom))
        parts = rest
    return parts


def to_yuv420p(rgb: np.ndarray) -> np.ndarray:
    """One whole frame converted (what the incremental conversion must always equal)."""
    height, width, _ = rgb.shape
    return Yuv420Converter(width, height).convert(rgb, None).copy()
