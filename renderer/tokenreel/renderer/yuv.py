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

import numpy as np
from PIL import Image

from tokenreel.renderer.layout import Rect

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

    convert(rgb, changed) brings the planes to the new frame, converting only the rectangles
    that `changed` names (None: the whole frame). The caller guarantees that the pixels outside
    those rectangles are the same as in the previous frame it converted.
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
        self._whole = (Rect(0, 0, width, height),)
        self._started = False

    def convert(self, rgb: np.ndarray, changed: Sequence[Rect] | None) -> np.ndarray:
        """The yuv420p bytes of rgb as a flat uint8 array, valid until the next call."""
        if rgb.shape != (self.height, self.width, 3) or rgb.dtype != np.uint8:
            raise ValueError(f"expected a uint8 frame of shape {(self.height, self.width, 3)}, got {rgb.dtype} {rgb.shape}")
        if changed is None or not self._started:
            changed = self._whole
            self._started = True
        for rect in changed:
            self._convert(rgb, rect)
        return self.frame

    def _convert(self, rgb: np.ndarray, rect: Rect) -> None:
        # Widen to the 2x2 grid and cut to the frame; the widened pixels convert to what they hold.
        x0, y0 = max(0, rect.x) & ~1, max(0, rect.y) & ~1
        x1, y1 = min(self.width, (rect.right + 1) & ~1), min(self.height, (rect.bottom + 1) & ~1)
        if x1 <= x0 or y1 <= y0:
            return
        image = Image.fromarray(np.ascontiguousarray(rgb[y0:y1, x0:x1]))
        self.y[y0:y1, x0:x1] = np.asarray(image.convert("L", Y_MATRIX))
        blocks = image.reduce(2)
        half = slice(y0 // 2, y1 // 2), slice(x0 // 2, x1 // 2)
        self.cb[half] = np.asarray(blocks.convert("L", CB_MATRIX))
        self.cr[half] = np.asarray(blocks.convert("L", CR_MATRIX))


def to_yuv420p(rgb: np.ndarray) -> np.ndarray:
    """One whole frame converted (what the incremental conversion must always equal)."""
    height, width, _ = rgb.shape
    return Yuv420Converter(width, height).convert(rgb, None).copy()
