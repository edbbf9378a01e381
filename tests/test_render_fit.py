"""Nothing that matters is truncated: in every supported layout (16:9, 9:16, 1:1, 4K; 2 to 4 arms;
long labels; 5-digit tok/s) each text run the renderer draws lies inside its box, and the only
runs ever cut are the user's own labels; figures keep their size and every digit. Sizes and arm
counts that the layouts do not support are refused with one line."""

from __future__ import annotations

import re

import pytest

from tests.session_factory import MS, session, stream, suite, words
from tokenreel.renderer.canvas import TextBox
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render_plan import build_plan

IDS = ("alpha", "beta", "gamma", "delta")
LONG_LABEL = "Original checkpoint in brain floating point served with every default left alone ({})"
LONG_MODEL = "organisation-with-a-long-name/an-enormous-model-with-a-very-long-identifier-{}"
FIGURE = re.compile(r"\d")


def ladder(arms: int, long_labels: bool) -> object:
    """arms from slow to 5-digit tok/s (the last one: 4 tokens a chunk every 0.2 ms)."""
    spec = []
    for i, arm_id in enumerate(IDS[:arms]):
        label = LONG_LABEL.format(arm_id) if long_labels else f"Arm {arm_id}"
        fastest = i == arms - 1
        chunks = stream(words(60), 300 * MS - 90 * MS * i, 200_000 if fastest else (40 - 8 * i) * MS, tokens=4 if fastest else 1)
        spec.append((arm_id, label, [chunks]))
    s = session(spec, acceptance={IDS[arms - 1]: 3.9})
    if long_labels:
        for arm in s.arms:
            arm.model = LONG_MODEL.format(arm.id)
    return s


def boxes_of(size: str, arms: int, long_labels: bool, metric: str) -> tuple[list[TextBox], list[str], str]:
    """Every text run drawn on the title card, frames across the race and the end card."""
    s = ladder(arms, long_labels)
    plan = build_plan(s, RenderOptions(size=size, metric=metric, hold_s="0.5", title_s="0.1"))
    boxes: list[TextBox] = []
    renderer = FrameRenderer(plan, boxes)
    first = plan.clock.title_frames
    last = first + plan.clock.replay_frames - 1
    for index in (0, first, first + 4, (first + last) // 3, (first + last) // 2, last, plan.frame_count - 1):
        renderer.frame(index)
    labels = [a.label for a in s.arms] + [a.model for a in s.arms]
    fastest = plan.arms[-1]
    return boxes, labels, f"{fastest.decode_tok_s:.1f}"


LAYOUTS = [(size, arms) for size in ("1920x1080", "1080x1920", "1080x1080", "3840x2160", "1280x720", "960x540") for arms in (2, 3, 4)]


@pytest.mark.parametrize(("size", "arms"), LAYOUTS)
@pytest.mark.parametrize("long_labels", [False, True])
def test_no_figure_is_cut_or_outside_its_box(size: str, arms: int, long_labels: bool) -> None:
    boxes, labels, fastest = boxes_of(size, arms, long_labels, "e2e" if arms != 3 else "decode")
    assert len(fastest.split(".")[0]) == 5, fastest  # the session really has a 5-digit tok/s
    assert any(box.text.startswith(fastest[:-2]) for box in boxes), "the 5-digit figure is drawn"
    for box in boxes:
        assert box.rect.x <= box.x and box.x + box.width <= box.rect.right, box
        if box.cut:
            assert not FIGURE.search(box.text), f"a figure was cut at {size}, {arms} arms: {box}"
            assert any(label in box.text for label in labels), f"a fixed text was cut at {size}: {box}"
    if not long_labels:
        assert not [box for box in boxes if box.cut]


@pytest.mark.parametrize("size", ["1920x1080", "1080x1920", "1080x1080"])
def test_labels_step_down_a_size_before_they_are_cut(size: str) -> None:
    """A label a little too long for its header is drawn whole in the smaller size."""
    s = ladder(4, False)
    plan = build_plan(s, RenderOptions(size=size))
    renderer = FrameRenderer(plan)
    room = plan.layout.columns[0].label.w - renderer._canvas.badge_width  # right of the arm's badge
    cells = room // renderer.painters["label"].cell_w
    s.arms[0].label = ("Quantized weights " * 10)[: cells + 1].rstrip() + "s"  # a cell or two too long
    boxes: list[TextBox] = []
    FrameRenderer(build_plan(s, RenderOptions(size=size)), boxes)
    header = [box for box in boxes if box.text == s.arms[0].label and box.rect.y == plan.layout.columns[0].label.y]
    assert header and header[0].role == "small" and not header[0].cut, header


@pytest.mark.parametrize(
    ("size", "arms", "problem"),
    [
        ("1080x1000", 3, r"^size: the layouts are 16:9 .*, 9:16 .* or 1:1 .*got 1080x1000$"),
        ("1920x1200", 2, r"^size: the layouts are 16:9"),
        ("7680x4320", 2, r"^size: width and height must be even and 16\.\.3840 px"),
        ("1920x1080", 1, r"^arms: a video races 2 to 4 arms, got 1; `tokenreel report`"),
        ("320x180", 4, r"^size: \d+ px per arm is too narrow for the figures; choose a larger size or fewer arms$"),
    ],
)
def test_unsupported_sizes_and_arm_counts_are_refused_in_one_line(size: str, arms: int, problem: str) -> None:
    s = ladder(max(arms, 2), False)
    chosen = IDS[:arms] if arms == 1 else ()
    with pytest.raises(ValueError, match=problem) as error:
        build_plan(s, RenderOptions(size=size, arms=chosen))
    assert "\n" not in str(error.value)


def interval_suite(arms: int) -> object:
    """Six prompts, two per category, long labels and models: the suite's figure has its interval line."""
    s = suite([(arm_id, LONG_LABEL.format(arm_id), 20 - 4 * i) for i, arm_id in enumerate(IDS[:arms])])
    for arm in s.arms:
        arm.model = LONG_MODEL.format(arm.id)
    return s


@pytest.mark.parametrize(("size", "arms"), LAYOUTS)
@pytest.mark.parametrize("interval", [False, True])
def test_the_end_card_stays_above_its_footer(size: str, arms: int, interval: bool) -> None:
    """The full-frame end card (headline, suite line and its interval, rows, small print) fits
    between the top margin and the footer that defines its figures, for every layout and arm count."""
    plan = build_plan(interval_suite(arms) if interval else ladder(arms, True), RenderOptions(size=size, hold_s="0.5", title_s="0"))
    boxes: list[TextBox] = []
    FrameRenderer(plan, boxes).frame(plan.frame_count - 1)
    footer = plan.layout.footer
    card = [box for box in boxes if box.rect.y != footer.y]
    assert len(card) > 4 * arms
    assert any(box.text.startswith("95 % interval") for box in card) is interval
    assert all(plan.layout.title.y <= box.rect.y and box.rect.bottom <= footer.y for box in card), size


@pytest.mark.parametrize(("size", "arms"), [(size, 3) for size, _ in LAYOUTS[::3]])
def test_every_text_drawn_beside_the_stream_is_12_px_at_640_px_wide(size: str, arms: int) -> None:
    """Figures, verdicts, the clock, labels, headings, model ids, the small print and the footer
    (every text run logged: all but the streamed answer and the prompt line) on the title card,
    through the race and on the end card, scaled to a feed's 640 px wide, are at least 12 px."""
    boxes, _, _ = boxes_of(size, arms, False, "e2e")
    plan = build_plan(ladder(arms, False), RenderOptions(size=size))
    width = plan.width
    sizes = {box.role: plan.layout.sizes[box.role] for box in boxes}
    assert {"big", "label", "small", "headline", "title"} <= set(sizes)
    assert all(px * 640 / width >= 12 for px in sizes.values()), (size, sizes)
