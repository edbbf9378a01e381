"""Frames: tokens appear at their archived times, finished columns freeze, any render order gives
the same pixels, hostile text stays inside its column, and every size has the right shape."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from tests.session_factory import MS, session, stream, words
from tokenreel.base.theme import load_theme
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.layout import Rect
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render_plan import RenderPlan, build_plan
from tokenreel.renderer.text import fonts
from tokenreel.renderer.text.blocks import AllLines
from tokenreel.renderer.timeline import first_frame_showing

SMALL = "640x360"
UNICODE = ["漢字かな", " 🚀✅", " café naïve", "\ttab", " cr\r", "bell\x07", " " + "y" * 300, " e\u0301nd"]


def region(frame: np.ndarray, rect: Rect) -> np.ndarray:
    return frame[rect.slices]


def blank(pixels: np.ndarray, plan: RenderPlan) -> bool:
    return bool((pixels == np.array(plan.theme.panel, dtype=np.uint8)).all())


def arrival_frame(plan: RenderPlan, arm: int, chunk: int) -> int:
    """The frame index at which a chunk first shows."""
    track = plan.arms[arm]
    return plan.clock.title_frames + first_frame_showing(track.t_ns[chunk], plan.fps, plan.clock.speed)


@pytest.fixture(scope="module")
def ttft_plan() -> RenderPlan:
    """Arm a: first token at 500 ms, long enough to scroll; arm b: first token at 100 ms, done early."""
    s = session(
        [
            ("a", "slow arm", [stream(["Hello", " world"] + words(400), 500 * MS, 5 * MS)]),
            ("b", "fast arm", [stream(["Hello", " world"] + words(40), 100 * MS, 10 * MS)]),
        ],
        acceptance={"b": 3.2},
    )
    return build_plan(s, RenderOptions(size=SMALL, title_s="0.2", hold_s="0.5", metric="e2e"))  # clocks from send: TTFT shows


@pytest.fixture(scope="module")
def ttft_renderer(ttft_plan: RenderPlan) -> FrameRenderer:
    return FrameRenderer(ttft_plan)


def test_tokens_appear_at_their_archived_arrival_frame(ttft_plan: RenderPlan, ttft_renderer: FrameRenderer) -> None:
    a = ttft_plan.arms[0]
    first_a = arrival_frame(ttft_plan, 0, a.first_index)
    assert first_a == 6 + 15  # title card of 6 frames, then 500 ms at 30 fps
    geo_a, geo_b = ttft_plan.layout.columns
    cell, line = geo_a.text.w // geo_a.cols, geo_a.text.h // geo_a.rows
    first_line_a = Rect(geo_a.text.x + cell, geo_a.text.y, geo_a.text.w - cell, line)  # right of the waiting cursor
    before, at = ttft_renderer.render(first_a - 1), ttft_renderer.render(first_a)
    assert blank(region(before, first_line_a), ttft_plan)
    assert not blank(region(at, first_line_a), ttft_plan)
    assert not blank(region(before, geo_b.text), ttft_plan)  # the fast arm is already streaming
    second = arrival_frame(ttft_plan, 0, a.first_index + 1)  # " world" lands in cells 5..10
    world = Rect(geo_a.text.x + 6 * cell, geo_a.text.y, 5 * cell, line)
    assert blank(region(ttft_renderer.render(second - 1), world), ttft_plan)
    assert not blank(region(ttft_renderer.render(second), world), ttft_plan)


def test_a_finished_column_never_changes_until_the_end_card(ttft_plan: RenderPlan, ttft_renderer: FrameRenderer) -> None:
    b = ttft_plan.arms[1]
    done = arrival_frame(ttft_plan, 1, len(b.t_ns) - 1)
    last_replay = ttft_plan.clock.title_frames + ttft_plan.clock.replay_frames - 1
    assert done < last_replay - 30
    panel, verdict = ttft_plan.layout.columns[1].panel, ttft_plan.layout.columns[1].verdict

    def still(frame: np.ndarray) -> np.ndarray:
        """The column but its verdict line: the live speed-up over the slow arm runs on there."""
        frame = frame.copy()
        frame[verdict.slices] = 0
        return region(frame, panel)

    frozen = still(ttft_renderer.render(done))
    assert not np.array_equal(still(ttft_renderer.render(done - 1)), frozen)
    for index in range(done, last_replay + 1):
        assert np.array_equal(still(ttft_renderer.render(index)), frozen), index
    other = ttft_plan.layout.columns[0].panel
    assert not np.array_equal(region(ttft_renderer.render(done), other), region(ttft_renderer.render(last_replay), other))
    assert not np.array_equal(region(ttft_renderer.render(last_replay + 1), panel), frozen)  # the end card covers it


def test_any_render_order_gives_the_same_pixels(ttft_plan: RenderPlan) -> None:
    count = ttft_plan.frame_count
    in_order = FrameRenderer(ttft_plan)
    reference = [in_order.render(i) for i in range(count)]
    assert len({frame.tobytes() for frame in reference}) > count // 2  # the frames do differ
    shuffled = FrameRenderer(ttft_plan)
    order = [(i * 37) % count for i in range(count)]  # every frame, jumping back and forth
    assert sorted(order) == list(range(count))
    for i in order:
        assert np.array_equal(shuffled.render(i), reference[i]), i
    backwards = FrameRenderer(ttft_plan)
    for i in reversed(range(count)):
        assert np.array_equal(backwards.render(i), reference[i]), i
    for i in (0, 7, 30, count // 2, count - 1):
        assert np.array_equal(FrameRenderer(ttft_plan).render(i), reference[i]), i


def test_frame_names_every_region_that_changed(ttft_plan: RenderPlan) -> None:
    """Outside the rectangles frame() names, a frame equals the one returned before it. The
    encoder converts and hashes only those, so a region left out would freeze in the video."""
    count = ttft_plan.frame_count
    reference = FrameRenderer(ttft_plan)
    renderer = FrameRenderer(ttft_plan)
    order = [*range(count), 40, 41, 41, 12, count - 1, count - 1, 0, 1, 60]  # in order, then jumps
    previous: np.ndarray | None = None
    partial = 0
    for index in order:
        pixels, changed = renderer.frame(index)
        assert not pixels.flags.writeable
        assert np.array_equal(pixels, reference.render(index)), index
        if previous is None:
            assert changed is None
        elif changed is not None:
            outside = np.ones(pixels.shape[:2], dtype=bool)
            for rect in changed:
                outside[rect.slices] = False
            assert np.array_equal(pixels[outside], previous[outside]), index
            partial += outside.any()
        previous = pixels.copy()
    assert partial > count // 2  # most frames name only part of the frame
    title = ttft_plan.clock.title_frames
    # a card after a replay frame; the title card again: only its countdown moves
    assert renderer.frame(1)[1] is None and renderer.frame(2)[1] == (renderer.countdown_rect,)
    assert renderer.frame(title)[1] is None and renderer.frame(title)[1] == ()  # back to the replay; the same frame


def test_frames_are_fresh_contiguous_rgb_arrays(ttft_plan: RenderPlan, ttft_renderer: FrameRenderer) -> None:
    frame = ttft_renderer.render(40)
    assert frame.shape == (360, 640, 3) and frame.dtype == np.uint8 and frame.flags.c_contiguous
    expected = frame.copy()
    frame[:] = 0
    assert np.array_equal(ttft_renderer.render(40), expected)
    with pytest.raises(IndexError):
        ttft_renderer.render(ttft_plan.frame_count)
    with pytest.raises(IndexError):
        ttft_renderer.render(-1)


def test_title_card_counts_down_and_end_card_holds_still(ttft_plan: RenderPlan, ttft_renderer: FrameRenderer) -> None:
    clock = ttft_plan.clock
    title = [ttft_renderer.render(i) for i in range(clock.title_frames)]
    still = np.ones(title[0].shape[:2], dtype=bool)
    still[ttft_renderer.countdown_rect.slices] = False  # the countdown is all that moves
    assert all(np.array_equal(frame[still], title[0][still]) for frame in title)
    assert not np.array_equal(title[-1], ttft_renderer.render(clock.title_frames))
    end_start = clock.title_frames + clock.replay_frames
    end = [ttft_renderer.render(i) for i in range(end_start, clock.frame_count)]
    assert len(end) == 15 and all(np.array_equal(frame, end[0]) for frame in end)
    assert not np.array_equal(end[0], ttft_renderer.render(end_start - 1))


def test_unicode_text_renders_inside_its_column_without_boxes() -> None:
    s = session(
        [("u", "unicode", [stream(UNICODE * 3, 100 * MS, 10 * MS)]), ("w", "words", [stream(words(20), 100 * MS, 10 * MS)])]
    )
    plan = build_plan(s, RenderOptions(size="1280x720", title_s="0", hold_s="0"))
    renderer = FrameRenderer(plan)
    for line in AllLines(renderer.columns[0].layout):
        for cell in line:
            assert cell.font is not None and all(ord(c) in fonts.coverage(cell.font) for c in cell.text), cell
    empty, full = renderer.render(0), renderer.render(plan.frame_count - 1)
    geo = plan.layout.columns[0]
    assert not blank(region(full, geo.text), plan)
    text = region(full, geo.text).astype(int)
    assert ((text.max(axis=2) - text.min(axis=2)) > 100).any()  # colour emoji, not grey boxes
    changed = np.zeros(full.shape[:2], dtype=bool)
    changed |= (empty != full).any(axis=2)
    for column in plan.layout.columns:
        for rect in (column.text, column.progress, column.big, column.verdict, column.stats):
            changed[rect.slices] = False
    changed[plan.layout.clock.slices] = False
    assert not changed.any(), "pixels changed outside the text and figure areas"


@pytest.mark.parametrize(("size", "stacked"), [("1080x1920", True), ("3840x2160", False), ("1280x720", False)])
def test_frame_sizes(size: str, stacked: bool) -> None:
    s = session([(f"a{i}", f"arm {i}", [stream(words(12), (100 + 50 * i) * MS, 20 * MS)]) for i in range(3)])
    plan = build_plan(s, RenderOptions(size=size, hold_s="0"))
    width, height = map(int, size.split("x"))
    frame = FrameRenderer(plan).render(plan.frame_count - 1)
    assert frame.shape == (height, width, 3) and frame.dtype == np.uint8 and frame.flags.c_contiguous
    panels = [c.panel for c in plan.layout.columns]
    if stacked:
        assert len({p.x for p in panels}) == 1 and panels[0].bottom <= panels[1].y
    else:
        assert len({p.y for p in panels}) == 1 and panels[0].right <= panels[1].x
    assert plan.layout.sizes["body"] == round(18 * min(width, height) / 1080)


def test_themes_and_four_arms() -> None:
    s = session([(f"a{i}", f"arm {i}", [stream(words(12), 100 * MS, 20 * MS)]) for i in range(4)])
    for theme in ("dark", "light"):
        plan = build_plan(s, RenderOptions(size="960x540", theme=theme, speed=str(Fraction(3, 2))))
        frame = FrameRenderer(plan).render(10)
        assert tuple(frame[0, 0]) == load_theme(theme).background
        assert len(plan.layout.columns) == 4
