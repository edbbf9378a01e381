"""Every speed-up a video draws is a claim defined once (tokenreel.analysis.claims): for the archived
sessions, in every layout and both metrics, each claim is the report's figure for the same
metric, scope and arms, appears no earlier than its evidence (and exactly then, in the frames),
and the video has one metric; the render manifest lists them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests import session_factory as sf
from tokenreel.analysis.claims import claim_text
from tokenreel.renderer.canvas import TextBox
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render import render
from tokenreel.renderer.render_plan import RenderPlan, build_plan
from tokenreel.report import build_report
from tokenreel.session import archive

SESSIONS = sorted((Path(__file__).resolve().parents[1] / "sessions").glob("*.json"))
# the ladders a video is rendered from (a sweep, sessions/sweep-demo.json, is never rendered)
ARCHIVED = [p for p in SESSIONS if not p.name.endswith(".render.json") and orjson.loads(p.read_bytes()).get("kind", "ladder") == "ladder"]
LAYOUTS = ["1920x1080", "1080x1920", "1080x1080"]


@pytest.fixture(scope="module", params=ARCHIVED, ids=lambda p: p.stem)
def archived(request: pytest.FixtureRequest) -> tuple[Path, dict]:
    """An archived session and its `tokenreel report --format json`, from the command itself."""
    path = request.param
    result = subprocess.run(
        [sys.executable, "-m", "tokenreel", "report", str(path), "--format", "json"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return path, json.loads(result.stdout)


def report_figure(report: dict, claim: dict) -> float | None:
    """The report's speed-up for the claim's metric, scope, prompt and arms."""
    key = ("metric", "scope", "prompt", "arm", "vs")
    found = [s for s in report["speedups"] if all(s[k] == claim[k] for k in key)]
    assert len(found) == 1, (claim, found)
    return found[0]["value"]


def as_dicts(plan: RenderPlan) -> list[dict]:
    return [dict(vars(claim)) for claim in plan.claims]


@pytest.mark.parametrize("metric", ["decode", "e2e"])
@pytest.mark.parametrize("size", LAYOUTS)
def test_claims_are_the_report_s_figures_never_before_their_evidence(archived: tuple[Path, dict], size: str, metric: str) -> None:
    path, report = archived
    session = archive.load(path)
    for prompt in [p.id for p in session.prompts]:
        plan = build_plan(session, RenderOptions(prompt=prompt, size=size, metric=metric, fps=10))
        claims = as_dicts(plan)
        assert {c["metric"] for c in claims} == {metric}  # one metric per video
        assert {c["scope"] for c in claims} == {"prompt", "suite"}
        assert len([c for c in claims if c["where"] == "verdict"]) == len(plan.arms) - 1
        for claim in claims:
            assert claim["value"] == report_figure(report, claim), claim  # full precision, the same float
            assert claim["first_frame"] >= claim["evidence_frame"], claim
            if claim["where"] == "verdict" or claim["text"].endswith(("decode", "end to end", "prompts")):
                words = claim["text"].removesuffix(f" over {plan.suite.prompts} prompts") if claim["scope"] == "suite" else claim["text"]
                assert words == claim_text(claim["value"], metric)


def drawn(renderer: FrameRenderer, boxes: list[TextBox], index: int) -> list[str]:
    boxes.clear()
    renderer.frame(index)
    return [box.drawn for box in boxes]


@pytest.mark.parametrize("size", LAYOUTS)
def test_each_claim_is_drawn_from_its_first_frame_and_not_before(archived: tuple[Path, dict], size: str) -> None:
    """Frames are drawn into a renderer that logs every text run: a verdict's multiplier is on
    screen from its first frame on, and nowhere in the race before it."""
    path, _ = archived
    session = archive.load(path)
    plan = build_plan(session, RenderOptions(size=size, fps=10))
    boxes: list[TextBox] = []
    renderer = FrameRenderer(plan, boxes)
    end = plan.clock.title_frames + plan.clock.replay_frames
    end_card = drawn(renderer, boxes, end)  # drawn once, then held
    assert not any(value in text for value in ("faster", "slower") for text in drawn(renderer, boxes, 0))
    for claim in plan.claims:
        value = claim.text.split()[0]  # "3.11x": the multiplier, whichever wording fitted
        if claim.where == "verdict":
            assert not any(value in text for index in range(claim.first_frame) for text in drawn(renderer, boxes, index)), claim
            assert any(value in text for text in drawn(renderer, boxes, claim.first_frame)), claim
        else:
            assert claim.first_frame == end
            assert claim.text in " ".join(end_card), claim  # a tall card gives the number a line of its own


def test_the_manifest_lists_the_claims_drawn(archived: tuple[Path, dict], tmp_path: Path) -> None:
    path, report = archived
    options = RenderOptions(size="1080x1080", at="0")
    result = render(path, tmp_path / "poster.png", options)
    listed = orjson.loads(result.manifest.read_bytes())["claims"]
    assert listed == as_dicts(build_plan(archive.load(path), options)) and listed
    for claim in listed:
        assert claim["value"] == report_figure(report, claim)


def test_archived_render_manifests_agree_with_the_report(archived: tuple[Path, dict]) -> None:
    """The manifests kept in sessions/ were rendered with their claims; each is the report's."""
    path, report = archived
    manifests = [m for m in path.parent.glob("*.render.json") if orjson.loads(m.read_bytes())["session"] == path.name]
    assert manifests, f"no archived render of {path.name}"
    for manifest in manifests:
        claims = orjson.loads(manifest.read_bytes())["claims"]
        assert claims, manifest
        for claim in claims:
            assert claim["value"] == report_figure(report, claim), (manifest.name, claim)
            assert claim["first_frame"] >= claim["evidence_frame"]


SUITE_ARMS = [("a", "Arm A", 20), ("b", "Arm B", 10), ("c", "Arm C", 5)]


@pytest.mark.parametrize("size", LAYOUTS)
def test_the_end_card_gives_the_suite_figure_s_interval_where_it_has_one(size: str) -> None:
    """Six prompts, two per category: under the suite's figure, its 95 % interval in the report's
    words, listed with the claims as the suite's; the demo (4 prompts) has none and draws nothing
    in its place (its archived renders stay pixel for pixel, `tokenreel verify`)."""
    session = sf.suite(SUITE_ARMS)
    headline = build_report(session)["headline"]
    plan = build_plan(session, RenderOptions(size=size, fps=10))
    boxes: list[TextBox] = []
    renderer = FrameRenderer(plan, boxes)
    end_card = drawn(renderer, boxes, plan.frame_count - 1)
    assert headline["interval_text"] == "95 % interval 3.80–4.21x" and headline["interval_text"] in end_card
    (claim,) = [c for c in plan.claims if c.text == headline["interval_text"]]
    assert (claim.scope, claim.arm, claim.vs, claim.value, claim.where) == ("suite", "c", "a", headline["value"], "end card")
    assert all(box.rect.bottom <= plan.layout.footer.y for box in boxes if box.rect.y != plan.layout.footer.y)

    demo = build_plan(archive.load(SESSIONS[0].parent / "seed-ladder-demo.json"), RenderOptions(size=size, fps=10))
    demo_boxes: list[TextBox] = []
    assert not any("interval" in text for text in drawn(FrameRenderer(demo, demo_boxes), demo_boxes, demo.frame_count - 1))
    assert not any("interval" in c.text for c in demo.claims)
