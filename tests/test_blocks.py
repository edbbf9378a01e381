"""A stream laid out a block at a time (text/blocks.py, text/sections.py) is the one-pass layout,
whatever the blocks and in whatever order frames read them; a long paragraph starts a new line
at the first space past every SECTION characters; a frame late in a long answer lays out only
the blocks it shows."""

from __future__ import annotations

from bisect import bisect_right
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.session_factory import MS, session, stream
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render_plan import build_plan
from tokenreel.renderer.text.blocks import KEPT, AllLines, ArmLayout, StreamLayout
from tokenreel.renderer.text.highlight import styled_stream
from tokenreel.renderer.text.paragraph import ShapedLine
from tokenreel.renderer.text.sections import SECTION, sections
from tokenreel.renderer.text.style_ids import StyleIds
from tokenreel.session import archive

ONE = 10**9  # a section or block longer than any text here: one pass, no cut

# Pieces of answers: words of several scripts, marks, an emoji sequence, tabs, runs of spaces,
# line breaks (CR LF too), and markdown (a list, a fence of code, a table row, emphasis).
PIECES = [
    "word ", "streams ", "tokens, ", "مرحبا ", "بالعالم، ", "שלום ", "漢字", "かな ", "e\u0301 ", "👩\u200d💻 ",
    "\t", "   ", "\n", "\r\n", "\n\n", "- item ", "```python\n", "def f(x):\n    return x\n", "```\n",
    "| a | b |\n|---|---|\n", "**bold** ", "`code` ", "long_identifier_without_spaces_here", "(1, 2) ", "١٢ ",
]


def _seen(line: tuple) -> tuple:
    """A line as a frame draws it, comparable across two layouts (a shaped line by its pieces)."""
    out = []
    for cell in line:
        if isinstance(cell, ShapedLine):
            out.append(("shaped", cell.text, cell.rtl, cell.cursor, tuple(cell.pieces)))
        else:
            out.append((cell.text, cell.font, cell.width, cell.style))
    return tuple(out)


def _stream(pieces: list[str], reasoning: list[str]) -> tuple[str, StyleIds, list[int]]:
    thoughts = reasoning + [""] * (len(pieces) - len(reasoning))
    text, styles, ends = styled_stream(pieces, thoughts[: len(pieces)], [""] * len(pieces), code=False)
    return text, styles, list(ends)


answers = st.lists(st.sampled_from(PIECES), min_size=1, max_size=60)
thinking = st.lists(st.sampled_from(["think ", "more\n", "ok "]), max_size=5)


@settings(max_examples=150, deadline=None)
@given(answers, thinking, st.integers(min_value=6, max_value=40), st.sampled_from([8, 30, 90, ONE]), st.sampled_from([1, 7, 40]))
def test_a_layout_made_block_by_block_is_the_one_pass_layout(
    pieces: list[str], reasoning: list[str], cols: int, section: int, block: int
) -> None:
    text, styles, ends = _stream(pieces, reasoning)
    one = ArmLayout(StreamLayout(text, styles, cols, 18, shared=0, section=section, block=ONE), ends, kept=None)
    many = ArmLayout(StreamLayout(text, styles, cols, 18, shared=1, section=section, block=block), ends, kept=2)
    assert len(one.stream.bounds) == 2
    assert [_seen(line) for line in AllLines(many)] == [_seen(line) for line in AllLines(one)]
    assert [many.caret(v) for v in range(len(ends) + 1)] == [one.caret(v) for v in range(len(ends) + 1)]


@settings(max_examples=150, deadline=None)
@given(answers, thinking, st.integers(min_value=6, max_value=40), st.integers(min_value=1, max_value=8), st.data())
def test_frames_read_in_any_order_see_the_lines_of_the_whole_layout(
    pieces: list[str], reasoning: list[str], cols: int, rows: int, data: st.DataObject
) -> None:
    """The first frame a renderer draws may be late in the stream (a poster, a worker's chunk of
    the video): its window, then the frames after and before it, show what the whole layout shows."""
    text, styles, ends = _stream(pieces, reasoning)
    whole = ArmLayout(StreamLayout(text, styles, cols, 18, shared=0, section=20, block=7), ends, kept=None)
    lazy = ArmLayout(StreamLayout(text, styles, cols, 18, shared=1, section=20, block=7), ends, kept=2)
    whole.first_line(0)
    order = data.draw(st.lists(st.integers(min_value=0, max_value=len(ends)), min_size=1, max_size=8))
    for visible in order:
        top, line, col = lazy.window(visible, rows)
        w_top, w_line, w_col = whole.window(visible, rows)
        assert (line - top, col) == (w_line - w_top, w_col)
        assert [_seen(lazy.line(n)) for n in range(top, line + 1)] == [_seen(whole.line(n)) for n in range(w_top, w_line + 1)]


def test_a_paragraph_past_a_section_starts_a_new_line_at_the_next_space() -> None:
    text = "word " * 2000  # one paragraph of 10,000 characters
    styles = StyleIds(["text"] * len(text))
    cuts, bounds = sections(text)
    cut = text.index(" ", SECTION) + 1
    assert list(cuts) == [cut] and list(bounds) == [0, cut, len(text)]
    layout = ArmLayout(StreamLayout(text, styles, 64, 18), [cut, cut + 1])
    (line, col), (after_line, after_col) = layout.caret(1), layout.caret(2)
    assert col < 64 - len("word ") and (after_line, after_col) == (line + 1, 1)  # the line ends short at the cut
    assert "".join(cell.text for cell in layout.line(after_line)).startswith("word word")
    # A paragraph shorter than a section, and line breaks, cut nothing.
    short = "word " * 1000 + "\n" + "word " * 1000
    assert list(sections(short).cuts) == []
    # With no space in twice a section: between two characters that are clusters of their own;
    # where there are none (Thai letters and their marks), no cut.
    for alone in ("x" * 40_000, "漢字かな" * 10_000, "a" * 20_000 + "é" * 20_000):
        assert list(sections(alone).cuts) == [2 * SECTION, 4 * SECTION][: len(alone) // (2 * SECTION) - (alone[-1] == "é")]
    assert list(sections("สวัสดีน้ำ" * 4000).cuts) == []


def test_a_frame_late_in_a_long_answer_lays_out_only_the_blocks_it_shows(tmp_path: Path) -> None:
    """A poster near the end of a 260,000-character answer (about 60 blocks) lays out the one to
    three blocks its rows show, the one holding its caret last; one near the start, the first two."""
    words = ["The ", "model ", "streams ", "tokens, ", "مرحبا ", "بالعالم، ", "and ", "then\n"]
    pieces = [words[(k * 3) % len(words)] for k in range(40_000)]
    path = tmp_path / "long.json"
    archive.save(session([("a", "A", [stream(pieces, 50 * MS, 1 * MS)]), ("b", "B", [stream(pieces, 50 * MS, 2 * MS)])]), path)
    loaded = archive.load(path)
    for at, late in (("38", True), ("1", False)):
        plan = build_plan(loaded, RenderOptions(size="1280x720", title_s="0", at=at))
        renderer = FrameRenderer(plan)
        renderer.render(plan.poster_index)
        for column in renderer.columns:
            layout = column.layout
            visible = column.timeline.visible(renderer.race_cutoff(plan.poster_index))
            holding = bisect_right(layout.stream.bounds, layout.ends[visible - 1] - 1) - 1
            laid = range(layout.lo, layout.lo + len(layout.numbers))
            assert layout.stream.count > 50 and len(laid) <= 3 and laid[-1] == holding, (layout.stream.count, laid, holding)
            assert holding > 25 if late else holding <= 1
            top, line, _ = layout.window(visible, column.geo.rows)
            assert len(layout._blocks) <= KEPT and line - top == column.geo.rows - 1
