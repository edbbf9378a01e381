"""One story a stopwatch confirms (docs/video.md): for the archived sessions (the demo among
them) in every layout and both metrics, the race's finish times give the video's headline
multiplier; each pair the video compares has one figure; the end card, read back by OCR at
640 px wide, shows no multiplier that is not a claim of the video's metric; and render, the
replay and the report print the same strings for the same run."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tokenreel.analysis.claims import typical_prompt
from tokenreel.analysis.figures import clock_seconds, multiplier
from tokenreel.analysis.ladder import build_cells
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render_plan import RenderPlan, build_plan, default_prompt
from tokenreel.renderer.timeline import first_frame_showing
from tokenreel.report import build_report
from tokenreel.report.html_replay import replay_data
from tokenreel.session import archive

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = [ROOT / "sessions" / "seed-ladder-demo.json", ROOT / "sessions" / "multilingual.json",
            ROOT / "sessions" / "h200-llamacpp" / "session.json"]
LAYOUTS = ["1920x1080", "1080x1920", "1080x1080"]
FEED_WIDTH = 640
STOPWATCH = 0.01  # finish-time ratio against the headline, relative


@pytest.fixture(scope="module", params=SESSIONS, ids=lambda p: p.parent.name if p.stem == "session" else p.stem)
def session_path(request: pytest.FixtureRequest) -> Path:
    return request.param


def headline_claim(plan: RenderPlan) -> float:
    """The value of the end card's big line: the last arm on screen over the first, this answer."""
    last, first = plan.arms[-1].id, plan.arms[0].id
    (value,) = {c.value for c in plan.claims if (c.arm, c.vs, c.scope) == (last, first, "prompt")}
    assert value is not None
    return value


@pytest.mark.parametrize("metric", ["decode", "e2e"])
@pytest.mark.parametrize("size", LAYOUTS)
def test_the_race_s_finish_times_give_the_headline(session_path: Path, size: str, metric: str) -> None:
    """The first arm's finish over the last's, read off the plan's per-column finish frames (what
    a viewer with a stopwatch times), is the headline within 1 %; the clocks start where the
    metric says (decode: each arm's first token; e2e: request send)."""
    plan = build_plan(archive.load(session_path), RenderOptions(size=size, metric=metric, fps=30))
    assert plan.align == ("first-token" if metric == "decode" else "send")
    first, last = plan.arms[0], plan.arms[-1]
    assert first.t_ns[first.first_index] == (0 if metric == "decode" else first.ttft_ns)
    stopwatch = first.finish_ns / last.finish_ns
    hero = headline_claim(plan)
    assert abs(stopwatch / hero - 1) <= STOPWATCH, (plan.prompt_id, stopwatch, hero)
    # the frames agree: each column is first drawn done at its finish time on the clock
    done_frames = [first_frame_showing(t.finish_ns, plan.clock.fps, plan.clock.speed) for t in (first, last)]
    timed = done_frames[0] / done_frames[1]
    assert abs(timed / hero - 1) <= STOPWATCH + 2 / done_frames[1], (timed, hero)


@pytest.mark.parametrize("metric", ["decode", "e2e"])
def test_one_value_per_pair_in_each_scope(session_path: Path, metric: str) -> None:
    """Every claim the video draws, keyed by (arm, vs, metric, scope): one value each; the pairs
    are the headline pair and the ladder's steps, and each is the report's figure."""
    session = archive.load(session_path)
    speedups = build_report(session)["speedups"]
    for size in LAYOUTS:
        plan = build_plan(session, RenderOptions(size=size, metric=metric, fps=10))
        values: dict[tuple[str, str, str, str], set[float | None]] = {}
        for claim in plan.claims:
            values.setdefault((claim.arm, claim.vs, claim.metric, claim.scope), set()).add(claim.value)
            found = [s["value"] for s in speedups if (s["metric"], s["scope"], s["prompt"], s["arm"], s["vs"])
                     == (claim.metric, claim.scope, claim.prompt, claim.arm, claim.vs)]
            assert found == [claim.value], claim
        assert all(len(v) == 1 for v in values.values()), values
        ids = [t.id for t in plan.arms]
        steps = {(ids[n], ids[n - 1]) for n in range(1, len(ids))}
        pairs = {(arm, vs) for arm, vs, _, scope in values if scope == "prompt"}
        assert pairs == steps | {(ids[-1], ids[0])}


def tesseract() -> str:
    found = shutil.which("tesseract")
    if found is None:
        pytest.skip("tesseract is not installed: the end card's OCR check did not run (install Debian's tesseract-ocr)")
    return found


def ocr(image: Image.Image, height: int, psm: str, tmp_path: Path) -> str:
    """OCR of part of a 640 px frame, scaled to `height` px (the engine reads letters about
    30-40 px tall best), binarised dark on light, with a white margin."""
    scaled = image.resize((max(1, round(image.width * height / image.height)), height), Image.Resampling.LANCZOS)
    page = Image.new("L", (scaled.width + 40, height + 40), 255)
    page.paste(scaled.convert("L").point(lambda v: 0 if v > 90 else 255), (20, 20))
    page.save(tmp_path / "ocr.png")
    result = subprocess.run([tesseract(), str(tmp_path / "ocr.png"), "-", "--psm", psm], capture_output=True, text=True, timeout=120)
    return result.stdout


def ocr_end_card(plan: RenderPlan, tmp_path: Path) -> str:
    """The end card scaled to 640 px wide and read back: the headline's first line (the hero
    multiplier alone on a tall frame) at 40 px, then everything under it at four times."""
    tesseract()
    renderer = FrameRenderer(plan)
    frame = renderer.render(plan.frame_count - 1)
    box = renderer.end_card.headline_box()
    first_h = renderer.painters["hero" if renderer.end_card.hero else "headline"].line_h
    scale = FEED_WIDTH / plan.width
    feed = Image.fromarray(frame).resize((FEED_WIDTH, round(plan.height * scale)), Image.Resampling.LANCZOS)
    hero = feed.crop((int(box.x * scale), int(box.y * scale), int(box.right * scale) + 1, int((box.y + first_h) * scale) + 1))
    rest = feed.crop((0, int((box.y + first_h) * scale) + 1, FEED_WIDTH, feed.height))
    text = ocr(hero, 40, "7", tmp_path) + "\n" + ocr(rest, rest.height * 4, "6", tmp_path)
    return re.sub(r"(\d)\s*\.\s*(\d)", r"\1.\2", text)  # "5 .06x" at times


MULTIPLIER = re.compile(r"(\d+\.\d\d)\s?x")


# tesseract reads the H200 card's suite line "2.36x" as "2.56x" on the tall layouts (the
# pixels hold the claim: test_one_value_per_pair checks the texts); strict, so a fix shows.
MISREAD = {("session", "1080x1920"), ("session", "1080x1080")}


@pytest.mark.parametrize("size", LAYOUTS)
def test_the_end_card_shows_only_claims_of_its_metric(
    session_path: Path, size: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Every multiplier read back is a claim of the video's metric (its value, or a bound of the
    suite's interval as the claim words it), and the headline is among them."""
    if (session_path.stem, size) in MISREAD:
        request.applymarker(pytest.mark.xfail(strict=True, reason="OCR misreads 2.36x as 2.56x at 640 px (tall H200 card)"))
    plan = build_plan(archive.load(session_path), RenderOptions(size=size))
    read = {f"{r}x" for r in MULTIPLIER.findall(ocr_end_card(plan, tmp_path))}
    claims = [c for c in plan.claims if c.metric == plan.metric]
    allowed = {multiplier(c.value) for c in claims} | {f"{r}x" for c in claims for r in MULTIPLIER.findall(c.text)}
    assert read <= allowed, (read, allowed)
    assert multiplier(headline_claim(plan)) in read, read


def test_render_names_the_prompt_it_picked(tmp_path: Path) -> None:
    """Without --prompt, render plays the prompt nearest the suite's speed-up and says so in one line."""
    demo = SESSIONS[0]
    result = subprocess.run([sys.executable, "-m", "tokenreel", "render", str(demo), "--at", "0", "--size", "640x360",
                             "-o", str(tmp_path / "poster.png")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    session = archive.load(demo)
    chosen, one, suite = typical_prompt(session, build_cells(session), "decode", "nvfp4-dflash2", "bf16") or ("", None, None)
    lines = [line for line in result.stdout.splitlines() if line.startswith("prompt: ")]
    assert lines == [default_prompt(session, RenderOptions())[1]] and lines[0].startswith(f"prompt: {chosen} ")
    assert one is not None and suite is not None and suite.value is not None
    others = [p.id for p in session.prompts if p.id != chosen]
    for other in others:  # nearer (by ratio) than every other prompt
        plan = build_plan(session, RenderOptions(prompt=other, size="640x360", fps=10))
        assert abs(np.log(plan.arms[-1].vs_first / suite.value)) >= abs(np.log(one.value / suite.value))


def test_align_that_is_not_the_metric_s_clock_is_refused() -> None:
    session = archive.load(SESSIONS[0])
    for metric, align in (("decode", "send"), ("e2e", "first-token")):
        with pytest.raises(ValueError, match=r"^align: .* drop --align"):
            build_plan(session, RenderOptions(metric=metric, align=align, size="640x360"))


def test_the_replay_opens_on_the_video_s_prompt_and_prints_its_times() -> None:
    """The HTML replay opens on the prompt render picks, and its finish for the run the video
    plays is the string the video's e2e clock shows (one rounding: 1.7263 s is 1.73 s)."""
    session = archive.load(SESSIONS[0])
    data = replay_data(session, build_report(session))
    prompt = default_prompt(session, RenderOptions())[0]
    assert data["prompts"][data["default"]]["id"] == prompt
    plan = build_plan(session, RenderOptions(prompt=prompt, metric="e2e", size="640x360", fps=10))
    tracks = {t["arm"]: t for t in data["prompts"][data["default"]]["tracks"]}
    for track in plan.arms:
        assert tracks[track.id]["run"] == track.run_index
        assert tracks[track.id]["done"] == clock_seconds(track.finish_ns)
    assert clock_seconds(1_726_300_000) == "1.73 s" and clock_seconds(1_725_000_000) == "1.73 s"
