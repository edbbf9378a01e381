"""The run selection in the video (issue 21): an arm with no usable run is left out and said on
screen; fewer than two arms left is refused in one line naming who is out and why."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tests import session_factory as factory
from tokenreel import archive
from tokenreel.cli import app
from tokenreel.model import HostPressure, Session
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.plan import RenderOptions, build_plan

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


def test_an_arm_left_out_is_said_on_screen_and_in_a_warning() -> None:
    plan = build_plan(three_arms(), RenderOptions(size="1920x1080", title_s="0", hold_s="0"))
    assert [t.id for t in plan.arms] == ["bf16", "nvfp4"] and plan.left_out == ("NVFP4 + drafter",)
    assert any(w.startswith("left out of the video: arm 'spec' has no usable measured run of prompt 'p1' (all 2 runs failed")
               for w in plan.warnings), plan.warnings
    boxes: list = []
    FrameRenderer(plan, boxes).render(plan.frame_count // 2)
    footer = "".join(box.text for box in boxes if box.role in ("small", "tiny") and "Left out" in box.text)
    assert footer.startswith("Left out (no usable run): NVFP4 + drafter."), [b.text for b in boxes]


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
    assert lines[0].startswith("tokenreel: arms: only 1 arm has a usable run of prompt 'p1', and a video races at least 2;")
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
    kept = build_plan(archive.load(path), RenderOptions(title_s="0", hold_s="0"))
    assert [t.id for t in kept.arms] == ["bf16", "nvfp4"]
    result = invoke("render", path, "--out", tmp_path / "v.png", "--at", "1", "--exclude-host-contended")
    assert result.exit_code == 2
    assert "arm 'nvfp4' has no usable measured run of prompt 'p1' (all 2 runs host contended: CPU pressure 70 %" in result.stderr
