"""Legible where it is watched: the archived demo scaled to 640 px wide (a video embedded in a
feed) and read back by OCR (Debian's tesseract, which `make test` installs). Every arm's
tok/s mid-race and the end card's headline must read back exactly."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.session_factory import suite
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.layout import Rect
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render_plan import RenderPlan, build_plan
from tokenreel.session import archive

DEMO = Path(__file__).resolve().parents[1] / "sessions" / "seed-ladder-demo.json"
FEED_WIDTH = 640


def tesseract() -> str:
    found = shutil.which("tesseract")
    if found is None:
        pytest.fail("tesseract is not installed: run `make test` (it installs Debian's tesseract-ocr) or install it")
    return found


def read_back(plan: RenderPlan, frame: np.ndarray, box: Rect, tmp_path: Path, lines: int = 1) -> str:
    """Scale the whole frame to the feed's width, cut out the box, and OCR that one line.

    The crop is enlarged and binarised only for the OCR engine (it wants ~30-40 px letters, dark
    on light); what it can read is what survived the scaling to 640 px.
    """
    scale = FEED_WIDTH / plan.width
    feed = Image.fromarray(frame).resize((FEED_WIDTH, round(plan.height * scale)), Image.Resampling.LANCZOS)
    crop = feed.crop((int(box.x * scale), int(box.y * scale), int(box.right * scale) + 1, int(box.bottom * scale) + 1))
    enlarge = max(1, round(60 * lines / crop.height))  # lines about 60 px tall, whatever their size at 640 px
    crop = crop.resize((crop.width * enlarge, crop.height * enlarge), Image.Resampling.LANCZOS).convert("L")
    crop.point(lambda v: 0 if v > 90 else 255).save(tmp_path / "line.png")
    result = subprocess.run([tesseract(), str(tmp_path / "line.png"), "-", "--psm", "7" if lines == 1 else "6"],
                            capture_output=True, text=True, timeout=60)
    return " ".join(result.stdout.split())


@pytest.fixture(scope="module")
def demo_plan() -> RenderPlan:
    return build_plan(archive.load(DEMO), RenderOptions(prompt="code-1"))


def test_every_arms_tok_s_reads_back_mid_race_at_640_px(demo_plan: RenderPlan, tmp_path: Path) -> None:
    renderer = FrameRenderer(demo_plan)
    index = demo_plan.clock.title_frames + demo_plan.fps * 3 // 2  # 1.5 s: every arm is streaming
    frame = renderer.render(index)
    for n, column in enumerate(demo_plan.layout.columns):
        shown = renderer._keys[("figures", n)][0][0][0]  # the big figure this frame drew
        assert re.fullmatch(r"\d+\.\d", shown), shown
        text = read_back(demo_plan, frame, column.big, tmp_path)
        assert text.split()[0].rstrip(".") == shown, (demo_plan.arms[n].id, text)


@pytest.mark.parametrize("size", ["1920x1080", "1080x1920", "1080x1080"])
def test_the_end_card_reads_back_at_640_px(size: str, tmp_path: Path) -> None:
    """The headline (its number and "faster"), what it compares and the suite's figure read back
    from the end card scaled to 640 px wide, in every layout."""
    plan = build_plan(archive.load(DEMO), RenderOptions(prompt="code-1", size=size))
    renderer = FrameRenderer(plan)
    frame = renderer.render(plan.frame_count - 1)
    big, _ = renderer.end_card.headline()
    assert re.fullmatch(r"\d+\.\d\dx faster decode", big), big
    box = renderer.end_card.headline_box()
    assert read_back(plan, frame, box, tmp_path, lines=2 if renderer.end_card.hero else 1) == big
    label_h = renderer.painters["label"].line_h
    suite = Rect(box.x, box.bottom + 2 * label_h, box.w, label_h)
    assert read_back(plan, frame, suite, tmp_path) == renderer.end_card.suite_line()
    assert renderer.end_card.suite_line().endswith("faster decode over 4 prompts")


@pytest.mark.parametrize("size", ["1920x1080", "1080x1920", "1080x1080"])
def test_the_suite_interval_reads_back_at_640_px(size: str, tmp_path: Path) -> None:
    """The interval line under the suite's figure (six prompts, two per category) reads back too."""
    plan = build_plan(suite([("a", "Arm A", 20), ("b", "Arm B", 10), ("c", "Arm C", 5)]), RenderOptions(size=size))
    renderer = FrameRenderer(plan)
    frame = renderer.render(plan.frame_count - 1)
    box, label_h = renderer.end_card.headline_box(), renderer.painters["label"].line_h
    line = Rect(box.x, box.bottom + 3 * label_h, box.w, renderer.painters["small"].line_h)
    assert renderer.end_card.interval_line() == "95 % interval 3.80–4.21x"
    assert read_back(plan, frame, line, tmp_path).replace("-", "–") == renderer.end_card.interval_line()
