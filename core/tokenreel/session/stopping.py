"""`record --target-ci`'s stopping rule as the session keeps it (docs/session-format.md)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Stopping:
    """`record --target-ci`: the stopping rule a session was recorded under, and how far it got.

    Prompts are drawn in `order` (a seeded shuffle within each category, then round-robin over
    the categories: `tokenreel.analysis.intervals.stratified_order`); the rule looks once the first
    `looks[i]` of them are recorded on every arm, and stops at the first look where every
    targeted interval, taken at `level` (`tokenreel.analysis.intervals.STOP_LEVEL`), is within
    `target` (relative half-width). Every interval of the session is reported at `level`.
    """

    target: float
    level: float
    looks: list[int]
    order: list[str]
    seed: int
    max_time_s: float | None = None
    targets: list[str] = field(default_factory=list)  # the ratios aimed at ("nvfp4 vs bf16"); empty: every one
    looked: list[int] = field(default_factory=list)  # the looks taken so far, in prompts
    widths: dict[str, float | None] = field(default_factory=dict)  # each targeted ratio's half-width at the last look
    stopped: str = ""  # why it stopped ("target met", "max prompts", "max time", "suite used up"); "" while going

    @property
    def drawn(self) -> list[str]:
        """The prompts drawn so far: up to the look being recorded (all planned ones once stopped)."""
        done = self.looked[-1] if self.looked else 0
        upcoming = next((look for look in self.looks if look > done), done)
        return self.order[: done if self.stopped else upcoming]
