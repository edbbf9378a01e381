"""How every output writes a figure: one rounding for the report, the terminal and the video.

Three outputs that each formatted with their own f-string could show one speed-up as 4.16x in
the report and 4.17x in the video. Figures here are rounded half up from their shortest decimal
form (4.165 -> 4.17, as a person rounds the number they read), never by binary half-even.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

MISSING = "—"


def figure(value: float | None, digits: int = 1, suffix: str = "") -> str:
    """A measured value to `digits` decimals, or the missing mark when there is none."""
    if value is None:
        return MISSING
    rounded = Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{rounded:.{digits}f}{suffix}"


def multiplier(value: float | None) -> str:
    """A speed-up or ratio, as 4.17x."""
    return figure(value, 2, "x")


def clock_seconds(ns: int) -> str:
    """A time read off the race clock (the video's, the race chart's), as 8.14 s: cut to
    hundredths like a clock shows them, never rounded up to a time not reached yet."""
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000 // 10_000_000:02d} s"
