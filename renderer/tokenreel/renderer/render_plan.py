"""From a session and the user's options to everything the frames need, checked up front.

The plan is plain picklable data: worker processes render from it without the session, and
every bad option fails here with a one-line message before any frame is drawn.
"""

from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import NamedTuple

from PIL import Image

from tokenreel.analysis.answers import compare
from tokenreel.analysis.claims import METRICS, Speedup, claim_text, interval_text, run_speedup, scope_text, suite_speedup
from tokenreel.analysis.drafting import drafted_arm
from tokenreel.analysis.engine_figures import stated_version
from tokenreel.analysis.figures import multiplier
from tokenreel.analysis.ladder import Cell, LadderRow, build_cells, build_ladder, common_prompts, median_run, missing_cells
from tokenreel.analysis.metrics import events_are_steps, first_token_index, last_token_index, output_tokens, run_metrics
from tokenreel.analysis.selection import RunSelection
from tokenreel.base.files import read_input
from tokenreel.base.safe_text import shown_path
from tokenreel.base.theme import Theme, load_theme
from tokenreel.base.theme import is_path as is_theme_path
from tokenreel.renderer.layout import FrameLayout, compute
from tokenreel.renderer.timeline import Clock, first_frame_showing
from tokenreel.session.gpu import gpu_hardware
from tokenreel.session.model import Arm, Prompt, Run, Session, fingerprint_summary

MIN_ARMS, MAX_ARMS = 2, 4
MAX_SIDE = 3840  # 4K: the largest size the layouts are checked at
MAX_FPS = 240
MAX_SECONDS = Fraction(3600)
# The replay (the race, at playback speed) may last at most options.max_duration_s seconds:
# 30 min unless asked (`render --max-duration`), so a week-long run is refused up front
# instead of rendering 18 million frames. The cap itself may be raised to a day.
MAX_DURATION_S = "1800"
MAX_DURATION_CAP = Fraction(86400)
ALIGNS = ("send", "first-token")
PAUSE = Fraction(3, 4)  # seconds every column shows its final state before the end card
_SIZE = re.compile(r"(\d{1,5})[xX×](\d{1,5})")


@dataclass(frozen=True)
class RenderOptions:
    prompt: str | None = None  # None -> the session's first prompt
    run: str = "median"  # "median" or a measured run index (as in Run.index) e.g. "2"
    arms: tuple[str, ...] = ()  # empty -> all arms; a video races 2 to 4
    fps: int = 30
    size: str = "1920x1080"  # also "1080x1920" (vertical, arms stacked) and "3840x2160"
    speed: str = "1"  # parsed to fractions.Fraction; all timing in integers
    theme: str = "dark"  # or "light", or a path to a JSON theme file
    title_s: str = "1.5"  # title card length (whole frames: round(title_s*fps)); "0": none
    hold_s: str = "4"  # end card (the headline) shown this long, after a short pause on the final state
    at: str | None = None  # poster frame time in seconds (for .png output)
    align: str = "send"  # "send": clocks start at request send (TTFT differences show);
    # "first-token": each arm's clock starts at its first token
    metric: str = "decode"  # the video's one metric for speed-ups: "decode" (tok/s) or "e2e" (time to done)
    title: str | None = None  # title card's big line; None -> the session name
    subtitle: str | None = None  # title card's line under it; None -> the prompt text, "" -> none
    logo: str | None = None  # PNG drawn in the title card's top-right corner
    logo_sha256: str | None = None  # the logo's hash, pinned when rendered (see pin_files)
    theme_sha256: str | None = None  # a theme file's hash, pinned likewise (None: a shipped theme)
    max_duration_s: str = MAX_DURATION_S  # longest replay allowed, seconds of video (see MAX_DURATION_S)
    answer_badge: bool = False  # each column says, once its stream is done, whether its answer is the first arm's
    exclude_host_contended: bool = False  # the run selection: leave out runs whose engine host was under CPU pressure

    @property
    def selection(self) -> RunSelection:
        """The run-selection policy these options ask for (`tokenreel.analysis.selection`)."""
        return RunSelection(exclude_host_contended=self.exclude_host_contended)


@dataclass(frozen=True)
class AnswerMark:
    """What an arm's badge says of its answer against the first arm's on screen, or a drafter's
    against the arm it drafts for where that one is on screen (tokenreel.analysis.answers)."""

    same: bool | None  # None: this is the reference arm
    diverges_at_token: int | None = None  # 1-based, event-granular
    estimated: bool = False  # token counts guessed one per event: the number is shown with ≈
    against: int = 0  # the place on screen of the arm it is compared with


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

    @property
    def finish_ns(self) -> int:
        """Replay time at which the arm is done (the race clock at its finish)."""
        return self.t_ns[self.last_index]


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
    align: str = "send"
    max_tokens: int = 0  # the session's max_tokens: the progress bars' full length
    race_end_ns: int = 0  # replay time the last arm is done; the clock stops there
    title: str = ""  # the title card's big line
    subtitle: str = ""  # the title card's line(s) under it (may be empty)
    logo: Logo | None = None  # scaled to the layout, for the title card's corner
    reference_is_baseline: bool = True  # the first arm raced is the session's first arm (only it is called baseline)
    metric: str = "decode"  # every speed-up the video shows is in this metric (tokenreel.analysis.claims)
    scope: str = "prompt"  # "prompt": the median runs, as the report's answer figures; "run": runs the user chose
    suite: Speedup | None = None  # the last arm on screen against the first over the session's suite
    claims: tuple[Claim, ...] = ()  # every speed-up drawn, where and from which frame
    facts: EndFacts | None = None  # what the end card says the race ran on


@dataclass(frozen=True)
class Claim:
    """A speed-up drawn on screen: what it says, its figure (the report's, at full precision), the
    first frame showing it and the first frame at which both arms it compares were done."""

    text: str
    metric: str
    scope: str
    prompt: str | None
    arm: str
    vs: str
    value: float | None
    first_frame: int
    evidence_frame: int
    where: str  # "verdict" (a column's line under its figures) or "end card"


@dataclass(frozen=True)
class EndFacts:
    """The end card's small print: what the arms ran on and when (missing facts are said missing)."""

    model: str
    hardware: str
    engine: str
    recorded: str


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


def _pinned(option: str, path: str, recorded: str | None) -> tuple[str, bytes]:
    """The file's hash and the very bytes hashed (read once, bounded: `files.read_input`); with a
    recorded hash, the file must still be the one rendered."""
    try:
        payload = read_input(path, option)
    except OSError as exc:
        raise ValueError(f"{option}: cannot read {shown_path(path)}: {exc.strerror or exc}") from None
    digest = hashlib.sha256(payload).hexdigest()
    if recorded is not None and digest != recorded:
        raise ValueError(f"{option}: {shown_path(path)} changed since it was pinned (sha256 {digest[:12]}…, expected {recorded[:12]}…)")
    return digest, payload


def pin_files(options: RenderOptions) -> RenderOptions:
    """Record the SHA-256 of the logo and of a theme file in the options, so the manifest names
    the exact files drawn and verify notices when one changes."""
    logo = _pinned("logo", options.logo, None)[0] if options.logo else None
    theme = None
    if is_theme_path(options.theme):
        theme = _pinned("theme", options.theme, None)[0]
        load_theme(options.theme)  # a bad theme file fails here, before anything is drawn
    return replace(options, logo_sha256=logo, theme_sha256=theme)


def _logo(path: str, recorded: str | None, layout: FrameLayout) -> Logo:
    """Read a PNG, scale it (Lanczos, deterministic) to the layout's logo height, and place it
    in the top-right corner, inside the frame's margin."""
    _, payload = _pinned("logo", path, recorded)
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


def _fraction(value: str, option: str, low: Fraction, high: Fraction) -> Fraction:
    try:
        number = Fraction(value.strip())
    except (ValueError, ZeroDivisionError, AttributeError):
        raise ValueError(f"{option}: expected a number, got {value!r}") from None
    if not low <= number <= high:
        raise ValueError(f"{option}: must be between {low} and {high}, got {value}")
    return number


def parse_size(value: str) -> tuple[int, int]:
    match = _SIZE.fullmatch(value.strip())
    if not match:
        raise ValueError(f"size: expected WIDTHxHEIGHT such as 1920x1080, got {value!r}")
    width, height = int(match.group(1)), int(match.group(2))
    if width % 2 or height % 2 or not (16 <= width <= MAX_SIDE and 16 <= height <= MAX_SIDE):
        raise ValueError(f"size: width and height must be even and 16..{MAX_SIDE} px, got {value}")
    if width * 9 != height * 16 and width * 16 != height * 9 and width != height:
        raise ValueError(f"size: the layouts are 16:9 (e.g. 1920x1080, 3840x2160), 9:16 (1080x1920) or 1:1 (1080x1080), got {value}")
    return width, height


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


def _engine(arm: Arm) -> str:
    """"vllm 0.11.2": the engine and version the endpoint's fingerprint said; without a version,
    the config's declared engine (it says more), else the engine's bare name."""
    summary = fingerprint_summary(arm)
    name, version = summary.get("engine", ""), summary.get("version", "")
    if version and not stated_version(version).startswith("unknown"):  # a llama.cpp "b0-unknown" says nothing
        return f"{name} {version}".strip()
    return arm.settings.get("engine") or name


def _joined(values: list[str], missing: str) -> str:
    """Each arm's value once, in arm order; `missing` when no arm has one."""
    return " / ".join(dict.fromkeys(v for v in values if v)) or missing


def end_facts(session: Session, arm_ids: list[str]) -> EndFacts:
    """Model, hardware, engine and recording date of the arms raced: from the endpoint's own
    fingerprint where it said them, else from the config's declared settings ("hardware" in
    [arms.settings] or [session]), else (hardware) the GPUs NVML named before the arm; a fact
    none gave is said to be missing."""
    arms = [session.arm(a) for a in arm_ids]
    dates = sorted({r["started_at"][:10] for a in arms for r in a.recorded if r.get("started_at")})
    dates = dates or ([session.created_at[:10]] if session.created_at else [])
    if session.simulated:
        hardware, engine = "simulated endpoints, no GPU", "tokenreel simulate (behaves like vLLM)"
    else:
        declared = [a.settings.get("hardware") or fingerprint_summary(a).get("hardware", "") or gpu_hardware(a.gpu) for a in arms]
        hardware = _joined(declared, "hardware not stated (config: [session] hardware)")
        engine = _joined([_engine(a) for a in arms], "engine not stated by the endpoints")
    return EndFacts(
        model=_joined([a.model for a in arms], "model not archived"),
        hardware=hardware,
        engine=engine,
        recorded=f"recorded {dates[0]}" + (f" to {dates[-1]}" if len(dates) > 1 else "") if dates else "recording date not archived",
    )


def _track(session: Session, run: Run, align: str) -> ArmTrack:
    chunks = run.chunks
    first = first_token_index(chunks)
    if first is None:
        raise ValueError(f"run: arm {run.arm!r} run {run.index} streamed no text (status {run.status})")
    if any(b < a for a, b in zip(chunks.t_ns, chunks.t_ns[1:], strict=False)):
        raise ValueError(f"run: arm {run.arm!r} run {run.index} has chunk times that go back in time")
    arm = session.arm(run.arm)
    figures = run_metrics(run)
    last = last_token_index(chunks)
    shift = chunks.t_ns[first] if align == "first-token" else 0
    return ArmTrack(
        id=arm.id,
        label=arm.label,
        model=arm.model,
        color=session.arms.index(arm),
        run_index=run.index,
        t_ns=tuple(max(0, t - shift) for t in chunks.t_ns),
        tokens=tuple(chunks.tokens),
        content=tuple(chunks.content),
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
    )


def answer_marks(session: Session, runs: list[Run], tracks: list[ArmTrack]) -> list[ArmTrack]:
    """Each arm's answer against the first arm's, both the runs the video plays; a drafter's
    against the arm it drafts for when that arm is on screen (`tokenreel.analysis.drafting`)."""
    shown = [run.arm for run in runs]
    out = [replace(tracks[0], answer=AnswerMark(same=None))]
    for run, track in zip(runs[1:], tracks[1:], strict=False):
        target = drafted_arm(session.arms, session.arm(run.arm))
        against = shown.index(target.arm) if target is not None and target.arm in shown else 0
        result = compare(runs[against], run)
        estimated = runs[against].tokens_estimated or run.tokens_estimated
        out.append(replace(track, answer=AnswerMark(result.identical, result.diverges_at_token, estimated, against)))
    return out


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


def _poster_index(at: str, clock: Clock) -> int:
    """The frame showing video time `at` (the title card counts), which must be in the video."""
    index = int(_fraction(at, "at", Fraction(0), MAX_SECONDS) * clock.fps)
    if index >= clock.frame_count:
        seconds = Fraction(clock.frame_count, clock.fps)
        raise ValueError(f"at: {at} s is past the end of the video ({float(seconds):.2f} s)")
    return index


def speed_ups(runs: list[Run], tracks: list[ArmTrack], metric: str, scope: str) -> list[ArmTrack]:
    """Each arm's speed-ups over the first arm on screen and over the arm before it, in the
    video's one metric, from `tokenreel.analysis.claims` (so the report's figure for the same runs), and its
    finishing place."""
    out = []
    for n, (run, track) in enumerate(zip(runs, tracks, strict=False)):
        vs_first = run_speedup(metric, run, runs[0], scope).value
        vs_prior = run_speedup(metric, run, runs[n - 1], scope).value if n else vs_first
        place = 1 + sum(other.finish_ns < track.finish_ns for other in tracks)
        out.append(replace(track, vs_first=vs_first, vs_prior=vs_prior, place=place))
    return out


def evidence_frame(clock: Clock, *tracks: ArmTrack) -> int:
    """The first frame at which every one of the tracks is done: a speed-up's evidence."""
    return clock.title_frames + max(first_frame_showing(t.finish_ns, clock.fps, clock.speed) for t in tracks)


def drawn_claims(clock: Clock, tracks: list[ArmTrack], metric: str, scope: str, suite: Speedup | None, prompt: str) -> list[Claim]:
    """Every speed-up the frames draw, with the text frames.py draws it with: each column's
    verdict (from the frame both it and the first arm are done), then the end card's headline
    (the last arm against the first), each row's vs prior and vs first, and the suite's figure
    with its 95 % interval (a claim of its own, of the suite's figure) where it has one."""
    first, last, end = tracks[0], tracks[-1], clock.title_frames + clock.replay_frames

    def claim(text: str, track: ArmTrack, vs: ArmTrack, value: float | None, frame: int | None, where: str) -> Claim:
        evidence = evidence_frame(clock, vs, track)
        return Claim(text, metric, scope, prompt, track.id, vs.id, value, evidence if frame is None else frame, evidence, where)

    claims = [claim(claim_text(t.vs_first, metric), t, first, t.vs_first, None, "verdict") for t in tracks[1:]]
    if not clock.hold_frames:
        return claims
    claims.append(claim(claim_text(last.vs_first, metric), last, first, last.vs_first, end, "end card"))
    for n, track in enumerate(tracks[1:], start=1):
        claims.append(claim(multiplier(track.vs_prior), track, tracks[n - 1], track.vs_prior, end, "end card"))
        if n > 1:
            claims.append(claim(multiplier(track.vs_first), track, first, track.vs_first, end, "end card"))
    if suite is not None:
        evidence = evidence_frame(clock, first, last)
        text = f"{claim_text(suite.value, metric)} {scope_text(suite)}"
        claims.append(Claim(text, metric, "suite", None, suite.arm, suite.vs, suite.value, end, evidence, "end card"))
        interval = interval_text(suite.value, suite.ci95)  # none, and nothing drawn, with fewer than 6 prompts
        if interval:
            claims.append(Claim(interval, metric, "suite", None, suite.arm, suite.vs, suite.value, end, evidence, "end card"))
    return claims


def _minutes(seconds: Fraction) -> str:
    return f"{float(seconds) / 60:.1f} min" if seconds >= 60 else f"{float(seconds):.1f} s"


def _check_duration(replay_frames: int, options: RenderOptions, speed: Fraction) -> None:
    cap = _fraction(options.max_duration_s, "max_duration", Fraction(1), MAX_DURATION_CAP)
    seconds = Fraction(replay_frames, options.fps)
    if seconds > cap:
        raise ValueError(
            f"max_duration: the replay would last {_minutes(seconds)} ({replay_frames} frames at {options.fps} fps,"
            f" speed {speed}), longer than the {_minutes(cap)} allowed; choose a higher --speed, or raise the cap"
            f" with --max-duration SECONDS (at most {int(MAX_DURATION_CAP)})"
        )


class CheckedOptions(NamedTuple):
    """The options that mean the same for every session, parsed."""

    width: int
    height: int
    speed: Fraction
    title_s: Fraction
    hold_s: Fraction
    theme: Theme
    align: str
    metric: str


def check_options(options: RenderOptions) -> CheckedOptions:
    """Check what needs no session (size, fps, speed, card lengths, theme, align, metric, run):
    build_plan starts here, and a catalogue checks each of its layouts and themes here before it
    renders anything, so a typo is bad input, not a failure of every video."""
    width, height = parse_size(options.size)
    if isinstance(options.fps, bool) or not isinstance(options.fps, int) or not 1 <= options.fps <= MAX_FPS:
        raise ValueError(f"fps: expected a whole number 1..{MAX_FPS}, got {options.fps!r}")
    speed = _fraction(options.speed, "speed", Fraction(1, 100), Fraction(100))
    title_s = _fraction(options.title_s, "title_s", Fraction(0), MAX_SECONDS)
    hold_s = _fraction(options.hold_s, "hold_s", Fraction(0), MAX_SECONDS)
    if is_theme_path(options.theme):
        _pinned("theme", options.theme, options.theme_sha256)
    theme = load_theme(options.theme)
    align = options.align.strip().lower()
    if align not in ALIGNS:
        raise ValueError(f"align: expected send or first-token, got {options.align!r}")
    metric = options.metric.strip().lower()
    if metric not in METRICS:
        raise ValueError(f"metric: expected decode or e2e, got {options.metric!r}")
    if metric == "e2e" and align != "send":
        raise ValueError("metric: e2e is the time from request send to the last token; race it with --align send")
    run = options.run.strip()
    if run != "median" and not run.isdigit():
        raise ValueError(f"run: expected 'median' or a run index such as '2', got {options.run!r}")
    return CheckedOptions(width, height, speed, title_s, hold_s, theme, align, metric)


def build_plan(session: Session, options: RenderOptions) -> RenderPlan:
    """Check every option against the session and gather what the frames need."""
    width, height, speed, title_s, hold_s, theme, align, metric = check_options(options)
    if not session.prompts:
        raise ValueError("prompt: the session has no prompts")
    prompt_id = options.prompt if options.prompt is not None else session.prompts[0].id
    known_prompts = [p.id for p in session.prompts]
    if prompt_id not in known_prompts:
        raise ValueError(f"prompt: no prompt {prompt_id!r} in this session (prompts: {', '.join(known_prompts)})")
    runs = _pick_runs(session, prompt_id, options)
    scope = "prompt" if options.run.strip() == "median" else "run"
    tracks = speed_ups(runs, [_track(session, run, align) for run in runs], metric, scope)
    if options.answer_badge:
        tracks = answer_marks(session, runs, tracks)
    hold_frames = round(hold_s * options.fps)
    pause_frames = round(PAUSE * options.fps) if hold_frames else 0  # the final state, then the card
    replay_frames = max(first_frame_showing(t.t_ns[-1], options.fps, speed) for t in tracks) + 1 + pause_frames
    _check_duration(replay_frames, options, speed)
    clock = Clock(options.fps, speed, round(title_s * options.fps), replay_frames, hold_frames)
    prompt = session.prompt(prompt_id)
    cells = build_cells(session, options.selection)
    layout = compute(width, height, len(tracks), options.answer_badge)
    suite = suite_speedup(session, cells, metric, tracks[-1].id, tracks[0].id)
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
        claims=tuple(drawn_claims(clock, tracks, metric, scope, suite, prompt_id)),
        facts=end_facts(session, [run.arm for run in runs]),
    )
