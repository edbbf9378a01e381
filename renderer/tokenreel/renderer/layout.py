"""Where everything goes on the frame, in whole pixels, for any size and number of arms.

Sizes scale with the shorter side (1080 is the design size), so 4K is 1080p doubled and the
vertical 1080x1920 format keeps 1080p type sizes with arms stacked instead of side by side.
Every text that says a number or what it measures is then raised to what reads at 640 px wide,
the width a feed shows a video at (`legible_px`): a 16:9 frame shrinks three times there, a
9:16 or 1:1 frame 1.7 times, so each layout gets type sized to its own canvas.
The text grid of a column is an exact number of cells, so nothing drawn into it can cross
the column's edge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from tokenreel.renderer.text.cells import cell_metrics

DESIGN_SIZE = 1080
# px at the design size; "tiny" is where small labels step down to when they do not fit
FONT_SIZES = {"body": 18, "prompt": 15, "small": 15, "tiny": 12, "label": 22, "big": 40, "title": 30, "headline": 64, "hero": 180}
MIN_FONT = 6
MIN_TEXT_PX = 12  # the stream and the prompt are never smaller than this, on any canvas
TEXT_ROLES = ("body", "prompt")
FEED_WIDTH = 640  # px: how wide a feed shows a video
FEED_MIN_PX = 12  # the smallest type that reads there
# Roles that say a number or what one measures, with how many times the legible size each needs
# at least (the hierarchy: big figures above labels). The stream ("body") and the prompt in the
# race's header are context, not figures: they keep their design sizes.
FIGURE_ROLES = {"small": 1.0, "tiny": 1.0, "label": 1.15, "title": 1.3, "big": 1.6, "headline": 2.5}
MIN_GRID = (4, 2)  # (cols, rows): below this a column cannot show a stream
# The shortest forms the figure lines fall back to (column.py), with the widest figures a
# session can give: (role, text) runs per line. A size that cannot fit these is refused.
WORST_CASE = {
    "big": (("big", "≈99999.9"), ("tiny", " tok/s")),
    "verdict": (("label", "99.99x slower"),),
    "stats": (("tiny", "≈99999/99999 tok"),),
}


@dataclass(frozen=True)
class Rect:
    x: int
    y: int
    w: int
    h: int

    @property
    def right(self) -> int:
        return self.x + self.w

    @property
    def bottom(self) -> int:
        return self.y + self.h

    @property
    def slices(self) -> tuple[slice, slice]:
        """Index a (height, width, 3) array with this to get the region."""
        return slice(self.y, self.bottom), slice(self.x, self.right)


@dataclass(frozen=True)
class Shift:
    """Pixels that moved up: within `rect`, a frame holds what the frame before held `dy` rows
    lower (a column's text scrolled by whole lines). The encoder moves what it derived from those
    pixels instead of deriving it again."""

    rect: Rect
    dy: int


@dataclass(frozen=True)
class ColumnLayout:
    """One arm: panel, header lines, the text grid, then its progress bar and three figure
    lines at the bottom (big: live tok/s and the finish; verdict: the speed-up; stats).
    answer: with `render --answer-badge`, a line under the text grid for the same-answer badge."""

    panel: Rect
    accent: Rect
    label: Rect
    detail: Rect
    text: Rect
    progress: Rect
    big: Rect
    verdict: Rect
    stats: Rect
    cols: int
    rows: int
    answer: Rect | None = None


@dataclass(frozen=True)
class FrameLayout:
    width: int
    height: int
    scale: float
    sizes: dict[str, int]  # font role -> px
    radius: int
    title: Rect
    prompt: Rect  # two small lines
    facts: Rect  # one small line: the hardware and engine the race ran on
    clock: Rect
    speed: Rect
    footer: Rect
    stage: Rect  # the area the columns share; the end card covers it
    columns: tuple[ColumnLayout, ...]


def legible_px(width: int) -> int:
    """The smallest type on a frame `width` px wide that is FEED_MIN_PX tall at FEED_WIDTH wide."""
    return math.ceil(FEED_MIN_PX * width / FEED_WIDTH)


def font_sizes(width: int, height: int) -> dict[str, int]:
    scale = min(width, height) / DESIGN_SIZE
    sizes = {role: max(MIN_FONT, round(px * scale)) for role, px in FONT_SIZES.items()}
    for role in TEXT_ROLES:  # a small canvas (a README's GIF) keeps its text readable at full size
        sizes[role] = max(sizes[role], MIN_TEXT_PX)
    floor = legible_px(width)
    for role, times in FIGURE_ROLES.items():
        sizes[role] = max(sizes[role], math.ceil(floor * times))
    return sizes


def _column(panel: Rect, pad: int, gap: int, metrics: Mapping[str, tuple[int, int]], answer_line: bool) -> ColumnLayout:
    """One arm's panel cut into its lines; ValueError when the text grid or a figure line
    (in its shortest form, WORST_CASE) does not fit."""
    body_w, body_h = metrics["body"]
    label_h, small_h, big_h = metrics["label"][1], metrics["small"][1], metrics["big"][1]
    inner_w = panel.w - 2 * pad
    accent = Rect(panel.x + pad, panel.y, inner_w, max(2, gap // 5))
    label = Rect(panel.x + pad, panel.y + pad, inner_w, label_h)
    detail = Rect(label.x, label.bottom, inner_w, small_h)
    stats = Rect(label.x, panel.bottom - pad - small_h, inner_w, small_h)
    verdict = Rect(label.x, stats.y - label_h, inner_w, label_h)
    big = Rect(label.x, verdict.y - big_h, inner_w, big_h)
    bar_h = max(2, gap * 3 // 10)
    progress = Rect(label.x, big.y - gap // 2 - bar_h, inner_w, bar_h)
    top, bottom = detail.bottom + gap, progress.y - gap // 2
    answer = None
    if answer_line:  # the badge sits right above the progress bar; the text grid gives up the room
        answer = Rect(label.x, bottom - metrics["title"][1], inner_w, metrics["title"][1])
        bottom = answer.y - gap // 4
    cols, rows = inner_w // body_w, max(0, bottom - top) // body_h
    if cols < MIN_GRID[0] or rows < MIN_GRID[1]:
        raise ValueError(f"size: {panel.w}x{panel.h} px per arm is too small to show the text; choose a larger size")
    for runs in WORST_CASE.values():
        if sum(metrics[role][0] * len(text) for role, text in runs) > inner_w:
            raise ValueError(f"size: {panel.w} px per arm is too narrow for the figures; choose a larger size or fewer arms")
    text = Rect(label.x, top, cols * body_w, rows * body_h)
    return ColumnLayout(panel, accent, label, detail, text, progress, big, verdict, stats, cols, rows, answer)


def compute(width: int, height: int, arms: int, answer_line: bool = False) -> FrameLayout:
    """The layout for a frame size; ValueError (naming the size option) when the text cannot fit.
    answer_line: room for the same-answer badge in each column (off: the layout of every render
    made before the badge existed, pixel for pixel)."""
    scale = min(width, height) / DESIGN_SIZE
    sizes = font_sizes(width, height)
    metrics = {role: cell_metrics(px)[:2] for role, px in sizes.items()}
    margin, gap, pad = round(32 * scale), round(20 * scale), round(18 * scale)
    title_h, small_h = metrics["title"][1], metrics["small"][1]
    prompt_h = metrics["prompt"][1]
    clock_w = max(metrics["title"][0] * 10, metrics["small"][0] * 32)  # the clock, and what it counts from
    title = Rect(margin, round(22 * scale), width - 2 * margin - clock_w, title_h)
    clock = Rect(width - margin - clock_w, title.y, clock_w, title_h)
    prompt = Rect(margin, title.bottom, title.w, max(2 * prompt_h, small_h))
    speed = Rect(clock.x, title.bottom, clock_w, small_h)
    footer = Rect(margin, height - round(12 * scale) - small_h, width - 2 * margin, small_h)
    facts = Rect(margin, prompt.bottom, width - 2 * margin, small_h)
    stage = Rect(margin, facts.bottom + gap, width - 2 * margin, footer.y - gap - facts.bottom - gap)
    panels = []
    if height > width:  # vertical video: arms stacked
        each = (stage.h - gap * (arms - 1)) // arms
        panels = [Rect(stage.x, stage.y + i * (each + gap), stage.w, each) for i in range(arms)]
    elif width == height and arms == 4:  # square: two by two, as four columns would be too narrow
        each_w, each_h = (stage.w - gap) // 2, (stage.h - gap) // 2
        panels = [Rect(stage.x + (i % 2) * (each_w + gap), stage.y + (i // 2) * (each_h + gap), each_w, each_h) for i in range(arms)]
    else:
        each = (stage.w - gap * (arms - 1)) // arms
        panels = [Rect(stage.x + i * (each + gap), stage.y, each, stage.h) for i in range(arms)]
    return FrameLayout(
        width=width,
        height=height,
        scale=scale,
        sizes=sizes,
        radius=round(14 * scale),
        title=title,
        prompt=prompt,
        facts=facts,
        clock=clock,
        speed=speed,
        footer=footer,
        stage=stage,
        columns=tuple(_column(p, pad, gap, metrics, answer_line) for p in panels),
    )
