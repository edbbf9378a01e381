"""The digest of each frame that the render manifest records: SHA-256 over the SHA-256 of its tiles.

A frame is cut into tiles of TILE_W x TILE_H pixels (those on the right and bottom edges cut
to the frame), row by row, left to right; each tile's raw RGB bytes (its rows in order) are
hashed with SHA-256, and the frame's digest is the SHA-256 of those 32-byte digests in that
order. Like a SHA-256 of the whole frame, it is a function of the frame's bytes alone and
changes with any byte of it; unlike one, it can be brought up to date by hashing only the tiles
a frame redrew, as the tiles elsewhere keep their digests (a race frame redraws about an eighth
of the frame, where hashing 6.2 MB of a 1080p frame whole cost a third of x264's time).

A tile redrawn with the bytes it held is not hashed again (its bytes are kept and compared).
The tiles whose digest changed are also the regions the yuv420p conversion must redo, so
`update` returns them: a region the renderer redrew with the same pixels is converted no more.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from tokenreel.renderer.layout import Rect

# Even, so every tile lies on the 2x2 grid of yuv420p chroma; wide and short, as the regions a
# race frame redraws are (a column's newest line, its figure lines, the clock).
TILE_W, TILE_H = 128, 32


def frame_digest(pixels: np.ndarray) -> str:
    """The digest of one whole (height, width, 3) frame."""
    return FrameDigest(pixels.shape[1], pixels.shape[0]).update(pixels, None)[0]


class FrameDigest:
    """The tile digests of the last frame seen, for frames of one size, brought up to date by
    rehashing only the tiles that the changed rectangles touch."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.rows, self.cols = -(-height // TILE_H), -(-width // TILE_W)
        self._tiles = [b""] * (self.rows * self.cols)  # row by row; b"": none seen yet
        # Each tile's bytes as last hashed: comparing them costs a tenth of hashing them again.
        self._bytes = [b""] * (self.rows * self.cols)
        self._started = False

    def update(self, pixels: np.ndarray, changed: Sequence[Rect] | None) -> tuple[str, tuple[Rect, ...]]:
        """(the frame's digest, where it differs from the last frame's). changed: the rectangles
        outside which the pixels equal the last frame's (None: they may differ anywhere). Each
        rectangle comes back cut to the tiles in it whose bytes moved, or left out if none did."""
        if pixels.shape != (self.height, self.width, 3) or pixels.dtype != np.uint8:
            raise ValueError(f"expected a uint8 frame of shape {(self.height, self.width, 3)}, got {pixels.dtype} {pixels.shape}")
        if changed is None or not self._started:
            changed = (Rect(0, 0, self.width, self.height),)
            self._started = True
        spans = [self._tile_span(rect) for rect in changed]
        moved = np.zeros((self.rows, self.cols), dtype=bool)
        touched = np.zeros((self.rows, self.cols), dtype=bool)
        for (r0, r1), (c0, c1) in spans:
            touched[r0:r1, c0:c1] = True
        tiles, held, sha256 = self._tiles, self._bytes, hashlib.sha256
        for row, col in np.argwhere(touched).tolist():
            left, top, at = col * TILE_W, row * TILE_H, row * self.cols + col
            block = pixels[top : top + TILE_H, left : left + TILE_W].tobytes()
            if block != held[at]:  # a tile redrawn with the same bytes keeps its digest, unhashed
                held[at], tiles[at] = block, sha256(block).digest()
                moved[row, col] = True
        return sha256(b"".join(tiles)).hexdigest(), tuple(
            cut for rect, span in zip(changed, spans, strict=True) if (cut := self._cut(rect, span, moved)) is not None
        )

    def _tile_span(self, rect: Rect) -> tuple[tuple[int, int], tuple[int, int]]:
        """The rows and columns of tiles, [start, stop), that a rectangle overlaps."""
        top, bottom = max(0, rect.y) // TILE_H, -(-min(self.height, rect.bottom) // TILE_H)
        left, right = max(0, rect.x) // TILE_W, -(-min(self.width, rect.right) // TILE_W)
        return (top, max(top, bottom)), (left, max(left, right))

    @staticmethod
    def _cut(rect: Rect, span: tuple[tuple[int, int], tuple[int, int]], moved: np.ndarray) -> Rect | None:
        """The rectangle cut to the box around its tiles that moved; None if none did."""
        (r0, r1), (c0, c1) = span
        rows, cols = np.nonzero(moved[r0:r1, c0:c1])
        if not len(rows):
            return None
        x0, y0 = max(rect.x, (c0 + int(cols.min())) * TILE_W), max(rect.y, (r0 + int(rows.min())) * TILE_H)
        x1, y1 = min(rect.right, (c0 + int(cols.max()) + 1) * TILE_W), min(rect.bottom, (r0 + int(rows.max()) + 1) * TILE_H)
        return Rect(x0, y0, x1 - x0, y1 - y0)
