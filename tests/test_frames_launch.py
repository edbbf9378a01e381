"""Launch-grade frames: the hardware and engine on the title card and the race's header; model
ids cut from the middle so the arms on screen stay apart; code wrapped between tokens; the
winner's place beside any figure; a footer in plain words."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_render_fit import LAYOUTS, ladder
from tokenreel.renderer.canvas import TextBox
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.model_ids import middle_cut
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render_plan import build_plan
from tokenreel.renderer.text.blocks import AllLines, layout_stream
from tokenreel.renderer.text.highlight import styled_stream
from tokenreel.session import archive

SESSIONS = Path(__file__).resolve().parent.parent / "sessions"
H200 = SESSIONS / "h200-llamacpp" / "session.json"
DEMO = SESSIONS / "seed-ladder-demo.json"
SIZES = ("1920x1080", "1080x1920", "1080x1080")
IDS = ["Qwen/Qwen3.8-27B", "ThakiCloud/Qwen3.8-27B-NVFP4-FP8ATTN", "ThakiCloud/Qwen3.8-27B-FP8-FP8ATTN",
       "org/model-a-very-long-name-Q4_0-draft", "org/model-a-very-long-name-Q4_0"]


@pytest.mark.parametrize("chars", range(12, 40))
def test_shortened_ids_differ_and_fit(chars: int):
    cut = [middle_cut(model, IDS, chars) for model in IDS]
    assert all(len(c) <= chars for c in cut), cut
    assert len(set(cut)) == len(IDS), cut  # what tells them apart survives
    assert all(c == m for c, m in zip(cut, IDS, strict=True) if len(m) <= chars)


@pytest.mark.parametrize("size", SIZES)
def test_the_demo_columns_name_models_that_differ(size: str):
    plan = build_plan(archive.load(DEMO), RenderOptions(prompt="code-1", size=size, hold_s="0"))
    boxes: list[TextBox] = []
    FrameRenderer(plan, boxes).frame(plan.clock.title_frames + 1)
    details = [next(b.drawn for b in boxes if b.rect == geo.detail) for geo in plan.layout.columns]
    assert details[0] != details[1] and not details[1].endswith("…"), details  # the tail, -NVFP4-FP8ATTN, is kept
    assert all(d.endswith("FP8ATTN") for d in details[1:]), details


def identifier_split(source: str, lines: list[str], cols: int) -> list[str]:
    """Identifiers of the source shorter than half a row whose characters land on two rows."""
    row_of = [row for row, line in enumerate(lines) for char in line if not char.isspace()]
    shown = [char for line in lines for char in line if not char.isspace()]
    kept = [(i, char) for i, char in enumerate(source) if not char.isspace()]
    assert "".join(shown) == "".join(char for _, char in kept)  # nothing lost, nothing added
    row = {i: row_of[n] for n, (i, _) in enumerate(kept)}
    return [m[0] for m in re.finditer(r"\w+", source) if len(m[0]) <= cols // 2 and row[m.start()] != row[m.end() - 1]]


@pytest.mark.parametrize("cols", range(12, 60, 3))
def test_code_wraps_between_tokens_never_inside_an_identifier(cols: int):
    code = (">>> busy = merge_times([(day.replace(hour=9), day.replace(hour=11)),\n"
            "...                    (day.replace(hour=10), day.replace(hour=12))])\n"
            "result = collections.OrderedDict(sorted(counts.items(), key=operator.itemgetter(1)))\n")
    text, styles, ends = styled_stream((code,), ("",), ("",), True)
    layout = layout_stream(text, styles, ends, cols)
    lines = ["".join(cell.text for cell in line) for line in layout.lines]
    assert identifier_split(text, lines, cols) == [], lines
    assert all(sum(cell.width for cell in line) <= cols for line in layout.lines)


@pytest.mark.parametrize("size", SIZES)
def test_the_demo_code_keeps_its_identifiers_whole(size: str):
    plan = build_plan(archive.load(DEMO), RenderOptions(prompt="code-1", size=size, hold_s="0"))
    for column in FrameRenderer(plan).columns:
        lines = ["".join(cell.text for cell in line) for line in AllLines(column.layout)]
        text = styled_stream(column.track.content, column.track.reasoning, column.track.tool, plan.code)[0]
        assert identifier_split(text, lines, column.geo.cols) == [], lines
        assert not any(line.rstrip().endswith("day.re") for line in lines)


@pytest.mark.parametrize(("size", "arms"), LAYOUTS)
def test_the_winner_keeps_its_place_beside_any_figure(size: str, arms: int):
    """The fastest arm streams at 5 digits of tok/s: its "1st" is drawn whole, on the big line
    where there is room, else leading the stats line."""
    plan = build_plan(ladder(arms, True), RenderOptions(size=size, hold_s="0", title_s="0"))
    boxes: list[TextBox] = []
    renderer = FrameRenderer(plan, boxes)
    renderer.frame(plan.frame_count - 1)
    geo = plan.layout.columns[-1]
    winner = [b for b in boxes if geo.panel.x <= b.rect.x < geo.panel.right and geo.panel.y <= b.rect.y < geo.panel.bottom]
    marks = [b for b in winner if "1st" in b.drawn]
    assert marks and all(not b.cut and b.x + b.width <= b.rect.right for b in marks), winner
    figures = renderer.columns[-1].figures(len(plan.arms[-1].t_ns), True)
    assert "1st" in "".join(text for spans in figures for text, _, _ in spans)


@pytest.mark.parametrize("size", SIZES)
def test_hardware_and_engine_on_the_title_card_and_the_race(size: str):
    plan = build_plan(archive.load(H200), RenderOptions(prompt="code-1", size=size, hold_s="0"))
    boxes: list[TextBox] = []
    renderer = FrameRenderer(plan, boxes)  # the race's static scenery is drawn once, here
    header = [b for b in boxes if b.rect == plan.layout.facts]
    assert header and header[0].drawn.startswith("1x NVIDIA H200 · llamacpp") and not header[0].cut, header
    assert header[0].rect.bottom <= plan.layout.stage.y
    del boxes[:]
    renderer.frame(0)
    title = [b.drawn for b in boxes if b.rect.y > plan.layout.stage.y]  # the card, not the race's header
    assert any(t.startswith("1x NVIDIA H200 · llamacpp b11312") for t in title), title


def test_the_footer_says_what_accept_means():
    plan = build_plan(archive.load(H200), RenderOptions(prompt="code-1", size="1920x1080", hold_s="0"))
    wordings = FrameRenderer(plan).footer_wordings()
    assert all("whole run" not in w for w in wordings) and all("tokens per step" in w or "tokens made per step" in w
                                                                for w in wordings), wordings
