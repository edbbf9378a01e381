"""How much of a drafter arm's run-to-run spread acceptance explains.

At temperature 0 a drafter arm's decode speed can still move 10-20 % run to run, and the
question is whether the drafts were accepted differently or the machine ran differently. Over
the arm's counted runs, within cells (each run's deviation from its prompt's mean, so that one
prompt being faster than another is not counted), log decode tok/s is regressed on log
acceptance length by least squares through the origin; the share explained is R^2 =
(Σxy)^2 / (Σx^2 Σy^2), with Σ(n_c - 1) - 1 residual degrees of freedom.

The report says "the run-to-run spread is acceptance, not the machine" only when the share is
above `SAYS_SHARE` (acceptance explains most of the spread) and the slope differs from 0 at the
5 % level (a t test on the regression, so a high share from a handful of runs, which chance
gives easily, is not said). With 1 run a cell there is no spread; where some run has no
acceptance length, nothing can be regressed: both are said missing with the reason.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from tokenreel.analysis.intervals import t_quantile
from tokenreel.analysis.ladder import Cell, common_prompts, usable_runs
from tokenreel.analysis.metrics import run_metrics
from tokenreel.analysis.selection import DEFAULT_SELECTION, RunSelection
from tokenreel.session.model import Session

SAYS_SHARE = 0.5  # more than half the variance: "most of the spread"
SAYS_LEVEL = 0.05  # the slope's test level
SAYS_TEXT = "the run-to-run spread is acceptance, not the machine"


@dataclass(frozen=True)
class RunVariance:
    """A drafter arm's share of run-to-run variance explained by acceptance (None: `note` says why)."""

    arm: str
    share: float | None
    runs: int  # runs in cells of 2 or more
    cells: int  # such cells
    dof: int  # the regression's residual degrees of freedom
    says: bool  # the share is high and significant: SAYS_TEXT holds
    note: str = ""


def run_variances(session: Session, cells: list[Cell], drafters: list[str],
                  selection: RunSelection = DEFAULT_SELECTION) -> list[RunVariance]:
    """One entry per arm of `drafters`, over the prompts every arm has."""
    shared = common_prompts(session, cells)
    return [run_variance(session, arm, shared, selection) for arm in drafters]


def run_variance(session: Session, arm: str, prompts: list[str], selection: RunSelection = DEFAULT_SELECTION) -> RunVariance:
    """The module's regression over the arm's usable runs on `prompts`."""
    xs: list[float] = []
    ys: list[float] = []
    runs = groups = 0
    for prompt in prompts:
        points = []
        for run in usable_runs(session, arm, prompt, selection):
            decode = run_metrics(run).decode_tok_s
            length = run.acceptance.mean_length if run.acceptance else None
            if decode is None or not decode > 0:
                continue
            if length is None or not length > 0:
                return RunVariance(arm, None, 0, 0, 0, False,
                                   f"acceptance not counted per run ({arm}, {prompt}, run {run.index}): nothing to regress")
            points.append((math.log(length), math.log(decode)))
        if len(points) < 2:
            continue
        mean_x = statistics.fmean(x for x, _ in points)
        mean_y = statistics.fmean(y for _, y in points)
        xs += [x - mean_x for x, _ in points]
        ys += [y - mean_y for _, y in points]
        runs, groups = runs + len(points), groups + 1
    dof = runs - groups - 1
    if not groups:
        return RunVariance(arm, None, 0, 0, 0, False,
                           "1 run a cell: no run-to-run spread to explain (record with --repeats 2 or more)")
    sxx, syy, sxy = math.fsum(x * x for x in xs), math.fsum(y * y for y in ys), math.fsum(x * y for x, y in zip(xs, ys, strict=True))
    if syy == 0:
        return RunVariance(arm, None, runs, groups, dof, False, "no run-to-run spread: every run of a cell decoded alike")
    if sxx == 0:
        return RunVariance(arm, 0.0, runs, groups, dof, False,
                           "acceptance the same in every run of a cell: the spread is not acceptance")
    share = sxy * sxy / (sxx * syy)
    return RunVariance(arm, share, runs, groups, dof, share > SAYS_SHARE and _significant(share, dof))


def _significant(share: float, dof: int) -> bool:
    """The slope differs from 0 at SAYS_LEVEL: t = r sqrt(dof / (1 - r^2)) beyond the t quantile."""
    if dof < 1:
        return False
    if share >= 1:
        return True
    return math.sqrt(share * dof / (1 - share)) > t_quantile(1 - SAYS_LEVEL / 2, dof)
