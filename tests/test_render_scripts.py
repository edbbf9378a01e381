"""Every script shaped (issues 9 and 23): one font per cluster, no missing glyphs, emoji sequences
as one glyph, RTL runs joined and reversed, Indic and Thai clusters shaped, byte-identical output,
and the text engine's libraries in the manifest."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.session_factory import MS, session, stream
from tokenreel.renderer import manifest as manifests
from tokenreel.renderer import verify as verifying
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render import render
from tokenreel.renderer.text import fonts, paragraph, raster, shaping
from tokenreel.renderer.text.blocks import layout_stream
from tokenreel.renderer.text.cells import GLYPH, Cell
from tokenreel.renderer.text.clusters import _ignorable, clusters, covered
from tokenreel.renderer.text.painter import GlyphPainter
from tokenreel.renderer.text.rtl_runs import merge_rtl_runs
from tokenreel.renderer.text.wrap import _wrap, fit, wrap
from tokenreel.session import archive

EMOJI_SEQUENCES = {
    "zwj": "👩\u200d💻",
    "family": "👨\u200d👩\u200d👧",
    "rainbow flag": "🏳\ufe0f\u200d🌈",
    "flag": "🇯🇵",
    "skin tone": "👍🏽",
    "skin tone zwj": "👩🏽\u200d💻",
    "keycap": "1\ufe0f\u20e3",
    "keycap hash": "#\ufe0f\u20e3",
    "subdivision flag": "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",
}
CORPUS = {
    "latin": "Latin café naïve façade",
    "greek": "Ελληνικά γράμματα",
    "cyrillic": "Привет, мир",
    "cjk": "漢字かなカナ",
    "hangul": "안녕하세요 한국어",
    "arabic": "مرحبا بالعالم، كيف حالك؟",
    "hebrew": "שלום עולם",
    "devanagari": "नमस्ते क्षत्रिय हिन्दी",
    "thai": "สวัสดีน้ำ ภาษาไทย",
    "emoji": " ".join(EMOJI_SEQUENCES.values()),
    "combining": "x\u0301\u0323 a\u0308\u0304 Z\u0336 q\u0307\u0323",
}


def glyph_cells(text: str, style: str = "text") -> list[Cell]:
    return [item.cell for item in clusters(text, [style] * len(text)) if item.kind == GLYPH]


def test_the_corpus_is_drawn_without_missing_glyphs_one_font_per_cluster() -> None:
    """HarfBuzz draws .notdef only for a codepoint the font's cmap lacks (its substitutions map
    real glyphs to real glyphs), so a cluster whose font maps every codepoint that is not
    default-ignorable draws no .notdef. Every cluster, and every merged RTL run, has one font."""
    for script, text in CORPUS.items():
        lines, _ = wrap(clusters(text, ["text"] * len(text)), 200)
        for cell in (c for line in lines for c in line):
            assert cell.font is not None, (script, cell)
            assert covered(cell.text, cell.font), (script, cell)
            missing = [hex(ord(c)) for c in cell.text if not _ignorable(ord(c)) and ord(c) not in fonts.coverage(cell.font)]
            assert not missing, (script, cell, missing)


def test_each_script_goes_to_its_font() -> None:
    expected = {
        "hangul": fonts.HANGUL, "arabic": fonts.ARABIC, "hebrew": fonts.HEBREW,
        "devanagari": fonts.DEVANAGARI, "thai": fonts.THAI, "cjk": fonts.CJK,
        "latin": fonts.REGULAR, "greek": fonts.REGULAR, "cyrillic": fonts.REGULAR,
    }
    for script, font in expected.items():
        used = {c.font for c in glyph_cells(CORPUS[script]) if not c.text.isascii() or c.text.isalpha()}
        assert used == {font}, (script, used)
    assert [c.width for c in glyph_cells("안녕")] == [2, 2]


@pytest.mark.parametrize("name", sorted(EMOJI_SEQUENCES))
def test_an_emoji_sequence_is_one_cluster_and_one_glyph(name: str) -> None:
    sequence = EMOJI_SEQUENCES[name]
    [cell] = glyph_cells(sequence)
    assert cell.font == fonts.EMOJI and cell.width == 2
    assert len(shaping.shape(cell.text, fonts.EMOJI)) == 1  # one glyph: it ligated
    painter = GlyphPainter(24)
    tile = painter.tile(cell.text, cell.font, cell.width, (255, 255, 255), (0, 0, 0))
    assert tile.any()


def test_skin_tone_and_flag_draw_other_pixels_than_their_parts() -> None:
    painter = GlyphPainter(24)
    tile = lambda text: painter.tile(text, fonts.EMOJI, 2, (255, 255, 255), (0, 0, 0))  # noqa: E731
    assert not np.array_equal(tile("👍🏽"), tile("👍"))
    assert not np.array_equal(tile("🇯🇵"), tile("🇯"))
    assert [c.text for c in glyph_cells("🇯🇵🇺🇸🇫")] == ["🇯🇵", "🇺🇸", "🇫"]  # pairs, then a lone one


def test_combining_marks_indic_conjuncts_and_thai_stay_one_cluster() -> None:
    assert [c.text for c in glyph_cells("x\u0301\u0323y")] == [unicodedata.normalize("NFC", "x\u0301\u0323"), "y"]
    assert [c.text for c in glyph_cells("क्षत्रिय")] == ["क्ष", "त्रि", "य"]
    assert [c.text for c in glyph_cells("น้ำดี")] == ["น้ำ", "ดี"]
    assert len(glyph_cells("\u1100\u1161\u11f0")) == 1  # conjoining jamo (no precomposed syllable)
    parts = sum(shaping.advance(c, fonts.DEVANAGARI) for c in "क्ष")
    assert shaping.advance("क्ष", fonts.DEVANAGARI) < parts * 0.9  # a conjunct, not three glyphs side by side
    assert all(c.width in (1, 2) for text in CORPUS.values() for c in glyph_cells(text))


def test_fallback_keeps_a_cluster_in_one_font() -> None:
    """A base the primary font has, with a mark only a fallback has: both go to the fallback."""
    mark = next(
        chr(m) for m in range(0x300, 0x370)
        if m not in fonts.coverage(fonts.REGULAR) and m in fonts.coverage(fonts.SYMBOLS)
    )
    [cell] = glyph_cells("a" + mark)
    assert cell.text == unicodedata.normalize("NFC", "a" + mark) and cell.font == fonts.SYMBOLS


def ink(text: str, font: str, size: int = 40) -> np.ndarray:
    """Where a merged run of one font is inked, drawn by the text engine (levels, then shaping)."""
    placed, end4 = paragraph.place_bidi(text, font, size * 64)
    mask = np.zeros((2 * size, end4 // raster.SUBPIXEL + 4), dtype=np.uint8)
    raster.draw(mask, placed, size * 3 // 2, raster.SUBPIXEL)
    return mask > 0


def test_rtl_runs_are_merged_shaped_right_to_left_and_joined() -> None:
    text = "say " + CORPUS["arabic"] + " ok " + CORPUS["hebrew"]
    lines, carets = wrap(clusters(text, ["text"] * len(text)), 200)
    [line] = lines
    runs = [c for c in line if c.font in fonts.RTL]
    assert [c.text for c in runs] == [CORPUS["arabic"], CORPUS["hebrew"]]
    assert [c.width for c in runs] == [len(CORPUS["arabic"]), len(CORPUS["hebrew"])]  # a cell per cluster
    assert sum(c.width for c in line) == carets[-1][1]  # the caret still counts every cluster
    shin_left = ink("יש", fonts.HEBREW).any(axis=0)  # yod is narrow, shin wide: read right to left,
    edges = np.flatnonzero(np.diff(shin_left.astype(int)))  # shin is drawn on the left
    segments = [edges[k + 1] - edges[k] for k in range(0, len(edges) - 1, 2)] if not shin_left[0] else []
    assert len(segments) == 2 and segments[0] > 2 * segments[1], segments
    joined = shaping.advance("سلام", fonts.ARABIC, rtl=True)
    assert joined < sum(shaping.advance(c, fonts.ARABIC, rtl=True) for c in "سلام") * 0.8  # joined forms
    painter = GlyphPainter(24)
    fg, bg = (255, 255, 255), (0, 0, 0)
    whole = painter.run_tile(runs[0].text, runs[0].font, runs[0].width, fg, bg)
    assert whole.shape[1] == runs[0].width * painter.cell_w and whole.any()


def test_a_wrapped_rtl_paragraph_is_shaped_line_by_line_and_right_aligned() -> None:
    """Arabic prose is laid out on shaped widths: whole lines, each one shaped line as wide as
    the grid, every glyph inside it, ink reaching the right edge (right-aligned), the words in
    reading order across lines; in a one-line UI text (fit) the run stays one merged cell."""
    text = (CORPUS["arabic"] + " ") * 4
    styles = ["text"] * len(text)
    painter = GlyphPainter(18)
    layout = layout_stream(text, styles, [len(text)], cols=30, size=painter.size)
    assert len(layout.lines) > 1
    assert "".join(line[0].text for line in layout.lines) == text
    for cells in layout.lines:
        [line] = cells
        assert line.font == paragraph.SHAPED_FONT and line.rtl and line.width == 30
        xs = [p.glyph.x4 // raster.SUBPIXEL for p in line.pieces if p.glyph is not None]
        assert xs and min(xs) >= 0 and max(xs) < 30 * painter.cell_w
        tile = painter.paint(cells, lambda style: (255, 255, 255), (0, 0, 0))
        inked = np.flatnonzero(tile.any(axis=(0, 2)))
        assert inked[-1] >= tile.shape[1] - painter.cell_w // 2  # flush with the right edge
    assert all(c.font == fonts.ARABIC for c in fit(CORPUS["arabic"], 10, "dim")[:-1])


def write_corpus_session(path: Path) -> Path:
    pieces = [" " + text if i else text for i, text in enumerate(CORPUS.values())]
    arms = [
        ("a", "عربي", [stream(pieces, 100 * MS, 40 * MS)]),
        ("b", "한국어", [stream(pieces, 150 * MS, 70 * MS)]),
    ]
    archive.save(session(arms, prompt="안녕 👩\u200d💻 नमस्ते", name="Scripts"), path)
    return path


def test_the_corpus_renders_byte_identical_across_runs_and_workers(tmp_path: Path) -> None:
    source = write_corpus_session(tmp_path / "scripts.json")
    options = RenderOptions(size="640x360", fps=10, hold_s="1")
    one = render(source, tmp_path / "one" / "out.mp4", options, workers=1, chunk_frames=8)
    two = render(source, tmp_path / "two" / "out.mp4", options, workers=2, chunk_frames=8)
    again = render(source, tmp_path / "again" / "out.mp4", options, workers=1, chunk_frames=8)
    assert one.frame_sha256 == two.frame_sha256 == again.frame_sha256
    assert one.output_sha256 == two.output_sha256 == again.output_sha256
    versions = manifests.load(one.manifest).versions
    assert versions["text_engine"] == fonts.TEXT_ENGINE
    for key in manifests.LAYOUT_KEYS:
        assert versions[key] and versions[key] != "None", key
    assert not set(versions) & set(manifests.PRE_ENGINE_KEYS)  # no raqm, no FriBiDi


def test_verify_names_the_text_engine_libraries_when_they_changed(tmp_path: Path) -> None:
    source = write_corpus_session(tmp_path / "scripts.json")
    result = render(source, tmp_path / "out.png", RenderOptions(size="640x360", fps=10, hold_s="1"))
    now = manifests.load(result.manifest)
    then = manifests.Manifest(**{**now.__dict__, "versions": {**now.versions, "harfbuzz": "2.7.4"}})
    cause = verifying._renderer_versions(then, now)
    assert cause.startswith("text engine changed:") and f"harfbuzz 2.7.4 -> {now.versions['harfbuzz']}" in cause
    # a manifest written while raqm shaped text (the archived ones): what changed is named
    raqm_era = {k: v for k, v in now.versions.items() if k not in manifests.LAYOUT_KEYS}
    raqm_era.update(layout_engine="raqm", raqm="0.11.0", fribidi="1.0.8", harfbuzz="14.5.0", freetype="2.14.3")
    cause = verifying._renderer_versions(manifests.Manifest(**{**now.__dict__, "versions": raqm_era}), now)
    assert cause.startswith("text engine changed: ")
    assert "fribidi 1.0.8 -> not used" in cause and f"python-bidi not recorded -> {now.versions['python-bidi']}" in cause
    old = {k: v for k, v in raqm_era.items() if k not in (*manifests.LAYOUT_KEYS, *manifests.PRE_ENGINE_KEYS)}  # before issue 9
    cause = verifying._renderer_versions(manifests.Manifest(**{**now.__dict__, "versions": old}), now)
    assert cause.endswith(f"text layout not recorded then, now: text_engine {fonts.TEXT_ENGINE}, freetype {now.versions['freetype']},"
                          f" harfbuzz {now.versions['harfbuzz']}, uharfbuzz {now.versions['uharfbuzz']},"
                          f" freetype_shaped {now.versions['freetype_shaped']}, freetype-py {now.versions['freetype-py']},"
                          f" python-bidi {now.versions['python-bidi']}")
    assert "same text engine" in verifying._renderer_versions(now, now)
    # a manifest without the layout keys still reads (the archived ones predate them)
    data = orjson.loads(manifests.dumps(now))
    data["versions"] = old
    assert manifests.from_dict(data, "old.render.json").versions == old


SCRIPT_PIECES = st.sampled_from([*(w for text in CORPUS.values() for w in text.split(" ")), " ", "\n", "  ", "2024", "?"])


@settings(max_examples=150, deadline=None)
@given(pieces=st.lists(SCRIPT_PIECES, max_size=60), cols=st.integers(4, 40))
def test_merged_runs_keep_every_cell_inside_the_grid(pieces: list[str], cols: int) -> None:
    """With RTL runs merged, lines still fit the grid, carets only move forward, every cell has
    one font that covers it, and each line holds the same text and width as without merging
    (runs only group a line's clusters: they never move one to another line or drop one)."""
    text = "".join(pieces)
    styles = ["text"] * len(text)
    merged, carets = wrap(clusters(text, styles), cols)
    plain: list[list[Cell]] = [[]]
    _wrap(clusters(text, styles), cols, lambda cell: plain[-1].append(cell), lambda: plain.append([]), lambda *_: None)
    assert carets == sorted(carets)
    assert len(merged) == len(plain)
    for line, unmerged in zip(merged, plain, strict=False):
        assert sum(c.width for c in line) == sum(c.width for c in unmerged) <= cols
        assert "".join(c.text for c in line) == "".join(c.text for c in unmerged)
        for cell in line:
            assert cell.font is None or covered(cell.text, cell.font), cell


def test_digits_after_rtl_text_join_its_run_and_are_drawn_on_its_left() -> None:
    """As the bidi algorithm places them: in "عام 2024." the number sits left of the word; the
    full stop after it stays outside the run."""
    text = "in عام 2024."
    line = merge_rtl_runs(item.cell for item in clusters(text, ["text"] * len(text)))
    assert [c.text for c in line] == ["i", "n", " ", "عام 2024", "."]
    assert line[3].width == len("عام 2024")
    run, word = ink(line[3].text, line[3].font), ink("عام", line[3].font)
    run, word = run[:, run.any(axis=0)], word[:, word.any(axis=0)]  # the inked columns
    assert run.shape[0] == word.shape[0] and np.array_equal(run[:, -word.shape[1] :], word)  # the word ends the run on the right
