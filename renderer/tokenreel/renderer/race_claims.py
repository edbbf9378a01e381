"""Every speed-up a video draws, as a claim: its text, its figure at full precision (the
report's), where it is drawn and the first frame showing it, never before its evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenreel.analysis.claims import Speedup, claim_text, interval_text, scope_text
from tokenreel.analysis.figures import multiplier
from tokenreel.renderer.options import Metric
from tokenreel.renderer.timeline import Clock, first_frame_showing
from tokenreel.renderer.tracks import ArmTrack


@dataclass(frozen=True)
class Claim:
    """A speed-up drawn on screen: what it says, its figure (the report's, at full precision), the
    first frame showing it and the first frame at which both arms it compares were done."""

    text: str
    metric: Metric
    scope: str
    prompt: str | None
    arm: str
    vs: str
    value: float | None
    first_frame: int
    evidence_frame: int
    where: str  # "verdict" (a column's line under its figures) or "end card"


def evidence_frame(clock: Clock, *tracks: ArmTrack) -> int:
    """The first frame at which every one of the tracks is done: a speed-up's evidence."""
    return clock.title_frames + max(first_frame_showing(t.finish_ns, clock.fps, clock.speed) for t in tracks)


def step_text(n: int, value: float | None) -> str:
    """A ladder step as the end card's rows label it, "1→2 2.10x": the arm at place n+1 on
    screen over the one before it (the rows' numbered badges)."""
    return f"{n}→{n + 1} {multiplier(value)}"


def drawn_claims(
    clock: Clock, tracks: list[ArmTrack], metric: Metric, scope: str, suite: Speedup | None, prompt: str, task: bool = False,
) -> list[Claim]:
    """Every speed-up the frames draw, with the text column.py and end_card.py draw it with: each column's
    verdict (from the frame both it and the arm it is compared with are done: the first arm for
    the last, the headline pair; the arm before for the others, their ladder step), then the end
    card's headline (the last arm against the first), each row's ladder step, and the suite's
    figure with its 95 % interval (a claim of its own, of the suite's figure) where it has one.
    One value per pair: a pair that is both a step and the headline pair (two arms) is one figure.
    `task`: a natural-length session, whose end card headline says the task's time (`claim_text`)."""
    first, last, end = tracks[0], tracks[-1], clock.title_frames + clock.replay_frames

    def claim(text: str, track: ArmTrack, vs: ArmTrack, value: float | None, frame: int | None, where: str) -> Claim:
        evidence = evidence_frame(clock, vs, track)
        return Claim(text, metric, scope, prompt, track.id, vs.id, value, evidence if frame is None else frame, evidence, where)

    claims = [claim(claim_text(t.verdict_value, metric), t, tracks[t.versus], t.verdict_value, None, "verdict") for t in tracks[1:]]
    if not clock.hold_frames:
        return claims
    claims.append(claim(claim_text(last.vs_first, metric, task), last, first, last.vs_first, end, "end card"))
    for n, track in enumerate(tracks[1:], start=1):
        claims.append(claim(step_text(n, track.vs_prior), track, tracks[n - 1], track.vs_prior, end, "end card"))
    if suite is not None:
        evidence = evidence_frame(clock, first, last)
        text = f"{claim_text(suite.value, metric)} {scope_text(suite)}"
        claims.append(Claim(text, metric, "suite", None, suite.arm, suite.vs, suite.value, end, evidence, "end card"))
        interval = interval_text(suite.value, suite.ci95)  # none, and nothing drawn, with fewer than 6 prompts
        if interval:
            claims.append(Claim(interval, metric, "suite", None, suite.arm, suite.vs, suite.value, end, evidence, "end card"))
    return claims
