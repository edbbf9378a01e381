"""Values the CLI reads from text: a percentage (`--target-ci 2%`) and a duration (`--max-time 90m`)."""

from __future__ import annotations

import math
import re


def percent(text: str) -> float:
    """'2%' or '2' -> 0.02; ValueError naming --target-ci otherwise."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        value = math.nan
    if not 0 < value < 100:
        raise ValueError(f"--target-ci: expected a percentage above 0 and below 100 such as 2%, got {text!r}")
    return value / 100


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> float:
    """'90m', '2h', '1h30m', '3600s' or '3600' -> seconds; ValueError naming --max-time otherwise."""
    parts = re.fullmatch(r"(?:\d+(?:\.\d+)?[smhd]?)+", text.strip()) and re.findall(r"(\d+(?:\.\d+)?)([smhd]?)", text.strip())
    seconds = sum(float(number) * _UNITS[unit or "s"] for number, unit in parts) if parts else 0
    if not seconds > 0:
        raise ValueError(f"--max-time: expected a duration such as 90m, 2h or 3600s, got {text!r}")
    return seconds
