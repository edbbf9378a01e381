"""Answers stream as markdown source and show as markdown renders (renderer/tokenreel/renderer/text/markup.py): the
offset map from source to display, and real frames of a markdown answer."""

from __future__ import annotations

import numpy as np
import pytest

from tests.session_factory import MS, session, stream
from tests.test_render_text import cells_before_caret, glyphs
from tokenreel.base.theme import load_theme
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render_plan import RenderPlan, build_plan
from tokenreel.renderer.text import fonts
from tokenreel.renderer.text.blocks import layout_stream
from tokenreel.renderer.text.cells import GLYPH, SHAPED
from tokenreel.renderer.text.clusters import clusters
from tokenreel.renderer.text.highlight import styled_stream
from tokenreel.renderer.text.markup import BULLET, HEADING, INLINE_CODE, PAD, RULE, STRONG, render
from tokenreel.renderer.text.wrap import shape_paragraphs

SAMPLE = """## Speculative **decoding**

A *draft* model proposes tokens; the `target` model checks them in **one pass**.

- The draft is **small**, so proposing costs little, and a long item like this one wraps onto the next rows of the column
- Accepted tokens are kept; the first rejected one is resampled
  1. nested `step`

| arm | tok/s |
|-----|------:|
| **base** | 41.2 |
| spec | 97.0 |

```python
def accept(draft, target):
    return [t for t, d in zip(target, draft) if t == d]
```
Done \\*really\\*.
"""


def chunked(text: str, size: int) -> list[str]:
    return [text[k : k + size] for k in range(0, len(text), size)]


def line_texts(lines) -> list[str]:
    return ["".join(" " * c.width if c.text == " " else c.text for c in line) for line in lines]


def test_markers_go_and_their_text_is_styled() -> None:
    shown = render(SAMPLE)
    for marker in ("**", "`", "```", "##", "| ", "|---", "- The"):
        assert marker not in shown.text, marker
    assert shown.text.startswith("Speculative decoding\n")
    style_at = lambda fragment: shown.styles[shown.text.index(fragment)]  # noqa: E731
    assert style_at("Speculative") == HEADING and style_at("decoding") == HEADING
    assert style_at("one pass") == STRONG and style_at("small") == STRONG and style_at("base") == STRONG
    assert style_at("target") == INLINE_CODE and style_at("step") == INLINE_CODE
    assert shown.styles[shown.text.index("draft")] == "emphasis"
    assert style_at("• The") == BULLET and style_at("1. nested") == BULLET
    assert "Done *really*." in shown.text  # escaped markers stay, their backslashes go
    assert "─" * 5 in shown.text and shown.styles[shown.text.index("─")] == RULE
    rows = shown.text.split("\n")
    table = [row for row in rows if row.startswith(("arm", "base", "spec"))]
    assert len({len(row) for row in table}) == 1 and all(
        row.index(n) == table[0].index("tok/s") for row, n in zip(table[1:], ("41.2", "97.0"), strict=False)
    )
    ((start, end, language),) = shown.code
    assert language == "python" and shown.text[start:end].startswith("def accept(draft, target):\n")


def test_every_source_offset_maps_forward_and_inside_the_display() -> None:
    shown = render(SAMPLE)
    offsets = [shown.offset(k) for k in range(len(SAMPLE) + 1)]
    assert offsets[0] == 0 and offsets[-1] == len(shown.text)
    assert all(a <= b for a, b in zip(offsets, offsets[1:], strict=False))
    assert list(shown.anchors) == sorted(shown.anchors) and all(a < len(SAMPLE) for a in shown.anchors)
    # inside a removed marker: the next display character's offset, so nothing shows early or changes
    small = render("a **b** c")
    assert small.text == "a b c"
    assert [small.offset(k) for k in range(10)] == [0, 1, 2, 2, 2, 3, 3, 3, 4, 5]


@pytest.mark.parametrize("size", [1, 2, 5, 13])
def test_any_chunking_shows_the_same_answer_and_only_ever_a_prefix_of_it(size: int) -> None:
    pieces = chunked(SAMPLE, size)
    text, styles, ends = styled_stream(pieces, [""] * len(pieces), [""] * len(pieces), code=False)
    whole, whole_styles, _ = styled_stream([SAMPLE], [""], [""], code=False)
    assert (text, styles) == (whole, whole_styles) and ends[-1] == len(text)
    assert all(a <= b for a, b in zip(ends, ends[1:], strict=False))
    layout = layout_stream(text, styles, ends, cols=30)
    assert list(layout.caret) == sorted(layout.caret)  # the caret never moves back: nothing shown moves
    items = clusters(text, styles)
    for v in range(len(pieces) + 1):
        end = ends[v - 1] if v else 0
        expected = [(i.cell.text, i.cell.style) for i in items if i.kind == GLYPH and i.start < end]
        assert glyphs([cells_before_caret(layout, v)]) == expected, v


def test_bold_is_the_bold_face_and_list_items_hang_under_their_text() -> None:
    text, styles, ends = styled_stream([SAMPLE], [""], [""], code=False)
    layout = layout_stream(text, styles, ends, cols=30)
    lines = line_texts(layout.lines)
    bold = {c.font for line in layout.lines for c in line if c.style in (STRONG, HEADING) and c.text.strip()}
    plain = {c.font for line in layout.lines for c in line if c.style == "text" and c.text.strip()}
    assert bold == {fonts.BOLD} and plain == {fonts.REGULAR}
    item = next(k for k, line in enumerate(lines) if line.startswith("• The draft"))
    assert lines[item + 1].startswith("  ") and lines[item + 1][2] != " "  # under "The", not at column 0
    nested = next(k for k, line in enumerate(lines) if line.startswith("  1. nested"))
    assert nested and lines[item + 2].startswith("  ")
    code = next(k for k, line in enumerate(lines) if line.startswith("    return"))
    assert lines[code + 1].startswith("      ")  # wrapped code keeps its hanging indent


def test_a_table_too_wide_for_the_column_keeps_its_rows_without_pipes() -> None:
    source = "| name | value |\n|---|---|\n| a much longer first cell | 1 |\n"
    text, styles, ends = styled_stream([source], [""], [""], code=False)
    wide = line_texts(layout_stream(text, styles, ends, cols=60).lines)
    assert wide[:3] == ["name                      value", "─" * 31, "a much longer first cell  1    "]
    narrow = layout_stream(text, styles, ends, cols=20)
    assert not any(c.style == PAD for line in narrow.lines for c in line)
    texts = line_texts(narrow.lines)
    assert texts[0] == "name  value" and texts[1] == "─" * 20 and "|" not in "".join(texts)


def test_markers_in_right_to_left_prose_go_too() -> None:
    source = "שלום **עולם** ו-`code` כאן\n\n- פריט *ראשון*\n"
    pieces = chunked(source, 3)
    text, styles, ends = styled_stream(pieces, [""] * len(pieces), [""] * len(pieces), code=False)
    assert "*" not in text and "`" not in text and "• " in text
    layout = layout_stream(text, styles, ends, cols=30)
    assert any(line and line[0].font == "shaped" for line in layout.lines)
    assert SHAPED in {item.kind for item in shape_paragraphs(clusters(text, styles), 30, 18)}


@pytest.fixture(scope="module")
def markdown_plan() -> RenderPlan:
    s = session(
        [
            ("a", "markdown", [stream(chunked(SAMPLE, 4), 100 * MS, 8 * MS)]),
            ("b", "plain", [stream(chunked(SAMPLE, 9), 150 * MS, 10 * MS)]),
        ]
    )
    return build_plan(s, RenderOptions(size="1080x1920", title_s="0.2", hold_s="0.3"))


def test_a_rendered_frame_shows_rendered_markdown(markdown_plan: RenderPlan) -> None:
    renderer = FrameRenderer(markdown_plan)
    last = markdown_plan.clock.title_frames + markdown_plan.clock.replay_frames - 1
    frame = renderer.render(last)
    column, geo = renderer.columns[0], markdown_plan.layout.columns[0]
    top, line, _, _ = column.text_key(len(column.track.t_ns), last, markdown_plan.fps)
    shown = line_texts(map(column.layout.line, range(top, line + 1)))
    assert shown and not any("**" in row or "```" in row or "`" in row for row in shown)
    cw, lh = column.painter.cell_w, column.painter.line_h
    item = next(k for k, row in enumerate(shown) if row.startswith("• The draft"))
    assert shown[item + 1].startswith("  ") and shown[item + 1][2] != " "
    row = frame[geo.text.y + (item + 1) * lh : geo.text.y + (item + 2) * lh, geo.text.x : geo.text.right]
    ink = (row != np.array(markdown_plan.theme.panel, dtype=np.uint8)).any(axis=(0, 2))
    assert not ink[: 2 * cw].any() and ink[2 * cw : 3 * cw].any()  # the continuation's text starts at the hang, in pixels
    head = next(k for k, row in enumerate(shown) if row.startswith("Speculative decoding"))
    heading = frame[geo.text.y + head * lh : geo.text.y + (head + 1) * lh, geo.text.x : geo.text.right]
    assert (np.abs(heading.astype(int) - load_theme("dark").color("heading")).sum(axis=2) < 60).any()


def test_markdown_frames_are_the_same_in_any_order(markdown_plan: RenderPlan) -> None:
    count = markdown_plan.frame_count
    picks = sorted({*range(0, count, max(1, count // 40)), count - 1})
    forward = {i: FrameRenderer(markdown_plan).render(i) for i in picks[:3]}
    renderer = FrameRenderer(markdown_plan)
    reference = {i: renderer.render(i) for i in picks}
    assert len({frame.tobytes() for frame in reference.values()}) > len(picks) // 3  # the frames do differ
    backwards = FrameRenderer(markdown_plan)
    for i in reversed(picks):
        assert np.array_equal(backwards.render(i), reference[i]), i
    for i, frame in forward.items():
        assert np.array_equal(frame, reference[i]), i
