"""How every output writes a figure: one rounding for the report, the terminal and the video.

Three outputs that each formatted with their own f-string could show one speed-up as 4.16x in
the report and 4.17x in the video. Figures here are rounded half up from their shortest decimal
form (4.165 -> 4.17, as a person rounds the number they read), never by binary half-even.
A value of 1e15 or more (a float holds no digit past its 16th) is written in scientific notation,
rounded the same way (1.25e27 -> 1.3e+27), so no figure has a digit limit; a value that is not
finite is written as Python does (inf, nan), never raised about.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal, localcontext

MISSING = "—"
SCIENTIFIC_FROM = 1e15


def figure(value: float | None, digits: int = 1, suffix: str = "") -> str:
    """A measured value to `digits` decimals, or the missing mark when there is none."""
    if value is None:
        return MISSING
    value = float(value)
    if not math.isfinite(value):
        return f"{value}{suffix}"
    with localcontext(rounding=ROUND_HALF_UP):
        kind = "e" if abs(value) >= SCIENTIFIC_FROM else "f"
        return f"{Decimal(repr(value)):.{digits}{kind}}{suffix}"


def multiplier(value: float | None) -> str:
    """A speed-up or ratio, as 4.17x."""
    return figure(value, 2, "x")


def signed_pct(value: float | None) -> str:
    """A signed difference in %, 2 decimals (a 2 % tolerance needs more than one); no sign on 0.00."""
    if value is None:
        return figure(None)
    text = figure(abs(value), 2)
    sign = "" if text == figure(0.0, 2) else ("+" if value > 0 else "-")
    return f"{sign}{text} %"


def clock_seconds(ns: int) -> str:
    """A time read off the race clock (the video's, the race chart's, the replay's), as 8.14 s:
    rounded like every other figure, so a finish the video shows is the string the report and
    the replay print for the same run (1.7263 s is 1.73 s everywhere)."""
    return figure(ns / 1_000_000_000, 2, " s")
