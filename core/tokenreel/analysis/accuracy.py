"""Each arm's accuracy and each ladder step's paired test, from the runs' grades.

A speed step is only worth taking when it keeps the answers. Every arm answered the same
problems, so a step is judged problem by problem (a paired design): McNemar's exact test on the
problems that flipped, which is a two-sided binomial test of the flips one way among all flips.
A problem's answer is the one the report counts, the cell's median run (`median_run`; an answer
too short for a decode speed: the cell's first counted run): its grade is the problem's.
Problems without a grade (an ungraded prompt, no counted run, a run the grader did not reach)
are left out and counted. pass@1 is greedy decoding's: one answer a
problem, so an interval comes from the binomial (exact Clopper-Pearson).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from tokenreel.analysis.figures import figure
from tokenreel.analysis.ladder import median_run, usable_runs
from tokenreel.analysis.selection import DEFAULT_SELECTION, RunSelection
from tokenreel.session.model import Session

if TYPE_CHECKING:
    from scipy.stats._result_classes import BinomTestResult

LEVEL = 0.95  # the pass@1 interval's confidence
ALPHA = 0.05  # a step's flips are a detectable change below this p-value
NO_CHANGE = "no detectable change"


@dataclass(frozen=True)
class PassRate:
    """pass@1 over graded problems, with its exact (Clopper-Pearson) 95 % interval."""

    passed: int
    graded: int
    rate: float | None  # None: no graded problem
    ci95: list[float] | None


@dataclass(frozen=True)
class Nondeterministic:
    """A cell whose counted runs' grades disagree (the median run's grade is the one counted)."""

    prompt: str
    passed_runs: int
    runs: int


@dataclass(frozen=True)
class ArmAccuracy:
    """One arm's pass@1 overall and per category; what was left out and why."""

    arm: str
    label: str
    overall: PassRate
    categories: dict[str, PassRate]
    left_out: dict[str, int]  # reason -> problems
    nondeterministic: list[Nondeterministic] = field(default_factory=list)


@dataclass(frozen=True)
class Flips:
    """One ladder step judged problem by problem: `arm` against `vs` on the problems both graded.

    newly_solved: failed on `vs`, passed on `arm`; lost: the other way round. p: McNemar's exact
    test (scipy's two-sided binomial test of newly_solved in all flips at 0.5; 1 with no flip)."""

    arm: str
    vs: str
    paired: int
    newly_solved: int
    lost: int
    p_value: float
    verdict: str


@dataclass(frozen=True)
class Accuracy:
    """Every arm's pass@1 and every step's flips, vs the prior arm and vs the first."""

    suite: str
    arms: list[ArmAccuracy]
    vs_prior: list[Flips]
    vs_first: list[Flips]


def suite_name(prompts: str) -> str:
    """The suite as people call it, from `Settings.prompts`: "humaneval" -> HumanEval,
    "arith:N" -> arithmetic, a file -> its name."""
    name = prompts.removeprefix("builtin:")
    if name.split(":")[0] == "humaneval":
        return "HumanEval"
    if name.split(":")[0] == "arith":
        return "arithmetic"
    return PurePosixPath(name.replace("\\", "/")).name or prompts


def graded(session: Session) -> bool:
    """Whether any run carries a grade (the accuracy views appear only then)."""
    return any(run.grade is not None for run in session.runs)


def binomtest(successes: int, trials: int, p: float = 0.5) -> BinomTestResult:
    """scipy's exact binomial test. scipy is imported here, not with the module: a render imports
    this module for its end card's accuracy line and, ungraded, never tests anything; scipy.stats
    cost it about a second of CPU at start-up (a twentieth of a 20 s video's encoding)."""
    from scipy.stats import binomtest as exact  # noqa: PLC0415

    return exact(successes, trials, p)


def pass_rate(passed: int, total: int) -> PassRate:
    if not total:
        return PassRate(passed, total, None, None)
    interval = binomtest(passed, total).proportion_ci(LEVEL, method="exact")
    return PassRate(passed, total, passed / total, [float(interval.low), float(interval.high)])


def p_text(p: float) -> str:
    """A p-value to 2 significant digits ("p = 0.62"), "p < 0.001" below 0.001."""
    if p < 0.001:
        return "p < 0.001"
    digits = max(1, 1 - math.floor(math.log10(p)))
    text = figure(p, digits)
    if float(text) >= 10 ** (1 - digits + 1) and digits > 1:  # 0.0995 -> 0.10, not 0.100
        text = figure(p, digits - 1)
    return f"p = {text}"


def pct_text(rate: PassRate) -> str:
    """pass@1 as "90.9 %" (the one rounding every view uses), or why there is none."""
    return figure(None if rate.rate is None else rate.rate * 100, 1, " %") if rate.graded else "no graded problem"


def verdict(newly_solved: int, lost: int, p: float) -> str:
    if p >= ALPHA or newly_solved == lost:
        return NO_CHANGE
    return "more problems solved" if newly_solved > lost else "fewer problems solved"


def problem_grades(
    session: Session, arm_id: str, selection: RunSelection = DEFAULT_SELECTION,
) -> tuple[dict[str, bool], dict[str, int], list[Nondeterministic]]:
    """Each graded problem's grade on this arm (its median run's), problems left out by reason,
    and the cells whose counted runs disagree."""
    grades: dict[str, bool] = {}
    left_out: dict[str, int] = {}
    mixed: list[Nondeterministic] = []
    for prompt in session.prompts:
        counted = usable_runs(session, arm_id, prompt.id, selection)
        # An answer too short for a decode speed (one or two events) has no median by speed: its first run.
        run = median_run(session, arm_id, prompt.id, selection) or next(iter(counted), None)
        if run is None:
            reason = "no counted run"
        elif run.grade is None:
            reason = "not graded" if prompt.grading is not None else "ungraded prompt"
        else:
            grades[prompt.id] = run.grade.passed
            passes = [r.grade.passed for r in counted if r.grade is not None]
            if 0 < sum(passes) < len(passes):
                mixed.append(Nondeterministic(prompt.id, sum(passes), len(passes)))
            continue
        left_out[reason] = left_out.get(reason, 0) + 1
    return grades, left_out, mixed


def flips(a: dict[str, bool], b: dict[str, bool], arm: str, vs: str) -> Flips:
    """`arm` (grades a) against `vs` (grades b) on the problems both graded."""
    shared = sorted(set(a) & set(b))
    newly = sum(1 for p in shared if a[p] and not b[p])
    lost = sum(1 for p in shared if b[p] and not a[p])
    p = float(binomtest(newly, newly + lost, 0.5).pvalue) if newly + lost else 1.0
    return Flips(arm, vs, len(shared), newly, lost, p, verdict(newly, lost, p))


def build_accuracy(session: Session, selection: RunSelection = DEFAULT_SELECTION, arm_ids: list[str] | None = None) -> Accuracy:
    """pass@1 per arm and category, and the flips of each step (arms in session order, or `arm_ids`)."""
    arms = [session.arm(a) for a in arm_ids] if arm_ids is not None else list(session.arms)
    categories = {p.id: p.category for p in session.prompts}
    grades: dict[str, dict[str, bool]] = {}
    rows = []
    for arm in arms:
        mine, left_out, mixed = problem_grades(session, arm.id, selection)
        grades[arm.id] = mine
        per_category = {
            c: pass_rate(sum(1 for p, ok in mine.items() if ok and categories[p] == c), sum(1 for p in mine if categories[p] == c))
            for c in dict.fromkeys(categories[p] for p in mine)
        }
        rows.append(ArmAccuracy(arm.id, arm.label, pass_rate(sum(mine.values()), len(mine)), per_category, left_out, mixed))
    ids = [a.id for a in arms]
    return Accuracy(
        suite=suite_name(session.settings.prompts),
        arms=rows,
        vs_prior=[flips(grades[a], grades[b], a, b) for b, a in zip(ids, ids[1:], strict=False)],
        vs_first=[flips(grades[a], grades[ids[0]], a, ids[0]) for a in ids[1:]],
    )


def end_line(session: Session, arm_ids: list[str], selection: RunSelection = DEFAULT_SELECTION) -> str:
    """The video's small print on a graded session: "HumanEval pass@1 90.9 % → 92.7 %, not
    significant" (first arm raced → last, McNemar's test between them); "" when ungraded."""
    if not graded(session) or not arm_ids:
        return ""
    found = build_accuracy(session, selection, list(dict.fromkeys(arm_ids)))
    first, last = found.arms[0], found.arms[-1]
    if len(found.arms) == 1:
        return f"{found.suite} pass@1 {pct_text(first.overall)}"
    step = found.vs_first[-1]
    said = "not significant" if step.verdict == NO_CHANGE else f"significant, {p_text(step.p_value)}"
    return f"{found.suite} pass@1 {pct_text(first.overall)} → {pct_text(last.overall)}, {said}"


@dataclass(frozen=True)
class AccuracyDiff:
    """One arm's accuracy in two sessions side by side: pass@1 and its step's flips (vs the
    arm before it in that session); None where that session has no grade or no such arm."""

    arm: str
    a: PassRate | None
    b: PassRate | None
    step_a: Flips | None
    step_b: Flips | None


def compare_accuracy(a: Session, b: Session) -> list[AccuracyDiff]:
    """Each arm (A's order, then B's extras) in both sessions; [] when neither is graded."""
    found = [build_accuracy(s) if graded(s) else None for s in (a, b)]
    if found == [None, None]:
        return []
    rates = [{row.arm: row.overall for row in f.arms} if f else {} for f in found]
    steps = [{flip.arm: flip for flip in f.vs_prior} if f else {} for f in found]
    arms = dict.fromkeys([*(arm.id for arm in a.arms), *(arm.id for arm in b.arms)])
    return [AccuracyDiff(arm, rates[0].get(arm), rates[1].get(arm), steps[0].get(arm), steps[1].get(arm)) for arm in arms]
