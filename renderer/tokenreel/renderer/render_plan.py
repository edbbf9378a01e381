"""From a session and the user's options (options.py) to everything the frames need, checked up front.

The plan is plain picklable data: worker processes render from it without the session, and
every option that does not fit the session fails here with a one-line message before any frame
is drawn.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from fractions import Fraction

from PIL import Image

from tokenreel.analysis.claims import Speedup, claim_text, prompt_rank, prompt_speedup, suite_speedup, typical_prompt
from tokenreel.analysis.figures import multiplier
from tokenreel.analysis.ladder import Cell, LadderRow, build_cells, build_ladder, common_prompts, median_run, missing_cells, usable_runs
from tokenreel.analysis.selection import RunSelection
from tokenreel.analysis.serving_config import SYNTHETIC_LABEL, synthetic_acceptance
from tokenreel.base.safe_text import shown_path
from tokenreel.base.theme import Theme
from tokenreel.renderer.end_facts import EndFacts, end_facts
from tokenreel.renderer.layout import FrameLayout, compute
from tokenreel.renderer.options import MAX_DURATION_CAP, MAX_SECONDS, Align, Metric, RenderOptions, check_options, fraction, pinned_file
from tokenreel.renderer.placed_text import RULE
from tokenreel.renderer.race_claims import Claim, drawn_claims
from tokenreel.renderer.timeline import Clock, first_frame_showing
from tokenreel.renderer.tracks import ArmTrack, answer_marks, arm_track, speed_ups
from tokenreel.session.model import Prompt, Run, Session

MIN_ARMS, MAX_ARMS = 2, 4
PAUSE = Fraction(3, 4)  # seconds every column shows its final state before the end card


@dataclass(frozen=True)
class RenderPlan:
    width: int
    height: int
    fps: int
    frame_count: int
    warnings: tuple[str, ...]
    options: RenderOptions
    clock: Clock
    layout: FrameLayout
    theme: Theme
    session_name: str
    simulated: bool
    prompt_id: str
    prompt_text: str
    code: bool  # highlight the whole answer as code (prompt category "code")
    arms: tuple[ArmTrack, ...]
    ladder: tuple[LadderRow, ...]
    ladder_note: str
    poster_index: int | None  # frame to save for .png output (options.at), else None
    align: Align = Align.SEND  # where the clocks start: the metric's (RenderOptions.clock_align)
    max_tokens: int = 0  # the session's max_tokens: the progress bars' full length
    race_end_ns: int = 0  # replay time the last arm is done; the clock stops there
    title: str = ""  # the title card's big line
    subtitle: str = ""  # the title card's line(s) under it (may be empty)
    logo: Logo | None = None  # scaled to the layout, for the title card's corner
    reference_is_baseline: bool = True  # the first arm raced is the session's first arm (only it is called baseline)
    metric: Metric = Metric.DECODE  # every speed-up the video shows is in this metric (tokenreel.analysis.claims)
    scope: str = "prompt"  # "prompt": the median runs, as the report's answer figures; "run": runs the user chose
    suite: Speedup | None = None  # the last arm on screen against the first over the session's suite
    claims: tuple[Claim, ...] = ()  # every speed-up drawn, where and from which frame
    facts: EndFacts | None = None  # what the end card says the race ran on
    prompt_name: str = ""  # how the end card names the answer: "the code prompt" (its category's only one), else its id
    # Where the headline's answer stands among the session's prompts ("the fastest of 4
    # prompts"; claims.prompt_rank), so a one-answer figure is never read as the suite's.
    prompt_rank: str = ""
    # What the video shows that its source files did not hold, one entry an arm (manifest
    # `reconstructed`): an imported reply's text placed over its chunks (placed_text.RULE).
    reconstructed: tuple[Reconstruction, ...] = ()
    task: bool = False  # runs of their natural length (no ignore_eos): an e2e headline is the task's time

    @property
    def placed_tools(self) -> str:
        """The peer tools whose replies the video places over their chunks ("" when none)."""
        return " / ".join(dict.fromkeys(placed.tool for placed in self.reconstructed))


@dataclass(frozen=True)
class Reconstruction:
    """An arm whose replayed text is placed by rule, not read from its file."""

    arm: str
    tool: str  # the peer tool whose file the arm was imported from
    version: str  # its version, "" when neither its file nor the user said
    file: str
    rule: str = RULE


def reconstructions(session: Session, tracks: list[ArmTrack]) -> tuple[Reconstruction, ...]:
    out = []
    for track in tracks:
        imported = session.arm(track.id).imported
        if track.text_placed and imported is not None:
            out.append(Reconstruction(track.id, imported.tool, imported.version, imported.file))
    return tuple(out)


LOGO_HEIGHT = 72  # px at the design size (1080): the logo is scaled to this height
LOGO_MAX_WIDTH = 4  # ... and at most this many times as wide as high


@dataclass(frozen=True)
class Logo:
    """An RGBA image, already scaled for the frame, and where its top-left corner goes."""

    x: int
    y: int
    width: int
    height: int
    rgba: bytes  # width*height*4, straight (not premultiplied) alpha


def _logo(path: str, recorded: str | None, layout: FrameLayout) -> Logo:
    """Read a PNG, scale it (Lanczos, deterministic) to the layout's logo height, and place it
    in the top-right corner, inside the frame's margin."""
    _, payload = pinned_file("logo", path, recorded)
    try:
        with Image.open(io.BytesIO(payload)) as image:
            if image.format != "PNG":
                raise ValueError(f"logo: {shown_path(path)} is not a PNG image (it is {image.format or 'unknown'})")
            rgba = image.convert("RGBA")
    except (OSError, Image.DecompressionBombError) as exc:
        raise ValueError(f"logo: cannot read {shown_path(path)} as a PNG image: {exc}") from None
    height = max(1, round(LOGO_HEIGHT * layout.scale))
    width = max(1, min(round(rgba.width * height / rgba.height), LOGO_MAX_WIDTH * height))
    scaled = rgba.resize((width, height), Image.Resampling.LANCZOS)
    margin = layout.title.x
    return Logo(layout.width - margin - width, layout.title.y, width, height, scaled.tobytes())


def prompt_text(prompt: Prompt) -> str:
    """What the user asked: the last user message for chat, else the completion prompt."""
    for message in reversed(prompt.messages):
        if message.get("role") == "user":
            return message.get("content", "")
    return prompt.prompt


def _pick_run(session: Session, arm_id: str, prompt_id: str, which: str, selection: RunSelection) -> Run:
    if which == "median":
        run = median_run(session, arm_id, prompt_id, selection)
        if run is None:
            why = next((m.reason for m in missing_cells(session, selection) if (m.arm, m.prompt) == (arm_id, prompt_id)), "")
            if not why and usable_runs(session, arm_id, prompt_id, selection):
                why = ("each of its counted runs got its whole answer in one read, so none has a decode interval to race by;"
                       " record the cell again on a less loaded machine")
            raise ValueError(f"run: arm {arm_id!r} has no usable measured run of prompt {prompt_id!r}" + (f" ({why})" if why else ""))
        return run
    runs = [r for r in session.runs_of(arm_id, prompt_id) if r.index == int(which)]
    if not runs:
        have = ", ".join(str(r.index) for r in session.runs_of(arm_id, prompt_id)) or "none"
        raise ValueError(f"run: arm {arm_id!r} has no measured run {which} of prompt {prompt_id!r} (runs: {have})")
    return runs[0]


def _pick_runs(session: Session, prompt_id: str, options: RenderOptions) -> list[Run]:
    """One run per arm. An arm without a usable run (all its runs failed, say) is refused, naming
    it and why: leaving it out silently would let the same command race other arms, and call
    another one the baseline, on a machine where a run failed. `--arms` leaves arms out on
    purpose; arms named there must have a usable run too."""
    runs: list[Run] = []
    problems: list[tuple[str, ValueError]] = []
    for arm_id in chosen_arms(session, options.arms):
        try:
            runs.append(_pick_run(session, arm_id, prompt_id, options.run.strip(), options.selection))
        except ValueError as exc:
            if options.arms or options.run.strip() != "median":  # the user's own choice: said as is
                raise
            problems.append((arm_id, exc))
    if not problems:
        return runs
    reasons = "; ".join(str(exc).removeprefix("run: ") for _, exc in problems)
    usable = [run.arm for run in runs]
    if len(usable) < MIN_ARMS:
        left = f"only {len(usable)} arm has" if len(usable) == 1 else "no arm has"
        raise ValueError(
            f"arms: {left} a usable run of prompt {prompt_id!r}, and a video races at least {MIN_ARMS}: "
            + reasons + " (`tokenreel report` shows the figures that exist)"
        )
    raise ValueError(
        f"arms: {reasons}; a video leaves an arm out only when asked: render the others with"
        f" --arms {','.join(usable)}, or record the arm again"
    )


def _warnings(session: Session, runs: list[Run], tracks: list[ArmTrack]) -> list[str]:
    out = []
    if session.simulated:
        out.append("the session was recorded against simulated endpoints, not real GPUs")
    counts = {t.output_tokens for t in tracks}
    if len(counts) > 1:
        out.append("runs differ in token count: " + ", ".join(f"{t.id} {t.output_tokens}" for t in tracks))
    for run in runs:
        if run.status != "ok":
            out.append(f"arm {run.arm} run {run.index} {run.status}: {run.error or 'no detail'}")
        if run.contended:
            out.append(f"arm {run.arm} run {run.index} was contended: {run.contention_detail or 'no detail'}")
        if run.tokens_estimated:
            out.append(f"arm {run.arm} run {run.index}: per-chunk token counts are estimated (the server sent none); shown with ≈")
        if where := synthetic_acceptance(session.arm(run.arm)):
            out.append(f"arm {run.arm}: {SYNTHETIC_LABEL} ({where}); the video has no end card")
    for placed in reconstructions(session, tracks):
        out.append(f"arm {placed.arm}: imported from {placed.tool} ({placed.file}), which keeps each reply whole: its text"
                   " is placed over the chunks by length; chunk times exact")
    return out


def _ladder_note(session: Session, cells: list[Cell]) -> str:
    runs = sorted({c.runs for c in cells})
    per_cell = "/".join(str(r) for r in runs) or "0"
    prompts = len(common_prompts(session, cells))
    runs_word = "run" if runs == [1] else "runs"
    return f"Median of {per_cell} {runs_word} per cell, mean over {prompts} prompt{'' if prompts == 1 else 's'}"


def chosen_arms(session: Session, chosen: tuple[str, ...]) -> list[str]:
    """The arms a video races (all, or those chosen), checked against the session: a catalogue
    checks them per session before it renders, so an unknown arm is bad input."""
    known = [a.id for a in session.arms]
    arm_ids = list(chosen) or known
    for arm_id in arm_ids:
        if arm_id not in known:
            raise ValueError(f"arms: no arm {arm_id!r} in this session (arms: {', '.join(known)})")
    if len(set(arm_ids)) != len(arm_ids):
        raise ValueError(f"arms: an arm is listed twice: {', '.join(arm_ids)}")
    if not MIN_ARMS <= len(arm_ids) <= MAX_ARMS:
        raise ValueError(
            f"arms: a video races {MIN_ARMS} to {MAX_ARMS} arms, got {len(arm_ids)}"
            + ("; choose some with arms" if len(arm_ids) > MAX_ARMS else "; `tokenreel report` shows a single arm's figures")
        )
    return arm_ids


def default_prompt(session: Session, options: RenderOptions) -> tuple[str, str]:
    """The prompt a video plays when none is asked for, and one line saying why: the one whose
    speed-up of the last arm raced over the first, in the video's metric, is nearest the suite's
    (`tokenreel.analysis.claims.typical_prompt`), so the race tells the suite's story; the
    session's first prompt where no prompt has a figure for both. The line is "" for a session
    of one prompt."""
    if not session.prompts:
        raise ValueError("prompt: the session has no prompts")
    arms = chosen_arms(session, options.arms)
    cells = build_cells(session, options.selection)
    found = typical_prompt(session, cells, options.metric, arms[-1], arms[0], options.selection)
    if found is None:
        first = session.prompts[0].id
        return first, f"prompt: {first} (the first; no prompt has a {options.metric.value} figure for both {arms[0]} and {arms[-1]})"
    prompt, one, suite = found
    if len(session.prompts) == 1:
        return prompt, ""  # no choice was made: nothing to say
    return prompt, (
        f"prompt: {prompt} (its {claim_text(one.value, one.metric)} is the nearest of {len(session.prompts)} prompts to"
        f" the suite's {multiplier(suite.value)}; --prompt ID races another)"
    )


def _poster_index(at: str, clock: Clock) -> int:
    """The frame showing video time `at` (the title card counts), which must be in the video."""
    index = int(fraction(at, "at", Fraction(0), MAX_SECONDS) * clock.fps)
    if index >= clock.frame_count:
        seconds = Fraction(clock.frame_count, clock.fps)
        raise ValueError(f"at: {at} s is past the end of the video ({float(seconds):.2f} s)")
    return index


def _minutes(seconds: Fraction) -> str:
    return f"{float(seconds) / 60:.1f} min" if seconds >= 60 else f"{float(seconds):.1f} s"


def _check_duration(replay_frames: int, options: RenderOptions, speed: Fraction) -> None:
    cap = fraction(options.max_duration_s, "max_duration", Fraction(1), MAX_DURATION_CAP)
    seconds = Fraction(replay_frames, options.fps)
    if seconds > cap:
        raise ValueError(
            f"max_duration: the replay would last {_minutes(seconds)} ({replay_frames} frames at {options.fps} fps,"
            f" speed {speed}), longer than the {_minutes(cap)} allowed; choose a higher --speed, or raise the cap"
            f" with --max-duration SECONDS (at most {int(MAX_DURATION_CAP)})"
        )


def build_plan(session: Session, options: RenderOptions) -> RenderPlan:
    """Check every option against the session and gather what the frames need."""
    width, height, speed, title_s, hold_s, theme = check_options(options)
    align, metric = options.clock_align, options.metric
    if not session.prompts:
        raise ValueError("prompt: the session has no prompts")
    prompt_id = options.prompt if options.prompt is not None else default_prompt(session, options)[0]
    known_prompts = [p.id for p in session.prompts]
    if prompt_id not in known_prompts:
        raise ValueError(f"prompt: no prompt {prompt_id!r} in this session (prompts: {', '.join(known_prompts)})")
    runs = _pick_runs(session, prompt_id, options)
    scope = "prompt" if options.run.strip() == "median" else "run"
    tracks = speed_ups(runs, [arm_track(session, run, align) for run in runs], metric, scope)
    if options.answer_badge:
        tracks = answer_marks(session, runs, tracks)
    # An arm whose engine forced acceptance is never on an end card (its speed-up is not the model's).
    hold_frames = 0 if any(synthetic_acceptance(session.arm(run.arm)) for run in runs) else round(hold_s * options.fps)
    pause_frames = round(PAUSE * options.fps) if hold_frames else 0  # the final state, then the card
    replay_frames = max(first_frame_showing(t.t_ns[-1], options.fps, speed) for t in tracks) + 1 + pause_frames
    _check_duration(replay_frames, options, speed)
    clock = Clock(options.fps, speed, round(title_s * options.fps), replay_frames, hold_frames)
    prompt = session.prompt(prompt_id)
    cells = build_cells(session, options.selection)
    layout = compute(width, height, len(tracks), options.answer_badge)
    suite = suite_speedup(session, cells, metric, tracks[-1].id, tracks[0].id)
    hero = prompt_speedup(session, metric, prompt_id, tracks[-1].id, tracks[0].id, options.selection)
    return RenderPlan(
        width=width,
        height=height,
        fps=options.fps,
        frame_count=clock.frame_count,
        warnings=tuple(_warnings(session, runs, tracks)),
        options=options,
        clock=clock,
        layout=layout,
        theme=theme,
        session_name=session.name,
        simulated=session.simulated,
        prompt_id=prompt_id,
        prompt_text=prompt_text(prompt),
        code=prompt.category == "code",
        arms=tuple(tracks),
        ladder=tuple(build_ladder(session, cells)),
        ladder_note=_ladder_note(session, cells),
        poster_index=None if options.at is None else _poster_index(options.at, clock),
        align=align,
        max_tokens=session.settings.max_tokens,
        race_end_ns=max(t.finish_ns for t in tracks),
        title=session.name if options.title is None else options.title,
        subtitle=prompt_text(prompt) if options.subtitle is None else options.subtitle,
        logo=_logo(options.logo, options.logo_sha256, layout) if options.logo else None,
        reference_is_baseline=runs[0].arm == session.arms[0].id,
        metric=metric,
        scope=scope,
        suite=suite,
        claims=tuple(drawn_claims(clock, tracks, metric, scope, suite, prompt_id, task=not session.settings.ignore_eos)),
        facts=end_facts(session, [run.arm for run in runs], options.selection),
        prompt_name=f"the {prompt.category} prompt" if [p.category for p in session.prompts].count(prompt.category) == 1 else prompt_id,
        prompt_rank=prompt_rank(session, hero, options.selection) if scope == "prompt" else "",
        reconstructed=reconstructions(session, tracks),
        task=not session.settings.ignore_eos,
    )
