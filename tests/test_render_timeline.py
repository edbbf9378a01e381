"""Frame timing in integers, frame counts, run selection and option checks of the render plan."""

from __future__ import annotations

import pickle
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.session_factory import MS, session, stream, words
from tokenreel.analysis.metrics import NS_PER_S, run_metrics
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render_plan import build_plan
from tokenreel.renderer.timeline import END, REPLAY, TITLE, ArmTimeline, Clock, first_frame_showing
from tokenreel.session.model import Chunks, Run


def two_arms(ttft_a: int = 500 * MS, ttft_b: int = 100 * MS):
    return session(
        [
            ("a", "slow", [stream(words(20), ttft_a, 50 * MS)]),
            ("b", "fast", [stream(words(20), ttft_b, 10 * MS)]),
        ]
    )


@settings(max_examples=300, deadline=None)
@given(
    t_ns=st.integers(0, 10**12),
    fps=st.integers(1, 240),
    speed=st.fractions(min_value=Fraction(1, 100), max_value=Fraction(100)).filter(lambda f: f > 0),
)
def test_first_frame_showing_is_the_exact_integer_threshold(t_ns: int, fps: int, speed: Fraction) -> None:
    k = first_frame_showing(t_ns, fps, speed)
    shows = lambda frame: t_ns * fps * speed.denominator <= frame * NS_PER_S * speed.numerator  # noqa: E731
    assert shows(k)
    assert k == 0 or not shows(k - 1)
    clock = Clock(fps, speed, title_frames=3, replay_frames=k + 1, hold_frames=0)
    assert clock.cutoff_ns(3 + k) >= t_ns
    assert k == 0 or clock.cutoff_ns(3 + k - 1) < t_ns


def test_title_frames_shift_the_replay_and_hide_even_t0() -> None:
    clock = Clock(30, Fraction(1), title_frames=15, replay_frames=10, hold_frames=5)
    timeline = ArmTimeline((0, 40 * MS), (0, 1), first_index=1)
    assert timeline.visible(clock.cutoff_ns(14)) == 0
    assert timeline.visible(clock.cutoff_ns(15)) == 1
    assert timeline.visible(clock.cutoff_ns(15 + 1)) == 1  # 33.3 ms < 40 ms
    assert timeline.visible(clock.cutoff_ns(15 + 2)) == 2
    assert [clock.phase(i) for i in (0, 14, 15, 24, 25, 29)] == [TITLE, TITLE, REPLAY, REPLAY, END, END]
    with pytest.raises(IndexError):
        clock.phase(30)


def test_visibility_follows_the_archived_timestamps_and_ttft_differences() -> None:
    # an end-to-end race: its clocks start at request send, so TTFT differences show
    plan = build_plan(two_arms(), RenderOptions(size="640x360", title_s="0", hold_s="0", metric="e2e"))
    a, b = (ArmTimeline(t.t_ns, t.tokens, t.first_index) for t in plan.arms)
    first_a = first_frame_showing(plan.arms[0].t_ns[plan.arms[0].first_index], 30, Fraction(1))
    assert first_a == 15  # 500 ms at 30 fps
    before, at = plan.clock.cutoff_ns(first_a - 1), plan.clock.cutoff_ns(first_a)
    assert a.visible(before) == plan.arms[0].first_index  # only the role chunk
    assert a.visible(at) == plan.arms[0].first_index + 1
    assert b.visible(before) > plan.arms[1].first_index + 5  # the fast arm is long under way
    for track in plan.arms:
        timeline = ArmTimeline(track.t_ns, track.tokens, track.first_index)
        for i, t in enumerate(track.t_ns):
            frame = first_frame_showing(t, 30, Fraction(1))
            assert timeline.visible(plan.clock.cutoff_ns(frame)) > i
            if frame:
                assert timeline.visible(plan.clock.cutoff_ns(frame - 1)) <= i


def test_frame_count_is_title_plus_replay_plus_hold() -> None:
    options = RenderOptions(size="640x360", fps=24, speed="2", title_s="0.5", hold_s="1.25")
    plan = build_plan(two_arms(), options)
    last = max(t.t_ns[-1] for t in plan.arms)
    pause = 18  # 3/4 s on every column's final state before the end card
    replay = first_frame_showing(last, 24, Fraction(2)) + 1 + pause
    assert plan.clock.title_frames == 12 and plan.clock.hold_frames == 30
    assert plan.frame_count == 12 + replay + 30
    assert -(-last * 24 // (2 * NS_PER_S)) + 1 + pause == replay


def test_live_decode_uses_the_metrics_definition_on_the_visible_prefix() -> None:
    chunks = stream(words(30), 200 * MS, 13 * MS, tokens=3)
    timeline = ArmTimeline(tuple(chunks.t_ns), tuple(chunks.tokens), first_index=1)
    assert timeline.live_decode(1) is None and timeline.live_decode(2) is None
    for v in range(3, len(chunks)):
        prefix = Chunks(chunks.t_ns[:v], chunks.tokens[:v], chunks.content[:v], chunks.reasoning[:v], chunks.tool[:v])
        expected = run_metrics(Run(arm="a", prompt="p", index=0, warmup=False, chunks=prefix)).decode_tok_s
        assert timeline.live_decode(v) == pytest.approx(expected)
        assert timeline.tokens(v) == sum(chunks.tokens[:v])


def test_median_run_and_explicit_run_are_selected() -> None:
    runs = [stream(words(10), 100 * MS, step * MS) for step in (10, 30, 20)]
    s = session([("a", "A", runs), ("b", "B", [stream(words(10), 100 * MS, 5 * MS)] * 3)])
    assert build_plan(s, RenderOptions(size="640x360")).arms[0].run_index == 2  # 20 ms steps: the middle speed
    assert build_plan(s, RenderOptions(size="640x360", run="1")).arms[0].run_index == 1
    with pytest.raises(ValueError, match=r"^run: .*no measured run 7"):
        build_plan(s, RenderOptions(size="640x360", run="7"))


@pytest.mark.parametrize(
    ("options", "pattern"),
    [
        (RenderOptions(prompt="nope"), r"^prompt: no prompt 'nope'"),
        (RenderOptions(arms=("a", "zz")), r"^arms: no arm 'zz'"),
        (RenderOptions(arms=("a", "a")), r"^arms: .*twice"),
        (RenderOptions(run="best"), r"^run: expected 'median'"),
        (RenderOptions(size="640by360"), r"^size: "),
        (RenderOptions(size="641x360"), r"^size: .*even"),
        (RenderOptions(size="64x36"), r"^size: .*too small"),
        (RenderOptions(speed="0"), r"^speed: "),
        (RenderOptions(speed="fast"), r"^speed: expected a number"),
        (RenderOptions(fps=0), r"^fps: "),
        (RenderOptions(theme="neon"), r"^theme: unknown theme 'neon'"),
        (RenderOptions(hold_s="-1"), r"^hold_s: "),
        (RenderOptions(at="999"), r"^at: .*past the end"),
    ],
)
def test_bad_options_fail_with_a_one_line_message_naming_the_option(options: RenderOptions, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern) as caught:
        build_plan(two_arms(), options)
    assert "\n" not in str(caught.value)


def test_plan_pickles_and_warns_when_token_counts_differ() -> None:
    s = session([("bf16", "A", [stream(words(12), 100 * MS, 5 * MS)]), ("nvfp4", "B", [stream(words(10), 100 * MS, 5 * MS)])])
    plan = build_plan(s, RenderOptions(size="640x360", at="0.5"))
    assert "runs differ in token count: bf16 12, nvfp4 10" in plan.warnings
    assert plan.poster_index == 15
    assert pickle.loads(pickle.dumps(plan)) == plan
    assert build_plan(two_arms(), RenderOptions(size="640x360")).warnings == ()
