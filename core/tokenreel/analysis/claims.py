"""Every speed-up a viewer is told, defined once: the report, the video and its end card print
from here and compute none of their own.

A speed-up compares one arm with another (`vs`) in one metric over one scope:
- metric "decode": decode tok/s over decode tok/s (the report's headline metric);
  metric "e2e": end to end, the other arm's time from request send to its last token over
  this arm's (a wait a user feels).
- scope "prompt": one answer: each arm's median run of the prompt (`tokenreel.analysis.ladder.median_run`,
  the run the video and the HTML replay play, so a speed-up said beside a race is the race's
  own, even where a cell has an even number of runs and its median falls between two);
  scope "suite": the means of the cells' medians over the prompts every arm has (the ladder's
  figures, so the suite decode speed-up vs the first arm is the ladder's vs_first); scope
  "category": the same over one category's prompts.
- metric "ttft" (suite and category only, not a race's claim): the other arm's mean time to the
  first token over this arm's.
A suite or category speed-up carries its 95 % interval over the prompts (`tokenreel.analysis.intervals`),
or the reason it has none; one prompt is one sample, so a prompt's speed-up has none.
Values keep full precision; `claim_text` words one as a person reads it, `interval_text` its interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenreel.analysis.figures import figure, multiplier
from tokenreel.analysis.intervals import ratio_interval
from tokenreel.analysis.ladder import Cell, common_prompts, interval_level, mean_of, median_run, paired
from tokenreel.analysis.metrics import RunMetrics, run_metrics
from tokenreel.analysis.selection import DEFAULT_SELECTION, RunSelection
from tokenreel.analysis.serving_config import real_acceptance_arms
from tokenreel.session.model import Run, Session

METRICS = ("decode", "e2e")  # a race's (a video's) metrics
RATIO_METRICS = (*METRICS, "ttft")  # the report's ratios over prompts
SCOPES = ("prompt", "suite", "category")
# What each metric measures, said once wherever a speed-up is shown (long, short).
METRIC_WORDS = {"decode": "decode", "e2e": "end to end", "ttft": "first token"}
DEFINITIONS = {
    "decode": "decode tok/s: tokens after the first over the time from the first token to the last",
    "e2e": "end to end: the time from request send to the last token",
    "ttft": "first token: the time from request send to the first token",
}
ONE_PROMPT = "one prompt: no interval (the prompt is the unit of sampling)"


@dataclass(frozen=True)
class Speedup:
    """How many times faster `arm` is than `vs` in `metric` over `scope` (None: a figure is missing)."""

    metric: str
    scope: str
    prompt: str | None  # the prompt (scope "prompt"); None for the suite
    arm: str
    vs: str
    value: float | None
    prompts: int  # prompts the figure covers: 1, or the suite's shared prompts
    runs: tuple[int, int] | None = None  # scope "prompt": the run indices compared (arm's, vs's)
    category: str | None = None  # scope "category"
    ci95: list[float] | None = None  # [low, high] over the prompts, None with ci95_note saying why
    ci95_note: str = ONE_PROMPT


def _ratio(metric: str, arm: float | None, vs: float | None) -> float | None:
    """decode: a rate, arm over vs; e2e and ttft: a time, vs over arm (all read "x times faster")."""
    numerator, denominator = (arm, vs) if metric == "decode" else (vs, arm)
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def cell_figure(cell: Cell | RunMetrics | None, metric: str) -> float | None:
    """A cell's (or a run's) figure in a metric: decode tok/s, or seconds from request send to
    the last token (e2e) or to the first (ttft)."""
    if cell is None:
        return None
    if metric == "ttft":
        return cell.ttft_s
    return cell.decode_tok_s if metric == "decode" else cell.e2e_s


def run_speedup(metric: str, arm: Run, vs: Run, scope: str = "prompt") -> Speedup:
    """One run against another: an answer's speed-up (scope "run" when they are not the median runs)."""
    value = _ratio(metric, cell_figure(run_metrics(arm), metric), cell_figure(run_metrics(vs), metric))
    return Speedup(metric, scope, arm.prompt, arm.arm, vs.arm, value, 1, (arm.index, vs.index))


def prompt_speedup(
    session: Session, metric: str, prompt: str, arm: str, vs: str, selection: RunSelection = DEFAULT_SELECTION
) -> Speedup:
    """The answer's speed-up: the two arms' median runs of the prompt (None when one has none)."""
    mine, theirs = median_run(session, arm, prompt, selection), median_run(session, vs, prompt, selection)
    if mine is None or theirs is None:
        return Speedup(metric, "prompt", prompt, arm, vs, None, 1)
    return run_speedup(metric, mine, theirs)


def suite_figure(session: Session, cells: list[Cell], metric: str, arm: str) -> float | None:
    """The arm's mean figure over the prompts every arm has (the ladder's decode_tok_s for decode)."""
    shared = set(common_prompts(session, cells))
    return mean_of([cell_figure(c, metric) for c in cells if c.arm == arm and c.prompt in shared])


def suite_speedup(session: Session, cells: list[Cell], metric: str, arm: str, vs: str, category: str | None = None) -> Speedup:
    """Over the prompts every arm has (of `category` alone when given), with its interval."""
    if category is not None:
        cells = [c for c in cells if c.category == category]
    shared = common_prompts(session, cells)
    value = _ratio(metric, suite_figure(session, cells, metric, arm), suite_figure(session, cells, metric, vs))
    numerator, denominator = (arm, vs) if metric == "decode" else (vs, arm)  # as `_ratio` orders them
    pairs = paired(cells, set(shared), lambda c: cell_figure(c, metric), numerator, denominator)
    interval = ratio_interval(pairs, interval_level(session))
    scope = "suite" if category is None else "category"
    return Speedup(metric, scope, None, arm, vs, value, len(shared), None, category, interval.as_list(), interval.note)


def all_speedups(session: Session, cells: list[Cell], selection: RunSelection = DEFAULT_SELECTION) -> list[Speedup]:
    """Every arm against every arm before it in the session: in every metric for the suite and
    each category, in the race's metrics for each prompt both arms have: every speed-up any view
    (or a video of any arms) can show."""
    arms = [a.id for a in session.arms]
    have = {(c.arm, c.prompt) for c in cells}
    categories = list(dict.fromkeys(c.category for c in cells))
    out = []
    for metric in RATIO_METRICS:
        for i, arm in enumerate(arms):
            for vs in arms[:i]:
                out.append(suite_speedup(session, cells, metric, arm, vs))
                out += [suite_speedup(session, cells, metric, arm, vs, category) for category in categories]
                if metric not in METRICS:
                    continue
                out += [
                    prompt_speedup(session, metric, p.id, arm, vs, selection)
                    for p in session.prompts
                    if (arm, p.id) in have and (vs, p.id) in have
                ]
    return out


def typical_prompt(
    session: Session, cells: list[Cell], metric: str, arm: str, vs: str, selection: RunSelection = DEFAULT_SELECTION
) -> tuple[str, Speedup, Speedup] | None:
    """The prompt whose speed-up of `arm` over `vs` is nearest the suite's (by ratio, so 4x off
    2x is as far as 1x), with both: the one answer a video or a replay shows by default, so the
    race a viewer times tells the suite's story, not its best or worst prompt. The first such
    prompt on a tie; None when no prompt has both arms' runs or the suite has no figure."""
    suite = suite_speedup(session, cells, metric, arm, vs)
    if suite.value is None:
        return None
    best: tuple[float, str, Speedup] | None = None
    for prompt in session.prompts:
        one = prompt_speedup(session, metric, prompt.id, arm, vs, selection)
        if one.value is None or one.value <= 0:
            continue
        distance = abs(math.log(one.value / suite.value))
        if best is None or distance < best[0]:
            best = (distance, prompt.id, one)
    return None if best is None else (best[1], best[2], suite)


def prompt_rank(session: Session, speedup: Speedup, selection: RunSelection = DEFAULT_SELECTION) -> str:
    """Where one answer's speed-up stands among the session's prompts, said truthfully: "the
    fastest of 4 prompts", "2nd fastest of 4 prompts", "the slowest of 4 prompts" ("" for one prompt)."""
    values = [
        v for p in session.prompts
        if (v := prompt_speedup(session, speedup.metric, p.id, speedup.arm, speedup.vs, selection).value) is not None
    ]
    if speedup.value is None or len(values) < 2:
        return ""
    place = 1 + sum(v > speedup.value for v in values)
    if place == 1:
        return f"the fastest of {len(values)} prompts"
    if place == len(values):
        return f"the slowest of {len(values)} prompts"
    return f"{ordinal(place)} fastest of {len(values)} prompts"


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def faster_word(value: float | None) -> str:
    return "slower" if value is not None and value < 1 else "faster"


def claim_text(value: float | None, metric: str, task: bool = False) -> str:
    """"4.42x faster decode", "1.25x slower end to end": a slower arm's figure is inverted, so a
    multiplier on screen is never below 1. `task`: runs of their natural length (no ignore_eos),
    whose end to end time is the task's own: "task done 1.25x sooner" (or "later")."""
    if value is None:
        return f"no {METRIC_WORDS[metric]} figure"
    shown = value if value >= 1 else 1 / value
    if task and metric == "e2e":
        return f"task done {multiplier(shown)} {'later' if value < 1 else 'sooner'}"
    return f"{multiplier(shown)} {faster_word(value)} {METRIC_WORDS[metric]}"


def interval_text(value: float | None, ci95: list[float] | None) -> str:
    """"95 % interval 1.97–2.31x": a claim's interval as `claim_text` words its value, so a
    slower arm's bounds are inverted with it and bracket the multiplier shown; "" with none."""
    if value is None or ci95 is None:
        return ""
    low, high = ci95 if value >= 1 else (1 / ci95[1], 1 / ci95[0])
    return f"95 % interval {figure(low, 2)}–{figure(high, 2)}x"


def scope_text(speedup: Speedup) -> str:
    """Which figure it is: "on this answer", "over 4 prompts", "over 8 code prompts"."""
    if speedup.scope == "prompt":
        return "on this answer"
    kind = f"{speedup.category} " if speedup.category else ""
    return f"over {speedup.prompts} {kind}prompt{'' if speedup.prompts == 1 else 's'}"


def headline(session: Session, cells: list[Cell], metric: str = "decode") -> Speedup | None:
    """The session's headline: its last arm against its first, over the suite; an arm whose
    engine forced acceptance (`tokenreel.analysis.serving_config`) is never one of them."""
    arms = real_acceptance_arms(session.arms)
    if len(arms) < 2:
        return None
    return suite_speedup(session, cells, metric, arms[-1], arms[0])
