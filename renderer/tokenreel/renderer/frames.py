"""Frame i of the video as a pure function of i: title card, side-by-side replay, end card.

Workers render chunks of frames starting anywhere, so no frame may depend on what was drawn
before. The replay keeps one canvas in which every region (clock, each column's text, each
column's figures) is known to hold exactly what a key describes; a frame recomputes the keys
and redraws only the regions whose key changed, always from the static base. The result is
the same whatever was rendered before. A finished column is never touched again but for its
verdict line, which gets its speed-up once the first arm is done too (never before its evidence).
Drawing primitives live in canvas.py, the race columns in column.py, the cards in title_card.py
and end_card.py.
"""

from __future__ import annotations

from collections.abc import Hashable
from functools import cached_property

import numpy as np

from tokenreel.analysis.claims import DEFINITIONS, METRIC_WORDS
from tokenreel.analysis.figures import clock_seconds
from tokenreel.renderer.canvas import STEP_DOWN, Canvas, Span, TextBox, first_fit, style_color, text_w, wrapped_lines
from tokenreel.renderer.column import ArmColumn
from tokenreel.renderer.end_card import EndCard
from tokenreel.renderer.layout import Rect, Shift
from tokenreel.renderer.model_ids import middle_cut
from tokenreel.renderer.placed_text import notes
from tokenreel.renderer.render_plan import RenderPlan
from tokenreel.renderer.text.painter import GlyphPainter
from tokenreel.renderer.timeline import END, REPLAY, TITLE
from tokenreel.renderer.title_card import TitleCard, composite_logo

# What a frame shows, as designed: bumped with every deliberate change to it, so that `verify`
# can say a re-render differs because the design did (2: the drawn claims, full-frame end card,
# type legible at 640 px, markdown answers, title countdown; 3: the end card's small print names each
# arm's dtype, quantization, speculative method and config hash; 4: the race clock follows the
# metric, one multiplier per pair, hardware and engine on the title card and race header, model ids
# shortened from the middle, code wrapped between tokens, at most one badge a column; 5: a
# llama-server arm's drafter and draft length read from its launch command in the small print and
# header, a graded session's pass@1 line, "task done N× sooner" at natural length; 6: a paragraph
# longer than 8,192 characters starts a new line at the first space past each 8,192 (sections.py), so a frame
# lays out only the part of a long answer it shows). Manifests before 2 record none.
DESIGN = "6"

class FrameRenderer:
    """Renders frame i of a plan; the same pixels whatever was rendered before and in what order."""

    def __init__(self, plan: RenderPlan, text_boxes: list[TextBox] | None = None) -> None:
        """text_boxes: a list to append every text run drawn to (tests check what fits)."""
        self.plan = plan
        self.text_boxes = text_boxes
        self.clock = plan.clock
        self.painters = {role: GlyphPainter(px) for role, px in plan.layout.sizes.items()}
        self.columns = [
            ArmColumn(track, geo, self.painters, plan, plan.arms[track.versus].label if n else None)
            for n, (track, geo) in enumerate(zip(plan.arms, plan.layout.columns, strict=False))
        ]
        self._base = self._draw_base()
        self._canvas = self._canvas_on(self._base.copy())
        self._keys: dict[Hashable, Hashable] = {}
        self._cards: dict[str, np.ndarray] = {}
        self.end_card = EndCard(plan, self.painters)
        self.title_card = TitleCard(plan, self.painters)
        self._shown: str | None = None  # phase of the frame returned last
        self.shifts: tuple[Shift, ...] = ()  # of the frame returned last (see `frame`)

    def render(self, index: int) -> np.ndarray:
        """(height, width, 3) uint8 RGB, C-contiguous, a fresh array the caller may keep."""
        return self.frame(index)[0].copy()

    def frame(self, index: int) -> tuple[np.ndarray, tuple[Rect, ...] | None]:
        """Frame `index` without a copy, and the regions outside which it equals the frame this
        renderer returned last (None: it may differ anywhere). The array is a read-only view of
        the renderer's own canvas, valid until the next call: the encoder hashes it and
        converts only the regions that changed, instead of copying 6 MB a frame. `shifts` then
        says which parts of those regions hold the last frame's pixels moved up (`Shift`)."""
        phase = self.clock.phase(index)
        changed: tuple[Rect, ...] | None
        self.shifts = ()
        if phase == TITLE:
            pixels, changed = self._title_frame(index), (self.countdown_rect,) if self._shown == TITLE else None
        elif phase == END:
            if END not in self._cards:
                self._cards[END] = self._end_card()
            pixels, changed = self._cards[END], () if self._shown == END else None
        else:
            redrawn, shifts = self._compose(self._canvas, self._keys, index)
            pixels, changed = self._canvas.pixels, tuple(redrawn) if self._shown == REPLAY else None
            self.shifts = tuple(shifts) if changed is not None else ()
        self._shown = phase
        view = pixels.view()
        view.flags.writeable = False
        return view, changed

    # -- replay ------------------------------------------------------------------------------

    def race_cutoff(self, index: int) -> int:
        """The replay time a frame shows; the clock stops when the last arm is done, so the
        pause before the end card shows every column's final state."""
        return min(self.clock.cutoff_ns(index), self.plan.race_end_ns)

    def _compose(self, canvas: Canvas, keys: dict[Hashable, Hashable], index: int) -> tuple[list[Rect], list[Shift]]:
        """Bring every region of canvas to what frame `index` shows, redrawing changed ones;
        the rectangles redrawn, and the parts of them that only moved up (scrolled text)."""
        redrawn: list[Rect] = []
        shifts: list[Shift] = []
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
        for n, column in enumerate(self.columns):
            text_key = column.text_key(visible[n], replay_frame, self.clock.fps)
            if keys.get(("text", n)) != text_key:
                rect, shift = column.draw_text(canvas, self._base, text_key, keys.get(("text", n)))
                redrawn.append(rect)
                if shift is not None:
                    shifts.append(shift)
                keys[("text", n)] = text_key
            progress_key = column.progress_key(visible[n], self.plan.max_tokens)
            if keys.get(("progress", n)) != progress_key:
                redrawn.append(column.draw_progress(canvas, progress_key))
                keys[("progress", n)] = progress_key
            figures_key = column.figures(visible[n], done[column.track.versus])
            if keys.get(("figures", n)) != figures_key:
                redrawn.extend(column.draw_figures(canvas, self._base, figures_key, keys.get(("figures", n))))
                keys[("figures", n)] = figures_key
            if column.geo.answer is not None:
                answer_key = column.answer_badge(visible[n], done)
                if keys.get(("answer", n)) != answer_key:
                    redrawn.append(column.draw_answer(canvas, self._base, answer_key))
                    keys[("answer", n)] = answer_key
        return redrawn, shifts

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
        about, guess = (" ≈: an estimate (the server gave no exact count).", " ≈: an estimate.") if estimates else ("", "")
        whole_run = any(t.acceptance_length is not None and not t.step_events for t in plan.arms)  # events not steps
        accept, brief = (
            (" Accept: tokens made per step, as the engine counted them over the answer.", " Accept: tokens per step, whole answer.")
            if whole_run else ("", "")
        )
        tools = plan.placed_tools
        placed, terse = (f" {notes(tools)[1]}.", f" {notes(tools)[-1]}.") if tools else ("", "")
        wordings = (
            f"{long}. Each arm was recorded on its own, then replayed side by side {pace}.{about}{accept}{placed}",
            f"{short}. Each arm recorded on its own, replayed side by side {pace}.{about}{accept}{placed}",
            f"{short}. Arms recorded one at a time, replayed {pace}.{about}{accept}{placed}",
            f"{short}; arms recorded one at a time.{about}{accept}{placed}",
            f"{short}.{about}{accept}{placed}",
            f"{short}.{about}{brief}{placed}",
        )
        if not tools:  # a recording's footer: these wordings only (its frames stay as they were)
            return wordings
        return tuple(dict.fromkeys((
            *wordings,
            f"{short}.{about}{brief}{terse}",
            f"{short}.{guess}{brief}{terse}",
            f"{short}.{guess}{brief}",  # no room for the placement note: the line under the title says it
        )))

    def prompt_line(self) -> str:
        """What the prompt's place under the title shows: the prompt; where a peer's file kept
        none (an import) and its replies are placed over their chunks, the whole rule's note."""
        if self.plan.prompt_text or not self.plan.placed_tools:
            return self.plan.prompt_text
        return f"{notes(self.plan.placed_tools)[0]}."

    def _footer(self, canvas: Canvas) -> None:
        """The footer's first wording that fits (then smaller)."""
        plan = self.plan
        wordings = self.footer_wordings()
        right: list[Span] = [("SIMULATED · ", "small", "tool")] if plan.simulated else []
        right.append(("tokenreel", "small", "dim"))
        room = plan.layout.footer.w - sum(text_w(self.painters, text, role) for text, role, _ in right)
        left = first_fit(self.painters, room, [((text, role, "dim"),) for role in ("small", "tiny") for text in wordings])
        canvas.spans(plan.layout.footer, "small", plan.theme.background, left, right)

    def _draw_base(self) -> np.ndarray:
        plan, layout, theme = self.plan, self.plan.layout, self.plan.theme
        canvas = self._blank()
        canvas.spans(layout.title, "title", theme.background, ((plan.session_name, "title", "title"),))
        prompt = self.painters["prompt"]
        for i, line in enumerate(wrapped_lines(self.painters, self.prompt_line(), layout.prompt.w, "prompt", 2)):
            canvas.cells(line, "prompt", layout.prompt.x, layout.prompt.y + i * prompt.line_h, theme.background, layout.prompt)
        speed = plan.clock.speed
        pace = "real time" if speed == 1 else f"{float(speed):g}x speed"
        since = "since request send" if plan.align == "send" else "since first token"
        canvas.spans(layout.speed, "small", theme.background, (), ((f"{since} · {pace}", "small", "dim"),))
        canvas.spans(layout.facts, "small", theme.background, self.facts_line(layout.facts.w, "small"))
        self._footer(canvas)
        border = max(1, round(layout.scale))
        role = self.label_role(canvas.badge_width)
        models = [track.model for track in plan.arms]
        for n, (track, geo) in enumerate(zip(plan.arms, layout.columns, strict=False)):
            canvas.panel(geo.panel, layout.radius, theme.panel, theme.panel_edge, border)
            canvas.blend(geo.accent, canvas.color(f"accent{track.color}"), geo.accent.h // 2)
            x = canvas.badge(geo.label.x, geo.label.y, geo.label.h, track.color, theme.panel, n + 1)
            name = Rect(x, geo.label.y, geo.label.right - x, geo.label.h)
            canvas.spans(name, "label", theme.panel, ((track.label, role, "title"),))
            model = middle_cut(track.model, models, geo.detail.w // self.painters["small"].cell_w)
            canvas.spans(geo.detail, "small", theme.panel, ((model, "small", "dim"),))
            y = geo.text.y - (geo.text.y - geo.detail.bottom) // 2
            canvas.fill(Rect(geo.label.x, y, geo.label.w, border), theme.faint)
            canvas.fill(geo.progress, theme.faint)
        return canvas.pixels

    def label_role(self, badge: int) -> str:
        """One size for every column's label: the label size where all fit beside the arm's
        number (`badge` px), else a size smaller (then cut), so no arm's name is drawn smaller
        than the others'."""
        plan, painters = self.plan, self.painters
        room = [geo.label.w - badge for geo in plan.layout.columns]
        fits = all(text_w(painters, t.label, "label") <= w for t, w in zip(plan.arms, room, strict=False))
        return "label" if fits else STEP_DOWN["label"]

    def facts_line(self, width: int, role: str) -> tuple[Span, ...]:
        """What the race ran on (`EndFacts.header`): the longest wording that fits, in dim type."""
        facts = self.plan.facts
        wordings = facts.header if facts is not None else ()
        return first_fit(self.painters, width, [((text, role, "dim"),) for text in wordings]) if wordings else ()

    def _title_card(self) -> np.ndarray:
        """The title card, the footer, then the logo, if any, in the top-right corner."""
        canvas = self._blank()
        self.title_card.draw(canvas)
        self._footer(canvas)
        if self.plan.logo is not None:
            composite_logo(canvas.pixels, self.plan.logo)
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
