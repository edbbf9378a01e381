"""A race column: one arm's wrapped stream, progress bar and running figures, drawn by keys.

Each region's key says all it depends on, so FrameRenderer redraws only the regions whose key
changed, always from the static base; a finished column is never touched again but for its
verdict line, which gets its speed-up once the first arm is done too (never before its evidence).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from functools import cached_property, lru_cache

import numpy as np

from tokenreel.analysis.claims import METRIC_WORDS, claim_text, ordinal
from tokenreel.analysis.figures import clock_seconds, figure
from tokenreel.base.theme import RGB
from tokenreel.renderer.canvas import Canvas, Span, first_fit, style_color, text_w
from tokenreel.renderer.layout import ColumnLayout, Rect, Shift
from tokenreel.renderer.render_plan import RenderPlan
from tokenreel.renderer.text.blocks import ArmLayout, stream_layout
from tokenreel.renderer.text.highlight import styled_stream
from tokenreel.renderer.text.painter import GlyphPainter
from tokenreel.renderer.text.paragraph import ShapedLine
from tokenreel.renderer.timeline import ArmTimeline
from tokenreel.renderer.tracks import ArmTrack

CURSOR_PHASES_PER_S = 2  # the cursor blinks (on, off) once a second while an arm waits


class ArmColumn:
    """One arm's column: its wrapped stream, the running figures, and how to draw both."""

    def __init__(
        self, track: ArmTrack, geometry: ColumnLayout, painters: dict[str, GlyphPainter], plan: RenderPlan, reference: str | None
    ) -> None:
        """reference: label of the arm its verdict's speed-up is over (`ArmTrack.versus`); None for the first arm."""
        self.track = track
        self.plan = plan
        self.theme = plan.theme
        self.geo = geometry
        self.painters = painters
        self.painter = painters["body"]
        self.reference = reference
        self.accent = f"accent{track.color}"
        self.about = "≈" if track.tokens_estimated else ""  # before every figure counted from tokens
        self.timeline = ArmTimeline(track.t_ns, track.tokens, track.first_index)
        self.steps = self.timeline.tokens_per_chunk if track.step_events else None
        self.line_tile = lru_cache(maxsize=4 * geometry.rows + 16)(self._line_tile)
        self._base_rows_alike: bool | None = None
        self._figures: tuple[tuple[int, bool] | None, tuple[tuple[Span, ...], ...]] = (None, ())

    @cached_property
    def layout(self) -> ArmLayout:
        """The stream wrapped, laid out as frames show it (blocks.py): a poster of the end card
        never lays out the answer, and a frame late in a long one only the blocks it shows."""
        text, styles, ends = styled_stream(self.track.content, self.track.reasoning, self.track.tool, self.plan.code)
        return ArmLayout(stream_layout(text, styles, self.geo.cols, self.painter.size), ends)

    def _line_tile(self, line: int) -> np.ndarray:
        return self.painter.paint(self.layout.line(line), self._style_color, self.theme.panel)

    def _style_color(self, style: str) -> RGB:
        return style_color(self.theme, style)

    def _shaped(self, line: int) -> ShapedLine | None:
        cells = self.layout.line(line)
        return cells[0] if cells and isinstance(cells[0], ShapedLine) else None

    def cursor_x(self, line: int, col: int) -> int | None:
        """Where the cursor's left edge goes after col cells (clusters, on a shaped line) of a
        line; None when the line is full."""
        shaped = self._shaped(line)
        if shaped is not None:
            return shaped.cursor[col]
        return col * self.painter.cell_w if col < self.geo.cols else None

    def finished(self, visible: int) -> bool:
        """Done: the last chunk with tokens or text shows (a usage-only tail does not count)."""
        return visible > self.track.last_index

    def text_key(self, visible: int, replay_frame: int, fps: int) -> tuple[int, int, int, bool]:
        """(top line, caret line, caret col, cursor shown): all the text region depends on."""
        top, line, col = self.layout.window(visible, self.geo.rows)
        waiting = visible <= self.track.first_index
        blink_on = (replay_frame * CURSOR_PHASES_PER_S // fps) % 2 == 0
        cursor = not self.finished(visible) and self.cursor_x(line, col) is not None and (blink_on or not waiting)
        return top, line, col, cursor

    def draw_text(
        self, canvas: Canvas, base: np.ndarray, key: tuple[int, int, int, bool], previous: Hashable
    ) -> tuple[Rect, Shift | None]:
        """Bring the text region from `previous` (its last key, if any) to `key`; the part redrawn,
        and the lines in it that only moved up (a scroll), if any."""
        top, line, col, cursor = key
        rect, lh, cw = self.geo.text, self.painter.line_h, self.painter.cell_w
        shift = None
        if isinstance(previous, tuple) and previous[0] == top and previous[1] <= line:
            # Same scroll, caret not moved up: rows above the old caret line already hold their
            # full lines and rows below the new one are still empty.
            first = previous[1]
            redraw = Rect(rect.x, rect.y + (first - top) * lh, rect.w, (line - first + 1) * lh)
            canvas.pixels[redraw.slices] = base[redraw.slices]
        elif isinstance(previous, tuple) and previous[0] < top < previous[1] <= line and self._rows_alike(base):
            # Scrolled down: the full lines from the new top to the old caret line move up as they
            # are (the base behind them is the same on every row); the rest is drawn again.
            first, redraw = previous[1], rect
            kept = Rect(rect.x, rect.y, rect.w, (first - top) * lh)
            shift = Shift(kept, (top - previous[0]) * lh)
            canvas.pixels[kept.slices] = canvas.pixels[kept.y + shift.dy : kept.bottom + shift.dy, kept.x : kept.right]
            rest = Rect(rect.x, kept.bottom, rect.w, rect.bottom - kept.bottom)
            canvas.pixels[rest.slices] = base[rest.slices]
        else:
            first, redraw = top, rect
            canvas.pixels[redraw.slices] = base[redraw.slices]
        for k in range(first, line + 1):
            shaped = self._shaped(k) if k == line else None
            if shaped is not None:  # a shaped line shows the glyphs of the clusters that arrived
                tile = self.painter.shaped(shaped, col, self._style_color, self.theme.panel)
                width = tile.shape[1]
            else:
                tile = self.line_tile(k)
                width = tile.shape[1] if k < line else min(tile.shape[1], col * cw)
            y = rect.y + (k - top) * lh
            canvas.pixels[y : y + lh, rect.x : rect.x + width] = tile[:, :width]
        if cursor:
            y = rect.y + (line - top) * lh
            inset = max(1, lh // 8)
            caret = Rect(rect.x + (self.cursor_x(line, col) or 0), y + inset, max(1, cw // 2), lh - 2 * inset)
            canvas.fill(caret, canvas.color(self.accent))
        return redraw, shift

    def _rows_alike(self, base: np.ndarray) -> bool:
        """Whether every row of the static base behind the text is the same, so that a line's
        pixels are the same on any row it is drawn at."""
        if self._base_rows_alike is None:
            region = base[self.geo.text.slices]
            self._base_rows_alike = bool((region == region[:1]).all())
        return self._base_rows_alike

    def progress_key(self, visible: int, max_tokens: int) -> int:
        """Pixels of the progress bar filled: tokens so far over the session's max_tokens."""
        full = max(max_tokens, self.track.output_tokens, 1)
        return min(self.geo.progress.w, self.geo.progress.w * self.timeline.tokens(visible) // full)

    def draw_progress(self, canvas: Canvas, filled: int) -> Rect:
        rect = self.geo.progress
        canvas.fill(rect, canvas.theme.faint)
        if filled:
            canvas.fill(Rect(rect.x, rect.y, filled, rect.h), canvas.color(self.accent))
        return rect

    def live_accept(self, visible: int) -> str:
        """Acceptance from the engine's counts, never from event sizes it cannot read: where the
        events are verify steps (`ArmTrack.step_events`), tokens per event so far; otherwise
        (one event per token, as llama.cpp streams) the engine's figure for the whole run, the
        one the column ends on, from the second token (the footer says so); the archived figure
        once done; nothing without the engine's figure."""
        track = self.track
        if track.acceptance_length is None:
            return ""
        whole_run = f"accept {'≈' if track.acceptance_approximate else ''}{figure(track.acceptance_length, 2)}"
        if self.finished(visible):
            return whole_run
        if visible <= track.first_index + 1:
            return ""
        return f"accept {figure(self.steps(visible), 1)}" if self.steps is not None else whole_run

    def figures(self, visible: int, ref_done: bool) -> tuple[tuple[Span, ...], ...]:
        """`lines`, kept while the same chunks show: a finished column asks for the same lines
        every frame, and fitting them measures every wording."""
        if self._figures[0] != (visible, ref_done):
            self._figures = ((visible, ref_done), self.lines(visible, ref_done))
        return self._figures[1]

    def lines(self, visible: int, ref_done: bool) -> tuple[tuple[Span, ...], ...]:
        """The figure lines as spans: (big left, big right, verdict, stats). ref_done: the arm its
        verdict compares with (`ArmTrack.versus`) has finished. Each line is the first of
        its variants that fits: words shorten, then step down a size, then the least important
        figures drop out whole; a figure itself is never cut or shrunk."""
        track, plan, geo = self.track, self.plan, self.geo
        ttft = f"TTFT {clock_seconds(track.ttft_ns)}"
        accept = self.live_accept(visible)
        if visible <= track.first_index:
            waiting = self.fitted(geo.stats.w, ("waiting for the first token", "waiting for token 1", "waiting"))
            return self.big_line(("—", "big", "faint")), (), (), waiting
        tokens = self.timeline.tokens(visible)
        if not self.finished(visible):
            count = f"{tokens}/{plan.max_tokens}" if plan.max_tokens >= tokens else str(tokens)
            live = (self.about + figure(self.timeline.live_decode(visible)), "big", self.accent)
            return self.big_line(live), (), (), self.stats_line((count, ""), ttft, accept)
        place = ordinal(track.place)
        finish = clock_seconds(track.finish_ns)
        left, right = self.finish_line((self.about + figure(track.decode_tok_s), "big", self.accent), place, finish)
        # What the big line had no room for leads the stats line: the place is never dropped.
        done = "" if finish in shown(right) else f"done {finish}" if right else f"{place} · done {finish}"
        return left, right, self.verdict(ref_done), self.stats_line((str(track.output_tokens), done), ttft, accept)

    def finish_line(self, value: Span, place: str, finish: str) -> tuple[tuple[Span, ...], tuple[Span, ...]]:
        """The big figure with its unit, and right of it the finishing place (with the time where
        there is room): the unit shortens or steps down before the place goes; the figure itself
        never shrinks. Only where even the place cannot fit (a 99999.9 in a quarter of a frame)
        is the right side empty, and the stats line says the place instead."""
        units = [(unit, role, "dim") for role in ("small", "tiny") for unit in (" tok/s decode", " tok/s")]
        marks = (f"{place} · done {finish}", f"{place} · {finish}", place)
        for unit in units:
            used = text_w(self.painters, value[0], value[1]) + text_w(self.painters, unit[0], unit[1])
            for mark in marks:
                if used + text_w(self.painters, " " + mark, "label") <= self.geo.big.w:
                    return (value, unit), ((mark, "label", "title"),)
        return self.big_line(value), ()

    def big_line(self, value: Span) -> tuple[Span, ...]:
        """The big tok/s figure and its unit, the unit shortened or stepped down to fit."""
        units = [(unit, role, "dim") for role in ("small", "tiny") for unit in (" tok/s decode", " tok/s")]
        return first_fit(self.painters, self.geo.big.w, [(value, unit) for unit in units])

    def stats_line(self, count_done: tuple[str, str], ttft: str, accept: str) -> tuple[Span, ...]:
        """tokens, TTFT, acceptance (and "done" first when the big line had no room for it)."""
        count, done = count_done
        count = self.about + count
        lead = [done] if done else []
        tail = [accept] if accept else []
        shortest = [*lead, f"{count} tok", ttft, *tail]
        wordings = [" · ".join([*lead, f"{count} tokens", ttft, *tail]), " · ".join(shortest)]
        drops = [" · ".join(shortest[:n]) for n in range(len(shortest) - 1, 0, -1)]
        return self.fitted(self.geo.stats.w, wordings, drops)

    def fitted(self, width: int, wordings: Sequence[str], drops: Sequence[str] = ()) -> tuple[Span, ...]:
        """Small dim text: the first wording that fits, else the shortest in tiny type, else
        (tiny) the first of `drops`, shorter lines with the least important figures left out."""
        candidates = [((text, "small", "dim"),) for text in wordings]
        candidates += [((text, "tiny", "dim"),) for text in (wordings[-1], *drops)]
        return first_fit(self.painters, width, candidates)

    def verdict(self, ref_done: bool) -> tuple[Span, ...]:
        """The speed-up over the arm it is compared with (the first, for the last arm: the
        headline pair; the one before, for the others: their ladder step), once both are done: never before its evidence (a live
        lower bound read as a claim the race then contradicted: "≥1.14x" beside an arm visibly
        4x ahead). Its text is the claim's (plan.claims); whom it is against only where there is
        room, and the metric's word drops last (the footer says it too)."""
        plan, track = self.plan, self.track
        if self.reference is None:
            name = "baseline" if plan.reference_is_baseline else "reference"  # only the session's first arm is its baseline
            tails = [(tail, role, "dim") for role in ("small", "tiny") for tail in (" for the speed-ups", "")]
            return first_fit(self.painters, self.geo.verdict.w, [((name, "label", "dim"), tail) for tail in tails])
        value = track.verdict_value
        if not ref_done or value is None:
            return ()
        style = "good" if value >= 1 else "dim"
        text = claim_text(value, plan.metric)
        short = text.removesuffix(" " + METRIC_WORDS[plan.metric])
        whom = (f" vs {self.reference}", "small", "dim")
        candidates = [((text, "label", style), whom), ((text, "label", style),), ((short, "label", style),)]
        return first_fit(self.painters, self.geo.verdict.w, candidates)

    def answer_badge(self, visible: int, done: Sequence[bool]) -> tuple[Span, ...]:
        """Once the arm's stream and the one it is compared with (`AnswerMark.against`; `done`: each
        column's) are both done (never before: the answers it compares are not both on screen),
        whether it is that arm's answer (`fitted_badge`)."""
        mark = self.track.answer
        if mark is None or not self.finished(visible) or not done[mark.against]:
            return ()
        return self.fitted_badge

    @cached_property
    def fitted_badge(self) -> tuple[Span, ...]:
        """"same answer as <arm>" or where it parts from that arm; nothing on the first arm (its
        verdict line says it is the baseline, and the others name it: one mark a column). A
        difference is a warning only where the arm must keep the other's tokens (a drafter
        against its target); a quantization's is said plainly. Words shorten, then the line steps
        down a size; the token number is never cut. Padded by a space each side: the badge's
        pill. Fitted once: it never changes."""
        mark = self.track.answer
        assert mark is not None
        if mark.same is None:
            return ()
        label = self.plan.arms[mark.against].label
        names = dict.fromkeys((label, short_label(label)))
        if mark.same:
            texts = [f"✓ same answer as {name}" for name in names] + [f"✓ same as {name}" for name in names]
            texts, style = [*texts, "✓ same answer", "✓ same"], "good"
        else:
            n = f"{'≈' if mark.estimated else ''}{mark.diverges_at_token}"
            verb, style = ("diverges", "tool") if mark.lossless else ("differs", "dim")  # tool: the theme's warning colour
            texts = [*(f"≠ {verb} from {name} at token {n}" for name in names), f"≠ {verb} at token {n}", f"≠ at token {n}",
                     f"≠ tok {n}"]
        # The most words first, each in the largest size it fits (every size reads at 640 px wide).
        # The last form, " ≠ tok ≈99999 " in tiny, is narrower than the stats line's worst case,
        # which layout.compute checks every size against.
        roles = ("title", "label", "small", "tiny")
        return first_fit(self.painters, self.answer_rect.w, [((f" {text} ", role, style),) for text in texts for role in roles])

    @property
    def answer_rect(self) -> Rect:
        """The badge's line: only a layout for `--answer-badge` has one, and only then is it drawn."""
        rect = self.geo.answer
        assert rect is not None, "no answer badge line in this layout"
        return rect

    def draw_answer(self, canvas: Canvas, base: np.ndarray, spans: tuple[Span, ...]) -> Rect:
        """The badge: its text on a tag of the text's colour mixed into the panel's."""
        rect = self.answer_rect
        canvas.pixels[rect.slices] = base[rect.slices]
        if spans:
            text, role, style = spans[0]
            color = canvas.color(style)
            r, g, b = ((p * 3 + c) // 4 for p, c in zip(canvas.theme.panel, color, strict=False))
            tint = (r, g, b)
            line_h = self.painters[role].line_h
            tag = Rect(rect.x, rect.y + (rect.h - line_h) // 2, min(rect.w, text_w(self.painters, text, role)), line_h)
            canvas.fill(tag, tint)
            canvas.spans(tag, role, tint, spans)
        return rect

    def draw_figures(self, canvas: Canvas, base: np.ndarray, key: tuple[tuple[Span, ...], ...], previous: Hashable) -> list[Rect]:
        """Redraw the figure lines that changed from `previous`; the regions redrawn."""
        old = previous if isinstance(previous, tuple) else (None, None, None, None)
        big_left, big_right, verdict, stats = key
        redrawn = []
        if (big_left, big_right) != old[:2]:
            canvas.pixels[self.geo.big.slices] = base[self.geo.big.slices]
            canvas.spans(self.geo.big, "big", canvas.theme.panel, big_left, big_right)
            redrawn.append(self.geo.big)
        for rect, role, spans, was in ((self.geo.verdict, "label", verdict, old[2]), (self.geo.stats, "small", stats, old[3])):
            if spans != was:
                canvas.pixels[rect.slices] = base[rect.slices]
                canvas.spans(rect, role, canvas.theme.panel, spans)
                redrawn.append(rect)
        return redrawn


def short_label(label: str) -> str:
    """An arm's label by what it adds: the part after its last " · " ("Quantized · NVFP4" ->
    "NVFP4"), the whole label where it has none."""
    return label.rsplit(" · ", 1)[-1]


def shown(spans: Sequence[Span]) -> str:
    return "".join(text for text, _, _ in spans)
