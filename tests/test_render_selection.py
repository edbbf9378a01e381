"""The run selection in the video (issues 21 and 24): an arm with no usable run is refused in one
line naming it and why, unless `--arms` leaves it out on purpose; only the session's first arm is
ever called the baseline."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tests import session_factory as factory
from tokenreel.cli import app
from tokenreel.cli.demo import race_arms
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render_plan import build_plan
from tokenreel.session import archive
from tokenreel.session.model import HostPressure, Session

MS = factory.MS


def three_arms() -> Session:
    """bf16, nvfp4 and a drafter; every drafter run failed (its endpoint dropped the stream)."""
    run = lambda step: [factory.stream(factory.words(40), 80 * MS, step * MS) for _ in range(2)]  # noqa: E731
    session = factory.session([("bf16", "bf16", run(20)), ("nvfp4", "NVFP4", run(14)), ("spec", "NVFP4 + drafter", run(4))])
    for r in session.runs:
        if r.arm == "spec":
            r.status, r.error = "failed", "the server closed the stream after 12 tokens"
    return session


def invoke(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_an_arm_without_a_usable_run_is_refused_unless_arms_leaves_it_out(tmp_path: Path) -> None:
    """Before: exit 0, a warning, and a two-arm video: the same command told another story."""
    path = tmp_path / "s.json"
    archive.save(three_arms(), path)
    result = invoke("render", path, "--out", tmp_path / "v.mp4")
    assert result.exit_code == 2 and not (tmp_path / "v.mp4").exists()
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(
        "tokenreel: arms: arm 'spec' has no usable measured run of prompt 'p1' (all 2 runs failed: the server closed"
    )
    assert lines[0].endswith("a video leaves an arm out only when asked: render the others with --arms bf16,nvfp4, or record the arm again")
    plan = build_plan(archive.load(path), RenderOptions(arms=("bf16", "nvfp4"), title_s="0", hold_s="0"))
    assert [t.id for t in plan.arms] == ["bf16", "nvfp4"] and plan.reference_is_baseline and not plan.warnings


def baseline_word(plan) -> str:
    """What the first arm's verdict line calls it once the race is over."""
    boxes: list = []
    FrameRenderer(plan, boxes).render(plan.frame_count - 1)
    return next(box.text for box in boxes if box.text in ("baseline", "reference"))


def test_only_the_sessions_first_arm_is_called_the_baseline() -> None:
    session = three_arms()
    for r in session.runs:
        r.status, r.error = "ok", None
    first = build_plan(session, RenderOptions(arms=("bf16", "spec"), title_s="0", hold_s="0"))
    assert first.reference_is_baseline and baseline_word(first) == "baseline"
    other = build_plan(session, RenderOptions(arms=("nvfp4", "spec"), title_s="0", hold_s="0"))
    assert not other.reference_is_baseline and baseline_word(other) == "reference"


def test_fewer_than_two_arms_left_is_refused_naming_who_is_out(tmp_path: Path) -> None:
    """Before: a one-arm video titled "1.00x sooner spec vs spec"."""
    session = three_arms()
    for r in session.runs:
        if r.arm == "nvfp4":
            r.status, r.error = "skipped", "the endpoint stayed busy for 30 s (2 running)"
    path = tmp_path / "s.json"
    archive.save(session, path)
    result = invoke("render", path, "--out", tmp_path / "v.mp4")
    assert result.exit_code == 2 and not (tmp_path / "v.mp4").exists()
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tokenreel: arms: only 1 arm has a usable run of prompt 'p1', and a video races at least 2:")
    assert "arm 'nvfp4' has no usable measured run of prompt 'p1' (all 2 runs skipped: the endpoint stayed busy" in lines[0]
    assert "arm 'spec' has no usable measured run of prompt 'p1' (all 2 runs failed: the server closed" in lines[0]


def test_exclude_host_contended_reaches_the_video(tmp_path: Path) -> None:
    """Flagged runs race by default; --exclude-host-contended leaves them out of the video too."""
    session = three_arms()
    for r in session.runs:
        if r.arm == "nvfp4":
            r.host = HostPressure("/proc/pressure/cpu", 64.0, 70.0, 5.0, True)
    path = tmp_path / "s.json"
    archive.save(session, path)
    kept = build_plan(archive.load(path), RenderOptions(arms=("bf16", "nvfp4"), title_s="0", hold_s="0"))
    assert [t.id for t in kept.arms] == ["bf16", "nvfp4"]
    result = invoke("render", path, "--out", tmp_path / "v.png", "--at", "1", "--arms", "bf16,nvfp4", "--exclude-host-contended")
    assert result.exit_code == 2
    assert "arm 'nvfp4' has no usable measured run of prompt 'p1' (all 2 runs host contended: CPU pressure 70 %" in result.stderr


def test_the_demo_asks_for_the_arms_it_races_and_says_so() -> None:
    """render refuses to drop an arm unasked; the demo, whose recording a busy machine can cost a
    run, names the arms with a usable run and says which it left out."""
    arms, note = race_arms(three_arms(), "p1")
    assert arms == ("bf16", "nvfp4") and note == (
        "note: the video races bf16, nvfp4 only: spec has no usable run of p1 (the report says why)"
    )
    complete = three_arms()
    for r in complete.runs:
        r.status, r.error = "ok", None
    assert race_arms(complete, "p1") == ((), None)
