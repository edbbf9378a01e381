"""Font coverage and fallback, clusters and cell widths, wrapping, highlighting and glyph tiles."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pygments.token import STANDARD_TYPES

from tokenreel.renderer.text import fonts
from tokenreel.renderer.text.blocks import AllLines, layout_stream
from tokenreel.renderer.text.cells import BREAK, GLYPH, NEWLINE, Cell
from tokenreel.renderer.text.clusters import clusters
from tokenreel.renderer.text.highlight import CODE_STYLES, _style, content_styles, styled_stream
from tokenreel.renderer.text.painter import GlyphPainter
from tokenreel.renderer.text.rtl_runs import merge_rtl_runs
from tokenreel.renderer.text.wrap import HANGING_INDENT, continuation_indent, fit, wrap

SAMPLES = ["漢字かな", "🚀✅", "café naïve", "a\tb", "x\ry", "bell\x07", "x" * 300, "e\u0301", "👨\u200d👩\u200d👧 👍🏽"]


def cells_of(text: str, style: str = "text"):
    return [item.cell for item in clusters(text, [style] * len(text)) if item.kind == GLYPH]


def test_cmap_coverage_agrees_with_what_freetype_draws() -> None:
    """A codepoint outside the parsed cmap draws the same .notdef box as a private-use one."""
    face = fonts.load(fonts.REGULAR, 20)
    notdef = np.asarray(face.getmask("\ue000"))
    for char in "A漢🚀é␇":
        covered = ord(char) in fonts.coverage(fonts.REGULAR)
        drawn = np.asarray(face.getmask(char))
        assert covered == (drawn.shape != notdef.shape or not np.array_equal(drawn, notdef)), char
    assert 0xE000 not in fonts.coverage(fonts.REGULAR)


def test_fallback_chain_finds_a_covering_font_for_every_sample_codepoint() -> None:
    expected = {"漢": fonts.CJK, "か": fonts.CJK, "🚀": fonts.EMOJI, "✅": fonts.EMOJI, "é": fonts.REGULAR, "A": fonts.REGULAR}
    for char, font in expected.items():
        assert fonts.font_for(ord(char)) == font
    for sample in SAMPLES:
        for cell in cells_of(sample):
            assert cell.font is not None, cell
            assert all(ord(c) in fonts.coverage(cell.font) for c in cell.text), cell
    assert fonts.font_for(0x10FFFF) is None


def test_cell_widths_and_visible_control_characters() -> None:
    assert [c.width for c in cells_of("漢字かな")] == [2, 2, 2, 2]
    assert [c.width for c in cells_of("🚀✅")] == [2, 2]
    assert [(c.text, c.width) for c in cells_of("e\u0301")] == [("é", 1)]
    assert [(c.text, c.style) for c in cells_of("\x00\x07\x7f\x1b")] == [
        ("␀", "control"), ("␇", "control"), ("␡", "control"), ("␛", "control")
    ]
    assert [c.text for c in cells_of("x\ry")] == ["x", "␍", "y"]
    kinds = [item.kind for item in clusters("a\r\nb", ["text"] * 4)]
    assert kinds == [GLYPH, NEWLINE, GLYPH]
    assert [c.text for c in cells_of("a\u200db\ufe0fc\u200bd")] == ["a", "b", "c", "d"]
    assert [(c.text, c.font, c.width) for c in cells_of("👍🏽")] == [("👍🏽", fonts.EMOJI, 2)]  # one shaped glyph


def test_tabs_expand_to_tab_stops_of_four() -> None:
    lines, _ = wrap(clusters("ab\tc\t\td", ["text"] * 8), 40)
    assert "".join(c.text * c.width for c in lines[0]) == "ab  c       d"


def test_a_300_character_token_is_hard_wrapped() -> None:
    lines, _ = wrap(clusters("go " + "x" * 300 + " end", ["text"] * 307), 40)
    widths = [sum(c.width for c in line) for line in lines]
    assert lines[0][0].text == "g" and widths[0] == 3  # "go " then the long token starts a new line
    assert widths[1:8] == [40] * 7 and widths[8] == 20 + 4


PIECES = st.sampled_from(list("ab cd\n\t漢字🚀é\x07\r\u0301") + ["xyzxyzxyz" * 3])
TEXT = st.lists(PIECES, max_size=120).map("".join)


@settings(max_examples=200, deadline=None)
@given(text=TEXT, cols=st.integers(4, 30))
def test_no_line_is_wider_than_the_grid_and_carets_only_move_forward(text: str, cols: int) -> None:
    items = clusters(text, ["text"] * len(text))
    lines, carets = wrap(items, cols)
    assert all(sum(c.width for c in line) <= cols for line in lines)
    assert carets == sorted(carets)
    assert all(0 <= line < len(lines) and 0 <= col <= cols for line, col in carets)


def test_words_that_fit_are_never_split() -> None:
    text = " ".join(["alpha", "beta", "gamma", "delta", "epsilon", "zeta"] * 5)
    lines, _ = wrap(clusters(text, ["text"] * len(text)), 17)
    for line in lines:
        shown = "".join(c.text for c in line).strip()
        assert all(word in text.split() for word in shown.split()), shown


def cells_before_caret(layout, v: int) -> list:
    """The cells a frame shows once chunk v has arrived: every line above the caret, then its
    own line up to the caret's column."""
    line, col = layout.caret[v]
    shown = [c for k in range(line) for c in layout.lines[k]]
    used = 0
    for cell in layout.lines[line]:
        if used + cell.width > col:
            break
        shown.append(cell)
        used += cell.width
    return shown


def test_chunk_carets_show_exactly_the_prefix_of_the_stream() -> None:
    pieces = ["Hello", " world", ",", " this", " is", " a", " streamed", " answer", " that", " wraps", " around"]
    text, styles, ends = styled_stream(pieces, [""] * len(pieces), [""] * len(pieces), code=False)
    layout = layout_stream(text, styles, ends, cols=12)
    for v in range(len(pieces) + 1):
        shown = cells_before_caret(layout, v)
        assert "".join(c.text for c in shown).replace(" ", "") == "".join(pieces[:v]).replace(" ", "")


def test_reasoning_is_styled_apart_and_starts_its_own_line() -> None:
    text, styles, ends = styled_stream(["", "", "Answer"], ["Think", "ing.", ""], ["", "", ""], code=False)
    assert text == "Thinking.Answer" and list(ends) == [5, 9, 15]
    assert styles[:9] == ["reasoning"] * 9 and styles[9:] == ["text"] * 6
    assert BREAK in [item.kind for item in clusters(text, styles)]
    layout = layout_stream(text, styles, ends, cols=40)
    assert ["".join(c.text for c in line) for line in layout.lines] == ["Thinking.", "Answer"]


def test_fenced_code_is_highlighted_and_prose_is_not() -> None:
    text = "Use this:\n```python\ndef f(x):\n    return 'hi'  # note\n```\ndef is prose here\n"
    styles = content_styles(text, code=False)
    style_at = lambda fragment, nth=0: styles[text.index(fragment, nth)]  # noqa: E731
    assert style_at("Use") == "text"
    assert style_at("```python") == "fence"
    assert style_at("def f") == "keyword" and style_at("f(x)") == "name"
    assert style_at("'hi'") == "string" and style_at("# note") == "comment"
    assert style_at("def is prose") == "text"
    unfenced = content_styles("for i in range(3):\n    pass\n", code=True)
    assert unfenced[0] == "keyword"
    assert content_styles("for i in range(3):\n", code=False)[0] == "text"


def test_fit_cuts_with_an_ellipsis_and_never_exceeds_the_width() -> None:
    cells = fit("漢字かな and more text", 8, "dim")
    assert sum(c.width for c in cells) <= 8 and cells[-1].text == "…"
    assert [c.text for c in fit("short", 8, "dim")] == list("short")


# Characters that stand alone (ASCII, the figure lines' punctuation, CJK) mixed with every kind
# that joins its neighbours: marks, joiners, selectors, flags, skin tones, Hangul jamo, Indic
# and Thai clusters, right-to-left letters and the digits they pull into their runs.
FIT_ALPHABET = st.sampled_from(
    [*"ab 1.5/720 ·≈—…✓≠×→x中", "\u0301", "\u200d", "\ufe0f", "👩", "🇯", "🇵", "🏽", "\u1100", "\u1161",
     "\u11a8", "가", "न", "्", "क", "\u0e33", "ส", "ש", "ل", "\t", "\n", "\x07", "\U000e0067"]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(FIT_ALPHABET, max_size=30), st.integers(1, 40), st.sampled_from([fonts.REGULAR, fonts.BOLD]))
def test_fit_reads_lone_characters_one_by_one_as_the_clusters_give_them(pieces: list[str], cols: int, primary: str) -> None:
    """fit's shortcut for lines of characters that stand alone gives the cells the clusters do."""
    text = "".join(pieces)
    flat = "".join(" " if c in "\n\t" else c for c in text)
    raw = [item.cell for item in clusters(flat, ["dim"] * len(flat), primary) if item.kind != BREAK]
    kept = [cell for n, cell in enumerate(raw) if sum(c.width for c in raw[: n + 1]) <= cols - 1]
    fits = sum(c.width for c in raw) <= cols
    expected = merge_rtl_runs(raw) if fits else [*merge_rtl_runs(kept), Cell("…", fonts.REGULAR, 1, "dim")]
    assert fit(text, cols, "dim", primary) == expected


@pytest.mark.parametrize("size", [6, 18, 36])
def test_tiles_are_cell_sized_and_emoji_keep_their_colours(size: int) -> None:
    painter = GlyphPainter(size)
    bg, fg = (10, 10, 10), (240, 240, 240)
    for cell in cells_of("A漢🚀") + [cells_of("\U0010ffff")[0]]:
        tile = painter.tile(cell.text, cell.font, cell.width, fg, bg)
        assert tile.shape == (painter.line_h, cell.width * painter.cell_w, 3) and tile.dtype == np.uint8
        assert (tile != bg).any(), cell  # drawn, including the replacement box for the uncovered codepoint
    rocket = painter.tile("🚀", fonts.EMOJI, 2, fg, bg).astype(int)
    assert (rocket.max(axis=2) - rocket.min(axis=2)).max() > 60  # not a grey silhouette
    assert cells_of("\U0010ffff")[0].font is None


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from([*"ab \t\n\r.", "漢", "🚀", "\ufe0f", "\u0301", "\x07", "\u200d", "\U0001f3fd", "x" * 25]), max_size=60
    ).map("".join),
    st.integers(min_value=1, max_value=30),
    st.lists(st.integers(min_value=0, max_value=120), max_size=12),
)
def test_the_compact_stream_layout_matches_wrapping_the_clusters(text: str, cols: int, ends: list[int]) -> None:
    """layout_stream keeps its lines as palette indices and its carets as int arrays; what it
    gives back must be exactly what wrapping the whole cluster list gives."""
    styles = ["reasoning" if k % 17 < 5 else "text" for k in range(len(text))]
    ends = sorted(min(e, len(text)) for e in ends)
    layout = layout_stream(text, styles, ends, cols)
    items = clusters(text, styles)
    lines, carets = wrap(items, cols)
    assert list(layout.lines) == lines and len(layout.lines) == len(lines)
    assert [layout.lines[k] for k in range(-len(lines), len(lines))] == lines + lines
    starts = [item.start for item in items]
    expected = [(0, 0)] + [carets[n - 1] if (n := sum(s < end for s in starts)) else (0, 0) for end in ends]
    assert list(layout.caret) == expected and [layout.caret[v] for v in range(len(ends) + 1)] == expected


def test_a_long_stream_is_laid_out_in_a_few_bytes_per_character() -> None:
    """No object per character: distinct cells are shared, placed cells are 1-byte indices while
    there are few distinct ones, a caret is its column (1 byte while columns fit one) and its line
    is found from where each line's carets start."""
    text = ("The model streams tokens, 漢字 and 🚀 too.\n" * 6000)[:200_000]
    ends = list(range(4, len(text), 4))
    layout = layout_stream(text, ["text"] * len(text), ends, cols=64)
    assert isinstance(layout.lines, AllLines)
    blocks = [layout.lines.layout.block(k) for k in range(layout.lines.layout.stream.count)]
    assert len(blocks) > 40  # laid out a block at a time
    assert all(len(block.lines.cells.keys) < 64 and block.lines.cells.ids.itemsize == 1 for block in blocks)
    assert sum(len(block.lines.cells.ids) for block in blocks) < len(text)
    assert layout.caret.cols.itemsize == 1 and len(layout.caret.firsts) <= len(layout.lines) and len(layout.caret) == len(ends) + 1
    assert "".join(c.text for c in layout.lines[0]) == "The model streams tokens, 漢字 and 🚀 too."


def shown(line) -> str:
    """A row as it reads: blank cells (tabs, hanging indents) as spaces of their width."""
    return "".join(c.text * c.width if c.text == " " else c.text for c in line)


FIXED = (
    "Here is a fixed version of the parser:\n```python\n"
    "def parse(lines):\n"
    "    for raw in lines:\n"
    "        raise ValueError(f\"bad line: {raw!r}\")  # skip it\n"
    "    return 'a string literal that wraps'\n"
    "```\n"
)


def test_wrapped_code_rows_keep_their_indent_plus_a_hanging_indent() -> None:
    """Continuation rows of a code line start at its indentation + HANGING_INDENT; prose
    around the fence still wraps to column 0."""
    assert HANGING_INDENT == 2
    styles = content_styles(FIXED, code=True)
    layout = layout_stream(FIXED, styles, [len(FIXED)], cols=28)
    assert [shown(line) for line in layout.lines] == [
        "Here is a fixed version of ",
        "the parser:",  # prose: no hanging indent
        "```python",
        "def parse(lines):",
        "    for raw in lines:",
        "        raise ",
        "          ValueError(f\"bad ",  # 8 + 2
        "          line: {raw!r}\")  #",
        "          skip it",
        "    return 'a string literal",
        "      that wraps'",  # 4 + 2
        "```",
        "",
    ]
    hang = layout.lines[6][0]
    assert (hang.text, hang.width) == (" ", 10)  # one blank cell, not ten: the row's text starts after it
    # the unfenced answer of a code prompt is code from its first line
    text = "total = compute(a, b, c, d)\n\tif total:\n\t\treturn total + 10\n"
    layout = layout_stream(text, content_styles(text, code=True), [len(text)], cols=24)
    assert [shown(line) for line in layout.lines] == [
        "total = compute(a, b, c,",
        "  d)",
        "    if total:",
        "        return total + ",
        "          10",  # a tab stop is 4 cells: two tabs are 8, + 2
        "",
    ]
    # the same text as prose keeps wrapping to column 0
    layout = layout_stream(text, content_styles(text, code=False), [len(text)], cols=24)
    assert [shown(line) for line in layout.lines] == [
        "total = compute(a, b, c,", "d)", "    if total:", "        return total + ", "10", ""
    ]


@pytest.mark.parametrize(
    ("lead", "cols", "expected"),
    [(0, 80, 2), (8, 80, 10), (8, 51, 10), (40, 51, 25), (12, 20, 10), (6, 4, 2), (3, 3, 1), (0, 2, 0), (0, 1, 0)],
)
def test_the_hanging_indent_leaves_at_least_half_the_column(lead: int, cols: int, expected: int) -> None:
    assert continuation_indent(lead, cols) == expected
    text = " " * lead + "y = " + "word " * 30
    lines, _ = wrap(clusters(text, ["code"] * len(text)), cols)
    if cols >= 2:
        assert all(sum(c.width for c in line) <= cols for line in lines)
    if expected:
        assert all(line[0].text == " " and line[0].width == expected and line[1].text != " " for line in lines[1:])
    else:
        assert all(line[0].text != " " for line in lines[1:])


def glyphs(lines) -> list[tuple[str, str]]:
    return [(c.text, c.style) for line in lines for c in line if c.text != " "]


def test_highlighting_survives_wraps() -> None:
    """Every glyph keeps the style the lexer gave its character, whichever row it lands on: a
    string literal or comment split over rows is coloured as one on both."""
    styles = content_styles(FIXED, code=True)
    items = clusters(FIXED, styles)
    expected = [(item.cell.text, item.cell.style) for item in items if item.kind == GLYPH]
    for cols in (12, 19, 28, 51, 200):
        layout = layout_stream(FIXED, styles, [len(FIXED)], cols)
        assert glyphs(layout.lines) == expected, cols
    layout = layout_stream(FIXED, styles, [len(FIXED)], cols=28)
    rows = {shown(line).strip(): line for line in layout.lines}
    assert {c.style for c in rows["return 'a string literal"][11:]} == {"string"}
    assert {c.style for c in rows["that wraps'"][1:]} == {"string"}  # after the hanging indent
    assert {c.style for c in rows["skip it"][1:]} == {"comment"}
    assert [c.style for c in rows['line: {raw!r}")  #'][1:6]] == ["string"] * 5


CODE_PIECES = st.sampled_from([*"ab ()\n\t漢🚀", "    ", "word", "x" * 25, "'str'"])


@settings(max_examples=200, deadline=None)
@given(text=st.lists(CODE_PIECES, max_size=80).map("".join), cols=st.integers(4, 40), code=st.booleans())
def test_each_source_line_wraps_on_its_own_behind_its_hanging_indent(text: str, cols: int, code: bool) -> None:
    """A stream's rows are its source lines' rows, each wrapped alone (a continuation depends
    only on its own line); code continuation rows start with one blank cell at
    continuation_indent, prose ones with text; no row outgrows the column; glyphs keep order."""
    style = "code" if code else "text"
    lines, carets = wrap(clusters(text, [style] * len(text)), cols)
    assert all(sum(c.width for c in line) <= cols for line in lines)
    assert carets == sorted(carets)
    assert glyphs(lines) == [(c.text, style) for c in cells_of(text, style)]
    rows: list[tuple] = []
    for source in text.split("\n"):
        own, _ = wrap(clusters(source, [style] * len(source)), cols)
        rows += own
        stripped = source.lstrip(" \t")
        lead = len(shown(wrap(clusters(source[: len(source) - len(stripped)], [style] * len(source)), 10_000)[0][0]))
        indent = continuation_indent(lead, cols) if code and stripped else 0
        for row in own[1:]:
            if indent:
                assert row[0].text == " " and row[0].width == indent and row[1].text != " "
            else:
                assert row[0].text != " "
    assert rows == lines


def test_wrapped_code_streams_without_moving_what_is_shown() -> None:
    """A frame shows a prefix of the final layout: with hanging indents too, the cells visible
    after each chunk are exactly that chunk prefix's glyphs, and the layout is the same each time."""
    pieces = [FIXED[k : k + 7] for k in range(0, len(FIXED), 7)]
    text, styles, ends = styled_stream(pieces, [""] * len(pieces), [""] * len(pieces), code=True)
    layout = layout_stream(text, styles, ends, cols=19)
    again = layout_stream(text, styles, ends, cols=19)
    assert list(layout.lines) == list(again.lines) and list(layout.caret) == list(again.caret)
    assert any(line[0].text == " " and line[0].style == "code" and line[0].width > 1 for line in layout.lines)
    items = clusters(text, styles)
    for v in range(len(pieces) + 1):
        visible = cells_before_caret(layout, v)
        end = ends[v - 1] if v else 0
        assert glyphs([visible]) == [(i.cell.text, i.cell.style) for i in items if i.kind == GLYPH and i.start < end]


def test_every_lexer_style_counts_as_code() -> None:
    """Wrapping decides code by style name: whatever a token is coloured as must be in CODE_STYLES."""
    assert {_style(token) for token in STANDARD_TYPES} <= CODE_STYLES
    assert not CODE_STYLES & {"text", "fence", "reasoning", "tool", "control", "dim"}
