"""Frame i of the video as a pure function of i: title card, side-by-side replay, end card.

Workers render chunks of frames starting anywhere, so no frame may depend on what was drawn
before. The replay keeps one canvas in which every region (clock, each column's text, each
column's figures) is known to hold exactly what a key describes; a frame recomputes the keys
and redraws only the regions whose key changed, always from the static base. The result is
the same whatever was rendered before, and a finished column is never touched again.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from functools import lru_cache

import numpy as np

from tokenreel.renderer import fonts
from tokenreel.renderer.highlight import styled_stream
from tokenreel.renderer.layout import ColumnLayout, Rect
from tokenreel.renderer.plan import ArmTrack, RenderPlan
from tokenreel.renderer.text import Cell, GlyphPainter, clusters, fit, layout_stream, wrap
from tokenreel.renderer.theme import RGB, Theme
from tokenreel.renderer.timeline import END, REPLAY, TITLE, ArmTimeline
from tokenreel.figures import figure, multiplier
from tokenreel.metrics import NS_PER_S

BOLD_ROLES = ("label", "big", "title")
SHOW_THROUGH = 56  # of 256: how much of the last replay frame shows behind the end card
CURSOR_PHASES_PER_S = 2  # the cursor blinks (on, off) once a second while an arm waits
SUPERSAMPLE = 4  # per axis, for the anti-aliased edges of panels and badges

Span = tuple[str, str, str]  # (text, font role, style)


def _seconds(ns: int) -> str:
    return f"{ns // NS_PER_S}.{ns % NS_PER_S // 10_000_000:02d} s"


def _width(cells: Sequence[Cell]) -> int:
    return sum(c.width for c in cells)


@lru_cache(maxsize=256)
def _color(theme: Theme, style: str) -> RGB:
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
        self.color: Callable[[str], RGB] = lambda style: _color(theme, style)

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
        return tile.shape[1]

    def spans(self, rect: Rect, role: str, bg: RGB, left: Sequence[Span], right: Sequence[Span] = ()) -> None:
        """One line of text runs of mixed sizes sharing the baseline of `role`: left runs from
        the left edge, right runs flush right; left runs are cut with an ellipsis to fit."""
        baseline = rect.y + self.painters[role].baseline
        x = rect.right
        for text, span_role, style in reversed(right):
            painter = self.painters[span_role]
            cells = fit(text, (x - rect.x) // painter.cell_w, style, self.primary(span_role))
            x -= _width(cells) * painter.cell_w
            self.cells(cells, span_role, x, baseline - painter.baseline, bg, rect)
        limit, x = x, rect.x
        for text, span_role, style in left:
            painter = self.painters[span_role]
            cells = fit(text, max(0, limit - x) // painter.cell_w, style, self.primary(span_role))
            x += self.cells(cells, span_role, x, baseline - painter.baseline, bg, Rect(rect.x, rect.y, limit - rect.x, rect.h))

    @property
    def badge_width(self) -> int:
        """Room a badge takes in a row, including the space after it."""
        return self.painters["label"].line_h * 9 // 8

    def badge(self, x: int, y: int, row_h: int, arm: int, bg: RGB) -> int:
        """The arm's number (its place in the session) in a circle of its accent colour,
        centred in a row; returns where the row's text starts."""
        diameter = self.painters["label"].line_h * 3 // 4
        rect = Rect(x, y + (row_h - diameter) // 2, diameter, diameter)
        accent = self.color(f"accent{arm}")
        self.fill(rect, bg)
        self.blend(rect, accent, diameter // 2)
        painter = self.painters["small"]
        tile = painter.paint(fit(str(arm + 1), 3, "panel", fonts.BOLD), self.color, accent)
        self.blit(tile, rect.x + (diameter - tile.shape[1]) // 2, rect.y + (diameter - painter.line_h) // 2, rect)
        return x + self.badge_width

    @staticmethod
    def primary(role: str) -> str:
        """The face a font role starts its fallback chain with."""
        return fonts.BOLD if role in BOLD_ROLES else fonts.REGULAR


class ArmColumn:
    """One arm's column: its wrapped stream, the running figures, and how to draw both."""

    def __init__(
        self, track: ArmTrack, geometry: ColumnLayout, painter: GlyphPainter, theme: Theme, code: bool, baseline: str | None
    ) -> None:
        """baseline: label of the arm that speed-ups are relative to; None for that arm itself."""
        self.track = track
        self.theme = theme
        self.geo = geometry
        self.painter = painter
        self.baseline = baseline
        self.accent = f"accent{track.color}"
        self.timeline = ArmTimeline(track.t_ns, track.tokens, track.first_index)
        text, styles, ends = styled_stream(track.content, track.reasoning, track.tool, code)
        self.layout = layout_stream(text, styles, ends, geometry.cols)
        self.line_tile = lru_cache(maxsize=4 * geometry.rows + 16)(self._line_tile)

    def _line_tile(self, line: int) -> np.ndarray:
        return self.painter.paint(self.layout.lines[line], lambda style: _color(self.theme, style), self.theme.panel)

    def finished(self, visible: int) -> bool:
        return visible == self.timeline.chunks

    def text_key(self, visible: int, replay_frame: int, fps: int) -> tuple[int, int, int, bool]:
        """(top line, caret line, caret col, cursor shown): all the text region depends on."""
        line, col = self.layout.caret[visible]
        top = max(0, line - self.geo.rows + 1)
        waiting = visible <= self.track.first_index
        blink_on = (replay_frame * CURSOR_PHASES_PER_S // fps) % 2 == 0
        cursor = not self.finished(visible) and col < self.geo.cols and (blink_on or not waiting)
        return top, line, col, cursor

    def draw_text(self, canvas: Canvas, base: np.ndarray, key: tuple[int, int, int, bool], previous: Hashable) -> Rect:
        """Bring the text region from `previous` (its last key, if any) to `key`; the part redrawn."""
        top, line, col, cursor = key
        rect, lh, cw = self.geo.text, self.painter.line_h, self.painter.cell_w
        if isinstance(previous, tuple) and previous[0] == top and previous[1] <= line:
            # Same scroll, caret not moved up: rows above the old caret line already hold their
            # full lines and rows below the new one are still empty.
            first = previous[1]
            redraw = Rect(rect.x, rect.y + (first - top) * lh, rect.w, (line - first + 1) * lh)
        else:
            first, redraw = top, rect
        canvas.pixels[redraw.slices] = base[redraw.slices]
        for k in range(first, line + 1):
            tile = self.line_tile(k)
            width = tile.shape[1] if k < line else min(tile.shape[1], col * cw)
            y = rect.y + (k - top) * lh
            canvas.pixels[y : y + lh, rect.x : rect.x + width] = tile[:, :width]
        if cursor:
            y = rect.y + (line - top) * lh
            inset = max(1, lh // 8)
            canvas.fill(Rect(rect.x + col * cw, y + inset, max(1, cw // 2), lh - 2 * inset), canvas.color(self.accent))
        return redraw

    def figures(self, visible: int, cutoff_ns: int) -> tuple[tuple[Span, ...], ...]:
        """The two figure lines as spans: (big left, big right, stats)."""
        track = self.track
        accept = () if track.acceptance_length is None else (f" · accept {figure(track.acceptance_length, 2)}",)
        unit: Span = (" tok/s", "label", "dim")
        if self.finished(visible):
            if self.baseline is None:
                verdict: Span = ("baseline", "label", "dim")
            else:
                better = track.vs_first is not None and track.vs_first >= 1
                verdict = (f"{multiplier(track.vs_first)} vs {self.baseline}", "label", "good" if better else "dim")
            stats = f"✓ {_seconds(track.t_ns[-1])} · {track.output_tokens} tokens · TTFT {_seconds(track.ttft_ns)}"
            final: Span = (figure(track.decode_tok_s), "big", self.accent)
            return (final, unit), (verdict,), ((stats + "".join(accept), "small", "dim"),)
        clock: Span = (_seconds(max(0, cutoff_ns)), "label", "text")
        if visible <= track.first_index:
            return (("—", "big", "faint"), unit), (clock,), (("waiting for the first token", "small", "dim"),)
        stats = f"{self.timeline.tokens(visible)} tokens · TTFT {_seconds(track.ttft_ns)}"
        live = (figure(self.timeline.live_decode(visible)), "big", self.accent)
        return (live, unit), (clock,), ((stats + "".join(accept), "small", "dim"),)

    def draw_figures(self, canvas: Canvas, base: np.ndarray, key: tuple[tuple[Span, ...], ...]) -> tuple[Rect, Rect]:
        """Redraw the figure lines; the regions redrawn."""
        big_left, big_right, stats = key
        for rect in (self.geo.big, self.geo.stats):
            canvas.pixels[rect.slices] = base[rect.slices]
        canvas.spans(self.geo.big, "big", canvas.theme.panel, big_left, big_right)
        canvas.spans(self.geo.stats, "small", canvas.theme.panel, stats)
        return self.geo.big, self.geo.stats


class FrameRenderer:
    """Renders frame i of a plan; the same pixels whatever was rendered before and in what order."""

    def __init__(self, plan: RenderPlan) -> None:
        self.plan = plan
        self.clock = plan.clock
        self.painters = {role: GlyphPainter(px) for role, px in plan.layout.sizes.items()}
        self.columns = [
            ArmColumn(track, geo, self.painters["body"], plan.theme, plan.code, plan.arms[0].label if n else None)
            for n, (track, geo) in enumerate(zip(plan.arms, plan.layout.columns))
        ]
        self._base = self._draw_base()
        self._canvas = Canvas(self._base.copy(), self.painters, plan.theme)
        self._keys: dict[Hashable, Hashable] = {}
        self._cards: dict[str, np.ndarray] = {}
        self._shown: str | None = None  # phase of the frame returned last

    def render(self, index: int) -> np.ndarray:
        """(height, width, 3) uint8 RGB, C-contiguous, a fresh array the caller may keep."""
        return self.frame(index)[0].copy()

    def frame(self, index: int) -> tuple[np.ndarray, tuple[Rect, ...] | None]:
        """Frame `index` without a copy, and the regions outside which it equals the frame this
        renderer returned last (None: it may differ anywhere). The array is a read-only view of
        the renderer's own canvas, valid until the next call: the encoder hashes it and
        converts only the regions that changed, instead of copying 6 MB a frame."""
        phase = self.clock.phase(index)
        if phase in (TITLE, END):
            if phase not in self._cards:
                self._cards[phase] = self._title_card() if phase == TITLE else self._end_card()
            pixels, changed = self._cards[phase], () if self._shown == phase else None
        else:
            redrawn = self._compose(self._canvas, self._keys, index)
            pixels, changed = self._canvas.pixels, tuple(redrawn) if self._shown == REPLAY else None
        self._shown = phase
        view = pixels.view()
        view.flags.writeable = False
        return view, changed

    # -- replay ------------------------------------------------------------------------------

    def _compose(self, canvas: Canvas, keys: dict[Hashable, Hashable], index: int) -> list[Rect]:
        """Bring every region of canvas to what frame `index` shows, redrawing changed ones;
        the rectangles redrawn."""
        redrawn = []
        cutoff = self.clock.cutoff_ns(index)
        replay_frame = index - self.clock.title_frames
        clock_key = _seconds(cutoff)
        if keys.get("clock") != clock_key:
            rect = self.plan.layout.clock
            canvas.pixels[rect.slices] = self._base[rect.slices]
            canvas.spans(rect, "title", self.plan.theme.background, (), ((clock_key, "title", "title"),))
            keys["clock"] = clock_key
            redrawn.append(rect)
        for n, column in enumerate(self.columns):
            visible = column.timeline.visible(cutoff)
            text_key = column.text_key(visible, replay_frame, self.clock.fps)
            if keys.get(("text", n)) != text_key:
                redrawn.append(column.draw_text(canvas, self._base, text_key, keys.get(("text", n))))
                keys[("text", n)] = text_key
            figures_key = column.figures(visible, cutoff)
            if keys.get(("figures", n)) != figures_key:
                redrawn.extend(column.draw_figures(canvas, self._base, figures_key))
                keys[("figures", n)] = figures_key
        return redrawn

    # -- static scenery ----------------------------------------------------------------------

    def _blank(self) -> Canvas:
        pixels = np.empty((self.plan.height, self.plan.width, 3), dtype=np.uint8)
        pixels[:] = self.plan.theme.background
        return Canvas(pixels, self.painters, self.plan.theme)

    def _footer(self, canvas: Canvas) -> None:
        plan = self.plan
        speed = plan.clock.speed
        pace = "at real speed" if speed == 1 else f"at {float(speed):g}x speed"
        left = f"Each arm was recorded on its own, then replayed side by side {pace}."
        right: list[Span] = [("SIMULATED ENDPOINTS · ", "small", "tool")] if plan.simulated else []
        right.append(("tokenreel", "small", "dim"))
        canvas.spans(plan.layout.footer, "small", plan.theme.background, ((left, "small", "dim"),), right)

    def _prompt_lines(self, width: int, role: str, lines: int) -> list[list[Cell]]:
        """The prompt with its whitespace collapsed, wrapped to at most `lines` lines; cut with '…'."""
        painter = self.painters[role]
        cols = width // painter.cell_w
        flat = " ".join(self.plan.prompt_text.split())
        limit = 2 * cols * (lines + 1)  # enough to fill the lines; a long prompt is not wrapped whole
        wrapped, _ = wrap(clusters(flat[:limit], ["dim"] * min(limit, len(flat))), cols)
        out = [list(line) for line in wrapped[:lines]]
        if len(wrapped) > lines or len(flat) > limit:
            last = out[-1]
            while last and _width(last) > cols - 2:
                last.pop()
            last.append(Cell("…", fonts.REGULAR, 1, "dim"))
        return out

    def _draw_base(self) -> np.ndarray:
        plan, layout, theme = self.plan, self.plan.layout, self.plan.theme
        canvas = self._blank()
        canvas.spans(layout.title, "title", theme.background, ((plan.session_name, "title", "title"),))
        small = self.painters["small"]
        for i, line in enumerate(self._prompt_lines(layout.prompt.w, "small", 2)):
            canvas.cells(line, "small", layout.prompt.x, layout.prompt.y + i * small.line_h, theme.background, layout.prompt)
        speed = plan.clock.speed
        pace = "real time" if speed == 1 else f"{float(speed):g}x speed"
        canvas.spans(layout.speed, "small", theme.background, (), ((pace, "small", "dim"),))
        self._footer(canvas)
        border = max(1, round(layout.scale))
        for track, geo in zip(plan.arms, layout.columns):
            canvas.panel(geo.panel, layout.radius, theme.panel, theme.panel_edge, border)
            canvas.blend(geo.accent, canvas.color(f"accent{track.color}"), geo.accent.h // 2)
            x = canvas.badge(geo.label.x, geo.label.y, geo.label.h, track.color, theme.panel)
            name = Rect(x, geo.label.y, geo.label.right - x, geo.label.h)
            canvas.spans(name, "label", theme.panel, ((track.label, "label", "title"),))
            canvas.spans(geo.detail, "small", theme.panel, ((track.model, "small", "dim"),))
            for y in (geo.text.y - (geo.text.y - geo.detail.bottom) // 2, geo.big.y - (geo.big.y - geo.text.bottom) // 2):
                canvas.fill(Rect(geo.label.x, y, geo.label.w, border), theme.faint)
        return canvas.pixels

    def _title_card(self) -> np.ndarray:
        """Session name, prompt and the arms, centred."""
        plan, layout, theme = self.plan, self.plan.layout, self.plan.theme
        canvas = self._blank()
        stage = layout.stage
        title, label, small = self.painters["title"], self.painters["label"], self.painters["small"]
        prompt = self._prompt_lines(min(stage.w, round(1100 * layout.scale)), "small", 4)
        row_h = label.line_h * 3 // 2
        block_h = title.line_h * 2 + small.line_h * (len(prompt) + 1) + row_h * len(plan.arms)
        y = stage.y + max(0, (stage.h - block_h) // 2)
        name = fit(plan.session_name, stage.w // title.cell_w, "title", fonts.BOLD)
        canvas.cells(name, "title", stage.x + (stage.w - _width(name) * title.cell_w) // 2, y, theme.background, stage)
        y += title.line_h * 2
        for line in prompt:
            canvas.cells(line, "small", stage.x + (stage.w - _width(line) * small.cell_w) // 2, y, theme.background, stage)
            y += small.line_h
        y += small.line_h
        for track in plan.arms:
            spans = ((track.label, "label", "title"), (f"  {track.model}", "small", "dim"))
            cells = [fit(text, stage.w // label.cell_w, style, Canvas.primary(role)) for text, role, style in spans]
            width = canvas.badge_width + _width(cells[0]) * label.cell_w + _width(cells[1]) * small.cell_w
            x = stage.x + max(0, (stage.w - width) // 2)
            middle = y + (row_h - label.line_h) // 2
            x = canvas.badge(x, middle, label.line_h, track.color, theme.background)
            canvas.spans(Rect(x, middle, stage.right - x, label.line_h), "label", theme.background, spans)
            y += row_h
        self._footer(canvas)
        return canvas.pixels

    def _end_card(self) -> np.ndarray:
        """The last replay frame, dimmed, under a card with the session's ladder."""
        plan, layout, theme = self.plan, self.plan.layout, self.plan.theme
        canvas = Canvas(self._base.copy(), self.painters, theme)
        self._compose(canvas, {}, self.clock.title_frames + self.clock.replay_frames - 1)
        stage = layout.stage
        region = canvas.pixels[stage.slices].astype(np.uint16)
        back = np.array(theme.background, dtype=np.uint16)
        canvas.pixels[stage.slices] = (region * SHOW_THROUGH + back * (256 - SHOW_THROUGH)) >> 8
        title, label, small = self.painters["title"], self.painters["label"], self.painters["small"]
        pad = round(36 * layout.scale)
        row_h = label.line_h * 3 // 2
        height = min(stage.h, 2 * pad + title.line_h + small.line_h * 2 + row_h * (len(plan.ladder) + 1))
        width = min(stage.w, round(1280 * layout.scale))
        card = Rect(stage.x + (stage.w - width) // 2, stage.y + (stage.h - height) // 2, width, height)
        canvas.panel(card, layout.radius, theme.panel, theme.panel_edge, max(1, round(layout.scale)))
        inner = Rect(card.x + pad, card.y + pad, card.w - 2 * pad, card.h - 2 * pad)
        canvas.spans(Rect(inner.x, inner.y, inner.w, title.line_h), "title", theme.panel, (("Decode speed", "title", "title"),))
        y = inner.y + title.line_h
        canvas.spans(Rect(inner.x, y, inner.w, small.line_h), "small", theme.panel, ((plan.ladder_note, "small", "dim"),))
        y += small.line_h * 2
        self._ladder(canvas, Rect(inner.x, y, inner.w, inner.bottom - y), row_h)
        return canvas.pixels

    def _ladder(self, canvas: Canvas, rect: Rect, row_h: int) -> None:
        """Rows like the seeds' tables: arm, a bar, decode tok/s, vs prior, vs first."""
        theme, label = self.plan.theme, self.painters["label"]
        widths = (16, 10, 10)  # cells of the three figure columns, right-aligned
        figures_w = label.cell_w * sum(widths)
        name_w = min(label.cell_w * 22, (rect.w - figures_w) // 2)
        bar_x, bar_w = rect.x + name_w, max(0, rect.w - name_w - figures_w - label.cell_w * 2)
        rights = [rect.right - label.cell_w * sum(widths[k + 1 :]) for k in range(len(widths))]
        for heading, right in zip(("decode speed", "vs prior", "vs first"), rights):
            canvas.spans(Rect(rect.x, rect.y, right - rect.x, row_h), "small", theme.panel, (), ((heading, "small", "dim"),))
        fastest = max((row.decode_tok_s or 0.0 for row in self.plan.ladder), default=0.0)
        for i, row in enumerate(self.plan.ladder):
            y = rect.y + row_h * (i + 1)
            if y + row_h > rect.bottom:
                break
            middle = y + (row_h - label.line_h) // 2
            x = canvas.badge(rect.x, middle, label.line_h, i, theme.panel)
            canvas.spans(Rect(x, middle, rect.x + name_w - x - label.cell_w, label.line_h), "label", theme.panel, ((row.label, "label", "title"),))
            if fastest and row.decode_tok_s:
                bar_h = max(2, label.line_h // 2)
                bar = Rect(bar_x, middle + (label.line_h - bar_h) // 2, max(bar_h, round(bar_w * row.decode_tok_s / fastest)), bar_h)
                canvas.blend(bar, canvas.color(f"accent{i}"), bar_h // 2)
            figures = (f"{figure(row.decode_tok_s)} tok/s", multiplier(row.vs_prior), multiplier(row.vs_first))
            for text, right in zip(figures, rights):
                canvas.spans(Rect(rect.x, middle, right - rect.x, label.line_h), "label", theme.panel, (), ((text, "label", "text"),))
