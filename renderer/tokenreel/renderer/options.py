"""The user's render options, and every check of them that needs no session.

An option with a fixed set of values is a str-valued Enum: the manifest keeps its value as the
CLI spells it, and a RenderOptions holds the member whatever it was built from (the CLI, a
manifest, a test), so a bad value fails once, when the options are made, with a one-line message.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from enum import StrEnum
from fractions import Fraction
from typing import NamedTuple, TypeVar

from tokenreel.analysis.selection import RunSelection
from tokenreel.base.files import read_input
from tokenreel.base.safe_text import shown_path
from tokenreel.base.theme import Theme, load_theme
from tokenreel.base.theme import is_path as is_theme_path

MAX_SIDE = 3840  # 4K: the largest size the layouts are checked at
MAX_FPS = 240
MAX_SECONDS = Fraction(3600)
# The replay (the race, at playback speed) may last at most options.max_duration_s seconds:
# 30 min unless asked (`render --max-duration`), so a week-long run is refused up front
# instead of rendering 18 million frames. The cap itself may be raised to a day.
MAX_DURATION_S = "1800"
MAX_DURATION_CAP = Fraction(86400)
_SIZE = re.compile(r"(\d{1,5})[xX×](\d{1,5})")


class Align(StrEnum):
    """Where each arm's replay clock starts: the video's metric decides (`clock_align`), so the
    finish times a viewer can time give the speed-up the video states."""

    SEND = "send"  # at request send: time-to-first-token differences show
    FIRST_TOKEN = "first-token"  # at the arm's own first token


class Metric(StrEnum):
    """The video's one metric for speed-ups (`tokenreel.analysis.claims.METRICS`)."""

    DECODE = "decode"  # decode tok/s
    E2E = "e2e"  # end to end: time from request send to the last token


# The stopwatch rule: the clock each metric's race is timed with.
METRIC_CLOCK = {Metric.DECODE: Align.FIRST_TOKEN, Metric.E2E: Align.SEND}

_Choice = TypeVar("_Choice", bound=StrEnum)


def choice(kind: type[_Choice], value: object, option: str) -> _Choice:
    """value as a member of kind: a member as it is, a spelling of one in any case with spaces
    around it; else ValueError naming the option and its values."""
    if isinstance(value, kind):
        return value
    if isinstance(value, str):
        try:
            return kind(value.strip().lower())
        except ValueError:
            pass
    raise ValueError(f"{option}: expected {' or '.join(member.value for member in kind)}, got {value!r}")


@dataclass(frozen=True)
class RenderOptions:
    prompt: str | None = None  # None -> the prompt nearest the suite's speed-up (render_plan.default_prompt)
    run: str = "median"  # "median" or a measured run index (as in Run.index) e.g. "2"
    arms: tuple[str, ...] = ()  # empty -> all arms; a video races 2 to 4
    fps: int = 30
    size: str = "1920x1080"  # also "1080x1920" (vertical, arms stacked) and "3840x2160"
    speed: str = "1"  # parsed to fractions.Fraction; all timing in integers
    theme: str = "dark"  # or "light", or a path to a JSON theme file
    title_s: str = "1.5"  # title card length (whole frames: round(title_s*fps)); "0": none
    hold_s: str = "4"  # end card (the headline) shown this long, after a short pause on the final state
    at: str | None = None  # poster frame time in seconds (for .png output)
    align: Align | None = None  # None -> the metric's clock (clock_align); another is refused
    metric: Metric = Metric.DECODE
    title: str | None = None  # title card's big line; None -> the session name
    subtitle: str | None = None  # title card's line under it; None -> the prompt text, "" -> none
    logo: str | None = None  # PNG drawn in the title card's top-right corner
    logo_sha256: str | None = None  # the logo's hash, pinned when rendered (see pin_files)
    theme_sha256: str | None = None  # a theme file's hash, pinned likewise (None: a shipped theme)
    max_duration_s: str = MAX_DURATION_S  # longest replay allowed, seconds of video (see MAX_DURATION_S)
    answer_badge: bool = False  # each column says, once its stream is done, whether its answer is the first arm's
    exclude_host_contended: bool = False  # the run selection: leave out runs whose engine host was under CPU pressure

    def __post_init__(self) -> None:
        """The enumerated options as members, from a member or its spelling (a manifest's, a test's)."""
        if self.align is not None:
            object.__setattr__(self, "align", choice(Align, self.align, "align"))
        object.__setattr__(self, "metric", choice(Metric, self.metric, "metric"))

    @property
    def clock_align(self) -> Align:
        """Where the race's clocks start: decode at each arm's first token (the finish times are
        the decode times), e2e at request send (the finish times are the end-to-end times)."""
        return METRIC_CLOCK[self.metric]

    @property
    def selection(self) -> RunSelection:
        """The run-selection policy these options ask for (`tokenreel.analysis.selection`)."""
        return RunSelection(exclude_host_contended=self.exclude_host_contended)


def pinned_file(option: str, path: str, recorded: str | None) -> tuple[str, bytes]:
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
    logo = pinned_file("logo", options.logo, None)[0] if options.logo else None
    theme = None
    if is_theme_path(options.theme):
        theme = pinned_file("theme", options.theme, None)[0]
        load_theme(options.theme)  # a bad theme file fails here, before anything is drawn
    return replace(options, logo_sha256=logo, theme_sha256=theme)


def fraction(value: str, option: str, low: Fraction, high: Fraction) -> Fraction:
    """A number option (such as "1/2" or "1.5") exactly, between low and high."""
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


class CheckedOptions(NamedTuple):
    """The options that mean the same for every session, parsed."""

    width: int
    height: int
    speed: Fraction
    title_s: Fraction
    hold_s: Fraction
    theme: Theme


def check_options(options: RenderOptions) -> CheckedOptions:
    """Check what needs no session (size, fps, speed, card lengths, theme, metric with align, run):
    build_plan starts here, and a catalogue checks each of its layouts and themes here before it
    renders anything, so a typo is bad input, not a failure of every video."""
    width, height = parse_size(options.size)
    if isinstance(options.fps, bool) or not isinstance(options.fps, int) or not 1 <= options.fps <= MAX_FPS:
        raise ValueError(f"fps: expected a whole number 1..{MAX_FPS}, got {options.fps!r}")
    speed = fraction(options.speed, "speed", Fraction(1, 100), Fraction(100))
    title_s = fraction(options.title_s, "title_s", Fraction(0), MAX_SECONDS)
    hold_s = fraction(options.hold_s, "hold_s", Fraction(0), MAX_SECONDS)
    if is_theme_path(options.theme):
        pinned_file("theme", options.theme, options.theme_sha256)
    theme = load_theme(options.theme)
    if options.align is not None and options.align != options.clock_align:
        raise ValueError(
            f"align: a {options.metric.value} race is timed from {options.clock_align.value}, so its finish times give the"
            f" speed-up it states; drop --align {options.align.value} (the metric sets the clock) or choose the other --metric"
        )
    run = options.run.strip()
    if run != "median" and not run.isdigit():
        raise ValueError(f"run: expected 'median' or a run index such as '2', got {options.run!r}")
    return CheckedOptions(width, height, speed, title_s, hold_s, theme)
