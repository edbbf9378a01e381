"""Each arm's replayed run as the frames draw it: its chunks on the replay clock, its final
figures, its speed-ups in the video's metric, its finishing place and its answer's badge.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tokenreel.analysis.answers import compare
from tokenreel.analysis.claims import run_speedup
from tokenreel.analysis.drafting import drafted_arm
from tokenreel.analysis.metrics import events_are_steps, first_token_index, last_token_index, output_tokens, run_metrics
from tokenreel.renderer.options import Align, Metric
from tokenreel.renderer.placed_text import spread
from tokenreel.session.model import Arm, Run, Session


@dataclass(frozen=True)
class AnswerMark:
    """What an arm's badge says of its answer against the first arm's on screen, or a drafter's
    against the arm it drafts for where that one is on screen (tokenreel.analysis.answers)."""

    same: bool | None  # None: this is the reference arm
    diverges_at_token: int | None = None  # 1-based, event-granular
    estimated: bool = False  # token counts guessed one per event: the number is shown with ≈
    against: int = 0  # the place on screen of the arm it is compared with
    # `against` is the arm this one drafts for: speculative decoding must keep its tokens, so a
    # difference is a fault (a warning); other arms (a quantization) may differ and say so plainly.
    lossless: bool = False


@dataclass(frozen=True)
class ArmTrack:
    """One arm's replayed run: its chunks and its final figures.

    t_ns are replay times: offsets from request send (align "send") or from the arm's first
    token (align "first-token", earlier chunks at 0). ttft_ns is always from request send.
    """

    id: str
    label: str
    model: str
    color: int  # the arm's place in the session: the same arm has the same accent everywhere
    run_index: int
    t_ns: tuple[int, ...]
    tokens: tuple[int, ...]
    content: tuple[str, ...]
    reasoning: tuple[str, ...]
    tool: tuple[str, ...]
    first_index: int  # first chunk with text (TTFT)
    last_index: int  # last chunk with tokens or text: the arm is done once it shows
    output_tokens: int
    ttft_ns: int
    decode_tok_s: float | None
    vs_first: float | None  # the video's speed-up over the first arm on screen, in RenderPlan.metric
    acceptance_length: float | None
    tokens_estimated: bool = False  # per-event counts are a guess (the server sent none): shown with ≈
    acceptance_approximate: bool = False  # from counters printed in rounded steps: shown with ≈
    # The events are verify steps (`tokenreel.analysis.metrics.events_are_steps`): the live acceptance is
    # tokens per event so far; otherwise it is the engine's figure for the whole run.
    step_events: bool = False
    place: int = 1  # finishing place among the arms on screen (ties share a place)
    answer: AnswerMark | None = None  # only with RenderOptions.answer_badge
    vs_prior: float | None = None  # the speed-up over the arm before it on screen, in RenderPlan.metric
    text_placed: bool = False  # an imported reply kept whole, placed over the chunks (placed_text.RULE)
    # The arm on screen its verdict compares with: the first for the last arm (the headline
    # pair), the one before it for the others (the ladder's steps): one multiplier per pair.
    versus: int = 0

    @property
    def verdict_value(self) -> float | None:
        """The speed-up its verdict states: over the first arm, or its step over the one before."""
        return self.vs_first if self.versus == 0 else self.vs_prior

    @property
    def finish_ns(self) -> int:
        """Replay time at which the arm is done (the race clock at its finish)."""
        return self.t_ns[self.last_index]


# What a replay needs that an imported arm's file may lack (`Imported.lacks` keys). Text kept
# whole, not per chunk ("chunk_text"), is placed over the chunks (placed_text); no text at all is refused.
REPLAY_NEEDS = ("token_times",)


def replayed_content(arm: Arm, run: Run) -> tuple[tuple[str, ...], bool]:
    """The run's content per chunk and whether it was placed (placed_text.RULE): an imported
    arm's reply kept whole is spread over its chunks; one whose file lacks what a replay needs
    is refused in one line naming the file and what it lacks."""
    content = tuple(run.chunks.content)
    if not arm.imported:
        return content, False
    lacks = arm.imported.lacks
    missing = [lacks[key] for key in REPLAY_NEEDS if key in lacks]
    reply = "".join(content)
    if "chunk_text" in lacks and not reply:
        missing.append(f"{lacks['chunk_text']} (run {run.index} of prompt {run.prompt!r} holds none)")
    if missing:
        raise ValueError(f"render: arm {arm.id!r} was imported from {arm.imported.tool} ({arm.imported.file}) and"
                         f" cannot be replayed token by token: {'; '.join(missing)}")
    if "chunk_text" not in lacks:
        return content, False
    return spread(reply, len(content)), True


def arm_track(session: Session, run: Run, align: Align) -> ArmTrack:
    chunks = run.chunks
    first = first_token_index(chunks)
    if first is None:
        raise ValueError(f"run: arm {run.arm!r} run {run.index} streamed no text (status {run.status})")
    if any(b < a for a, b in zip(chunks.t_ns, chunks.t_ns[1:], strict=False)):
        raise ValueError(f"run: arm {run.arm!r} run {run.index} has chunk times that go back in time")
    arm = session.arm(run.arm)
    content, placed = replayed_content(arm, run)
    figures = run_metrics(run)
    last = last_token_index(chunks)
    shift = chunks.t_ns[first] if align == Align.FIRST_TOKEN else 0
    return ArmTrack(
        id=arm.id,
        label=arm.label,
        model=arm.model,
        color=session.arms.index(arm),
        run_index=run.index,
        t_ns=tuple(max(0, t - shift) for t in chunks.t_ns),
        tokens=tuple(chunks.tokens),
        content=content,
        reasoning=tuple(chunks.reasoning),
        tool=tuple(chunks.tool),
        first_index=first,
        last_index=first if last is None else max(first, last),
        output_tokens=output_tokens(run),
        ttft_ns=chunks.t_ns[first],
        decode_tok_s=figures.decode_tok_s,
        vs_first=None,
        acceptance_length=run.acceptance.mean_length if run.acceptance else None,
        tokens_estimated=run.tokens_estimated,
        acceptance_approximate=bool(run.acceptance and run.acceptance.approximate),
        step_events=events_are_steps(run),
        text_placed=placed,
    )


def answer_marks(session: Session, runs: list[Run], tracks: list[ArmTrack]) -> list[ArmTrack]:
    """Each arm's answer against the first arm's, both the runs the video plays; a drafter's
    against the arm it drafts for when that arm is on screen (`tokenreel.analysis.drafting`)."""
    shown = [run.arm for run in runs]
    out = [replace(tracks[0], answer=AnswerMark(same=None))]
    for run, track in zip(runs[1:], tracks[1:], strict=False):
        target = drafted_arm(session, session.arm(run.arm))
        lossless = target is not None and target.arm in shown
        against = shown.index(target.arm) if target is not None and lossless else 0
        result = compare(runs[against], run)
        estimated = runs[against].tokens_estimated or run.tokens_estimated
        out.append(replace(track, answer=AnswerMark(result.identical, result.diverges_at_token, estimated, against, lossless)))
    return out


def speed_ups(runs: list[Run], tracks: list[ArmTrack], metric: Metric, scope: str) -> list[ArmTrack]:
    """Each arm's speed-ups over the first arm on screen and over the arm before it (its ladder
    step), which of them its verdict states (`ArmTrack.versus`), in the video's one metric,
    from `tokenreel.analysis.claims` (so the report's figure for the same runs), and its
    finishing place."""
    out = []
    for n, (run, track) in enumerate(zip(runs, tracks, strict=False)):
        vs_first = run_speedup(metric, run, runs[0], scope).value
        vs_prior = run_speedup(metric, run, runs[n - 1], scope).value if n else vs_first
        place = 1 + sum(other.finish_ns < track.finish_ns for other in tracks)
        versus = 0 if n in (0, len(runs) - 1) else n - 1
        out.append(replace(track, vs_first=vs_first, vs_prior=vs_prior, place=place, versus=versus))
    return out
