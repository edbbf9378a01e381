"""The video's answer badge (`render --answer-badge`): "same answer as <first arm>" or "diverges
at token N" under each column's text once that arm's stream is done, never before; it fits its
box at every supported size without cutting the number, reads back at 640 px wide, and is off by
default (archived renders keep their pixels)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from tests.session_factory import MS, session, stream, words
from tests.test_render_fit import FIGURE, LAYOUTS, ladder
from tests.test_render_legibility import DEMO, read_back
from tokenreel.renderer import verify
from tokenreel.renderer.canvas import TextBox
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.layout import Rect, compute
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render import render
from tokenreel.renderer.render_plan import RenderPlan, build_plan
from tokenreel.renderer.timeline import first_frame_showing
from tokenreel.renderer.tracks import AnswerMark
from tokenreel.session import archive

BASE = words(60)
CHANGED = 30  # 0-based: token 31 differs


def three_arms():
    """bf16 (reference), nvfp4 diverging at token 31 and finishing first, a third arm identical."""
    changed = list(BASE)
    changed[CHANGED] = "#ZEBRA crossing"
    return session([
        ("bf16", "Original · bf16", [stream(BASE, 500 * MS, 10 * MS)]),
        ("nvfp4", "Quantized · NVFP4", [stream(changed, 400 * MS, 7 * MS)]),
        ("same", "Same answer arm", [stream(BASE, 300 * MS, 12 * MS)]),
    ])


def badge_boxes(renderer: FrameRenderer, boxes: list[TextBox], index: int) -> dict[int, TextBox]:
    """Column -> the badge drawn in it by frame `index` (the renderer redraws changed regions only)."""
    del boxes[:]
    renderer.frame(index)
    rects = {n: column.answer for n, column in enumerate(renderer.plan.layout.columns)}
    return {n: box for box in boxes for n, rect in rects.items() if inside(box.rect, rect)}


def inside(box: Rect, rect: Rect) -> bool:
    return rect.x <= box.x and box.right <= rect.right and rect.y <= box.y and box.bottom <= rect.bottom


def finish_frame(plan: RenderPlan, n: int) -> int:
    """The first frame at which arm n's last chunk shows."""
    return plan.clock.title_frames + first_frame_showing(plan.arms[n].finish_ns, plan.fps, plan.clock.speed)


def test_marks_come_from_the_answers_check():
    plan = build_plan(three_arms(), RenderOptions(answer_badge=True))
    marks = [t.answer for t in plan.arms]
    assert marks[0] == AnswerMark(same=None)
    assert marks[1] == AnswerMark(same=False, diverges_at_token=CHANGED + 1, estimated=False)
    assert marks[2] == AnswerMark(same=True, diverges_at_token=None, estimated=False)


@pytest.mark.parametrize("size", ["1920x1080", "1080x1920"])
def test_badge_shows_once_both_streams_it_compares_are_done_never_before(size: str):
    """Before: "✓ same as Original · bf16" 6.4 s before bf16 had streamed that text."""
    # an end-to-end race (clocks from send), in which the faster arms end first
    plan = build_plan(three_arms(), RenderOptions(answer_badge=True, size=size, title_s="0", metric="e2e"))
    boxes: list[TextBox] = []
    expected = {1: rf"≠ differs (from .* )?at token {CHANGED + 1} ", 2: "✓ same (answer|as Original · bf16|as bf16)"}
    reference_done = finish_frame(plan, 0)
    assert 0 not in badge_boxes(FrameRenderer(plan, boxes), boxes, plan.frame_count - 1)  # the baseline: none
    for n, wording in expected.items():
        done = max(finish_frame(plan, n), reference_done)
        assert n == 0 or finish_frame(plan, n) < reference_done  # the faster arms end first: their badge waits
        renderer = FrameRenderer(plan, boxes)  # fresh: a frame draws only what changed
        assert n not in badge_boxes(renderer, boxes, done - 1), f"arm {n} badged before both streams ended"
        shown = badge_boxes(renderer, boxes, done)
        assert n in shown and re.search(wording, shown[n].drawn), (n, shown)
        assert not shown[n].cut


def test_off_by_default_leaves_the_layout_alone():
    plan = build_plan(three_arms(), RenderOptions())
    assert all(t.answer is None for t in plan.arms)
    assert plan.layout == compute(plan.width, plan.height, 3)
    assert all(c.answer is None for c in plan.layout.columns)
    badged = build_plan(three_arms(), RenderOptions(answer_badge=True)).layout
    assert all(a.answer is not None and a.text.h < b.text.h for a, b in zip(badged.columns, plan.layout.columns, strict=False))


@pytest.mark.parametrize(("size", "arms"), LAYOUTS)
@pytest.mark.parametrize("long_labels", [False, True])
def test_badge_fits_with_every_digit_at_every_size(size: str, arms: int, long_labels: bool):
    s = ladder(arms, long_labels)
    plan = build_plan(s, RenderOptions(size=size, answer_badge=True, title_s="0", hold_s="0"))
    worst = AnswerMark(same=False, diverges_at_token=99999, estimated=True)
    same = AnswerMark(same=True)
    plan = replace(plan, arms=(plan.arms[0], *(replace(t, answer=worst if i % 2 == 0 else same) for i, t in enumerate(plan.arms[1:]))))
    boxes: list[TextBox] = []
    FrameRenderer(plan, boxes).frame(plan.frame_count - 1)
    badges = [b for b in boxes if b.text.startswith(" ") and b.text.endswith(" ")]
    assert len(badges) == arms - 1  # the first arm wears none
    for box in badges:
        assert box.rect.x <= box.x and box.x + box.width <= box.rect.right, box
        assert not box.cut, box
        if FIGURE.search(box.text):
            assert "≈99999" in box.drawn, box


def test_badge_reads_back_at_640_px(tmp_path: Path):
    s = three_arms()
    plan = build_plan(s, RenderOptions(answer_badge=True, hold_s="0"))
    renderer = FrameRenderer(plan)
    frame = renderer.render(plan.frame_count - 1)
    text = read_back(plan, frame, plan.layout.columns[1].answer, tmp_path)
    assert f"{CHANGED + 1}" in text and "differs" in text, text
    demo = build_plan(archive.load(DEMO), RenderOptions(prompt="code-1", answer_badge=True, hold_s="0"))
    frame = FrameRenderer(demo).render(demo.frame_count - 1)
    text = read_back(demo, frame, demo.layout.columns[2].answer, tmp_path)
    assert re.search(r"same (as NVFP4|answer as)", text), text  # the drafter against its target, named


def test_manifest_keeps_the_option_and_verifies(tmp_path: Path):
    session_file = tmp_path / "s.json"
    archive.save(three_arms(), session_file)
    result = render(session_file, tmp_path / "badge.png", RenderOptions(answer_badge=True, hold_s="0"))
    plain = render(session_file, tmp_path / "plain.png", RenderOptions(hold_s="0"))
    assert (tmp_path / "badge.png").read_bytes() != (tmp_path / "plain.png").read_bytes()
    for checked in verify.verify([result.manifest, plain.manifest]):
        assert checked.status == verify.IDENTICAL, checked.message


def smallest_size(arms: int, vertical: bool) -> str:
    """The smallest 16:9 (or 9:16) size the layouts accept for `arms` arms with the badge."""
    accepted = None
    # 16:9 sizes in steps of 32x18 px, all even, down to where the layouts refuse (at 126x224 the
    # header leaves no room for the prompt line: it is left out rather than drawn past its box)
    for short in range(1080, 17, -18):
        width, height = (short, short * 16 // 9) if vertical else (short * 16 // 9, short)
        try:
            compute(width, height, arms, answer_line=True)
        except ValueError:
            break
        accepted = f"{width}x{height}"
    assert accepted is not None
    return accepted


@pytest.mark.parametrize("arms", [2, 4])
@pytest.mark.parametrize("vertical", [False, True])
def test_badge_fits_at_the_smallest_size_the_layouts_accept(arms: int, vertical: bool):
    size = smallest_size(arms, vertical)
    plan = build_plan(ladder(arms, True), RenderOptions(size=size, answer_badge=True, title_s="0", hold_s="0"))
    worst = AnswerMark(same=False, diverges_at_token=99999, estimated=True)
    plan = replace(plan, arms=(plan.arms[0], *(replace(t, answer=worst) for t in plan.arms[1:])))
    boxes: list[TextBox] = []
    FrameRenderer(plan, boxes).frame(plan.frame_count - 1)
    badges = [b for b in boxes if "99999" in b.text]
    assert len(badges) == arms - 1, size
    for box in badges:
        assert box.x + box.width <= box.rect.right and not box.cut and "≈99999" in box.drawn, (size, box)
