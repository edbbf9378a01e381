"""A sweep's arms compared level by level: ratios with intervals, crossovers.

Adjacent arms are compared in the session's order: arm i + 1 (`arm`, usually the drafter) against
arm i (`vs`, its base), each level on its own.

- Per-request ratio at a level: mean decode tok/s of the arm's measured requests over the other
  arm's. The two arms ran alone, one after the other, so their requests are independent samples:
  the interval is `verdicts.runs_interval` (Welch's t on the log of the ratio of two means, the
  requests the unit). It is the speed one user sees.
- Aggregate ratio: the arms' aggregate output tok/s at that level. At equal concurrency N each
  arm's aggregate is N times its per-request rate (the level keeps exactly N in flight), so the
  aggregate ratio is the per-request ratio up to how TTFT and the window's ends weigh in; its
  interval is the per-request interval scaled by aggregate ratio / per-request ratio (same relative
  width). Batch means over time windows were the alternative; with a few dozen requests a level
  they give a handful of windows, correlated ones, so a wider and less honest interval.
- Crossover: the lowest level where the speed-up's interval includes or falls below 1, or where it
  has no interval (fewer than two timed requests a side: a ratio alone shows nothing), so no longer
  shown to pay, per request and aggregate separately. `drafting_off_level`: the lowest level where the arm's drafts per decode step falls
  below OFF_BELOW while a lower level drafted (the engine stopped drafting, vLLM's
  speculative_disable_by_batch_size). Not exactly 0: the counters see the gaps where a slot
  waits for its next request, when fewer than N run and such an engine drafts again.
"""

from __future__ import annotations

from typing import Any

from tokenreel.analysis.intervals import Interval
from tokenreel.analysis.verdicts import runs_interval
from tokenreel.session.model import Session

OFF_BELOW = 0.05  # drafts per step: under 1 step in 20 drafting is drafting switched off


def crossovers(session: Session, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per pair of adjacent arms: the levels compared and the three crossover levels."""
    arms = [arm.id for arm in session.arms]
    by = {(row["arm"], row["level"]): row for row in rows}
    return [_pair(session, by, base, arm) for base, arm in zip(arms, arms[1:], strict=False)]


def compare(session: Session, rows: list[dict[str, Any]], base: str, arm: str) -> dict[str, Any]:
    """`arm` against `base`, level by level, as `crossovers` compares adjacent arms (any two arms)."""
    return _pair(session, {(row["arm"], row["level"]): row for row in rows}, base, arm)


def _pair(session: Session, by: dict[tuple[str, int], dict[str, Any]], base: str, arm: str) -> dict[str, Any]:
    levels = sorted({level for a, level in by if a == arm} & {level for a, level in by if a == base})
    compared = [_level(by[(base, level)], by[(arm, level)]) for level in levels]
    return {
        "arm": arm,
        "vs": base,
        "per_request_level": _first_not_paying(compared, "per_request"),
        "aggregate_level": _first_not_paying(compared, "aggregate"),
        "drafting_off_level": _drafting_off(by, arm, levels),
        "levels": compared,
        "sentence": "",
    }


def _level(base: dict[str, Any], arm: dict[str, Any]) -> dict[str, Any]:
    interval = runs_interval(base["decode_tok_s"], arm["decode_tok_s"])
    per_request = _figures(interval.ratio, interval)
    agg_a, agg_b = base["aggregate_output_tok_s"], arm["aggregate_output_tok_s"]
    aggregate_ratio = agg_b / agg_a if agg_a and agg_b is not None else None
    return {"level": arm["level"], "per_request": per_request, "aggregate": _figures(aggregate_ratio, interval)}


def _figures(ratio: float | None, interval: Interval) -> dict[str, Any]:
    """`ratio` with the per-request interval's relative bounds around it (module docstring)."""
    scale = ratio / interval.ratio if ratio is not None and interval.ratio else None
    bounds = interval.as_list()
    ci = [b * scale for b in bounds] if bounds is not None and scale is not None else None
    return {"ratio": ratio, "ci95": ci, "requests": interval.prompts, "note": interval.note}


def pays(figures: dict[str, Any]) -> bool:
    """The speed-up's whole 95 % interval lies above 1."""
    return figures["ci95"] is not None and figures["ci95"][0] > 1


def _first_not_paying(compared: list[dict[str, Any]], key: str) -> int | None:
    return next((c["level"] for c in compared if not pays(c[key])), None)


def _drafting_off(by: dict[tuple[str, int], dict[str, Any]], arm: str, levels: list[int]) -> int | None:
    drafted = False
    for level in levels:
        per_step = by[(arm, level)]["drafts_per_step"]
        if per_step is not None and per_step >= OFF_BELOW:
            drafted = True
        elif per_step is not None and drafted:
            return level
    return None


def sentence(pair: dict[str, Any], labels: dict[str, str], levels: list[int]) -> str:
    """The pair's crossover in one line: where the arm pays, where not, where drafting stopped."""
    name, other = labels[pair["arm"]], labels[pair["vs"]]
    cross, agg = pair["per_request_level"], pair["aggregate_level"]
    if not levels:
        return f"{name} vs {other}: no level to compare."
    if cross is None:
        text = f"{name} pays over {other} at every level measured, up to {levels[-1]} concurrent requests"
    elif cross == levels[0]:
        text = f"{name} is not shown faster than {other} at any level measured (from {cross} concurrent requests on)"
    else:
        below = levels[levels.index(cross) - 1]
        text = f"{name} pays over {other} up to {below} concurrent requests; from {cross} on it is {_verdict(pair, cross)}"
    text += f" (per request; aggregate: {'pays at every level' if agg is None else f'from {agg} on'})"
    if pair["drafting_off_level"] is not None:
        text += f"; the engine stopped drafting at {pair['drafting_off_level']}"
    return text + "."


def _verdict(pair: dict[str, Any], level: int) -> str:
    """"slower" where the per-request interval at `level` lies wholly below 1, else "not shown faster"."""
    figures = next(c["per_request"] for c in pair["levels"] if c["level"] == level)
    return "slower" if figures["ci95"] is not None and figures["ci95"][1] < 1 else "not shown faster"
