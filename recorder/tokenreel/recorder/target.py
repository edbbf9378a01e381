"""`record --target-ci`: record until the answer is known, then stop.

Prompts are drawn in a seeded stratified order (`intervals.stratified_order`) and recorded in
looks of growing size (`intervals.planned_looks`): each look records its new prompts on every
selected arm in turn (arms stay strictly one at a time, and every arm runs the same prompts),
then takes the targeted intervals at the stopping rule's level (`intervals.STOP_LEVEL`), and stops once every
one is within the target, or when the budget (`--max-prompts`, `--max-time`) or the suite runs
out. The rule and how far it got are in the session (`tokenreel.session.stopping.Stopping`), so `--resume` goes on
where it stopped and every report shows the intervals at the rule's level.

What is targeted:
- all arms at once (every endpoint up): every ladder ratio, each arm against the arm before it
  and against the first, in decode tok/s over the prompts every arm has;
- some arms (`--arms`, one server up at a time), or a session of one arm: each arm's own mean decode tok/s, so
  arm 1 records until its figure is known; the other arms then record the same prompts
  (`record --arms B` without --target-ci records only the prompts drawn), and `--resume
  --target-ci` with an arm adds a look when the ratio needs more.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from tokenreel.analysis.intervals import STOP_LEVEL, Interval, Sample, contrast_interval, planned_looks, stratified_order
from tokenreel.analysis.ladder import build_cells, paired
from tokenreel.session.model import Session
from tokenreel.session.stopping import Stopping

DEFAULT_SEED = 26


@dataclass(frozen=True)
class LookDone:
    """A look was taken: each targeted figure's relative half-width, and why it stopped (or "")."""

    look: int  # 1-based
    looks: int
    prompts: int
    widths: dict[str, float | None]
    target: float
    stopped: str


def new_stopping(session: Session, target: float, max_prompts: int | None, max_time_s: float | None,
                 targets: list[str], seed: int = DEFAULT_SEED) -> Stopping:
    """The rule for a fresh session: the draw order, the looks up to the budget, the level."""
    order = stratified_order([(p.id, p.category) for p in session.prompts], seed)
    budget = min(max_prompts or len(order), len(order))
    looks = planned_looks(len({p.category for p in session.prompts}), budget)
    return Stopping(target, STOP_LEVEL, looks, order, seed, max_time_s, targets)


def target_names(session: Session, arm_ids: list[str] | None) -> list[str]:
    """What can be targeted: each chosen arm's own decode speed (or the only arm's), or with every
    arm each ladder ratio."""
    arms = [a.id for a in session.arms]
    if arm_ids is not None or len(arms) == 1:
        return [f"{arm} decode tok/s" for arm in arm_ids or arms]
    return [f"{arm} vs {base}" for i, arm in enumerate(arms[1:], start=1) for base in dict.fromkeys((arms[i - 1], arms[0]))]


def check_targets(session: Session, arm_ids: list[str] | None, targets: list[str]) -> None:
    """ValueError naming --target-ratio and the known names for a ratio this recording cannot give."""
    known = target_names(session, arm_ids)
    unknown = [t for t in targets if t not in known]
    if unknown:
        raise ValueError(f"--target-ratio: no ratio {unknown[0]!r} in this recording; choose among: {', '.join(known)}")


def targeted(session: Session, arm_ids: list[str] | None, level: float, targets: Sequence[str] = ()) -> dict[str, Interval]:
    """The intervals the rule waits for (this module's docstring; those named in `targets` when
    any are), by name."""
    every = _intervals(session, arm_ids, level)
    return {name: interval for name, interval in every.items() if not targets or name in targets}


def _intervals(session: Session, arm_ids: list[str] | None, level: float) -> dict[str, Interval]:
    cells = build_cells(session)
    arms = [a.id for a in session.arms]
    if arm_ids is not None or len(arms) == 1:
        return {
            f"{arm} decode tok/s": contrast_interval(
                [Sample(c.category, (c.decode_tok_s,)) for c in cells if c.arm == arm and c.decode_tok_s is not None],
                (1,), level,
            )
            for arm in arm_ids or arms
        }
    have: dict[str, set[str]] = {}
    for cell in cells:
        have.setdefault(cell.prompt, set()).add(cell.arm)
    shared = {prompt for prompt, who in have.items() if who == set(arms)}
    out = {}
    for i, arm in enumerate(arms[1:], start=1):
        for base in dict.fromkeys((arms[i - 1], arms[0])):
            out[f"{arm} vs {base}"] = contrast_interval(
                [Sample(p.category, (p.base, p.other)) for p in paired(cells, shared, lambda c: c.decode_tok_s, arm, base)],
                (-1, 1), level,
            )
    return out


class TargetPlan:
    """The looks still to take under `session.stopping`, and the decision after each."""

    def __init__(self, session: Session, arm_ids: list[str] | None, clock: Callable[[], float] = time.monotonic) -> None:
        if session.stopping is None:
            raise ValueError("the session has no stopping rule")
        self.session, self.arm_ids, self.clock = session, arm_ids, clock
        self.rule: Stopping = session.stopping
        self.started = clock()

    def batches(self) -> Iterator[set[str]]:
        """The prompts of each look still to take (all of the look's prompts: runs already ok are skipped)."""
        done = self.rule.looked[-1] if self.rule.looked else 0
        for look in self.rule.looks:
            if look > done and not self.rule.stopped:
                yield set(self.rule.order[:look])

    def out_of_time(self) -> bool:
        limit = self.rule.max_time_s
        return limit is not None and self.clock() - self.started >= limit

    def look(self, prompts: int) -> LookDone:
        """Take the look at `prompts` drawn: the intervals, and whether (and why) to stop."""
        rule = self.rule
        rule.looked.append(prompts)
        intervals = targeted(self.session, self.arm_ids, rule.level, rule.targets)
        rule.widths = {name: interval.half_width for name, interval in intervals.items()}
        met = bool(intervals) and all(w is not None and w <= rule.target for w in rule.widths.values())
        if met:
            rule.stopped = "target met"
        elif self.out_of_time():
            rule.stopped = "max time"
        elif prompts >= rule.looks[-1]:
            rule.stopped = "suite used up" if rule.looks[-1] == len(rule.order) else "max prompts"
        return LookDone(len(rule.looked), len(rule.looks), prompts, dict(rule.widths), rule.target, rule.stopped)
