"""The end card: the race's verdict on a frame of its own, held at the end of the video.

It never covers the race (whose text it would cut): the last arm against the first in the video's
one metric (tokenreel.analysis.claims), what that compares, the suite's figure for the same arms with its
95 % interval where the suite has one, a row per arm on screen, and what the arms ran on and
when. Its texts are the claims the plan lists (race_claims.drawn_claims); every size is the
layout's, legible at 640 px wide.
"""

from __future__ import annotations

from functools import cached_property

from tokenreel.analysis.claims import claim_text, interval_text, scope_text
from tokenreel.analysis.figures import clock_seconds, figure
from tokenreel.renderer.canvas import Canvas, first_fit, label_spans, text_w
from tokenreel.renderer.layout import Rect
from tokenreel.renderer.options import Metric
from tokenreel.renderer.placed_text import notes
from tokenreel.renderer.race_claims import step_text
from tokenreel.renderer.render_plan import RenderPlan
from tokenreel.renderer.text.painter import GlyphPainter


class EndCard:
    """Lays out and draws the end card of a plan with the frames' painters."""

    def __init__(self, plan: RenderPlan, painters: dict[str, GlyphPainter]) -> None:
        self.plan = plan
        self.painters = painters

    def headline(self) -> tuple[str, str]:
        """The end card's big line (the last arm on screen against the first, the claim's text)
        and which arms it compares."""
        plan = self.plan
        first, last = plan.arms[0], plan.arms[-1]
        return claim_text(last.vs_first, plan.metric, plan.task), f"{last.label} vs {first.label}"

    def answer_line(self) -> str:
        """Which answer the headline is, and where it stands among the prompts ("on the code
        prompt, the fastest of 4 prompts"), so one answer's figure is never read as the suite's
        (the next line gives that, in the same metric, as context)."""
        plan = self.plan
        if plan.scope != "prompt":
            return f"run {plan.arms[-1].run_index} vs run {plan.arms[0].run_index} of {plan.prompt_id}"
        return f"on {plan.prompt_name}" + (f", {plan.prompt_rank}" if plan.prompt_rank else "")

    def suite_line(self) -> str:
        """The suite's figure for the same two arms, saying it is the suite's ("4.42x faster
        decode over 4 prompts"); empty when the session cannot give one."""
        suite = self.plan.suite
        if suite is None or suite.value is None:
            return ""
        return f"{claim_text(suite.value, suite.metric)} {scope_text(suite)}"

    def interval_line(self) -> str:
        """The suite figure's 95 % interval, on a line under it ("95 % interval 1.97–2.31x");
        empty where the suite has none (fewer than 6 prompts): nothing is drawn in its place."""
        suite = self.plan.suite
        return "" if suite is None else interval_text(suite.value, suite.ci95)

    def _gap_h(self) -> int:
        """Room between the suite's line and the rows' headings: half a line, or the interval's
        line where there is one (so it adds little to the card's height)."""
        gap = self.painters["label"].line_h // 2
        return max(gap, self.painters["small"].line_h) if self.interval_line() else gap

    def headings(self) -> tuple[str, ...]:
        first = ("done in", "decode") if self.plan.metric == Metric.DECODE else ("TTFT", "done in")
        return (*first, "step")

    def rows(self) -> list[tuple[str, ...]]:
        """Per arm on screen, under its headings: its times and figures, and its ladder step over
        the arm before it (race_claims.step_text) in the video's one metric; the first arm has
        no step. No other pair is given a figure: one multiplier per pair."""
        rows: list[tuple[str, ...]] = []
        for n, track in enumerate(self.plan.arms):
            done = clock_seconds(track.finish_ns)
            step = step_text(n, track.vs_prior) if n else ""
            if self.plan.metric == Metric.DECODE:
                decode = f"{'≈' if track.tokens_estimated else ''}{figure(track.decode_tok_s)} tok/s"
                rows.append((done, decode, step))
            else:
                rows.append((clock_seconds(track.ttft_ns), done, step))
        return rows

    def facts_lines(self, compact: bool) -> tuple[str, ...]:
        """The small print under the rows: what the arms ran on, the models when the rows had no
        room to name them, then the engine and the recording date, a graded session's accuracy;
        then, for an imported reply placed over its chunks, that it was (placed_text)."""
        facts = self.plan.facts
        assert facts is not None
        lines = (facts.hardware, *([facts.model] if compact else []), f"{facts.engine} · {facts.recorded}",
                 *([facts.accuracy] if facts.accuracy else []))
        if not self.plan.placed_tools:
            return lines
        fit = first_fit(self.painters, self.plan.layout.footer.w, [((n, "small", "dim"),) for n in notes(self.plan.placed_tools)])
        return (*lines, fit[0][0])

    def _block_h(self, row_h: int, compact: bool) -> int:
        label, small = self.painters["label"], self.painters["small"]
        gap, facts = label.line_h // 2, len(self.facts_lines(compact))
        rows = small.line_h + row_h * len(self.plan.arms)
        lines = 3 if self.answer_own_line else 2
        return self._headline_h() + lines * label.line_h + self._gap_h() + rows + gap + facts * small.line_h

    def _row_h(self, with_model: bool) -> int:
        label, small = self.painters["label"], self.painters["small"]
        return label.line_h + (small.line_h if with_model else 0) + self._bar_h() + label.line_h // 2

    @cached_property
    def answer_own_line(self) -> bool:
        """The answer line under the arms compared, where the card has the room (four arms on a
        wide frame have not: it follows the arms on their line, cut at the end if it must be)."""
        layout = self.plan.layout
        label, small = self.painters["label"], self.painters["small"]
        rows = small.line_h + (label.line_h + self._bar_h() + label.line_h // 2) * len(self.plan.arms)
        facts = len(self.facts_lines(True)) * small.line_h
        need = self._headline_h() + 3 * label.line_h + self._gap_h() + rows + label.line_h // 2 + facts
        return need <= layout.footer.y - layout.title.y

    def compared(self) -> str:
        """The line under the headline: the arms compared, and the answer where it has no line of its own."""
        what = self.headline()[1]
        return what if self.answer_own_line else f"{what} · {self.answer_line()}"

    @cached_property
    def compact(self) -> bool:
        """Rows without their model line (the models go to the small print): four arms on a
        wide frame have no room for it."""
        layout = self.plan.layout
        return self._block_h(self._row_h(True), False) > layout.footer.y - layout.title.y

    def _end_blocks(self) -> tuple[int, int, int]:
        """(top of the card's block, row height, block height): centred between the title line
        and the footer."""
        layout = self.plan.layout
        row_h = self._row_h(not self.compact)
        block = self._block_h(row_h, self.compact)
        top, bottom = layout.title.y, layout.footer.y
        return top + max(0, (bottom - top - block) // 2), row_h, block

    @property
    def hero(self) -> bool:
        """A tall or square frame has the room to give the headline's multiplier a line of its
        own, in the largest type (the words follow on the next line)."""
        return self.plan.layout.height >= self.plan.layout.width

    def _headline_h(self) -> int:
        return self.painters["headline"].line_h + (self.painters["hero"].line_h if self.hero else 0)

    def headline_box(self) -> Rect:
        """Where the end card's big line (both lines, on a tall frame) is drawn (tests read it
        back from the pixels)."""
        layout = self.plan.layout
        y, _, _ = self._end_blocks()
        return Rect(layout.footer.x, y, layout.footer.w, self._headline_h())

    def draw(self, canvas: Canvas) -> None:
        """The card on a blank frame, all but its footer (the frames' own, which defines every
        figure): the headline in the video's one metric with what it compares, the suite's
        figure, a row per arm, and what the arms ran on and when."""
        plan, layout, theme = self.plan, self.plan.layout, self.plan.theme
        head, label, small = self.painters["headline"], self.painters["label"], self.painters["small"]
        y, row_h, _ = self._end_blocks()
        x, w, bg = layout.footer.x, layout.footer.w, theme.background
        big, _ = self.headline()
        accent = f"accent{plan.arms[-1].color}"
        if self.hero:
            value, words = _hero_split(big)
            canvas.spans(Rect(x, y, w, self.painters["hero"].line_h), "hero", bg, ((value, "hero", accent),))
            y += self.painters["hero"].line_h
            canvas.spans(Rect(x, y, w, head.line_h), "headline", bg, ((words, "headline", accent),))
        else:
            canvas.spans(Rect(x, y, w, head.line_h), "headline", bg, ((big, "headline", accent),))
        y += head.line_h
        canvas.spans(Rect(x, y, w, label.line_h), "label", bg, label_spans(self.painters, self.compared(), w, "label", "dim"))
        y += label.line_h
        if self.answer_own_line:
            canvas.spans(Rect(x, y, w, label.line_h), "label", bg, label_spans(self.painters, self.answer_line(), w, "label", "dim"))
            y += label.line_h
        suite, interval = self.suite_line(), self.interval_line()
        if suite:
            canvas.spans(Rect(x, y, w, label.line_h), "label", bg, ((suite, "label", "title"),))
        y += label.line_h
        if interval:
            canvas.spans(Rect(x, y, w, small.line_h), "small", bg, ((interval, "small", "text"),))
        y += self._gap_h()
        self._rows(canvas, Rect(x, y, w, small.line_h + row_h * len(plan.arms)), row_h, self.rows())
        y += small.line_h + row_h * len(plan.arms) + label.line_h // 2
        for line in self.facts_lines(self.compact):
            canvas.spans(Rect(x, y, w, small.line_h), "small", bg, ((line, "small", "dim"),))
            y += small.line_h

    def _bar_h(self) -> int:
        return max(2, self.painters["label"].line_h // 3)

    def _rows(self, canvas: Canvas, rect: Rect, row_h: int, rows: list[tuple[str, ...]]) -> None:
        """Headings, then a row per arm on screen: badge and label, the figures right-aligned
        under their headings; the arm's model below its label; then a bar from request send (or
        first token) to done, every arm's on the same scale."""
        plan, theme, label, small = self.plan, self.plan.theme, self.painters["label"], self.painters["small"]
        bg = theme.background
        headings = self.headings()
        gap = label.cell_w * 2
        widths = [
            max(text_w(self.painters, h, "small"), *(text_w(self.painters, r[k], "label") for r in rows)) for k, h in enumerate(headings)
        ]
        rights: list[int] = []
        right = rect.right
        for w in reversed(widths):
            rights.insert(0, right)
            right -= w + gap
        figures_x = right + gap
        for heading, right in zip(headings, rights, strict=False):
            canvas.spans(Rect(rect.x, rect.y, right - rect.x, small.line_h), "small", bg, (), ((heading, "small", "dim"),))
        longest = max(t.finish_ns for t in plan.arms) or 1
        bar_h = self._bar_h()
        for n, (track, figures) in enumerate(zip(plan.arms, rows, strict=False)):
            y = rect.y + small.line_h + row_h * n
            x = canvas.badge(rect.x, y, label.line_h, track.color, bg, n + 1)
            name_w = figures_x - gap - x
            canvas.spans(Rect(x, y, name_w, label.line_h), "label", bg, label_spans(self.painters, track.label, name_w))
            model_h = 0 if self.compact else small.line_h
            if model_h:
                canvas.spans(Rect(x, y + label.line_h, rect.right - x, small.line_h), "small", bg, ((track.model, "small", "dim"),))
            for text, right in zip(figures, rights, strict=False):
                canvas.spans(Rect(rect.x, y, right - rect.x, label.line_h), "label", bg, (), ((text, "label", "text"),))
            top, bar_w = y + label.line_h + model_h + bar_h // 2, rect.right - x
            done = max(bar_h, bar_w * track.finish_ns // longest)
            canvas.blend(Rect(x, top, done, bar_h), canvas.color(f"accent{track.color}"), bar_h // 2)
            if plan.align == "send":  # the wait for the first token, in the bar's faint start
                wait = min(done - bar_h // 2, bar_w * track.ttft_ns // longest)
                if wait > 0:
                    canvas.fill(Rect(x + bar_h // 2, top, wait, bar_h), theme.faint)
                    canvas.blend(Rect(x, top, bar_h, bar_h), theme.faint, bar_h // 2)


def _hero_split(headline: str) -> tuple[str, str]:
    """The headline's multiplier for the hero line and its other words for the line under it:
    "4.42x" / "faster decode", "1.25x" / "task done sooner"; the first word where it has none."""
    words = headline.split(" ")
    at = next((i for i, word in enumerate(words) if word.endswith("x") and word[:-1].replace(".", "", 1).isdigit()), 0)
    return words[at], " ".join(words[:at] + words[at + 1:])
