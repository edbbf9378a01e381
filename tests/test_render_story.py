"""One speed story per video: every multiplier on screen is in the video's one metric and is the
race's own (end to end: the finish times; decode: the columns' tok/s), the end card lists only the arms on screen,
and the race elements (progress, finish, live speed-up, running acceptance) never show a figure
before the frames earn it."""

from __future__ import annotations

import re
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from tests.session_factory import MS, session, stream, words
from tokenreel.analysis.engine_figures import stated_version
from tokenreel.analysis.figures import clock_seconds, multiplier
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render_plan import RenderPlan, build_plan
from tokenreel.renderer.timeline import first_frame_showing
from tokenreel.renderer.tracks import ArmTrack
from tokenreel.session import archive
from tokenreel.session.model import Session

DEMO = Path(__file__).resolve().parents[1] / "sessions" / "seed-ladder-demo.json"
SMALL = "640x360"
MULTIPLIER = re.compile(r"(\d+\.\d\d)x (sooner|later|faster|slower)")


def finish_frame(plan: RenderPlan, track: ArmTrack) -> int:
    """Replay frame (from the race clock's 0) at which the arm is done."""
    return first_frame_showing(track.finish_ns, plan.fps, plan.clock.speed)


def shown(spans: tuple) -> str:
    return "".join(text for text, _, _ in spans)


def shown_multiplier(text: str) -> float:
    """A speed-up as the screen says it, as the finish-time ratio first arm / this arm."""
    match = MULTIPLIER.search(text)
    assert match, text
    value = float(match.group(1))
    return value if match.group(2) in ("sooner", "faster") else 1 / value


def last_replay(plan: RenderPlan) -> int:
    return plan.clock.title_frames + plan.clock.replay_frames - 1


def final_figures(renderer: FrameRenderer, index: int) -> list[tuple]:
    renderer.frame(index)
    return [renderer._keys[("figures", n)] for n in range(len(renderer.columns))]


def check_within_one_frame(plan: RenderPlan, multiplier: float, arm: int, reference: int = 0) -> None:
    """The multiplier shown (two decimals) is the ratio of the finish frames the viewer sees,
    each known to within one frame: it lies among those ratios, give or take its rounding."""
    ref, track = finish_frame(plan, plan.arms[reference]), finish_frame(plan, plan.arms[arm])
    ratios = [(ref + a) / (track + b) for a in (-1, 1) for b in (-1, 1)]
    assert min(ratios) - 0.005 <= multiplier <= max(ratios) + 0.005, (plan.align, arm, multiplier, ref, track)


@pytest.fixture(scope="module")
def demo() -> Session:
    return archive.load(DEMO)


def check_decode(plan: RenderPlan, multiplier_shown: float, arm: int, reference: int = 0) -> None:
    """A decode speed-up shown is the ratio of the two runs' decode tok/s (each arm's big final
    figure), to its two decimals."""
    ratio = plan.arms[arm].decode_tok_s / plan.arms[reference].decode_tok_s
    assert multiplier_shown == pytest.approx(ratio, abs=0.005), (arm, reference, multiplier_shown, ratio)


@pytest.mark.parametrize("metric", ["e2e", "decode"])
@pytest.mark.parametrize("arms", [(), ("bf16", "nvfp4-dflash2"), ("nvfp4", "bf16")])
def test_every_multiplier_shown_is_the_race_s_own(demo: Session, metric: str, arms: tuple) -> None:
    """Either metric: the ratio of the finish frames the viewer sees (the clocks start where the
    metric says); decode: also the ratio of the decode tok/s the columns show. One metric per
    video: its word on every verdict."""
    plan = build_plan(demo, RenderOptions(prompt="code-1", size=SMALL, arms=arms, metric=metric))

    def check(plan: RenderPlan, multiplier_shown: float, arm: int, reference: int = 0) -> None:
        check_within_one_frame(plan, multiplier_shown, arm, reference)
        if metric == "decode":
            check_decode(plan, multiplier_shown, arm, reference)

    word = "end to end" if metric == "e2e" else "decode"
    renderer = FrameRenderer(plan)
    columns = final_figures(renderer, last_replay(plan))
    for n, (_, _, verdict, _) in enumerate(columns):
        if n == 0:  # only the session's first arm is its baseline
            assert shown(verdict).startswith("baseline" if plan.arms[0].id == demo.arms[0].id else "reference")
            continue
        text = shown(verdict)
        assert text.split(" vs ")[0].endswith(word) or text.endswith(("faster", "slower")), text
        check(plan, shown_multiplier(text), n, reference=plan.arms[n].versus)  # the last vs the first, others their step
    big, what = renderer.end_card.headline()
    assert "on the code prompt" in renderer.end_card.answer_line() and big.endswith(word)
    check(plan, shown_multiplier(big), len(plan.arms) - 1)
    rows = renderer.end_card.rows()
    assert len(rows) == len(plan.arms)  # only the arms on screen
    done = renderer.end_card.headings().index("done in")
    for n, row in enumerate(rows):
        if n:  # the ladder step: the arm before it on screen, labelled by their places
            assert row[-1].startswith(f"{n}→{n + 1} ")
            check(plan, float(row[-1].split()[-1].rstrip("x")), n, reference=n - 1)
        else:
            assert row[-1] == ""
        assert row[done] == clock_seconds(plan.arms[n].finish_ns)


def test_metric_sets_every_speed_up_and_the_clocks(demo: Session) -> None:
    decode = build_plan(demo, RenderOptions(prompt="code-1", size=SMALL))
    e2e = build_plan(demo, RenderOptions(prompt="code-1", size=SMALL, metric="e2e"))
    assert decode.align == "first-token" and decode.metric == "decode" and decode.options.hold_s == "4"
    assert e2e.align == "send"
    last = e2e.arms[-1]
    assert last.vs_first == pytest.approx(e2e.arms[0].finish_ns / last.finish_ns)
    assert decode.arms[-1].vs_first == pytest.approx(decode.arms[-1].decode_tok_s / decode.arms[0].decode_tok_s)
    assert decode.arms[-1].vs_first == pytest.approx(decode.arms[0].finish_ns / decode.arms[-1].finish_ns)  # same tokens
    assert FrameRenderer(e2e).end_card.headline()[0] == f"{multiplier(last.vs_first)} faster end to end"
    assert FrameRenderer(decode).end_card.headline()[0] == f"{multiplier(decode.arms[-1].vs_first)} faster decode"
    assert last.vs_first < decode.arms[-1].vs_first  # TTFT counts end to end, so the race gains less
    for plan in (decode, e2e):  # TTFT is always from request send; replay times start at the first token or 0
        for track in plan.arms:
            assert track.ttft_ns > 0
            assert track.t_ns[track.first_index] == (track.ttft_ns if plan.align == "send" else 0)
    with pytest.raises(ValueError, match="align: expected send or first-token"):
        build_plan(demo, RenderOptions(prompt="code-1", size=SMALL, align="last-token"))
    with pytest.raises(ValueError, match="metric: expected decode or e2e"):
        build_plan(demo, RenderOptions(prompt="code-1", size=SMALL, metric="tpot"))
    with pytest.raises(ValueError, match="align: a e2e race is timed from send"):
        build_plan(demo, RenderOptions(prompt="code-1", size=SMALL, metric="e2e", align="first-token"))


def test_end_card_lists_only_the_arms_on_screen_numbered_as_on_screen(demo: Session) -> None:
    plan = build_plan(demo, RenderOptions(prompt="code-1", size=SMALL, arms=("bf16", "nvfp4-dflash2")))
    renderer = FrameRenderer(plan)
    assert [t.id for t in plan.arms] == ["bf16", "nvfp4-dflash2"] and [t.color for t in plan.arms] == [0, 2]
    rows = renderer.end_card.rows()
    assert len(rows) == 2 and rows[1][-1] == f"1→2 {multiplier(plan.arms[1].vs_first)}"  # the step is over bf16, the arm before it
    assert "NVFP4 + DFlash2 vs Original · bf16" in renderer.end_card.headline()[1]
    assert [t.place for t in plan.arms] == [2, 1]


@pytest.fixture(scope="module")
def race() -> RenderPlan:
    """a: baseline, first token at 300 ms, slow; b: speculative, done early: 4 tokens a chunk, its
    verify steps (the engine's acceptance, 4.1, agrees within 5 %: tokens per chunk is the live figure)."""
    s = session(
        [
            ("a", "slow arm", [stream(words(120), 300 * MS, 20 * MS)]),
            ("b", "fast arm", [stream(words(30), 200 * MS, 25 * MS, tokens=4)]),
        ],
        acceptance={"b": 4.1},
    )
    return build_plan(s, RenderOptions(size=SMALL, title_s="0.2", hold_s="1"))


def test_race_elements_appear_only_when_earned(race: RenderPlan) -> None:
    renderer = FrameRenderer(race)
    title = race.clock.title_frames
    done_b = title + finish_frame(race, race.arms[1])
    done_a = title + finish_frame(race, race.arms[0])
    assert done_b < done_a
    for index in range(title, last_replay(race) + 1):
        (a_left, a_right, a_verdict, a_stats), (b_left, b_right, b_verdict, b_stats) = final_figures(renderer, index)
        if index < done_a:
            assert a_right == () and a_verdict == ()  # no second clock in a running column: the header has it
        if index < done_b:
            assert b_right == () and b_verdict == () and "4.10" not in shown(b_stats)  # never the final figure early
        else:
            assert shown(b_right).startswith("1st")
            assert "accept 4.10" in shown(b_stats)
        if done_b <= index < done_a:
            assert b_verdict == ()  # no claim before its evidence: the baseline is still running
        if index >= done_a:
            assert shown(b_verdict).startswith(multiplier(race.arms[1].vs_first))
            assert shown(a_right).startswith("2nd") and shown(a_verdict).startswith("baseline")
    mid = (title + done_b) // 2
    stats = shown(final_figures(renderer, mid)[1][3])
    assert "accept 4.0" in stats  # tokens per chunk so far, one decimal: not the archived 4.10


def test_progress_bars_fill_with_tokens_over_max_tokens(race: RenderPlan) -> None:
    renderer = FrameRenderer(race)
    geo = race.layout.columns[0]
    accent = np.array(race.theme.accent(race.arms[0].color), dtype=np.uint8)
    filled = []
    for index in (race.clock.title_frames, race.clock.title_frames + 20, last_replay(race)):
        bar = renderer.render(index)[geo.progress.slices]
        filled.append(int((bar[0] == accent).all(axis=1).sum()))
    assert filled[0] == 0 < filled[1] < filled[2] == geo.progress.w * 120 // 1024


def test_the_pause_shows_the_final_state_then_the_card_holds(race: RenderPlan) -> None:
    renderer = FrameRenderer(race)
    end = race.clock.title_frames + race.clock.replay_frames
    last_done = race.clock.title_frames + max(first_frame_showing(t.t_ns[-1], race.fps, race.clock.speed) for t in race.arms)
    pause = [renderer.render(i) for i in range(last_done, end)]
    assert len(pause) == 1 + race.fps * 3 // 4  # the finish frame, then 3/4 s of the same frame
    assert all(np.array_equal(frame, pause[0]) for frame in pause)
    assert race.clock.hold_frames == race.fps and not np.array_equal(renderer.render(end), pause[-1])


@pytest.mark.parametrize("metric", ["e2e", "decode"])  # clocks from send, from the first token
def test_frame_names_every_region_that_changed_with_the_race_elements(demo: Session, metric: str) -> None:
    plan = build_plan(demo, RenderOptions(prompt="code-1", size=SMALL, metric=metric, speed=str(Fraction(1, 2)), hold_s="0.2"))
    reference, renderer = FrameRenderer(plan), FrameRenderer(plan)
    previous = None
    for index in [*range(plan.frame_count), 50, 120, 7, plan.frame_count - 1, 60]:
        pixels, changed = renderer.frame(index)
        assert np.array_equal(pixels, reference.render(index)), index
        if previous is not None and changed is not None:
            outside = np.ones(pixels.shape[:2], dtype=bool)
            for rect in changed:
                outside[rect.slices] = False
            assert np.array_equal(pixels[outside], previous[outside]), index
        previous = pixels.copy()


@pytest.mark.parametrize(("size", "arms"), [("1920x1080", 4), ("3840x2160", 2), ("1080x1920", 3)])
def test_end_card_and_columns_fit_every_layout(size: str, arms: int) -> None:
    s = session([(f"a{i}", f"arm number {i}", [stream(words(40), (100 + 60 * i) * MS, (30 - 5 * i) * MS)]) for i in range(arms)])
    plan = build_plan(s, RenderOptions(size=size, hold_s="0.1"))
    renderer = FrameRenderer(plan)
    for n, (left, right, verdict, _) in enumerate(final_figures(renderer, last_replay(plan))):
        assert "…" not in shown(left) and shown(right).startswith(("1st", "2nd", "3rd", "4th"))
        assert n == 0 or MULTIPLIER.search(shown(verdict))
    frame = renderer.render(plan.frame_count - 1)
    assert frame.shape == (int(size.split("x")[1]), int(size.split("x")[0]), 3)


def test_estimated_counts_and_approximate_acceptance_are_marked(race: RenderPlan) -> None:
    """A run counted one token per event (the server sent no counts) shows ≈ before every figure
    counted from tokens; acceptance from rounded counters shows ≈ too; the footer says what ≈ is."""
    s = session(
        [
            ("a", "slow arm", [stream(words(30), 300 * MS, 40 * MS)]),
            ("b", "fast arm", [stream(words(30), 200 * MS, 25 * MS, tokens=4)]),
        ],
        acceptance={"b": 4.37},
    )
    s.runs[1].token_source = "per_event"
    s.runs[1].acceptance = replace(s.runs[1].acceptance, approximate=True)
    plan = build_plan(s, RenderOptions(size=SMALL, title_s="0.2", hold_s="1"))
    boxes: list = []
    renderer = FrameRenderer(plan, boxes)
    mid = plan.clock.title_frames + finish_frame(plan, plan.arms[1]) // 2
    (a_left, _, _, a_stats), (b_left, _, _, b_stats) = final_figures(renderer, mid)
    assert shown(b_left).startswith("≈") and shown(b_stats).startswith("≈")
    assert "≈" not in shown(a_left) + shown(a_stats)
    (_, _, _, _), (b_left, _, _, b_stats) = final_figures(renderer, last_replay(plan))
    assert shown(b_left).startswith("≈") and "accept ≈4.37" in shown(b_stats)
    assert any("≈: an estimate" in box.text for box in boxes)  # the footer, drawn with the base
    assert any("estimated" in w for w in plan.warnings)
    unmarked = FrameRenderer(race)
    assert all("≈" not in shown(line) for column in final_figures(unmarked, last_replay(race)) for line in column)


def test_the_end_card_says_what_the_arms_ran_on_or_that_it_is_missing() -> None:
    """Engine and version from the endpoint's fingerprint; hardware from the config (no endpoint
    says it); the recording dates; each one said missing when the session does not hold it."""
    s = session([("a", "slow", [stream(words(20), 100 * MS, 20 * MS)]), ("b", "fast", [stream(words(20), 100 * MS, 10 * MS)])])
    bare = build_plan(s, RenderOptions(size=SMALL)).facts
    assert (bare.hardware, bare.engine, bare.recorded) == (
        "hardware not stated (config: [session] hardware)", "engine not stated by the endpoints", "recording date not archived"
    )
    assert bare.model == "model-a / model-b"
    for arm, day in zip(s.arms, ("2026-12-01", "2026-12-02"), strict=False):
        arm.fingerprint = {"summary": {"engine": "vllm", "version": "0.11.2"}}
        arm.settings["hardware"] = "1x NVIDIA H200"
        arm.recorded = [{"started_at": f"{day}T10:00:00+00:00", "finished_at": f"{day}T10:05:00+00:00"}]
    said = build_plan(s, RenderOptions(size=SMALL)).facts
    assert (said.hardware, said.engine, said.recorded) == ("1x NVIDIA H200", "vllm 0.11.2", "recorded 2026-12-01 to 2026-12-02")
    s.arms[1].fingerprint = {"summary": {"engine": "llamacpp", "version": "b0-unknown"}}
    s.arms[1].settings["engine"] = "llama.cpp b7000, CUDA"
    assert build_plan(s, RenderOptions(size=SMALL)).facts.engine == "vllm 0.11.2 / llama.cpp b7000, CUDA"
    s.arms[1].fingerprint = {"summary": {"engine": "llamacpp", "version": stated_version("b0-unknown")}}  # as recorded now
    assert build_plan(s, RenderOptions(size=SMALL)).facts.engine == "vllm 0.11.2 / llama.cpp b7000, CUDA"
