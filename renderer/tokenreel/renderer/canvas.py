"""Drawing on a frame: an RGB array, the painters of each font role, and the runs of text, panels
and badges every part of a frame (title card, race, end card) is made of.

Text runs are fitted, never overflowing their box: a run too long is cut with "…", and
`first_fit` picks the first of a line's wordings that fits whole. Every run drawn can be logged
as a TextBox, which is how the tests check that nothing that matters was cut.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from tokenreel.base.theme import RGB, Theme
from tokenreel.renderer.layout import Rect
from tokenreel.renderer.text import fonts
from tokenreel.renderer.text.cells import Cell
from tokenreel.renderer.text.clusters import clusters
from tokenreel.renderer.text.painter import GlyphPainter
from tokenreel.renderer.text.wrap import fit, wrap

BOLD_ROLES = ("label", "big", "title", "headline", "hero")
SUPERSAMPLE = 4  # per axis, for the anti-aliased edges of panels and badges

Span = tuple[str, str, str]  # (text, font role, style)
# Labels step down to these roles when they do not fit (figures never do: they keep their role).
STEP_DOWN = {"label": "small", "small": "tiny"}


class TextBox(NamedTuple):
    """One text run as drawn: its box, what was asked and what fitted (tests read these)."""

    rect: Rect
    role: str
    text: str
    drawn: str
    x: int
    width: int

    @property
    def cut(self) -> bool:
        """Shortened with an ellipsis to fit (RTL runs may be reordered, so text is not compared)."""
        return self.drawn.endswith("…") and not self.text.endswith("…")


def cells_width(cells: Sequence[Cell]) -> int:
    return sum(c.width for c in cells)


@lru_cache(maxsize=256)
def style_color(theme: Theme, style: str) -> RGB:
    """Text styles plus 'accentN', the accent of the session's N-th arm."""
    if style.startswith("accent"):
        return theme.accent(int(style[6:]))
    return theme.color(style)


@lru_cache(maxsize=64)
def _round_mask(w: int, h: int, radius: int) -> np.ndarray:
    """Coverage (0..255) of a w x h rectangle with anti-aliased corners of the given radius."""
    mask = np.full((h, w), 255, dtype=np.uint16)
    r = min(radius, w // 2, h // 2)
    if r > 0:
        sub = (np.arange(r * SUPERSAMPLE) + 0.5) / SUPERSAMPLE
        inside = (sub[:, None] - r) ** 2 + (sub[None, :] - r) ** 2 <= r * r
        corner = inside.reshape(r, SUPERSAMPLE, r, SUPERSAMPLE).sum(axis=(1, 3)) * 255 // SUPERSAMPLE**2
        mask[:r, :r] = corner
        mask[:r, w - r :] = corner[:, ::-1]
        mask[h - r :, :r] = corner[::-1]
        mask[h - r :, w - r :] = corner[::-1, ::-1]
    return mask[..., None]


class Canvas:
    """An RGB array with the painters and theme to draw text runs and shapes on it."""

    def __init__(self, pixels: np.ndarray, painters: dict[str, GlyphPainter], theme: Theme) -> None:
        self.pixels = pixels
        self.painters = painters
        self.theme = theme
        self.color: Callable[[str], RGB] = lambda style: style_color(theme, style)
        self.boxes: list[TextBox] | None = None  # set to a list to log every run drawn

    def _logged(self, rect: Rect, role: str, text: str, cells: Sequence[Cell], x: int, width: int) -> None:
        if self.boxes is not None:
            self.boxes.append(TextBox(rect, role, text, "".join(c.text for c in cells), x, width))

    def fill(self, rect: Rect, rgb: RGB) -> None:
        self.pixels[rect.slices] = rgb

    def blend(self, rect: Rect, rgb: RGB, radius: int) -> None:
        """Fill a rounded rectangle, anti-aliased against what is below."""
        region = self.pixels[rect.slices]
        mask = _round_mask(rect.w, rect.h, radius)
        region[:] = (region.astype(np.uint16) * (255 - mask) + np.array(rgb, dtype=np.uint16) * mask + 127) // 255

    def panel(self, rect: Rect, radius: int, fill: RGB, edge: RGB, border: int) -> None:
        self.blend(rect, edge, radius)
        inner = Rect(rect.x + border, rect.y + border, rect.w - 2 * border, rect.h - 2 * border)
        self.blend(inner, fill, max(0, radius - border))

    def blit(self, tile: np.ndarray, x: int, y: int, clip: Rect) -> None:
        """Copy a tile to (x, y), cut to the clip rectangle."""
        x0, y0 = max(x, clip.x), max(y, clip.y)
        x1, y1 = min(x + tile.shape[1], clip.right), min(y + tile.shape[0], clip.bottom)
        if x1 > x0 and y1 > y0:
            self.pixels[y0:y1, x0:x1] = tile[y0 - y : y1 - y, x0 - x : x1 - x]

    def cells(self, cells: Sequence[Cell], role: str, x: int, y: int, bg: RGB, clip: Rect) -> int:
        """Draw cells with their top-left at (x, y); returns the width drawn."""
        tile = self.painters[role].paint(cells, self.color, bg)
        self.blit(tile, x, y, clip)
        width: int = tile.shape[1]
        return width

    def spans(self, rect: Rect, role: str, bg: RGB, left: Sequence[Span], right: Sequence[Span] = ()) -> None:
        """One line of text runs of mixed sizes sharing the baseline of `role`: left runs from
        the left edge, right runs flush right; left runs are cut with an ellipsis to fit."""
        baseline = rect.y + self.painters[role].baseline
        x = rect.right
        for text, span_role, style in reversed(right):
            painter = self.painters[span_role]
            cells = fit(text, (x - rect.x) // painter.cell_w, style, self.primary(span_role))
            x -= cells_width(cells) * painter.cell_w
            width = self.cells(cells, span_role, x, baseline - painter.baseline, bg, rect)
            self._logged(rect, span_role, text, cells, x, width)
        limit, x = x, rect.x
        for text, span_role, style in left:
            painter = self.painters[span_role]
            cells = fit(text, max(0, limit - x) // painter.cell_w, style, self.primary(span_role))
            width = self.cells(cells, span_role, x, baseline - painter.baseline, bg, Rect(rect.x, rect.y, limit - rect.x, rect.h))
            self._logged(Rect(rect.x, rect.y, limit - rect.x, rect.h), span_role, text, cells, x, width)
            x += width

    @property
    def badge_width(self) -> int:
        """Room a badge takes in a row, including the space after it."""
        return self.painters["label"].line_h * 9 // 8

    def badge(self, x: int, y: int, row_h: int, arm: int, bg: RGB, number: int) -> int:
        """The arm's number on screen in a circle of its accent colour (the arm's place in the
        session, so an arm keeps its colour across videos), centred in a row; returns where
        the row's text starts."""
        diameter = self.painters["label"].line_h * 3 // 4
        rect = Rect(x, y + (row_h - diameter) // 2, diameter, diameter)
        accent = self.color(f"accent{arm}")
        self.fill(rect, bg)
        self.blend(rect, accent, diameter // 2)
        painter = self.painters["small"]
        tile = painter.paint(fit(str(number), 3, "panel", fonts.BOLD), self.color, accent)
        self.blit(tile, rect.x + (diameter - tile.shape[1]) // 2, rect.y + (diameter - painter.line_h) // 2, rect)
        return x + self.badge_width

    @staticmethod
    def primary(role: str) -> str:
        """The face a font role starts its fallback chain with."""
        return fonts.BOLD if role in BOLD_ROLES else fonts.REGULAR



def text_w(painters: dict[str, GlyphPainter], text: str, role: str) -> int:
    return _cells_wide(text, Canvas.primary(role)) * painters[role].cell_w


@lru_cache(maxsize=4096)
def _cells_wide(text: str, primary: str) -> int:
    """Grid cells a line of UI text takes; cached because every frame measures its figure lines'
    variants to pick the one that fits (most of them repeat from frame to frame)."""
    return cells_width(fit(text, 10**6, "text", primary))


def first_fit(painters: dict[str, GlyphPainter], width: int, candidates: Sequence[tuple[Span, ...]]) -> tuple[Span, ...]:
    """The first candidate line that fits `width` px uncut; the last one when none does (the
    layout is checked to fit every last candidate, see layout.compute)."""
    for spans in candidates:
        if sum(text_w(painters, text, role) for text, role, _ in spans) <= width:
            return spans
    return candidates[-1]


def label_spans(painters: dict[str, GlyphPainter], text: str, width: int, role: str = "label", style: str = "title") -> tuple[Span, ...]:
    """A user's label (arm name, model): a size smaller when it does not fit, then cut."""
    smaller = STEP_DOWN[role]
    return first_fit(painters, width, [((text, role, style),), ((text, smaller, style),)])


def wrapped_lines(painters: dict[str, GlyphPainter], text: str, width: int, role: str, lines: int, empty: bool = True) -> list[list[Cell]]:
    """text with its whitespace collapsed, wrapped to at most `lines` lines of `width` px in the
    role's type; cut with '…'. empty: an empty text still gives its (empty) line."""
    painter = painters[role]
    cols = width // painter.cell_w
    flat = " ".join(text.split())
    if (not flat and not empty) or cols < 2 or lines < 1:
        return []  # an empty subtitle, or no room for one character and the '…': no lines
    limit = 2 * cols * (lines + 1)  # enough to fill the lines; a long prompt is not wrapped whole
    wrapped, _ = wrap(clusters(flat[:limit], ["dim"] * min(limit, len(flat))), cols)
    out = [list(line) for line in wrapped[:lines]]
    if len(wrapped) > lines or len(flat) > limit:
        last = out[-1]
        while last and cells_width(last) > cols - 2:
            last.pop()
        last.append(Cell("…", fonts.REGULAR, 1, "dim"))
    return out
