"""The text engine (issue 23): shaping, bidi and rasterising from pinned wheels, no system library.

Golden crops of every script case, right-to-left paragraphs laid out as readers expect and
streamed from their start edge, Hangul filling its two cells, and the same pixels with the
system's FriBiDi hidden (the archived sessions and a multilingual render)."""

from __future__ import annotations

import _ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from bidi import get_display
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from tests import golden
from tests.test_render_scripts import write_corpus_session
from tokenreel.renderer import manifest as manifests
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render import render
from tokenreel.renderer.text import bidi, fonts, paragraph, raster, shaping
from tokenreel.renderer.text.blocks import layout_stream
from tokenreel.renderer.text.cells import cell_metrics
from tokenreel.renderer.text.clusters import iter_clusters, needs_shaping
from tokenreel.renderer.text.painter import GlyphPainter

ROOT = Path(__file__).resolve().parent.parent
WHITE, BLACK = (255, 255, 255), (0, 0, 0)
ARABIC = "هذا النص العربي يقرأ من اليمين إلى اليسار دائما بلا استثناء"


@pytest.mark.parametrize("name", sorted(golden.CASES))
def test_golden_crops(name: str) -> None:
    """Each case draws the pixels of its committed crop (make golden redraws them)."""
    kept = np.asarray(Image.open(golden.path(name)).convert("RGB"))
    drawn = golden.draw(name)
    assert golden.pixels_sha256(drawn) == golden.pixels_sha256(kept), (
        f"{name}: other pixels than tests/golden/{name}.png (make golden, then look)"
    )


def test_levels_come_from_python_bidi_and_reorder_as_it_does() -> None:
    """The parsed levels of known text, and L1-L2 on them, give python-bidi's own display order."""
    text = "abc אבג 12 (x) def"
    assert list(bidi.levels(text)) == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0]
    assert bidi.is_rtl_paragraph("42 שלום abc") and not bidi.is_rtl_paragraph("42 abc שלום")
    assert bidi.visual_order([1, 1, 2, 2, 1, 0]) == [4, 2, 3, 1, 0, 5]


BIDI_ALPHABET = st.sampled_from(list("abc אבג دخل 123 4.5 ,:;!?()[]-+%$ \t") + ["ש", "ل", "\u05d0\u05b8", "x"])


@settings(max_examples=300, deadline=None)
@given(st.lists(BIDI_ALPHABET, min_size=1, max_size=40))
def test_our_l1_l2_agree_with_python_bidi(pieces: list[str]) -> None:
    text = "".join(pieces)
    base = 1 if bidi.is_rtl_paragraph(text) else 0
    order = bidi.visual_order(bidi.line_levels(text, bidi.levels(text), base))
    assert "".join(text[k] for k in order) == get_display(text)


def test_an_rtl_paragraph_is_right_aligned_in_reading_order_and_streams_from_the_right() -> None:
    painter = GlyphPainter(24)
    layout = layout_stream(ARABIC, ["text"] * len(ARABIC), [len(ARABIC)], cols=30, size=24)
    [line] = layout.lines[0]
    assert line.rtl and line.font == paragraph.SHAPED_FONT
    full = painter.shaped(line, len(line.cursor), lambda s: WHITE, BLACK)
    width = full.shape[1]
    previous_left = width
    for shown in range(1, len(line.cursor)):
        tile = painter.shaped(line, shown, lambda s: WHITE, BLACK)
        inked = np.flatnonzero(tile.any(axis=(0, 2)))
        if not len(inked):
            continue
        assert inked[-1] >= width - painter.cell_w  # the first word is at the right edge
        assert inked[0] <= previous_left  # and the line grows leftwards
        previous_left = inked[0]
        right = line.cursor[shown] + painter.cell_w  # right of the cursor nothing changes any more
        assert np.array_equal(tile[:, right:], full[:, right:]), shown
    # the first word is rightmost: its glyphs lie right of the second word's
    xs = {p.order: p.glyph.x4 for p in line.pieces if p.glyph is not None}
    first_word = ARABIC.index(" ")
    assert min(x for k, x in xs.items() if k < first_word) > max(
        x for k, x in xs.items() if first_word < k < 2 * first_word - 1 and k < ARABIC.index(" ", first_word + 1)
    )


def test_embedded_numbers_and_latin_keep_their_order_and_no_gap_wider_than_the_fonts() -> None:
    text = "العدد 2024 والكلمة code هنا"
    layout = layout_stream(text, ["text"] * len(text), [len(text)], cols=60, size=24)
    [line] = layout.lines[0]
    order = sorted(((p.glyph.x4, p.order) for p in line.pieces if p.glyph is not None))
    digits = [k for _, k in order if text[k].isdigit()]
    latin = [k for _, k in order if text[k].isascii() and text[k].isalpha()]
    assert digits == sorted(digits) and latin == sorted(latin)  # left to right, as written
    words = [k for _, k in order if not text[k].isspace()]
    assert words[0] == len(text) - 1 or text[words[0]] != " "  # the paragraph's end is leftmost
    # consecutive glyphs: a gap is at most a space's advance (plus a pixel of rounding)
    pens = sorted(p.glyph.x4 for p in line.pieces if p.glyph is not None)
    widest_space = max(raster.scale4(shaping.advance(" ", f), f, 24 * 64) for f in (fonts.ARABIC, fonts.REGULAR))
    glyph_w = max(
        raster.scale4(shaping.advance(c, f), f, 24 * 64)
        for c in "2024codeالعدد" for f in (fonts.ARABIC, fonts.REGULAR) if ord(c) in fonts.coverage(f)
    )
    assert max(b - a for a, b in zip(pens, pens[1:], strict=False)) <= glyph_w + widest_space + raster.SUBPIXEL


def test_hangul_fills_its_two_cells() -> None:
    painter = GlyphPainter(24)
    cells = [item.cell for item in iter_clusters("한글", ["text"] * 2)]
    assert [c.width for c in cells] == [2, 2] and needs_shaping(cells[0].text, cells[0].font)
    tile = painter.tile(cells[0].text, cells[0].font, 2, WHITE, BLACK)
    inked = np.flatnonzero(tile.any(axis=(0, 2)))
    assert inked[-1] - inked[0] + 1 >= 0.8 * 2 * cell_metrics(24)[0]


def _hidden_fribidi(tmp_path: Path) -> dict[str, str]:
    """An environment whose dynamic loader finds a libfribidi.so.0 that is not FriBiDi (a copy of
    another shared object): Pillow's raqm is then unavailable, as on a stock Ubuntu CUDA image."""
    lib = tmp_path / "lib"
    lib.mkdir()
    shutil.copy(_ctypes.__file__, lib / "libfribidi.so.0")
    env = {**os.environ, "LD_LIBRARY_PATH": f"{lib}:{os.environ.get('LD_LIBRARY_PATH', '')}"}
    check = subprocess.run(
        [sys.executable, "-c", "from PIL import features; print(features.check('raqm'))"], env=env, capture_output=True, text=True
    )
    assert check.stdout.strip() == "False", check.stderr
    return env


def test_with_fribidi_hidden_a_multilingual_render_and_the_archived_renders_are_the_same(tmp_path: Path) -> None:
    source = write_corpus_session(tmp_path / "scripts.json")
    here = render(source, tmp_path / "here" / "out.mp4", RenderOptions(size="640x360", fps=10, hold_s="1"))
    env = _hidden_fribidi(tmp_path)
    cli = [sys.executable, "-m", "tokenreel"]
    out = tmp_path / "hidden" / "out.mp4"
    done = subprocess.run([*cli, "render", str(source), "--out", str(out), "--size", "640x360", "--fps", "10", "--hold-s", "1"],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    hidden = manifests.load(Path(f"{out}{manifests.SUFFIX}"))
    assert hidden.frame_sha256 == here.frame_sha256 and hidden.output_sha256 == here.output_sha256
    # Every archived render, the sessions' and the docs' frames: the suite's check that they stand.
    archived = [ROOT / "sessions", ROOT / "docs"]
    verified = subprocess.run([*cli, "verify", *map(str, archived)], env=env, capture_output=True, text=True, cwd=ROOT)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    manifests_kept = [path for folder in archived for path in folder.rglob("*" + manifests.SUFFIX)]  # sessions/h200-llamacpp/ too
    assert len(manifests_kept) >= 9 and verified.stdout.count(": identical:") == len(manifests_kept), verified.stdout
