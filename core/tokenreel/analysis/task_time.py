"""What a task really costs at its natural length: tokens and time per task, and per ladder step
how much sooner a task finishes, beside the decode ratio.

At a forced length (`ignore_eos`) every arm writes the same tokens, so decode speed is the whole
story. At its natural length a faster step may write more tokens for the same task (a quantized
model that rambles), and a task then finishes no sooner though each token is faster. The decode
figures keep their like-for-like rule (`tokenreel.analysis.ladder` marks cells of unequal length);
the time per task, from request send to the last token, is the figure that needs no equal lengths.

Each prompt's figures are its cell's (the median over the runs the report counts), as the
ladder's; an arm's are over the prompts every arm has. A step's "sooner" is 1 - its mean time per
task over the prior arm's, its token change mean tokens over the prior's - 1, each with its 95 %
interval paired over prompts (`tokenreel.analysis.intervals`, the ladder's machinery).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from tokenreel.analysis.figures import figure
from tokenreel.analysis.intervals import Interval, ratio_interval
from tokenreel.analysis.ladder import ITSELF, Cell, build_ladder, common_prompts, interval_level, mean_of, paired
from tokenreel.analysis.selection import DEFAULT_SELECTION, RunSelection
from tokenreel.session.model import Session


@dataclass(frozen=True)
class TaskRow:
    """One arm's tokens and time per task, and its step from the arm before it (the first arm's
    step figures are None, with ITSELF as their note)."""

    arm: str
    label: str
    prompts: int
    tokens_median: float | None  # median over prompts of completion tokens
    tokens_mean: float | None
    seconds_mean: float | None  # time per task: mean over prompts of send to last token
    seconds_median: float | None
    decode_vs_prior: float | None  # the ladder's decode ratio, like for like only where lengths agree
    tokens_change: float | None  # mean tokens / the prior arm's - 1: 0.21 writes 21 % more
    tokens_change_ci95: list[float] | None
    tokens_change_note: str
    sooner: float | None  # 1 - mean time / the prior arm's: 0.16 finishes 16 % sooner, < 0 later
    sooner_ci95: list[float] | None  # [low, high] of `sooner`
    sooner_note: str
    text: str  # "writes 21 % more tokens, finishes no sooner"
    capped: int = 0  # of `prompts`, those whose counted runs stopped at max_tokens: the cap's length, not the task's


@dataclass(frozen=True)
class TaskPair:
    """`tokenreel compare`: one arm's task-time row in session A and in B (None where that session
    is forced-length: its tasks all have max_tokens' length)."""

    arm: str
    label: str
    a: TaskRow | None
    b: TaskRow | None


def natural_length(session: Session) -> bool:
    """Whether runs stopped where the model ended (recorded without ignore_eos)."""
    return not session.settings.ignore_eos


def task_rows(session: Session, cells: list[Cell], category: str | None = None,
              selection: RunSelection = DEFAULT_SELECTION) -> list[TaskRow]:
    """One row per arm in ladder order, over the prompts every arm has (of `category` alone when
    given); `selection`: the runs the cells were built from."""
    if category is not None:
        cells = [c for c in cells if c.category == category]
    shared = set(common_prompts(session, cells))
    level = interval_level(session)
    ladder = build_ladder(session, cells)
    rows = []
    for i, arm in enumerate(session.arms):
        mine = [c for c in cells if c.arm == arm.id and c.prompt in shared]
        tokens = [float(c.output_tokens) for c in mine if c.output_tokens is not None]
        seconds = [c.e2e_s for c in mine if c.e2e_s is not None]
        prior = session.arms[i - 1].id if i > 0 else None
        change = _step(cells, shared, lambda c: None if c.output_tokens is None else float(c.output_tokens), arm.id, prior, level)
        # sooner = 1 - arm / prior, so its interval is the time ratio's, turned over.
        time = _step(cells, shared, lambda c: c.e2e_s, arm.id, prior, level)
        sooner = None if time.ratio is None else 1 - time.ratio
        sooner_ci = None if time.low is None or time.high is None else [1 - time.high, 1 - time.low]
        tokens_change = None if change.ratio is None else change.ratio - 1
        rows.append(TaskRow(
            arm=arm.id, label=arm.label, prompts=len(mine),
            tokens_median=statistics.median(tokens) if tokens else None, tokens_mean=mean_of(list(tokens)),
            seconds_mean=mean_of(list(seconds)), seconds_median=statistics.median(seconds) if seconds else None,
            decode_vs_prior=ladder[i].vs_prior if i < len(ladder) else None,
            tokens_change=tokens_change,
            tokens_change_ci95=None if change.low is None or change.high is None else [change.low - 1, change.high - 1],
            tokens_change_note=change.note,
            sooner=sooner, sooner_ci95=sooner_ci, sooner_note=time.note,
            text="" if prior is None else step_text(tokens_change, sooner, sooner_ci),
            capped=_capped(session, arm.id, {c.prompt for c in mine}, selection),
        ))
    return rows


def _capped(session: Session, arm: str, prompts: set[str], selection: RunSelection) -> int:
    """How many of `prompts` had a counted run of `arm` stop at max_tokens (finish reason
    "length"): that task was cut by the cap, so its tokens and time are a lower bound."""
    return len({run.prompt for run in session.runs if run.arm == arm and run.prompt in prompts
                and selection.counts(run) and run.finish_reason == "length"})


def _step(
    cells: list[Cell], shared: set[str], value: Callable[[Cell], float | None], arm: str, prior: str | None, level: float,
) -> Interval:
    """mean(arm) / mean(prior) of a cell figure over the shared prompts, with its paired interval."""
    if prior is None:
        return Interval(None, None, None, 0, note=ITSELF)
    return ratio_interval(paired(cells, shared, value, arm, prior), level)


def task_pairs(a: Session, cells_a: list[Cell], b: Session, cells_b: list[Cell]) -> list[TaskPair]:
    """Each arm in both sessions (A's order) with its task-time row in each; none when neither
    session was recorded at natural length."""
    if not (natural_length(a) or natural_length(b)):
        return []
    rows_a = {row.arm: row for row in task_rows(a, cells_a)} if natural_length(a) else {}
    rows_b = {row.arm: row for row in task_rows(b, cells_b)} if natural_length(b) else {}
    arms_b = {arm.id for arm in b.arms}
    return [TaskPair(arm.id, arm.label, rows_a.get(arm.id), rows_b.get(arm.id)) for arm in a.arms if arm.id in arms_b]


def category_task_rows(session: Session, cells: list[Cell], selection: RunSelection = DEFAULT_SELECTION) -> dict[str, list[TaskRow]]:
    """category -> its rows over that category's prompts alone."""
    categories = list(dict.fromkeys(c.category for c in cells))
    return {category: task_rows(session, cells, category, selection) for category in categories}


def percent(fraction: float) -> str:
    """A fraction as a whole-number percentage, as the step's words print it: 0.214 -> "21 %"."""
    return f"{figure(abs(fraction) * 100, 0)} %"


def tokens_text(change: float | None) -> str:
    """"writes 21 % more tokens", "writes 5 % fewer tokens", "writes as many tokens"."""
    if change is None:
        return "no token count"
    if percent(change) == percent(0.0):
        return "writes as many tokens"
    return f"writes {percent(change)} {'more' if change > 0 else 'fewer'} tokens"


def sooner_text(sooner: float | None, ci95: list[float] | None) -> str:
    """"finishes 16 % sooner", "finishes 8 % later", or "finishes no sooner" when the interval
    holds 0 (or the point rounds to 0 %): the task-time verdict of one step."""
    if sooner is None:
        return "no time per task"
    if (ci95 is not None and ci95[0] <= 0 <= ci95[1]) or percent(sooner) == percent(0.0):
        return "finishes no sooner"
    return f"finishes {percent(sooner)} {'sooner' if sooner > 0 else 'later'}"


def step_text(tokens_change: float | None, sooner: float | None, ci95: list[float] | None) -> str:
    """A step's task-time row in words: "writes 21 % more tokens, finishes no sooner"."""
    return f"{tokens_text(tokens_change)}, {sooner_text(sooner, ci95)}"
