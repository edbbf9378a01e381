"""The title card: the title, the subtitle and the arms about to race, centred on the stage.

The logo, if any, goes in the top-right corner, composited in integers so its pixels are the
same everywhere.
"""

from __future__ import annotations

import numpy as np

from tokenreel.renderer.canvas import Canvas, cells_width, first_fit, text_w, wrapped_lines
from tokenreel.renderer.layout import Rect
from tokenreel.renderer.model_ids import middle_cut
from tokenreel.renderer.render_plan import Logo, RenderPlan
from tokenreel.renderer.text import fonts
from tokenreel.renderer.text.painter import GlyphPainter
from tokenreel.renderer.text.wrap import fit

SUBTITLE_LINES = 4


class TitleCard:
    """Lays out and draws the title card of a plan with the frames' painters."""

    def __init__(self, plan: RenderPlan, painters: dict[str, GlyphPainter]) -> None:
        self.plan = plan
        self.painters = painters

    def draw(self, canvas: Canvas) -> None:
        """Title (default the session name), subtitle (default the prompt) and the arms, centred."""
        plan, layout, theme = self.plan, self.plan.layout, self.plan.theme
        stage = layout.stage
        # The title in the largest type it fits in whole (the headline's, on every canvas).
        role = next((r for r in ("headline", "big") if text_w(self.painters, plan.title, r) <= stage.w), "title")
        title, label, small = self.painters[role], self.painters["label"], self.painters["small"]
        lines = SUBTITLE_LINES
        prompt = wrapped_lines(self.painters, plan.subtitle, min(stage.w, round(1100 * layout.scale)), "small", lines, empty=False)
        row_h = label.line_h * 3 // 2
        # centred as if the subtitle had all its lines: another subtitle never moves the title
        block_h = title.line_h * 3 // 2 + label.line_h * 3 // 2 + small.line_h * (lines + 1) + row_h * len(plan.arms)
        y = stage.y + max(0, (stage.h - block_h) // 2)
        name = fit(plan.title, stage.w // title.cell_w, "title", fonts.BOLD)
        canvas.cells(name, role, stage.x + (stage.w - cells_width(name) * title.cell_w) // 2, y, theme.background, stage)
        y += title.line_h * 3 // 2
        # What the race ran on, under the title: the hardware and the engine (EndFacts.header).
        facts = first_fit(self.painters, stage.w, [((text, "label", "dim"),) for text in plan.facts.header]) if plan.facts else ()
        if facts:
            text = facts[0][0]
            x = stage.x + max(0, (stage.w - text_w(self.painters, text, "label")) // 2)
            canvas.spans(Rect(x, y, stage.right - x, label.line_h), "label", theme.background, facts)
        y += label.line_h * 3 // 2
        for line in prompt:
            canvas.cells(line, "small", stage.x + (stage.w - cells_width(line) * small.cell_w) // 2, y, theme.background, stage)
            y += small.line_h
        y += small.line_h
        models = [track.model for track in plan.arms]
        for n, track in enumerate(plan.arms):
            room = (stage.w - canvas.badge_width - text_w(self.painters, track.label, "label")) // small.cell_w - 2
            model = middle_cut(track.model, models, room) if room > 0 else ""  # no room: the label alone
            spans = ((track.label, "label", "title"), *(((f"  {model}", "small", "dim"),) if model else ()))
            cells = [fit(text, stage.w // label.cell_w, style, Canvas.primary(role)) for text, role, style in spans]
            width = canvas.badge_width + sum(cells_width(c) * self.painters[r].cell_w for c, (_, r, _) in zip(cells, spans, strict=True))
            x = stage.x + max(0, (stage.w - width) // 2)
            middle = y + (row_h - label.line_h) // 2
            x = canvas.badge(x, middle, label.line_h, track.color, theme.background, n + 1)
            canvas.spans(Rect(x, middle, stage.right - x, label.line_h), "label", theme.background, spans)
            y += row_h


def composite_logo(pixels: np.ndarray, logo: Logo) -> None:
    """Alpha-composite the logo onto pixels in place, in integers (the same bytes everywhere);
    a logo reaching past the frame is clipped."""
    rgba = np.frombuffer(logo.rgba, dtype=np.uint8).reshape(logo.height, logo.width, 4)
    h, w = pixels.shape[:2]
    x0, y0 = max(0, logo.x), max(0, logo.y)
    x1, y1 = min(w, logo.x + logo.width), min(h, logo.y + logo.height)
    if x0 >= x1 or y0 >= y1:
        return
    src = rgba[y0 - logo.y : y1 - logo.y, x0 - logo.x : x1 - logo.x].astype(np.uint32)
    dst = pixels[y0:y1, x0:x1].astype(np.uint32)
    alpha = src[..., 3:4]
    pixels[y0:y1, x0:x1] = ((src[..., :3] * alpha + dst * (255 - alpha) + 127) // 255).astype(np.uint8)

