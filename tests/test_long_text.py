"""A long right-to-left answer renders in memory and time that follow what a frame shows: a long
run is shaped a segment at a time with the same advances as whole, a long paragraph's bidi levels
are resolved a chunk at a time with the same levels as whole, and a line's glyphs are shaped only
when a frame draws it. `bench/long_text.py` prints the peak memory and time of such a render."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.session_factory import MS, session, stream
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render import render
from tokenreel.renderer.text import bidi, fonts, paragraph, shaping, wrap
from tokenreel.renderer.text.highlight import answer_styles, styled_stream
from tokenreel.renderer.text.wrap import layout_stream
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


def test_a_long_rtl_answer_is_laid_out_in_a_few_bytes_a_character() -> None:
    """Rendering the markdown of a 40,000-character Arabic paragraph and laying it out (wrapped
    into shaped lines, carets per chunk) costs tens of bytes a character at its peak, not
    hundreds: the paragraph is held and laid out as packed arrays (palette indices, offsets,
    widths, levels), never as an object per character; markdown keeps its anchors in an array and
    its text in pieces. Before, they peaked at about 125 and 250 bytes a character."""
    words = PROSE[fonts.ARABIC]
    pieces = [words[(k * 3) % len(words)] for k in range(2500)]
    chars = len("".join(pieces))
    answer_styles.cache_clear()
    wrap._wrapped.cache_clear()
    styled = _traced(lambda: styled_stream(pieces, [""] * len(pieces), [""] * len(pieces), code=False))
    text, styles, ends = styled_stream(pieces, [""] * len(pieces), [""] * len(pieces), code=False)
    laid = _traced(lambda: layout_stream(text, styles, ends, 60, 18))
    assert chars > 40_000 and len(layout_stream(text, styles, ends, 60, 18).lines) > 400
    assert styled[0] < 48 * chars and styled[1] < 36 * chars, (styled[0] / chars, styled[1] / chars)
    assert laid[0] < 64 * chars and laid[1] < 40 * chars, (laid[0] / chars, laid[1] / chars)
