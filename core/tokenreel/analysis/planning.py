"""How many prompts a target interval needs, from a pilot session, before spending GPU hours.

For each ladder ratio (each arm against the arm before it and against the first, decode tok/s)
the pilot's prompts give each category's spread of the ratio's linearised values (the variance
`tokenreel.analysis.intervals` takes its interval from). With the suite's categories in their shares
(proportional allocation), the interval's relative half-width over n prompts is about
z * sqrt(sum_h W_h s_h^2 / n), so a half-width of `target` needs n = z^2 sum_h W_h s_h^2 / target^2
(Cochran 1977, 5.5 and 5.9): z = 1.96 for one look at a fixed n chosen now, and the z of
`record --target-ci`'s level (`intervals.STOP_LEVEL`), rounded up to the next of the looks it
plans (`intervals.planned_looks`, the recorder's own).
Time is the pilot's own: each arm's mean seconds per run (send to last token) times the runs per
prompt. An estimate from a pilot is itself uncertain: a pilot of a few prompts per category can
be off by half, so `record --target-ci` decides as it goes, and this says where it will likely end.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from statistics import NormalDist

from tokenreel.analysis.intervals import LEVEL, MIN_PER_CATEGORY, STOP_LEVEL, Pair, planned_looks, ratio_interval
from tokenreel.analysis.ladder import build_cells, common_prompts, paired
from tokenreel.analysis.metrics import run_metrics
from tokenreel.analysis.selection import DEFAULT_SELECTION
from tokenreel.session.model import Session


@dataclass(frozen=True)
class RatioPlan:
    """What one ladder ratio needs for `target`; None where the pilot cannot tell (`note` says why)."""

    name: str
    half_width: float | None  # the pilot's own 95 % interval's (as the report gives it)
    fixed_prompts: int | None  # one look, 95 %
    sequential_prompts: int | None  # record --target-ci: the look it will likely stop at
    per_category: dict[str, int]  # sequential_prompts split by the suite's shares
    hours: float | None  # recording sequential_prompts on every arm, at the pilot's speeds
    note: str = ""


def plan(session: Session, target: float, suite_size: int | None = None) -> list[RatioPlan]:
    """Every ladder ratio's needs for a relative half-width of `target`, from `session`'s runs."""
    cells = build_cells(session)
    shared = set(common_prompts(session, cells))
    shares = _shares(session)
    suite = suite_size or len(session.prompts)
    looks = planned_looks(len(shares), suite)
    z_fixed = NormalDist().inv_cdf(0.5 + LEVEL / 2)
    z_stop = NormalDist().inv_cdf(0.5 + STOP_LEVEL / 2)
    seconds = _seconds_per_prompt(session)
    arms = [a.id for a in session.arms]
    plans = []
    for i, arm in enumerate(arms[1:], start=1):
        for base in dict.fromkeys((arms[i - 1], arms[0])):
            pairs = paired(cells, shared, lambda c: c.decode_tok_s, arm, base)
            plans.append(_ratio_plan(f"{arm} vs {base}", pairs, shares, target, z_fixed, z_stop, looks, seconds))
    return plans


def _shares(session: Session) -> dict[str, float]:
    """Each category's share of the suite (what the ladder's mean weights it by)."""
    counts: dict[str, int] = {}
    for prompt in session.prompts:
        counts[prompt.category] = counts.get(prompt.category, 0) + 1
    return {category: n / len(session.prompts) for category, n in counts.items()}


def _seconds_per_prompt(session: Session) -> float | None:
    """Seconds one prompt costs on every arm: warmup and measured runs at each arm's mean run time."""
    per_run = []
    for arm in session.arms:
        times = [m.e2e_s for r in session.runs if r.arm == arm.id and DEFAULT_SELECTION.counts(r)
                 for m in [run_metrics(r)] if m.e2e_s is not None]
        if not times:
            return None
        per_run.append(statistics.fmean(times))
    runs = session.settings.warmup + session.settings.repeats
    return runs * math.fsum(per_run)


def _ratio_plan(name: str, pairs: list[Pair], shares: dict[str, float], target: float, z_fixed: float, z_stop: float,
                looks: list[int], seconds: float | None) -> RatioPlan:
    by_category: dict[str, list[Pair]] = {}
    for p in pairs:
        by_category.setdefault(p.category, []).append(p)
    thin = [c for c in shares if len(by_category.get(c, [])) < MIN_PER_CATEGORY]
    if thin:
        note = f"the pilot has fewer than {MIN_PER_CATEGORY} prompts in {', '.join(thin)}: record a pilot with more"
        return RatioPlan(name, None, None, None, {}, None, note)
    mean_base = statistics.fmean(p.base for p in pairs)
    mean_other = statistics.fmean(p.other for p in pairs)
    variance = math.fsum(
        shares[c] * statistics.variance([p.other / mean_other - p.base / mean_base for p in ps])
        for c, ps in by_category.items() if c in shares
    )
    now = ratio_interval(pairs).half_width
    fixed = max(math.ceil(z_fixed**2 * variance / target**2), looks[0])
    needed = z_stop**2 * variance / target**2
    stop = next((look for look in looks if look >= needed), None)
    if stop is None:
        note = (f"needs about {math.ceil(needed)} prompts, more than the suite's {looks[-1]}: a bigger suite"
                " (`tokenreel prompts import`) or a wider target")
        return RatioPlan(name, now, fixed, None, {}, None, note)
    per_category = {c: math.ceil(share * stop) for c, share in shares.items()}
    hours = None if seconds is None else stop * seconds / 3600
    return RatioPlan(name, now, fixed, stop, per_category, hours)
