"""95 % intervals on the ladder's ratios: how sure a speed-up is, with the prompt as the unit.

A ladder ratio of two arms is a ratio of means over the prompts both have: R = mean(b) / mean(a),
a_p and b_p being the arms' cell figures (the median over the prompt's runs) on prompt p. Its
interval is the linearised (delta-method) interval of the combined ratio estimate of stratified
sampling (Cochran, *Sampling Techniques*, 3rd ed., 1977, sections 6.11-6.12):

- strata are the prompt categories, weighted by their share of the prompts, as the ladder's plain
  mean over prompts weights them; a category's own interval is the same with one stratum;
- paired: the residual e_p = b_p - R a_p holds both arms' figures on one prompt, so what makes a
  prompt slow for every arm cancels, and only how the speed-up varies between prompts counts;
- repeats: a prompt's figure is the median of its runs, so run-to-run noise is already in the
  spread of e_p between prompts; the between-prompt variance counts it once, with no second
  level (the "ultimate cluster" estimator: Hansen, Hurwitz and Madow, 1953; Wolter,
  *Introduction to Variance Estimation*, 2nd ed., 2007, section 2.4);
- on the log scale, log R +- t * se / R, with Satterthwaite's degrees of freedom for the strata
  (Cochran 5.9), so an interval never reaches 0 and is skewed as a ratio's is.

No resampling, so no seed: one session gives the same interval, byte for byte, on any machine.
Under a stopping rule (`record --target-ci`) the looks are planned before the first prompt (each
5 % larger than the one before, up to the budget) and every look's interval is taken at
`STOP_LEVEL`, 96.5 %. The rule stops on the interval's width, never on where it lies, so looking
often does not call for a repeated-looks correction (Chow and Robbins, 1965: a fixed-width
interval, sampled until wide enough, covers at its level as the width shrinks); the margin above
95 % pays for what a finite session loses: a long slow tail of speed-ups (the prompts a drafter
fails on) makes a t interval cover a little less than its level, and the first narrow interval
tends to come while those prompts are few so far (bench/ci_coverage.py measures the coverage).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

LEVEL = 0.95
# The fewest prompts an interval is given for: with fewer, the spread between prompts is itself
# too uncertain for a t interval to mean much (a paired comparison needs about 6 at 5 %); and every
# category needs 2, since a stratum of one prompt has no variance to estimate.
MIN_PROMPTS = 6
MIN_PER_CATEGORY = 2


@dataclass(frozen=True)
class Pair:
    """One prompt's figures for the two arms of a ratio: `base` (the denominator) and `other`."""

    category: str
    base: float
    other: float


@dataclass(frozen=True)
class Interval:
    """A ratio with its interval at `level`, or without one and `note` saying why."""

    ratio: float | None
    low: float | None
    high: float | None
    prompts: int  # the sample size: prompts (for `tokenreel.analysis.verdicts.runs_interval`, runs on its smaller side)
    level: float = LEVEL
    note: str = ""
    dof: float | None = None  # the t quantile's degrees of freedom (None: no interval, or a width of 0)

    @property
    def half_width(self) -> float | None:
        """Half the interval's width relative to the ratio: 0.02 is "+-2 %" (what --target-ci aims at)."""
        if self.ratio is None or self.low is None or self.high is None:
            return None
        return (self.high - self.low) / 2 / self.ratio

    def as_list(self) -> list[float] | None:
        """[low, high] for machine-readable outputs, None without an interval."""
        return None if self.low is None or self.high is None else [self.low, self.high]


def ratio_interval(pairs: Sequence[Pair], level: float = LEVEL) -> Interval:
    """mean(other) / mean(base) over `pairs` with its interval at `level` (the module's method)."""
    return contrast_interval([Sample(p.category, (p.base, p.other)) for p in pairs], (-1, 1), level)


@dataclass(frozen=True)
class Sample:
    """One prompt's figures for a contrast of several means (two arms, or two arms in two sessions)."""

    category: str
    values: tuple[float, ...]


def contrast_interval(samples: Sequence[Sample], powers: tuple[int, ...], level: float = LEVEL) -> Interval:
    """prod_k mean_k ** powers[k] over `samples` with its interval at `level`: the delta method on
    the log, whose linearised value for a prompt is sum_k powers[k] * x_k / mean_k (the module's
    method). A ratio of means, values (base, other), is powers (-1, 1); session B's ratio over
    session A's, values (A base, A arm, B base, B arm), is powers (1, -1, -1, 1)."""
    n = len(samples)
    means = [math.fsum(s.values[k] for s in samples) / n if n else 0.0 for k in range(len(powers))]
    if not n or any(m <= 0 for m in means):
        return Interval(None, None, None, n, level, "no ratio: a mean figure is 0 or missing")
    # Numerator over denominator, so a ratio of means is the ladder's own float (mean / mean).
    numerator = math.prod(m**p for m, p in zip(means, powers, strict=False) if p > 0)
    value = numerator / math.prod(m**-p for m, p in zip(means, powers, strict=False) if p < 0)
    reason = _too_few(samples)
    if reason:
        return Interval(value, None, None, n, level, reason)
    strata: dict[str, list[float]] = {}
    for s in samples:
        strata.setdefault(s.category, []).append(math.fsum(p * x / m for p, x, m in zip(powers, s.values, means, strict=False)))
    parts = []  # per stratum: W_h^2 s_h^2 / n_h, and n_h - 1 for the degrees of freedom
    for linear in strata.values():
        k = len(linear)
        mean = math.fsum(linear) / k
        variance = math.fsum((e - mean) ** 2 for e in linear) / (k - 1)
        parts.append(((k / n) ** 2 * variance / k, k - 1))
    return log_interval(value, parts, n, level)


def log_interval(value: float, parts: Sequence[tuple[float, int]], n: int, level: float = LEVEL) -> Interval:
    """`value` times exp(+-t * sd) on the log scale, where the log's variance is the sum of the
    parts' variance terms and the t's degrees of freedom Satterthwaite's from theirs (each part:
    its variance term and degrees of freedom). Zero variance gives the point itself."""
    variance = math.fsum(g for g, _ in parts)
    if variance == 0:
        return Interval(value, value, value, n, level)
    dof = variance**2 / math.fsum(g * g / df for g, df in parts if g > 0)
    spread = t_quantile(1 - (1 - level) / 2, dof) * math.sqrt(variance)
    return Interval(value, value * math.exp(-spread), value * math.exp(spread), n, level, dof=dof)


def _too_few(samples: Sequence[Sample]) -> str:
    """Why `samples` are too few for an interval ("n = 2 prompts: no interval"), or ""."""
    n = len(samples)
    if n < MIN_PROMPTS:
        return f"n = {n} prompt{'' if n == 1 else 's'}: no interval (it needs {MIN_PROMPTS})"
    counts: dict[str, int] = {}
    for s in samples:
        counts[s.category] = counts.get(s.category, 0) + 1
    single = [c for c, k in counts.items() if k < MIN_PER_CATEGORY]
    if single:
        return f"n = {n} prompts, 1 in {', '.join(single)}: no interval (every category needs {MIN_PER_CATEGORY})"
    return ""


def t_quantile(probability: float, dof: float) -> float:
    """Student's t quantile (scipy's `stdtrit`). scipy is imported here, not with the module:
    it costs a render, which imports this module through the claims it draws and never asks for
    an interval, about 0.4 s of CPU at start-up (3 % of a 20 s video's encoding)."""
    from scipy.special import stdtrit  # noqa: PLC0415

    return float(stdtrit(dof, probability))


# ---------------------------------------------------------------------------------------------
# Stopping when the answer is known


# `record --target-ci`'s level (the module's docstring says why it is above LEVEL).
STOP_LEVEL = 0.965
# Each look adds 5 % to the one before: a stop overshoots the prompts it needed by 5 % at most,
# and since the level does not depend on the looks, looking often costs nothing.
LOOK_GROWTH = 1.05


@dataclass(frozen=True)
class StoppingRule:
    """`record --target-ci`: stop at the first of the planned `looks` (prompt counts) where every
    targeted ratio's interval, taken at `level`, is within `target` (relative half-width)."""

    target: float
    looks: tuple[int, ...]
    level: float = STOP_LEVEL

    def met(self, interval: Interval) -> bool:
        width = interval.half_width
        return width is not None and width <= self.target


def look_sizes(first: int, budget: int, growth: float = LOOK_GROWTH) -> list[int]:
    """Prompt counts at which to look: `first`, then x`growth` each time, the last one `budget`."""
    sizes = [min(first, budget)]
    while sizes[-1] < budget:
        sizes.append(min(budget, max(sizes[-1] + 1, math.ceil(sizes[-1] * growth))))
    return sizes


def stratified_order(prompts: Sequence[tuple[str, str]], seed: int) -> list[str]:
    """The ids of (id, category) `prompts` in the order `record --target-ci` draws them: a seeded
    shuffle within each category, then the categories interleaved by each one's share (its i-th
    of n prompts at (i + 1/2) / n of the way; round-robin when all are the same size), so every
    prefix holds the categories in the suite's proportions as nearly as a prefix can."""
    rng = random.Random(seed)
    by_category: dict[str, list[str]] = {}
    for prompt_id, category in prompts:
        by_category.setdefault(category, []).append(prompt_id)
    keyed = []
    for rank, ids in enumerate(by_category.values()):
        rng.shuffle(ids)
        keyed += [((i + 0.5) / len(ids), rank, prompt_id) for i, prompt_id in enumerate(ids)]
    return [prompt_id for _, _, prompt_id in sorted(keyed)]


def first_look(categories: int) -> int:
    """The smallest look that can give an interval: MIN_PROMPTS, and 2 prompts of every category."""
    return max(MIN_PROMPTS, MIN_PER_CATEGORY * categories)


def planned_looks(categories: int, budget: int) -> list[int]:
    """The looks `record --target-ci` plans (and `tokenreel plan` predicts its stop among) for a
    suite of `categories` and `budget` prompts at most."""
    return look_sizes(min(first_look(categories), budget), budget)
