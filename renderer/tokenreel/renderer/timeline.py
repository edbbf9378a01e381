"""Which chunks each frame shows, in integer arithmetic only.

Every arm starts at t = 0: its request send (align "send", so TTFT differences show) or its
first token (align "first-token"; the plan shifts the times). Replay frame k (frames
counted after the title card) shows the chunks with t_ns * fps * speed.den <= k * 1e9 * speed.num:
exact for any fps and speed, so no float rounding can move a token to a neighbouring frame on
another machine.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from dataclasses import dataclass
from fractions import Fraction
from itertools import accumulate

from tokenreel.analysis.metrics import NS_PER_S, decode_rate

TITLE, REPLAY, END = "title", "replay", "end"


def first_frame_showing(t_ns: int, fps: int, speed: Fraction) -> int:
    """The first replay frame at which a chunk that arrived at t_ns is visible."""
    return -(-t_ns * fps * speed.denominator // (NS_PER_S * speed.numerator))


@dataclass(frozen=True)
class Clock:
    """Frame index <-> recording time; the title card and end hold shift by whole frames."""

    fps: int
    speed: Fraction
    title_frames: int
    replay_frames: int
    hold_frames: int

    @property
    def frame_count(self) -> int:
        return self.title_frames + self.replay_frames + self.hold_frames

    def phase(self, index: int) -> str:
        if not 0 <= index < self.frame_count:
            raise IndexError(f"frame {index} is outside 0..{self.frame_count - 1}")
        if index < self.title_frames:
            return TITLE
        return REPLAY if index < self.title_frames + self.replay_frames else END

    def cutoff_ns(self, index: int) -> int:
        """Latest arrival offset shown at a frame: floor((index - title) / fps * speed) in ns.

        Negative during the title card, so not even a chunk at t = 0 shows.
        """
        scaled = (index - self.title_frames) * NS_PER_S * self.speed.numerator
        return scaled // (self.fps * self.speed.denominator)


class ArmTimeline:
    """One arm's chunk arrivals, running token counts and running decode speed."""

    def __init__(self, t_ns: tuple[int, ...], tokens: tuple[int, ...], first_index: int) -> None:
        self.t_ns = t_ns
        self.first = first_index
        # cumulative[v]: tokens in the first v chunks; 8 bytes an entry, not a Python int's ~36
        self.cumulative = array("q", [0, *accumulate(tokens)])
        self.carrying = array("q", [0, *accumulate(1 if n > 0 else 0 for n in tokens)])  # chunks with tokens

    @property
    def chunks(self) -> int:
        return len(self.t_ns)

    def visible(self, cutoff_ns: int) -> int:
        """How many chunks have arrived by cutoff_ns (t_ns is sorted)."""
        return bisect_right(self.t_ns, cutoff_ns)

    def tokens(self, visible: int) -> int:
        return self.cumulative[visible]

    def live_decode(self, visible: int) -> float | None:
        """Decode tok/s over the visible chunks after the first token, as metrics defines it."""
        if visible <= self.first + 1:
            return None
        after_first = self.cumulative[visible] - self.cumulative[self.first + 1]
        return decode_rate(after_first, self.t_ns[self.first], self.t_ns[visible - 1])

    def tokens_per_chunk(self, visible: int) -> float | None:
        """Tokens per token-carrying chunk after the first token, over the visible chunks: a
        speculative arm's running acceptance length when it streams one chunk per step."""
        start = self.first + 1
        if visible <= start:
            return None
        chunks = self.carrying[visible] - self.carrying[start]
        return (self.cumulative[visible] - self.cumulative[start]) / chunks if chunks else None
