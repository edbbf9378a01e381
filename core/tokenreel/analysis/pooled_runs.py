"""A ladder figure's interval from the runs, for sessions with too few prompts for one over prompts.

`tokenreel compare` judges a ladder row (an arm's mean decode tok/s, B / A) or a ladder ratio (B's
speed-up over A's) by an interval over prompts. Below `intervals.MIN_PROMPTS` prompts (the seeds'
reproducibility checks are 4 prompts, 2-3 runs a cell) that interval does not exist, yet the
runs still say how far each session's figure can move by chance: the prompts are held as they
are (both sessions asked the same ones), and the only sampling left is run to run.

The figure is a product of means over the same prompts, prod_g M_g ** power_g, each group g being
one arm in one session and M_g the mean over prompts of each cell's mean over its runs. On the log
(the delta method), var(log M_g) = sum_p (m_p / sum_p m_p)^2 * v_g / n_p, with n_p the cell's runs
and v_g the relative run-to-run variance (s^2 / m^2) pooled over the group's cells, with
sum_p (n_p - 1) degrees of freedom: 2-3 runs are too few to estimate a cell's own scatter, but
an arm's cells in one session scatter alike (the same engine, the same host, the same hour), so
4 prompts x 3 runs give 8 degrees of freedom a group. The groups may scatter differently (B
recorded on a busier host), so their variances add, with Satterthwaite's degrees of freedom and a
Student t quantile (`intervals.log_interval`). What it cannot see is a cell that moves as a whole
between the sessions (the interval over prompts counts that): it answers whether the sessions
differ by more than their runs scatter.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tokenreel.analysis.intervals import LEVEL, Interval, log_interval


@dataclass(frozen=True)
class RunGroup:
    """One arm in one session: each prompt's usable runs' figures (prompts in one order over all
    groups of a figure), and the power of its mean in the figure (+1 numerator, -1 denominator)."""

    power: int
    cells: Sequence[Sequence[float]]


def pooled_runs_interval(groups: Sequence[RunGroup], level: float = LEVEL) -> Interval:
    """prod_g mean_g ** power_g with its interval at `level` (the module's method); its `prompts`
    holds the most runs a cell, the n that more runs a cell would grow."""
    runs = [len(cell) for group in groups for cell in group.cells]
    if not runs or min(runs) == 0:
        return Interval(None, None, None, max(runs, default=0), level, "no ratio: a cell without a run")
    n = max(runs)
    cell_means = [[statistics.fmean(cell) for cell in group.cells] for group in groups]
    means = [statistics.fmean(cells) for cells in cell_means]
    if any(mean <= 0 for mean in means):
        return Interval(None, None, None, n, level, "no ratio: a mean figure is 0")
    numerator = math.prod(mean**g.power for mean, g in zip(means, groups, strict=True) if g.power > 0)
    value = numerator / math.prod(mean**-g.power for mean, g in zip(means, groups, strict=True) if g.power < 0)
    parts = []
    for group, mean, cells in zip(groups, means, cell_means, strict=True):
        dof = sum(len(cell) - 1 for cell in group.cells)
        if not dof:
            return Interval(value, None, None, n, level, "1 run a cell: no run-to-run scatter to judge by")
        pooled = math.fsum(statistics.variance(cell) / m**2 * (len(cell) - 1)
                           for cell, m in zip(group.cells, cells, strict=True) if len(cell) > 1) / dof
        k = len(cells)
        weight = math.fsum((m / (k * mean)) ** 2 / len(cell) for cell, m in zip(group.cells, cells, strict=True))
        parts.append((pooled * weight, dof))
    return log_interval(value, parts, n, level)
