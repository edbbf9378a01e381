"""Frame i of the video as a pure function of i: title card, side-by-side replay, end card.

Workers render chunks of frames starting anywhere, so no frame may depend on what was drawn
before. The replay keeps one canvas in which every region (clock, each column's text, each
column's figures) is known to hold exactly what a key describes; a frame recomputes the keys
and redraws only the regions whose key changed, always from the static base. The result is
the same whatever was rendered before. A finished column is never touched again but for its
verdict line, which gets its speed-up once the first arm is done too (never before its evidence).
Drawing primitives live in canvas.py, the end card in end_card.py.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from functools import cached_property, lru_cache

import numpy as np

from tokenreel.analysis.claims import DEFINITIONS, METRIC_WORDS, claim_text
from tokenreel.analysis.figures import clock_seconds, figure
from tokenreel.base.theme import RGB
from tokenreel.renderer.canvas import Canvas, Span, TextBox, cells_width, first_fit, label_spans, style_color, text_w
from tokenreel.renderer.end_card import EndCard
from tokenreel.renderer.layout import ColumnLayout, Rect
from tokenreel.renderer.render_plan import ArmTrack, Logo, RenderPlan
from tokenreel.renderer.text import fonts
from tokenreel.renderer.text.cells import Cell
from tokenreel.renderer.text.clusters import clusters
from tokenreel.renderer.text.highlight import styled_stream
from tokenreel.renderer.text.painter import GlyphPainter
from tokenreel.renderer.text.paragraph import ShapedLine
from tokenreel.renderer.text.wrap import fit, layout_stream, wrap
from tokenreel.renderer.timeline import END, REPLAY, TITLE, ArmTimeline

# What a frame shows, as designed: bumped with every deliberate change to it, so that `verify`
# can say a re-render differs because the design did (2: issue 24's claims, full-frame end card,
# type legible at 640 px, markdown answers, title countdown). Manifests before it record none.
DESIGN = "2"
CURSOR_PHASES_PER_S = 2  # the cursor blinks (on, off) once a second while an arm waits
ORDINALS = {1: "1st", 2: "2nd", 3: "3rd"}

class ArmColumn:
    """One arm's column: its wrapped stream, the running figures, and how to draw both."""

    def __init__(
        self, track: ArmTrack, geometry: ColumnLayout, painters: dict[str, GlyphPainter], plan: RenderPlan, reference: str | None
    ) -> None:
        """reference: label of the arm that speed-ups are relative to; None for that arm itself."""
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
        text, styles, ends = styled_stream(track.content, track.reasoning, track.tool, plan.code)
        self.layout = layout_stream(text, styles, ends, geometry.cols, self.painter.size)
        self.line_tile = lru_cache(maxsize=4 * geometry.rows + 16)(self._line_tile)

    def _line_tile(self, line: int) -> np.ndarray:
        return self.painter.paint(self.layout.lines[line], self._style_color, self.theme.panel)

    def _style_color(self, style: str) -> RGB:
        return style_color(self.theme, style)

    def _shaped(self, line: int) -> ShapedLine | None:
        cells = self.layout.lines[line]
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
        line, col = self.layout.caret[visible]
        top = max(0, line - self.geo.rows + 1)
        waiting = visible <= self.track.first_index
        blink_on = (replay_frame * CURSOR_PHASES_PER_S // fps) % 2 == 0
        cursor = not self.finished(visible) and self.cursor_x(line, col) is not None and (blink_on or not waiting)
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
            canvas.fill(Rect(rect.x + (self.cursor_x(line, col) or 0), y + inset, max(1, cw // 2), lh - 2 * inset), canvas.color(self.accent))
        return redraw

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
        """The figure lines as spans: (big left, big right, verdict, stats). ref_done: the first
        arm on screen, which speed-ups are relative to, has finished. Each line is the first of
        its variants that fits: words shorten, then step down a size, then the least important
        figures drop out whole; a figure itself is never cut or shrunk."""
        track, plan, geo = self.track, self.plan, self.geo
        ttft = f"TTFT {clock_seconds(track.ttft_ns)}"
        accept = self.live_accept(visible)
        if visible <= track.first_index:
            return self.big_line(("—", "big", "faint")), (), (), self.fitted(geo.stats.w, ("waiting for the first token", "waiting for token 1", "waiting"))
        tokens = self.timeline.tokens(visible)
        if not self.finished(visible):
            count = f"{tokens}/{plan.max_tokens}" if plan.max_tokens >= tokens else str(tokens)
            live = (self.about + figure(self.timeline.live_decode(visible)), "big", self.accent)
            return self.big_line(live), (), (), self.stats_line((count, ""), ttft, accept)
        left = self.big_line((self.about + figure(track.decode_tok_s), "big", self.accent))
        place = ORDINALS.get(track.place, f"{track.place}th")
        finish = clock_seconds(track.finish_ns)
        right = self.fitting(left, (f"{place} · done {finish}", f"{place} · {finish}", place))
        done = "" if finish in shown(right) else f"done {finish}"  # a narrow column says it below
        return left, right, self.verdict(ref_done), self.stats_line((str(track.output_tokens), done), ttft, accept)

    def big_line(self, value: Span) -> tuple[Span, ...]:
        """The big tok/s figure and its unit, the unit shortened or stepped down to fit."""
        return first_fit(self.painters, self.geo.big.w, [(value, (unit, role, "dim")) for role in ("small", "tiny") for unit in (" tok/s decode", " tok/s")])

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

    def fitting(self, left: Sequence[Span], variants: Sequence[str]) -> tuple[Span, ...]:
        """The first finish mark that fits right of the big figure, which never shrinks."""
        used = sum(text_w(self.painters, text, role) for text, role, _ in left)
        for text in variants:
            if used + text_w(self.painters, " " + text, "label") <= self.geo.big.w:
                return ((text, "label", "title"),)
        return ()

    def verdict(self, ref_done: bool) -> tuple[Span, ...]:
        """The speed-up over the first arm, once both are done: never before its evidence (a live
        lower bound read as a claim the race then contradicted: "≥1.14x" beside an arm visibly
        4x ahead). Its text is the claim's (plan.claims); whom it is against only where there is
        room, and the metric's word drops last (the footer says it too)."""
        plan, track = self.plan, self.track
        if self.reference is None:
            name = "baseline" if plan.reference_is_baseline else "reference"  # only the session's first arm is its baseline
            return first_fit(self.painters, self.geo.verdict.w, [((name, "label", "dim"), (tail, role, "dim")) for role in ("small", "tiny") for tail in (" for the speed-ups", "")])
        if not ref_done or track.vs_first is None:
            return ()
        style = "good" if track.vs_first >= 1 else "dim"
        text = claim_text(track.vs_first, plan.metric)
        short = text.removesuffix(" " + METRIC_WORDS[plan.metric])
        candidates = [((text, "label", style), (f" vs {self.reference}", "small", "dim")), ((text, "label", style),), ((short, "label", style),)]
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
        """"same answer as <first arm>" or "diverges at token N"; "reference answer" on the first
        arm. Words shorten, then the line steps down a size; the token number is never cut.
        Padded by a space each side: the badge's pill. Fitted once: it never changes."""
        mark = self.track.answer
        assert mark is not None
        against = self.plan.arms[mark.against].label
        if mark.same is None:
            texts, style = ["reference answer", "reference"], "dim"
        elif mark.same:
            texts, style = [f"✓ same answer as {against}", f"✓ same as {against}", "✓ same answer", "✓ same"], "good"
        else:
            n = f"{'≈' if mark.estimated else ''}{mark.diverges_at_token}"
            texts = [f"≠ diverges from {against} at token {n}", f"≠ diverges at token {n}", f"≠ at token {n}", f"≠ tok {n}"]
            style = "tool"  # the theme's warning colour (as the footer's SIMULATED ENDPOINTS)
        # The most words first, each in the largest size it fits (every size reads at 640 px wide).
        # The last form, " ≠ tok ≈99999 " in tiny, is narrower than the stats line's worst case,
        # which layout.compute checks every size against.
        roles = ("title", "label", "small", "tiny")
        return first_fit(self.painters, self.geo.answer.w, [((f" {text} ", role, style),) for text in texts for role in roles])

    def draw_answer(self, canvas: Canvas, base: np.ndarray, spans: tuple[Span, ...]) -> Rect:
        """The badge: its text on a tag of the text's colour mixed into the panel's."""
        rect = self.geo.answer
        canvas.pixels[rect.slices] = base[rect.slices]
        if spans:
            text, role, style = spans[0]
            color = canvas.color(style)
            tint = tuple((p * 3 + c) // 4 for p, c in zip(canvas.theme.panel, color, strict=False))
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


def shown(spans: Sequence[Span]) -> str:
    return "".join(text for text, _, _ in spans)


class FrameRenderer:
    """Renders frame i of a plan; the same pixels whatever was rendered before and in what order."""

    def __init__(self, plan: RenderPlan, text_boxes: list[TextBox] | None = None) -> None:
        """text_boxes: a list to append every text run drawn to (tests check what fits)."""
        self.plan = plan
        self.text_boxes = text_boxes
        self.clock = plan.clock
        self.painters = {role: GlyphPainter(px) for role, px in plan.layout.sizes.items()}
        self.columns = [
            ArmColumn(track, geo, self.painters, plan, plan.arms[0].label if n else None)
            for n, (track, geo) in enumerate(zip(plan.arms, plan.layout.columns, strict=False))
        ]
        self._base = self._draw_base()
        self._canvas = self._canvas_on(self._base.copy())
        self._keys: dict[Hashable, Hashable] = {}
        self._cards: dict[str, np.ndarray] = {}
        self.end_card = EndCard(plan, self.painters)
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
        if phase == TITLE:
            pixels, changed = self._title_frame(index), (self.countdown_rect,) if self._shown == TITLE else None
        elif phase == END:
            if END not in self._cards:
                self._cards[END] = self._end_card()
            pixels, changed = self._cards[END], () if self._shown == END else None
        else:
            redrawn = self._compose(self._canvas, self._keys, index)
            pixels, changed = self._canvas.pixels, tuple(redrawn) if self._shown == REPLAY else None
        self._shown = phase
        view = pixels.view()
        view.flags.writeable = False
        return view, changed

    # -- replay ------------------------------------------------------------------------------

    def race_cutoff(self, index: int) -> int:
        """The replay time a frame shows; the clock stops when the last arm is done, so the
        pause before the end card shows every column's final state."""
        return min(self.clock.cutoff_ns(index), self.plan.race_end_ns)

    def _compose(self, canvas: Canvas, keys: dict[Hashable, Hashable], index: int) -> list[Rect]:
        """Bring every region of canvas to what frame `index` shows, redrawing changed ones;
        the rectangles redrawn."""
        redrawn = []
        cutoff = self.race_cutoff(index)
        replay_frame = index - self.clock.title_frames
        clock_key = clock_seconds(cutoff)
        if keys.get("clock") != clock_key:
            rect = self.plan.layout.clock
            canvas.pixels[rect.slices] = self._base[rect.slices]
            canvas.spans(rect, "title", self.plan.theme.background, (), ((clock_key, "title", "title"),))
            keys["clock"] = clock_key
            redrawn.append(rect)
        visible = [column.timeline.visible(cutoff) for column in self.columns]
        done = [column.finished(v) for column, v in zip(self.columns, visible, strict=False)]
        ref_done = done[0]
        for n, column in enumerate(self.columns):
            text_key = column.text_key(visible[n], replay_frame, self.clock.fps)
            if keys.get(("text", n)) != text_key:
                redrawn.append(column.draw_text(canvas, self._base, text_key, keys.get(("text", n))))
                keys[("text", n)] = text_key
            progress_key = column.progress_key(visible[n], self.plan.max_tokens)
            if keys.get(("progress", n)) != progress_key:
                redrawn.append(column.draw_progress(canvas, progress_key))
                keys[("progress", n)] = progress_key
            figures_key = column.figures(visible[n], ref_done)
            if keys.get(("figures", n)) != figures_key:
                redrawn.extend(column.draw_figures(canvas, self._base, figures_key, keys.get(("figures", n))))
                keys[("figures", n)] = figures_key
            if column.geo.answer is not None:
                answer_key = column.answer_badge(visible[n], done)
                if keys.get(("answer", n)) != answer_key:
                    redrawn.append(column.draw_answer(canvas, self._base, answer_key))
                    keys[("answer", n)] = answer_key
        return redrawn

    # -- static scenery ----------------------------------------------------------------------

    def _blank(self) -> Canvas:
        pixels = np.empty((self.plan.height, self.plan.width, 3), dtype=np.uint8)
        pixels[:] = self.plan.theme.background
        return self._canvas_on(pixels)

    def _canvas_on(self, pixels: np.ndarray) -> Canvas:
        canvas = Canvas(pixels, self.painters, self.plan.theme)
        canvas.boxes = self.text_boxes
        return canvas

    def metric_notes(self) -> tuple[str, str]:
        """What every speed-up on screen is, said once for the whole video (long, short)."""
        plan = self.plan
        which = "this answer" if plan.scope == "prompt" else "the runs shown"
        clocks = "" if plan.align == "send" else "; each arm's clock starts at its first token"
        return f"Speed-ups: {DEFINITIONS[plan.metric]}, {which}{clocks}", f"Speed-ups: {METRIC_WORDS[plan.metric]}, {which}"

    def footer_wordings(self) -> tuple[str, ...]:
        """The footer, longest wording first: what the speed-ups are, how the race was made, and
        what an estimate or a whole-run acceptance on screen is."""
        plan = self.plan
        speed = plan.clock.speed
        pace = "at real speed" if speed == 1 else f"at {float(speed):g}x speed"
        long, short = self.metric_notes()
        estimates = any(t.tokens_estimated or t.acceptance_approximate for t in plan.arms)
        about = " ≈: an estimate (the server gave no exact count)." if estimates else ""
        whole_run = any(t.acceptance_length is not None and not t.step_events for t in plan.arms)  # events not steps
        accept, brief = (" Accept: the engine's figure for the whole run.", " Accept: whole run.") if whole_run else ("", "")
        return (
            f"{long}. Each arm was recorded on its own, then replayed side by side {pace}.{about}{accept}",
            f"{short}. Each arm recorded on its own, replayed side by side {pace}.{about}{accept}",
            f"{short}. Arms recorded one at a time, replayed {pace}.{about}{accept}",
            f"{short}; arms recorded one at a time.{about}{accept}",
            f"{short}.{about}{accept}",
            f"{short}.{about}{brief}",
        )

    def _footer(self, canvas: Canvas) -> None:
        """The footer's first wording that fits (then smaller)."""
        plan = self.plan
        wordings = self.footer_wordings()
        right: list[Span] = [("SIMULATED · ", "small", "tool")] if plan.simulated else []
        right.append(("tokenreel", "small", "dim"))
        room = plan.layout.footer.w - sum(text_w(self.painters, text, role) for text, role, _ in right)
        left = first_fit(self.painters, room, [((text, role, "dim"),) for role in ("small", "tiny") for text in wordings])
        canvas.spans(plan.layout.footer, "small", plan.theme.background, left, right)

    def _prompt_lines(self, width: int, role: str, lines: int, text: str | None = None) -> list[list[Cell]]:
        """The prompt (or `text`) with its whitespace collapsed, wrapped to at most `lines` lines;
        cut with '…'."""
        painter = self.painters[role]
        cols = width // painter.cell_w
        flat = " ".join((self.plan.prompt_text if text is None else text).split())
        if (not flat and text is not None) or cols < 2 or lines < 1:
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

    def _draw_base(self) -> np.ndarray:
        plan, layout, theme = self.plan, self.plan.layout, self.plan.theme
        canvas = self._blank()
        canvas.spans(layout.title, "title", theme.background, ((plan.session_name, "title", "title"),))
        prompt = self.painters["prompt"]
        for i, line in enumerate(self._prompt_lines(layout.prompt.w, "prompt", 2)):
            canvas.cells(line, "prompt", layout.prompt.x, layout.prompt.y + i * prompt.line_h, theme.background, layout.prompt)
        speed = plan.clock.speed
        pace = "real time" if speed == 1 else f"{float(speed):g}x speed"
        since = "since request send" if plan.align == "send" else "since first token"
        canvas.spans(layout.speed, "small", theme.background, (), ((f"{since} · {pace}", "small", "dim"),))
        self._footer(canvas)
        border = max(1, round(layout.scale))
        for n, (track, geo) in enumerate(zip(plan.arms, layout.columns, strict=False)):
            canvas.panel(geo.panel, layout.radius, theme.panel, theme.panel_edge, border)
            canvas.blend(geo.accent, canvas.color(f"accent{track.color}"), geo.accent.h // 2)
            x = canvas.badge(geo.label.x, geo.label.y, geo.label.h, track.color, theme.panel, n + 1)
            name = Rect(x, geo.label.y, geo.label.right - x, geo.label.h)
            canvas.spans(name, "label", theme.panel, label_spans(self.painters, track.label, name.w))
            canvas.spans(geo.detail, "small", theme.panel, label_spans(self.painters, track.model, geo.detail.w, "small", "dim"))
            y = geo.text.y - (geo.text.y - geo.detail.bottom) // 2
            canvas.fill(Rect(geo.label.x, y, geo.label.w, border), theme.faint)
            canvas.fill(geo.progress, theme.faint)
        return canvas.pixels

    def _title_card(self) -> np.ndarray:
        """Title (default the session name), subtitle (default the prompt) and the arms, centred;
        the logo, if any, in the top-right corner."""
        plan, layout, theme = self.plan, self.plan.layout, self.plan.theme
        canvas = self._blank()
        stage = layout.stage
        # The title in the largest type it fits in whole (the headline's, on every canvas).
        role = next((r for r in ("headline", "big") if text_w(self.painters, plan.title, r) <= stage.w), "title")
        title, label, small = self.painters[role], self.painters["label"], self.painters["small"]
        lines = 4
        prompt = self._prompt_lines(min(stage.w, round(1100 * layout.scale)), "small", lines, plan.subtitle)
        row_h = label.line_h * 3 // 2
        # centred as if the subtitle had all its lines: another subtitle never moves the title
        block_h = title.line_h * 3 // 2 + small.line_h * (lines + 1) + row_h * len(plan.arms)
        y = stage.y + max(0, (stage.h - block_h) // 2)
        name = fit(plan.title, stage.w // title.cell_w, "title", fonts.BOLD)
        canvas.cells(name, role, stage.x + (stage.w - cells_width(name) * title.cell_w) // 2, y, theme.background, stage)
        y += title.line_h * 3 // 2
        for line in prompt:
            canvas.cells(line, "small", stage.x + (stage.w - cells_width(line) * small.cell_w) // 2, y, theme.background, stage)
            y += small.line_h
        y += small.line_h
        for n, track in enumerate(plan.arms):
            spans = ((track.label, "label", "title"), (f"  {track.model}", "small", "dim"))
            cells = [fit(text, stage.w // label.cell_w, style, Canvas.primary(role)) for text, role, style in spans]
            width = canvas.badge_width + cells_width(cells[0]) * label.cell_w + cells_width(cells[1]) * small.cell_w
            x = stage.x + max(0, (stage.w - width) // 2)
            middle = y + (row_h - label.line_h) // 2
            x = canvas.badge(x, middle, label.line_h, track.color, theme.background, n + 1)
            canvas.spans(Rect(x, middle, stage.right - x, label.line_h), "label", theme.background, spans)
            y += row_h
        self._footer(canvas)
        if plan.logo is not None:
            _composite(canvas.pixels, plan.logo)
        return canvas.pixels

    @cached_property
    def countdown_rect(self) -> Rect:
        """The title card's countdown: a line along the bottom of the stage that fills until the
        race starts, so the video moves from its first frames."""
        stage, scale = self.plan.layout.stage, self.plan.layout.scale
        height = max(2, round(6 * scale))
        return Rect(stage.x, stage.bottom - height, stage.w, height)

    def _title_frame(self, index: int) -> np.ndarray:
        """Title frame `index`: the card, its countdown filled to (index + 1) / title frames."""
        if TITLE not in self._cards:
            self._cards[TITLE] = self._title_card()
            self._title = self._cards[TITLE].copy()
        rect = self.countdown_rect
        self._title[rect.slices] = self._cards[TITLE][rect.slices]
        filled = rect.w * (index + 1) // self.clock.title_frames
        self._title[rect.y : rect.bottom, rect.x : rect.x + filled] = style_color(self.plan.theme, f"accent{self.plan.arms[0].color}")
        return self._title

    def _end_card(self) -> np.ndarray:
        canvas = self._blank()
        self.end_card.draw(canvas)
        self._footer(canvas)
        return canvas.pixels

    def logo_box(self) -> Rect | None:
        """Where the logo is drawn on the title card (None: no logo)."""
        logo = self.plan.logo
        return None if logo is None else Rect(logo.x, logo.y, logo.width, logo.height)

def _composite(pixels: np.ndarray, logo: Logo) -> None:
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
