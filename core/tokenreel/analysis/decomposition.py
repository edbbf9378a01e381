"""A drafter's speed-up split in two: more tokens a step, and the cost of a step.

For a drafter arm D against the arm it drafts for, T (`tokenreel.analysis.drafting`), the decode
speed-up the ladder prints, mean(D) / mean(T) over the prompts both have, is the product of

- tokens per step: the acceptance length L, 1 + Σaccepted / Σdrafts pooled over the arm's
  counted runs as `tokenreel.analysis.acceptance` pools it (the ladder's own figure);
- the step ratio: T's time per step over D's. T makes one token a step, so its step lasts
  1 / mean(T); D makes L a step, so its step lasts L / mean(D). The ratio is mean(D) / (L mean(T))
  and L times it is the measured speed-up, exactly (not an estimate of it).

Each factor is a product of means over prompts (L = mean(drafts + accepted) / mean(drafts)), so
each has its 95 % interval by `tokenreel.analysis.intervals.contrast_interval`, the ladder's own
machinery: the prompt is the unit, the categories the strata. Where some run lacks the counts, L
is the mean of the prompts' lengths (`acceptance_pooled` False) and the product still holds.

Which factor moved between two categories: the one whose log changed the more, when
it holds at least `MOVER_SHARE` of the two factors' absolute log change; else both did.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from tokenreel.analysis.drafting import drafted_arm
from tokenreel.analysis.figures import figure, multiplier
from tokenreel.analysis.intervals import Sample, contrast_interval
from tokenreel.analysis.ladder import Cell, common_prompts, interval_level
from tokenreel.session.model import Session

Scope = Literal["suite", "category"]
Mover = Literal["acceptance", "step", "both", "neither"]
# A factor "moved" when its share of the total absolute log change is at least this: two thirds,
# so the sentence names one factor only where it moved at least twice as much as the other.
MOVER_SHARE = 2 / 3
NO_ACCEPTANCE = ("no acceptance counted for the drafter arm: its engine gave no acceptance"
                 " (give the arm its metrics_url so tokenreel reads the engine's spec-decode counters)")


@dataclass(frozen=True)
class Decomposition:
    """The speed-up of `arm` over `target` as acceptance length x step ratio, each with its
    interval ([low, high], or None and the note saying why); `missing` says why there is none."""

    arm: str
    target: str
    scope: Scope
    category: str | None
    prompts: int
    speedup: float | None = None
    speedup_ci95: list[float] | None = None
    speedup_ci95_note: str = ""
    acceptance_length: float | None = None
    acceptance_ci95: list[float] | None = None
    acceptance_ci95_note: str = ""
    acceptance_pooled: bool = False
    step_ratio: float | None = None  # the target's time per step / the drafter arm's
    step_ratio_ci95: list[float] | None = None
    step_ratio_ci95_note: str = ""
    target_step_ms: float | None = None  # 1 / the target's mean decode tok/s
    arm_step_ms: float | None = None  # the acceptance length / the drafter arm's mean decode tok/s
    missing: str = ""


def decompositions(session: Session, cells: list[Cell]) -> list[Decomposition]:
    """Every drafter arm against its target: over the prompts every arm has, then per category."""
    shared = set(common_prompts(session, cells))
    shown = {arm.id for arm in session.arms}
    categories = list(dict.fromkeys(c.category for c in cells if c.prompt in shared))
    out = []
    for arm in session.arms:
        target = drafted_arm(session, arm)
        if target is None or target.arm not in shown:
            continue
        mine = [c for c in cells if c.prompt in shared]
        out.append(decompose(session, mine, arm.id, target.arm, "suite", None))
        out += [decompose(session, [c for c in mine if c.category == category], arm.id, target.arm, "category", category)
                for category in categories]
    return out


def decompose(session: Session, cells: list[Cell], arm: str, target: str, scope: Scope, category: str | None) -> Decomposition:
    """The decomposition over `cells` (the prompts both arms have a decode figure for)."""
    base = {c.prompt: c for c in cells if c.arm == target and c.decode_tok_s is not None}
    mine = [c for c in cells if c.arm == arm and c.decode_tok_s is not None and c.prompt in base]
    empty = Decomposition(arm, target, scope, category, len(mine))
    if not mine:
        return _with(empty, missing="no prompt where both arms have a decode figure")
    counted = all(c.acceptance_drafts and c.acceptance_accepted is not None for c in mine)
    if not counted and any(c.acceptance_length is None for c in mine):
        return _with(empty, missing=_acceptance_missing(mine))
    level = interval_level(session)
    # Per prompt: the target's and the arm's decode, and L's numerator and denominator.
    samples = [Sample(c.category, (base[c.prompt].decode_tok_s or 0.0, c.decode_tok_s or 0.0, *_acceptance(c, counted)))
               for c in mine]
    speedup = contrast_interval(samples, (-1, 1, 0, 0), level)
    length = contrast_interval(samples, (0, 0, 1, -1), level)
    step = contrast_interval(samples, (-1, 1, -1, 1), level)
    target_tok_s = math.fsum(s.values[0] for s in samples) / len(samples)
    arm_tok_s = math.fsum(s.values[1] for s in samples) / len(samples)
    return Decomposition(
        arm, target, scope, category, len(mine),
        speedup.ratio, speedup.as_list(), speedup.note,
        length.ratio, length.as_list(), length.note, counted,
        step.ratio, step.as_list(), step.note,
        1000 / target_tok_s if target_tok_s else None,
        1000 * length.ratio / arm_tok_s if length.ratio is not None and arm_tok_s else None,
    )


def _acceptance(cell: Cell, counted: bool) -> tuple[float, float]:
    """L's (numerator, denominator) on one prompt: (drafts + accepted, drafts) summed over the
    cell's runs when every cell counted them, else (its length, 1)."""
    if counted:
        drafts = cell.acceptance_drafts or 0.0
        return drafts + (cell.acceptance_accepted or 0.0), drafts
    return cell.acceptance_length or 0.0, 1.0


def _acceptance_missing(cells: list[Cell]) -> str:
    notes = [c.acceptance_note for c in cells if c.acceptance_length is None and c.acceptance_note]
    return f"{NO_ACCEPTANCE}; the engine said: {notes[0]}" if notes else NO_ACCEPTANCE


def _with(d: Decomposition, missing: str) -> Decomposition:
    return Decomposition(d.arm, d.target, d.scope, d.category, d.prompts, missing=missing)


def step_cost(step_ratio: float | None) -> float | None:
    """The drafter arm's step as a multiple of the target's (1 / the step ratio): "step 1.27x"."""
    return 1 / step_ratio if step_ratio else None


def factor_text(d: Decomposition) -> str:
    """"5.28 tokens a step, step 1.11x the target's: 4.77x" (the figures every view prints)."""
    if d.missing:
        return f"missing: {d.missing}"
    return (f"{figure(d.acceptance_length, 2)} tokens a step, step {multiplier(step_cost(d.step_ratio))} the target's:"
            f" {multiplier(d.speedup)}")


def mover(a: Decomposition, b: Decomposition) -> Mover:
    """Which factor moved from `a` to `b` (the module's rule)."""
    if a.acceptance_length is None or b.acceptance_length is None or not a.step_ratio or not b.step_ratio:
        return "neither"
    moved_length = abs(math.log(b.acceptance_length / a.acceptance_length))
    moved_step = abs(math.log(b.step_ratio / a.step_ratio))
    total = moved_length + moved_step
    if total == 0:
        return "neither"
    if moved_length / total >= MOVER_SHARE:
        return "acceptance"
    return "step" if moved_step / total >= MOVER_SHARE else "both"


MOVER_TEXT: dict[Mover, str] = {
    "acceptance": "acceptance moved, the step's cost hardly",
    "step": "the step's cost moved, acceptance hardly",
    "both": "both acceptance and the step's cost moved",
    "neither": "neither factor moved",
}


def category_sentence(entries: list[Decomposition]) -> str:
    """Each category's factors, highest speed-up first, and which factor moved between the
    highest and the lowest: "code 5.28 tokens a step, step 1.11x the target's: 4.77x; prose ...";
    "" with fewer than two categories that have the figures."""
    have = sorted((d for d in entries if d.scope == "category" and not d.missing and d.speedup is not None),
                  key=lambda d: -(d.speedup or 0.0))
    if len(have) < 2:
        return ""
    parts = "; ".join(f"{d.category} {factor_text(d)}" for d in have)
    top, bottom = have[0], have[-1]
    return f"{parts}. From {bottom.category} to {top.category}: {MOVER_TEXT[mover(bottom, top)]}."

