"""What keeps a render's CPU near ffmpeg's own: start-up that loads only what a render uses, and
frame-path caches that give the same bytes as drawing and converting everything."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tests.session_factory import MS, session, stream, words
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.layout import Rect, Shift
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render_plan import build_plan
from tokenreel.renderer.yuv import Yuv420Converter, to_yuv420p


def test_a_render_does_not_import_scipy() -> None:
    """scipy (about a second of CPU to import) serves only intervals and graded accuracy; a
    render imports the modules that hold them but never calls them."""
    code = (
        "import sys, tokenreel.renderer.render, tokenreel.cli.app, tokenreel.cli.render;"
        " print(sorted(m for m in sys.modules if m.startswith('scipy')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_converting_with_shifts_equals_converting_everything() -> None:
    """Random frames whose regions move up by an even number of rows (odd edges on every side,
    the frame's border included) while the rest of each region is redrawn at random."""
    rng = np.random.default_rng(11)
    width, height = 64, 48
    frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    converter = Yuv420Converter(width, height)
    converter.convert(frame, None)
    moves = 0
    for _ in range(80):
        x, y = int(rng.integers(-2, width - 4)), int(rng.integers(-2, height - 8))
        rect = Rect(x, y, int(rng.integers(3, width + 3 - x)), int(rng.integers(6, height + 3 - y)))
        dy = int(rng.integers(1, 4)) * 2
        kept = Rect(rect.x, rect.y, rect.w, int(rng.integers(0, rect.h - dy + 1)))
        cut = (slice(max(0, kept.y), max(0, kept.bottom)), slice(max(0, kept.x), max(0, kept.right)))
        source = frame[max(0, kept.y) + dy : max(0, kept.bottom) + dy, cut[1]].copy()
        inside = frame[max(0, rect.y) : max(0, rect.bottom), max(0, rect.x) : max(0, rect.right)]
        inside[:] = rng.integers(0, 256, inside.shape, dtype=np.uint8)
        frame[cut][: len(source)] = source
        moves += len(source) > 0 and kept.bottom + dy <= height
        shift = Shift(kept, dy) if kept.bottom + dy <= height else Shift(kept, 1)  # an odd move is converted
        assert np.array_equal(converter.convert(frame, [rect], [shift]), to_yuv420p(frame))
    assert moves > 40


@pytest.mark.parametrize("size", ["640x360", "360x640", "480x480"])
def test_scrolled_text_moves_the_last_frames_pixels(size: str) -> None:
    """A race whose columns scroll: every frame is the one drawn afresh, each shift holds the
    frame before's pixels moved up, and the encoder's planes moved with them are the ones a
    whole conversion gives; frames asked out of order too."""
    s = session([("a", "bf16", [stream(words(400), 100 * MS, 12 * MS)]), ("b", "nvfp4", [stream(words(400), 80 * MS, 5 * MS)])])
    plan = build_plan(s, RenderOptions(size=size, fps=15, hold_s="0.2"))
    renderer = FrameRenderer(plan)
    converter = Yuv420Converter(plan.width, plan.height)
    previous: np.ndarray | None = None
    shifted = 0
    order = [*range(plan.frame_count), 40, 20, 41, 42]
    for index in order:
        pixels, changed = renderer.frame(index)
        assert np.array_equal(pixels, FrameRenderer(plan).render(index)), index
        for shift in renderer.shifts:
            assert previous is not None and changed is not None
            rect, dy = shift.rect, shift.dy
            assert np.array_equal(pixels[rect.slices], previous[rect.y + dy : rect.bottom + dy, rect.x : rect.right]), index
            shifted += 1
        assert np.array_equal(converter.convert(pixels, changed, renderer.shifts), to_yuv420p(pixels)), index
        previous = pixels.copy()
    assert shifted >= 10
