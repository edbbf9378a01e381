"""Every script shaped (issue 9 item 6): one font per cluster, no missing glyphs, emoji sequences
as one glyph, RTL runs joined and reversed, Indic and Thai clusters shaped, byte-identical output,
and a clear refusal where Pillow has no raqm (FriBiDi missing)."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tokenreel import archive
from tokenreel.cli import app
from tokenreel.renderer import fonts
from tokenreel.renderer import manifest as manifests
from tokenreel.renderer import verify as verifying
from tokenreel.renderer.plan import RenderOptions
from tokenreel.renderer.render import render
from tokenreel.renderer.text import (
    GLYPH, Cell, GlyphPainter, _covered, _ignorable, _wrap, clusters, fit, layout_stream, merge_rtl_runs, wrap,
)
from tests.session_factory import MS, session, stream

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
            assert _covered(cell.text, cell.font), (script, cell)
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
    face = fonts.load(fonts.EMOJI, fonts.EMOJI_SIZE, shaped=True)
    assert face.getlength(cell.text) == face.getlength("👩")  # one glyph's advance: it ligated
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
    face = fonts.load(fonts.DEVANAGARI, 40, shaped=True)
    parts = sum(face.getlength(c) for c in "क्ष")
    assert face.getlength("क्ष") < parts - 5  # a conjunct, not three glyphs side by side
    assert all(c.width in (1, 2) for text in CORPUS.values() for c in glyph_cells(text))


def test_fallback_keeps_a_cluster_in_one_font() -> None:
    """A base the primary font has, with a mark only a fallback has: both go to the fallback."""
    mark = next(
        chr(m) for m in range(0x300, 0x370)
        if m not in fonts.coverage(fonts.REGULAR) and m in fonts.coverage(fonts.SYMBOLS)
    )
    [cell] = glyph_cells("a" + mark)
    assert cell.text == unicodedata.normalize("NFC", "a" + mark) and cell.font == fonts.SYMBOLS


def test_rtl_runs_are_merged_shaped_right_to_left_and_joined() -> None:
    text = "say " + CORPUS["arabic"] + " ok " + CORPUS["hebrew"]
    lines, carets = wrap(clusters(text, ["text"] * len(text)), 200)
    [line] = lines
    runs = [c for c in line if c.font in fonts.RTL]
    assert [c.text for c in runs] == [CORPUS["arabic"], CORPUS["hebrew"]]
    assert [c.width for c in runs] == [len(CORPUS["arabic"]), len(CORPUS["hebrew"])]  # a cell per cluster
    assert sum(c.width for c in line) == carets[-1][1]  # the caret still counts every cluster
    hebrew = fonts.load(fonts.HEBREW, 40, shaped=True)
    image = hebrew.getmask("יש", direction="rtl")  # yod is narrow, shin wide: read right to left,
    ink = np.asarray(image).reshape(image.size[1], image.size[0]).any(axis=0)  # shin is drawn on the left
    edges = np.flatnonzero(np.diff(ink.astype(int)))
    segments = [edges[k + 1] - edges[k] for k in range(0, len(edges) - 1, 2)] if not ink[0] else []
    assert len(segments) == 2 and segments[0] > 2 * segments[1], segments
    arabic = fonts.load(fonts.ARABIC, 40, shaped=True)
    assert arabic.getlength("سلام", direction="rtl") < sum(arabic.getlength(c) for c in "سلام") - 10  # joined forms
    painter = GlyphPainter(24)
    fg, bg = (255, 255, 255), (0, 0, 0)
    whole = painter.run_tile(runs[0].text, runs[0].font, runs[0].width, fg, bg)
    assert whole.shape[1] == runs[0].width * painter.cell_w and whole.any()


def test_a_wrapped_rtl_paragraph_keeps_its_runs_on_their_lines() -> None:
    text = (CORPUS["arabic"] + " ") * 4
    styles = ["text"] * len(text)
    layout = layout_stream(text, styles, [len(text)], cols=30)
    assert len(layout.lines) > 1
    for line in layout.lines:
        assert sum(c.width for c in line) <= 30
        assert [c.font for c in line if c.text.strip()] == [fonts.ARABIC]  # one run per line
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
    assert versions["layout_engine"] == "raqm"
    for key in manifests.LAYOUT_KEYS:
        assert versions[key] and versions[key] != "not available", key


def test_without_raqm_rendering_refuses_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = write_corpus_session(tmp_path / "scripts.json")
    monkeypatch.setattr(fonts, "shaping_available", lambda: False)
    with pytest.raises(fonts.ShapingUnavailable) as caught:
        render(source, tmp_path / "out.png", RenderOptions(size="640x360", fps=10, hold_s="1"))
    message = str(caught.value)
    assert "\n" not in message and "libfribidi0" in message and "raqm" in message
    assert not (tmp_path / "out.png").exists()
    result = CliRunner().invoke(app, ["render", str(source), "--out", str(tmp_path / "x.png")], catch_exceptions=False)
    assert result.exit_code == 2
    assert "text shaping is not available" in result.output and "Traceback" not in result.output


def test_verify_names_the_text_layout_libraries_when_they_changed(tmp_path: Path) -> None:
    source = write_corpus_session(tmp_path / "scripts.json")
    result = render(source, tmp_path / "out.png", RenderOptions(size="640x360", fps=10, hold_s="1"))
    now = manifests.load(result.manifest)
    then = manifests.Manifest(**{**now.__dict__, "versions": {**now.versions, "harfbuzz": "2.7.4", "fribidi": "not available"}})
    cause = verifying._renderer_versions(then, now)
    assert cause.startswith("text layout changed:")
    assert f"harfbuzz 2.7.4 -> {now.versions['harfbuzz']}" in cause and "fribidi not available ->" in cause
    old = {k: v for k, v in now.versions.items() if k not in manifests.LAYOUT_KEYS}  # written before issue 9
    cause = verifying._renderer_versions(manifests.Manifest(**{**now.__dict__, "versions": old}), now)
    assert cause.endswith(f"text layout not recorded then, now: layout_engine raqm, raqm {now.versions['raqm']},"
                          f" fribidi {now.versions['fribidi']}, harfbuzz {now.versions['harfbuzz']},"
                          f" freetype {now.versions['freetype']}")
    assert "same text layout" in verifying._renderer_versions(now, now)
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
    for line, unmerged in zip(merged, plain):
        assert sum(c.width for c in line) == sum(c.width for c in unmerged) <= cols
        assert "".join(c.text for c in line) == "".join(c.text for c in unmerged)
        for cell in line:
            assert cell.font is None or _covered(cell.text, cell.font), cell


def test_digits_after_rtl_text_join_its_run_and_are_drawn_on_its_left() -> None:
    """As the bidi algorithm places them: in "عام 2024." the number sits left of the word; the
    full stop after it stays outside the run."""
    text = "in عام 2024."
    line = merge_rtl_runs(item.cell for item in clusters(text, ["text"] * len(text)))
    assert [c.text for c in line] == ["i", "n", " ", "عام 2024", "."]
    assert line[3].width == len("عام 2024")
    font = fonts.load(line[3].font, 40, shaped=True)

    def ink(text: str) -> np.ndarray:
        mask = font.getmask(text, direction="rtl")
        return np.asarray(mask).reshape(mask.size[1], mask.size[0]) > 0

    run, word = ink(line[3].text), ink("عام")
    assert run.shape[0] == word.shape[0] and np.array_equal(run[:, -word.shape[1] :], word)  # the word ends the run on the right
