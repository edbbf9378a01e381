"""A long right-to-left answer renders in memory and time that follow what a frame shows: a long
run is shaped a segment at a time with the same advances as whole, a long paragraph's bidi levels
are resolved a chunk at a time with the same levels as whole, and a line's glyphs are shaped only
when a frame draws it. `bench/long_text.py` prints the peak memory and time of such a render."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from itertools import accumulate
from pathlib import Path

import pytest
from bidi import get_base_level
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.session_factory import MS, session, stream
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render import render
from tokenreel.renderer.text import bidi, clusters, fonts, highlight, paragraph, shaping, wrap
from tokenreel.renderer.text.blocks import ArmLayout, StreamLayout, layout_stream
from tokenreel.renderer.text.highlight import styled_stream
from tokenreel.renderer.text.offsets import Offsets
from tokenreel.renderer.text.style_ids import StyleIds
from tokenreel.session import archive

PROSE = {
    fonts.ARABIC: ("مرحبا بالعالم، كيف حالك اليوم؟ ", "إنّ السّلامَ عليكم ", "لا إله ", "في عام ٢٠٢٤ "),
    fonts.HEBREW: ("שלום עולם, מה שלומך היום? ", "בְּרֵאשִׁית בָּרָא ", "בשנת 2024 "),
    fonts.DEVANAGARI: ("नमस्ते क्षत्रिय हिन्दी ", "श्री कृष्ण ", "द्वारा "),
    fonts.THAI: ("สวัสดีน้ำ ภาษาไทย ", "กรุงเทพมหานคร "),
}


@pytest.mark.parametrize("font", list(PROSE))
@pytest.mark.parametrize("segment", [16, 64, 300])
def test_a_long_run_shaped_in_segments_has_the_whole_runs_advances(font: str, segment: int) -> None:
    words = PROSE[font]
    text = "".join(words[(k * 7) % len(words)] for k in range(120))
    rtl = font in fonts.RTL
    whole = [(g.cluster, g.x_advance) for g in shaping.shape(text, font, rtl)]
    assert len(text) > 5 * segment
    assert list(shaping.advances(text, font, rtl, segment)) == whole


# Every bidi class but the explicit ones, separators and brackets (those send a paragraph to be
# resolved whole): strong L, R, AL; numbers EN, AN; ES, ET, CS; NSM; BN; WS; ON.
CLASSES = "ab" + "אב" + "مح" + "12" + "١٢" + "+-" + "$%" + ".,:/" + "\u0301\u064b" + "\u200d" + " \u00a0" + "!?\"&"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=CLASSES, min_size=1, max_size=120), st.integers(min_value=2, max_value=40))
def test_a_long_paragraphs_levels_resolved_in_chunks_are_the_whole_paragraphs(text: str, chunk: int) -> None:
    assert bidi.levels(text, chunk) == bidi.levels(text, len(text))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=CLASSES + "\u2066\u2067\u2068\u2069\u202b\u2029", min_size=1, max_size=40))
def test_a_paragraphs_direction_read_up_to_its_first_strong_character_is_python_bidis(text: str) -> None:
    assert bidi.is_rtl_paragraph(text) == (get_base_level(text) == 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=700), max_size=60), st.lists(st.sampled_from("abcdefgh"), max_size=60))
def test_offsets_and_styles_kept_in_bytes_read_back_as_given(steps: list[int], names: list[str]) -> None:
    """Offsets keep 1-byte steps until one does not fit; styles a byte each until 256 names."""
    values = list(accumulate(steps))
    whole, split = Offsets(), Offsets()
    whole.extend(values)
    for value in values[: len(values) // 2]:
        split.append(value)
    rest = Offsets()
    rest.extend(values[len(values) // 2 :])
    split.follow(rest)
    assert list(whole) == list(split) == values and list(whole.absolute()) == values
    assert whole.steps.itemsize == (1 if all(step < 256 for step in steps) else 4)
    many = [f"s{k}" for k in range(300)]
    styles = StyleIds(names)
    styles.extend_from(StyleIds(many), 10, 290)
    styles.run("t", 3)
    styles.paint(0, min(2, len(names)), "p")
    expected = ["p"] * min(2, len(names)) + names[2:] + many[10:290] + ["t"] * 3
    assert list(styles) == expected and styles == StyleIds(expected) and hash(styles) == hash(StyleIds(expected))
    assert styles.ids.itemsize == 2 and StyleIds(names).ids.itemsize == 1


def test_brackets_send_a_paragraph_to_be_resolved_whole() -> None:
    """N0 pairs brackets across any distance: "(" here takes its level from the text after the cut."""
    text = "abc (" + "مرح " * 20 + ") def"
    assert bidi.levels(text, 8) == bidi.levels(text, len(text))


def test_a_long_rtl_answer_shapes_only_the_lines_a_frame_draws(tmp_path: Path) -> None:
    """A poster of two columns streaming a 40,000-character Arabic paragraph (hundreds of lines)
    shapes the glyphs of the lines it shows, not of every line: before, every line of the
    paragraph was shaped when it was laid out."""
    words = PROSE[fonts.ARABIC]
    pieces = [words[(k * 3) % len(words)] for k in range(2500)]
    path = tmp_path / "long.json"
    archive.save(session([("a", "A", [stream(pieces, 50 * MS, 1 * MS)]), ("b", "B", [stream(pieces, 50 * MS, 2 * MS)])]), path)
    paragraph._drawn.cache_clear()
    render(path, tmp_path / "poster.png", RenderOptions(size="1280x720", at="4"), workers=1)
    shaped = paragraph._drawn.cache_info().misses
    text = "".join(pieces)
    laid = layout_stream(text, ["text"] * len(text), [len(text)], 100, 18).lines
    assert len(text) > 40_000 and len(laid) > 200, (len(text), len(laid))
    assert all(isinstance(cells[0], paragraph.ShapedLine) for cells in laid)
    assert 0 < shaped <= 120, (shaped, len(laid))


def _traced(call: Callable[[], object]) -> tuple[int, int]:
    """(peak, kept) bytes a call allocates above what was allocated before it (tracemalloc counts
    Python's own allocations, so the figure does not depend on the machine's load)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = call()
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del result
    return peak - before, kept - before


def _styled_and_laid(count: int) -> tuple[int, tuple[int, int]]:
    """(characters, (peak, kept) bytes) of rendering the markdown of an Arabic paragraph of count
    words and laying it out (wrapped into shaped lines, carets per chunk), caches emptied first."""
    words = PROSE[fonts.ARABIC]
    pieces = [words[(k * 3) % len(words)] for k in range(count)]
    for module in (fonts, shaping, clusters, paragraph, wrap, highlight):  # as in a fresh process, whatever ran before
        for cached in vars(module).values():
            if callable(getattr(cached, "cache_clear", None)):
                cached.cache_clear()

    def both() -> object:
        text, styles, ends = styled_stream(pieces, [""] * len(pieces), [""] * len(pieces), code=False)
        return text, layout_stream(text, styles, ends, 60, 18)

    return len("".join(pieces)), _traced(both)


def _styled_and_shown(count: int) -> tuple[int, tuple[int, int]]:
    """(characters, (peak, kept) bytes) of rendering the markdown of an Arabic paragraph of count
    words and showing its end in a 30-row column, as a poster late in the answer does."""
    words = PROSE[fonts.ARABIC]
    pieces = [words[(k * 3) % len(words)] for k in range(count)]

    def shown() -> object:
        text, styles, ends = styled_stream(pieces, [""] * len(pieces), [""] * len(pieces), code=False)
        layout = ArmLayout(StreamLayout(text, styles, 60, 18), ends)
        top, line, _ = layout.window(len(ends), 30)
        assert line - top == 29 and all(isinstance(layout.line(n)[0], paragraph.ShapedLine) for n in range(top, line + 1))
        return text, layout

    return len("".join(pieces)), _traced(shown)


def test_a_frame_late_in_a_long_answer_keeps_its_text_and_styles_and_a_few_blocks() -> None:
    """Showing the end of a long Arabic answer keeps, per further character, its text (2 bytes)
    and styles (1) and little else, under 4 bytes, and peaks under 12: the blocks laid out are
    the few the rows show. Laying the whole answer out first kept about 9 and peaked at 22."""
    _styled_and_shown(2500)  # fonts and caches
    small, (small_peak, small_kept) = _styled_and_shown(7500)
    large, (large_peak, large_kept) = _styled_and_shown(22500)
    peak, kept = (large_peak - small_peak) / (large - small), (large_kept - small_kept) / (large - small)
    assert small > 120_000 and large > 3 * small - 100
    assert kept < 4 and peak < 12, (kept, peak)


def test_a_long_rtl_answer_is_laid_out_in_a_few_bytes_a_character() -> None:
    """What rendering the markdown of a long Arabic paragraph and laying it out adds per further
    character (the growth between 43,000 and 129,000 characters, so one-off costs such as font
    caches and python-bidi's chunk do not count) is under 10 bytes kept, the answer's own text
    (2 bytes a character) included, and under 26 at the peak: styles a byte a character,
    markdown anchors as runs, cluster starts and unit ends as 1-byte steps, a shaped line as two
    offsets, never an object per character or per line. Before, about 39 kept and 47 at the peak."""
    small, (small_peak, small_kept) = _styled_and_laid(2500)
    large, (large_peak, large_kept) = _styled_and_laid(7500)
    peak, kept = (large_peak - small_peak) / (large - small), (large_kept - small_kept) / (large - small)
    assert small > 40_000 and large > 3 * small - 100
    assert kept < 10 and peak < 26, (kept, peak)
    pieces = [PROSE[fonts.ARABIC][(k * 3) % 4] for k in range(2500)]
    lines = layout_stream(*styled_stream(pieces, [""] * len(pieces), [""] * len(pieces), code=False), 60, 18).lines
    assert len(lines) > 400 and all(isinstance(cells[0], paragraph.ShapedLine) for cells in lines)
