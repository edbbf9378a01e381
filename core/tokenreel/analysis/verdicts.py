"""Same, faster, slower, or can't tell yet: a difference between two sessions, judged by its interval.

A difference is B / A - 1, in %, with its 95 % interval. Against the tolerance T (`compare
--tolerance`, 2 % by default) its verdict is:

- "same": the whole interval lies inside [-T, +T];
- "faster" / "slower": the whole interval lies above +T / below -T;
- "can't tell yet": anything else (the interval holds an edge of the band), with about how many
  more prompts (a ladder figure) or runs (a cell) would settle it, or why there is no interval.

Two units of sampling. A ladder figure (an arm's mean decode tok/s, a ladder ratio) is a mean over
prompts: its interval is `tokenreel.analysis.intervals`' (the combined ratio estimate of stratified sampling,
Cochran, *Sampling Techniques*, 3rd ed., 1977, sections 6.11-6.12: strata the prompt categories,
paired by prompt, the delta method on the log, Satterthwaite's degrees of freedom). A cell (one
arm on one prompt) is a mean over runs: its interval is on log(mean_B / mean_A) of the runs'
decode tok/s, with variance s_A^2 / (n_A mean_A^2) + s_B^2 / (n_B mean_B^2) (the delta method)
and Welch's t with the Welch-Satterthwaite degrees of freedom, since the two sessions' runs need
not scatter alike (Welch, Biometrika 34, 1947, 28-35; Satterthwaite, Biometrics Bulletin 2, 1946,
110-114). With fewer than 2 runs on a side there is no spread to estimate, so no interval.

How many more: the half-width on the log scale is t(dof) * se, se shrinks as 1/sqrt(n) (n prompts,
or runs in each session) and dof grows as n - 1. N more is the smallest n' - n at which the
half-width fits between the estimate and the band's nearer edge (inside the band for "same",
outside it for "faster"/"slower"), the estimate held where it is now. The t quantile matters:
with 2 runs a side it is 4.3 to 12.7 (2 to 1 degrees of freedom), so 1/sqrt(n) with the quantile
held would ask for 5 to 40 times too many runs. It is an estimate: the difference itself moves
as runs come in.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tokenreel.analysis.intervals import LEVEL, Interval, log_interval, t_quantile

SAME, FASTER, SLOWER, CANT_TELL = "same", "faster", "slower", "can't tell yet"
VERDICTS = (SAME, FASTER, SLOWER, CANT_TELL)
MIN_RUNS = 2  # a side: one run has no spread
MOST = 10**9  # more prompts or runs than this: the estimate sits on the band's edge


@dataclass(frozen=True)
class Verdict:
    """One difference judged: `unit` is what more of would narrow it, "prompts" or "runs"."""

    estimate_pct: float | None  # B / A - 1 in %, the value the interval is around
    diff_ci95: list[float] | None  # [low, high] in %; None without an interval, `note` says why
    verdict: str  # one of VERDICTS
    more: int | None  # about how many more `unit` would settle a "can't tell yet"; None: not estimable
    unit: str
    note: str = ""

    @property
    def differs(self) -> bool:
        return self.verdict in (FASTER, SLOWER)

    @property
    def reason(self) -> str:
        """Why it can't tell yet: "about 8 more prompts", or why there is no interval; else ""."""
        if self.verdict != CANT_TELL:
            return ""
        if self.more is not None:
            return f"about {self.more} more {self.unit if self.more != 1 else self.unit[:-1]}"
        return self.note

    @property
    def text(self) -> str:
        """The verdict in words: "same", "can't tell yet: about 8 more prompts"."""
        return f"{CANT_TELL}: {self.reason}" if self.verdict == CANT_TELL else self.verdict


def judge(interval: Interval, tolerance_pct: float, unit: str) -> Verdict:
    """The verdict of `interval` (a ratio B / A) against ±tolerance_pct; `unit` is what its n counts."""
    ratio, low, high = interval.ratio, interval.low, interval.high
    estimate = None if ratio is None else (ratio - 1) * 100
    if ratio is None or low is None or high is None:
        return Verdict(estimate, None, CANT_TELL, None, unit, interval.note)
    bounds = [(low - 1) * 100, (high - 1) * 100]
    if -tolerance_pct <= bounds[0] and bounds[1] <= tolerance_pct:
        return Verdict(estimate, bounds, SAME, None, unit)
    if bounds[0] > tolerance_pct or bounds[1] < -tolerance_pct:
        return Verdict(estimate, bounds, FASTER if bounds[0] > tolerance_pct else SLOWER, None, unit)
    more = _more(interval, tolerance_pct)
    note = "" if more is not None else f"the difference sits on the band's edge: more {unit} will not settle it"
    return Verdict(estimate, bounds, CANT_TELL, more, unit, note)


def _more(interval: Interval, tolerance_pct: float) -> int | None:
    """About how many more prompts or runs until the interval fits inside or outside the band."""
    assert interval.ratio is not None and interval.high is not None and interval.dof is not None
    centre = math.log(interval.ratio)
    upper = math.log1p(tolerance_pct / 100)
    lower = math.log1p(-tolerance_pct / 100) if tolerance_pct < 100 else -math.inf
    if lower <= centre <= upper:
        room = min(centre - lower, upper - centre)
    else:
        room = centre - upper if centre > upper else lower - centre
    n, dof = interval.prompts, interval.dof
    probability = 1 - (1 - interval.level) / 2
    se = math.log(interval.high / interval.ratio) / t_quantile(probability, dof)

    def fits(size: int) -> bool:
        return t_quantile(probability, dof * (size - 1) / (n - 1)) * se * math.sqrt(n / size) <= room

    if room <= 0 or not fits(MOST):
        return None
    low, high = n, n + 1  # fits(high), not fits(low): widen, then halve
    while not fits(high):
        low, high = high, min(MOST, 2 * high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if fits(middle) else (middle, high)
    return high - n


def runs_interval(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> Interval:
    """mean(b) / mean(a) over two cells' runs, with Welch's interval on the log (the module's
    method); its `prompts` holds the smaller side's run count, the n that more runs would grow."""
    n = min(len(a), len(b))
    if not n:
        return Interval(None, None, None, n, level, "no decode tok/s on one side: nothing to compare")
    mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
    ratio = mean_b / mean_a
    short = [f"{len(runs)} run in {side}" for side, runs in (("A", a), ("B", b)) if len(runs) < MIN_RUNS]
    if short:
        return Interval(ratio, None, None, n, level, f"{' and '.join(short)}: no interval (it needs {MIN_RUNS} a side)")
    parts = [(statistics.variance(runs) / len(runs) / mean**2, len(runs) - 1) for runs, mean in ((a, mean_a), (b, mean_b))]
    return log_interval(ratio, parts, n, level)
