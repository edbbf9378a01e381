"""Did re-recording give the same numbers? Two sessions compared, each difference with its 95 %
interval and a verdict (the views, md/json/csv, are in `tokenreel.report.compare`).

Two sessions of the same ladder (a re-recording, another day, another driver) are matched arm by
arm (by id) and prompt by prompt (by id). Every matched cell shows both sessions' figures
(decode tok/s, TTFT, TPOT, end-to-end tok/s), their difference in % of A, and whether the
difference lies within the runs' spread: |B - A| <= the larger of the two cells' spreads (max -
min of that figure over the cell's usable runs), i.e. the re-recording moved no further than
the runs of one recording already scatter; never less than SPREAD_FLOOR_PCT of A, since runs
that agree exactly would otherwise call any difference at all out of spread. When both sessions
ran at temperature 0, each cell also says whether the answers are the same, and if not, the
token where B's first usable run parts from A's (`tokenreel.analysis.answers`).

Each decode tok/s difference gets a verdict, "same", "faster", "slower" or "can't tell yet", from
its 95 % interval against the tolerance band (`tokenreel.analysis.verdicts`, which gives the method and its
references):

- a ladder row: the arm's mean decode tok/s, B / A, over the prompts where both sessions have the
  arm's cell, paired by prompt (`ratio_interval`: the prompt is the unit, stratified by category);
- a ladder ratio: each arm's speed-up over A's first arm, and over the arm before it, B's ratio
  over A's (`contrast_interval` of the means of A base, A arm, B base, B arm with powers 1, -1,
  -1, 1), over the prompts where all four cells are;
- a cell (one arm, one prompt): B / A of the mean over its runs, Welch's interval with the run as
  the unit (`runs_interval`); fewer than 2 runs on a side: no interval, and it says so.

With too few prompts for an interval over prompts (fewer than 6, or a category with one), a ladder
row or ratio is judged from the runs instead (`pooled_runs_interval`: each arm's run-to-run scatter
pooled over its cells, the prompts held as they are), and says so ("from 3 runs a cell, 4
prompts"); when every run it covers is the same in both sessions (a session compared with a copy
of itself), the difference is 0 exactly, with nothing between the two to sample.

The ladder rows and ratios gate: they are the ladder's claims, and their intervals over prompts
count how much a cell moves from one session to the next. The cells do not: a cell's interval
sees only how its own runs scatter within a session, not a cell that moves as a whole between
sessions (a cache, a clock, drafts accepted differently: the real H200 sessions in
tests/data/h200-llamacpp/ move single cells by up to 14 %, yet no ladder figure differs beyond
2 %), and with 2 runs a side its t quantile is 4.3 to 12.7, so few cells can ever be "same";
gating on dozens of them would fail or stall reproductions that are not in doubt. They are
shown, verdicts and all, to find what moved. Decode tok/s is the figure judged: the ladder's headline and every speed-up
is a ratio of it; TPOT is 1000 / decode, TTFT is a fraction of a second where a few ms of
scheduling noise is several per cent, end-to-end mixes the two: shown with their spread.

The outcome: "reproduced" when every gated verdict is "same"; "not reproduced" when one is
"faster" or "slower", or when anything could not be matched (an arm or a prompt in one session
only, a prompt id whose text changed, a cell without a usable run on one side: listed, since a
comparison that silently skipped it would claim more than it checked); else "can't tell yet".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from tokenreel.analysis.accuracy import AccuracyDiff, compare_accuracy
from tokenreel.analysis.answers import compare as compare_answers
from tokenreel.analysis.intervals import Interval, Pair, Sample, contrast_interval, ratio_interval
from tokenreel.analysis.ladder import (
    Cell,
    LadderRow,
    build_cells,
    build_ladder,
    common_prompts,
    interval_level,
    mean_of,
    missing_cells,
    usable_runs,
)
from tokenreel.analysis.metrics import run_metrics
from tokenreel.analysis.pooled_runs import RunGroup, pooled_runs_interval
from tokenreel.analysis.task_time import TaskPair, task_pairs
from tokenreel.analysis.verdicts import CANT_TELL, SAME, Verdict, judge, runs_interval
from tokenreel.session.model import Session

GATE = "decode_tok_s"
DEFAULT_TOLERANCE_PCT = 2.0
# Figures compared per cell: key (a Cell and RunMetrics field), label, decimals shown.
FIGURES = (
    ("decode_tok_s", "Decode tok/s", 1),
    ("ttft_s", "TTFT s", 3),
    ("tpot_ms", "TPOT ms", 2),
    ("e2e_tok_s", "E2E tok/s", 1),
)
SPREAD_FLOOR_PCT = 0.5  # a spread of 0 (identical runs, simulated ones) is not a tolerance of 0
SPREAD_RULE = (
    "|B - A| <= the larger of the two cells' spreads (max - min of that figure over the cell's usable runs),"
    f" or {SPREAD_FLOOR_PCT:g} % of A where the spreads are smaller"
)
GATE_RULE = (
    "decode tok/s: each ladder row (an arm's mean, B / A) and each ladder ratio (B's speed-up over A's) "
    "by its 95 % interval over prompts (too few prompts for one: from the runs, pooled over the cells); "
    "cells are judged by their runs but do not gate (a cell's runs "
    "miss how it moves between sessions, and 2 runs a side seldom settle it)"
)
REPRODUCED, NOT_REPRODUCED = "reproduced", "not reproduced"
# What a gated verdict was judged from: its interval over prompts, over the runs (too few prompts),
# or none needed (B's runs are A's).
Method = Literal["prompts", "runs", "same runs"]
RunsByCell = dict[tuple[str, str], tuple[list[float], list[float]]]  # (arm, prompt) -> A's, B's runs' decode tok/s
EXIT_CODES = {REPRODUCED: 0, NOT_REPRODUCED: 1, CANT_TELL: 3}  # 2 is bad input, as for every command


@dataclass(frozen=True)
class FigureDiff:
    a: float | None
    b: float | None
    diff_pct: float | None  # (B - A) / A in %; None when either is missing
    spread_a: float | None  # max - min over the cell's usable runs (None for ladder rows)
    spread_b: float | None
    within_spread: bool | None  # SPREAD_RULE; None when a figure or a spread is missing


@dataclass(frozen=True)
class CellDiff:
    arm: str
    prompt: str
    category: str
    runs_a: int
    runs_b: int
    tokens_a: int | None
    tokens_b: int | None
    figures: dict[str, FigureDiff]
    verdict: Verdict  # decode tok/s, B / A of the means over runs: shown, not gated
    note: str = ""
    answers_diverge_at: int | None = None  # 1-based token where B's answer parts from A's; None: the same, or not compared
    answers_compared: bool = False  # both sessions at temperature 0, a usable run on each side


@dataclass(frozen=True)
class Basis:
    """What a gated verdict was judged from, and its n."""

    method: Method
    prompts: int
    runs_a_cell: list[int]  # [fewest, most] usable runs a cell, over both sessions' cells it covers

    @property
    def size(self) -> str:
        """"3 runs a cell, 4 prompts" ("2-3 runs a cell" where cells differ)."""
        low, high = self.runs_a_cell
        runs = f"{low}-{high}" if low != high else f"{low}"
        return f"{runs} run{'' if high == 1 else 's'} a cell, {self.prompts} prompt{'' if self.prompts == 1 else 's'}"

    @property
    def text(self) -> str:
        """"from 3 runs a cell, 4 prompts" ("" for an interval over prompts, the usual case)."""
        if self.method == "prompts":
            return ""
        return f"from {self.size}{': the same runs in both sessions' if self.method == 'same runs' else ''}"


@dataclass(frozen=True)
class LadderDiff:
    """An arm's ladder row in both sessions: mean decode tok/s and the speed-up vs the first arm."""

    arm: str
    label: str
    decode_tok_s: FigureDiff
    vs_first_a: float | None
    vs_first_b: float | None
    verdict: Verdict  # B / A of the arm's mean decode tok/s, paired by prompt: gated
    basis: Basis


@dataclass(frozen=True)
class RatioDiff:
    """A ladder ratio, arm / base, in both sessions (over the prompts where all four cells are)."""

    arm: str
    base: str
    vs: str  # "first" or "prior"
    a: float | None
    b: float | None
    verdict: Verdict  # B's ratio over A's: gated
    basis: Basis


@dataclass(frozen=True)
class Unmatched:
    what: str  # "arm", "prompt" or "cell"
    arm: str
    prompt: str
    reason: str


@dataclass(frozen=True)
class Comparison:
    a: str  # how the user named session A (its path)
    b: str
    session_a: str
    session_b: str
    tolerance_pct: float
    ladder: list[LadderDiff]
    ratios: list[RatioDiff]
    cells: list[CellDiff]
    unmatched: list[Unmatched]
    notes: list[str]  # differences in settings or models: context, not gated
    task_time: list[TaskPair] = field(default_factory=list)  # natural-length sessions' time per task, not gated
    accuracy: list[AccuracyDiff] = field(default_factory=list)  # graded sessions: each arm's pass@1 in both; shown, not gated

    @property
    def gated(self) -> list[tuple[str, Verdict]]:
        """(what, verdict) of every figure the outcome follows: the ladder rows, then the ratios."""
        return [(f"{r.arm} decode", r.verdict) for r in self.ladder] + [(f"{r.arm} / {r.base}", r.verdict) for r in self.ratios]

    @property
    def bases(self) -> list[Basis]:
        """What each gated verdict was judged from, in `gated`'s order."""
        return [r.basis for r in self.ladder] + [r.basis for r in self.ratios]

    @property
    def outcome(self) -> str:
        verdicts = [v for _, v in self.gated]
        if self.unmatched or any(v.differs for v in verdicts):
            return NOT_REPRODUCED
        return REPRODUCED if all(v.verdict == SAME for v in verdicts) else CANT_TELL


def _diff(a: float | None, b: float | None, spread_a: float | None = None, spread_b: float | None = None) -> FigureDiff:
    pct = (b - a) / a * 100 if a and b is not None else None
    spreads = [s for s in (spread_a, spread_b) if s is not None]
    floor = abs(a) * SPREAD_FLOOR_PCT / 100 if a is not None else 0.0
    within = abs(b - a) <= max(*spreads, floor) if a is not None and b is not None and spreads else None
    return FigureDiff(a, b, pct, spread_a, spread_b, within)


def _run_figures(session: Session, cell: Cell) -> dict[str, list[float]]:
    """Each compared figure over the cell's usable runs (the runs its medians use)."""
    metrics = [run_metrics(run) for run in usable_runs(session, cell.arm, cell.prompt)]
    return {key: [v for v in (getattr(m, key) for m in metrics) if v is not None] for key, _, _ in FIGURES}


def _cell_diff(a: Session, b: Session, ca: Cell, cb: Cell, tolerance: float,
               runs_a: dict[str, list[float]], runs_b: dict[str, list[float]]) -> CellDiff:
    figures = {
        key: _diff(getattr(ca, key), getattr(cb, key), _spread(runs_a[key]), _spread(runs_b[key])) for key, _, _ in FIGURES
    }
    notes = []
    if figures[GATE].diff_pct is None:
        sides = [side for side, cell in (("A", ca), ("B", cb)) if not cell.decode_tok_s]
        notes.append(f"no decode tok/s in {' and '.join(sides)} (no token after the first token event): nothing to compare")
    if ca.output_tokens != cb.output_tokens:
        notes.append(f"output tokens differ ({ca.output_tokens} vs {cb.output_tokens})")
    diverges, compared = _answers(a, b, ca, cb)
    if diverges is not None:
        notes.append(f"answers part at token {diverges}")
    return CellDiff(
        arm=ca.arm, prompt=ca.prompt, category=ca.category, runs_a=ca.runs, runs_b=cb.runs,
        tokens_a=ca.output_tokens, tokens_b=cb.output_tokens, figures=figures,
        verdict=judge(runs_interval(runs_a[GATE], runs_b[GATE]), tolerance, "runs"), note="; ".join(notes),
        answers_diverge_at=diverges, answers_compared=compared,
    )


def _spread(values: list[float]) -> float | None:
    return max(values) - min(values) if values else None


def _answers(a: Session, b: Session, ca: Cell, cb: Cell) -> tuple[int | None, bool]:
    """(where B's answer parts from A's, whether they were compared): only at temperature 0,
    where the same weights give the same tokens, so a difference means something changed."""
    if a.settings.temperature != 0 or b.settings.temperature != 0:
        return None, False
    runs_a, runs_b = usable_runs(a, ca.arm, ca.prompt), usable_runs(b, cb.arm, cb.prompt)
    if not runs_a or not runs_b:
        return None, False
    return compare_answers(runs_a[0], runs_b[0]).diverges_at_token, True


def _missing_reason(session: Session, arm: str, prompt: str) -> str:
    return next((m.reason for m in missing_cells(session) if m.arm == arm and m.prompt == prompt), "no usable run")


def _notes(a: Session, b: Session) -> list[str]:
    """Differences in what was recorded: they explain a difference, they do not gate."""
    notes = []
    for name in ("prompts", "max_tokens", "ignore_eos", "temperature", "warmup", "repeats"):
        va, vb = getattr(a.settings, name), getattr(b.settings, name)
        if va != vb:
            notes.append(f"setting {name}: {va} in A, {vb} in B")
    if a.simulated != b.simulated:
        notes.append(f"simulated endpoints: {'yes' if a.simulated else 'no'} in A, {'yes' if b.simulated else 'no'} in B")
    models_b = {arm.id: arm.model for arm in b.arms}
    for arm in a.arms:
        if arm.id in models_b and models_b[arm.id] != arm.model:
            notes.append(f"arm {arm.id}: model {arm.model} in A, {models_b[arm.id]} in B")
    return notes


def compare_sessions(
    a: Session, b: Session, tolerance_pct: float = DEFAULT_TOLERANCE_PCT, names: tuple[str, str] = ("A", "B")
) -> Comparison:
    """Match arms and prompts by id (in A's order, then B's extras), compare every cell, and
    judge every cell, ladder row and ladder ratio against ±tolerance_pct."""
    unmatched: list[Unmatched] = []
    arms_b = {arm.id for arm in b.arms}
    arms_a = {arm.id for arm in a.arms}
    for arm in a.arms:
        if arm.id not in arms_b:
            unmatched.append(Unmatched("arm", arm.id, "", f"only in A ({names[0]}): none of its cells compared"))
    for arm in b.arms:
        if arm.id not in arms_a:
            unmatched.append(Unmatched("arm", arm.id, "", f"only in B ({names[1]}): none of its cells compared"))
    prompts_b = {p.id: p for p in b.prompts}
    prompts_a = {p.id: p for p in a.prompts}
    shared_prompts = []
    for prompt in a.prompts:
        other = prompts_b.get(prompt.id)
        if other is None:
            unmatched.append(Unmatched("prompt", "", prompt.id, f"only in A ({names[0]}): none of its cells compared"))
        elif (other.messages, other.prompt, other.category) != (prompt.messages, prompt.prompt, prompt.category):
            unmatched.append(Unmatched("prompt", "", prompt.id, "same id, different prompt text or category: not compared"))
        else:
            shared_prompts.append(prompt.id)
    for prompt in b.prompts:
        if prompt.id not in prompts_a:
            unmatched.append(Unmatched("prompt", "", prompt.id, f"only in B ({names[1]}): none of its cells compared"))
    drawn = _drawn_by_both(a, b)
    if drawn is not None:  # --target-ci sessions: only the prompts both drew were asked of both
        left_out = [p for p in shared_prompts if p not in drawn]
        shared_prompts = [p for p in shared_prompts if p in drawn]
    # A session recorded under a stopping rule gives its intervals at the rule's level; so does this.
    level = max(interval_level(a), interval_level(b))
    all_a, all_b = build_cells(a), build_cells(b)
    cells_a = {(c.arm, c.prompt): c for c in all_a}
    cells_b = {(c.arm, c.prompt): c for c in all_b}
    both = [arm.id for arm in a.arms if arm.id in arms_b]
    diffs = []
    runs: RunsByCell = {}
    for arm_id in both:
        for prompt_id in shared_prompts:
            ca, cb = cells_a.get((arm_id, prompt_id)), cells_b.get((arm_id, prompt_id))
            if ca is not None and cb is not None:
                runs_a, runs_b = _run_figures(a, ca), _run_figures(b, cb)
                runs[arm_id, prompt_id] = runs_a[GATE], runs_b[GATE]
                diffs.append(_cell_diff(a, b, ca, cb, tolerance_pct, runs_a, runs_b))
                continue
            why = [f"no usable run in {side}: {_missing_reason(s, arm_id, prompt_id)}"
                   for side, s, c in (("A", a, ca), ("B", b, cb)) if c is None]
            unmatched.append(Unmatched("cell", arm_id, prompt_id, "; ".join(why)))
    notes = _notes(a, b)
    if drawn is not None and left_out:
        notes.append(f"{len(left_out)} prompts drawn by only one session's --target-ci (or by neither): not compared")
    shared_a, shared_b = common_prompts(a, all_a), common_prompts(b, all_b)
    if shared_a != shared_b:  # each ladder row is a mean over its session's shared prompts
        notes.append(
            f"the ladder rows average different prompts: A over {', '.join(shared_a) or 'none'}, "
            f"B over {', '.join(shared_b) or 'none'}; compare the cells"
        )
    return Comparison(
        a=names[0], b=names[1], session_a=a.name, session_b=b.name, tolerance_pct=tolerance_pct,
        ladder=_ladder_diffs(build_ladder(a, all_a), build_ladder(b, all_b), diffs, runs, tolerance_pct, level),
        ratios=_ratio_diffs(both, diffs, runs, tolerance_pct, level), cells=diffs, unmatched=unmatched, notes=notes,
        task_time=task_pairs(a, all_a, b, all_b),
        accuracy=compare_accuracy(a, b),
    )


def _drawn_by_both(a: Session, b: Session) -> set[str] | None:
    """The prompts both sessions drew (every prompt for one without a stopping rule); None when
    neither was recorded with --target-ci."""
    if a.stopping is None and b.stopping is None:
        return None
    sets = [set(s.stopping.drawn) if s.stopping else {p.id for p in s.prompts} for s in (a, b)]
    return sets[0] & sets[1]


def _decodes(cells: list[CellDiff], arm: str) -> dict[str, tuple[str, float, float]]:
    """prompt -> (category, A's decode tok/s, B's) of `arm`'s matched cells with both figures."""
    found = {}
    for cell in cells:
        gate = cell.figures[GATE]
        if cell.arm == arm and gate.a is not None and gate.b is not None:
            found[cell.prompt] = (cell.category, gate.a, gate.b)
    return found


def _ladder_diffs(
    ladder_a: list[LadderRow], ladder_b: list[LadderRow], cells: list[CellDiff], runs: RunsByCell, tolerance: float,
    level: float,
) -> list[LadderDiff]:
    """Ladder rows of the arms in both sessions (each session's own ladder: its first arm, its
    shared prompts), each judged on B / A of its mean over the prompts both sessions have."""
    rows_b = {row.arm: row for row in ladder_b}
    result = []
    for row in ladder_a:
        other = rows_b.get(row.arm)
        if other is None:
            continue
        decodes = _decodes(cells, row.arm)
        pairs = [Pair(category, a, b) for category, a, b in decodes.values()]
        verdict, basis = _judge(ratio_interval(pairs, level), ((row.arm, 0, -1), (row.arm, 1, 1)), list(decodes), runs,
                                tolerance, level)
        result.append(LadderDiff(
            arm=row.arm, label=row.label, decode_tok_s=_diff(row.decode_tok_s, other.decode_tok_s),
            vs_first_a=row.vs_first, vs_first_b=other.vs_first, verdict=verdict, basis=basis,
        ))
    return result


def _ratio_diffs(arms: list[str], cells: list[CellDiff], runs: RunsByCell, tolerance: float, level: float) -> list[RatioDiff]:
    """Every arm over the first of `arms` (A's order) and, from the third on, over the arm before."""
    decodes = {arm: _decodes(cells, arm) for arm in arms}
    result = []
    for i, arm in enumerate(arms[1:], start=1):
        mine = decodes[arm]
        for base in dict.fromkeys((arms[0], arms[i - 1])):  # the second arm's prior is the first
            prompts = [prompt for prompt in decodes[base] if prompt in mine]
            samples = [
                Sample(category, (base_a, mine[prompt][1], base_b, mine[prompt][2]))
                for prompt, (category, base_a, base_b) in decodes[base].items() if prompt in mine
            ]
            terms = ((base, 0, 1), (arm, 0, -1), (base, 1, -1), (arm, 1, 1))
            verdict, basis = _judge(contrast_interval(samples, (1, -1, -1, 1), level), terms, prompts, runs, tolerance, level)
            result.append(RatioDiff(
                arm=arm, base=base, vs="first" if base == arms[0] else "prior",
                a=_mean_ratio(samples, 1, 0), b=_mean_ratio(samples, 3, 2), verdict=verdict, basis=basis,
            ))
    return result


def _mean_ratio(samples: list[Sample], numerator: int, denominator: int) -> float | None:
    """mean of values[numerator] / mean of values[denominator], as the ladder divides its means."""
    below = mean_of([s.values[denominator] for s in samples])
    above = mean_of([s.values[numerator] for s in samples])
    return above / below if above is not None and below else None


def _judge(
    over_prompts: Interval, terms: Sequence[tuple[str, int, int]], prompts: list[str], runs: RunsByCell,
    tolerance: float, level: float,
) -> tuple[Verdict, Basis]:
    """A gated figure's verdict: by its interval over prompts; with too few prompts for one, from
    the runs of its `terms` (arm, session 0 for A or 1 for B, power) over `prompts`."""
    counts = [len(runs[arm, prompt][side]) for arm, side, _ in terms for prompt in prompts]
    spread = [min(counts), max(counts)] if counts else [0, 0]
    if over_prompts.low is not None or over_prompts.ratio is None:
        return judge(over_prompts, tolerance, "prompts"), Basis("prompts", len(prompts), spread)
    if all(runs[arm, prompt][0] == runs[arm, prompt][1] for arm, _, _ in terms for prompt in prompts):
        # B's runs are A's: the same measurements, so the difference is 0 with nothing to sample.
        return judge(Interval(1.0, 1.0, 1.0, spread[1], level), tolerance, "runs"), Basis("same runs", len(prompts), spread)
    groups = [RunGroup(power, [runs[arm, prompt][side] for prompt in prompts]) for arm, side, power in terms]
    interval = pooled_runs_interval(groups, level)
    if interval.low is None:
        interval = Interval(interval.ratio, None, None, interval.prompts, level, f"{over_prompts.note}; {interval.note}")
    return judge(interval, tolerance, "runs"), Basis("runs", len(prompts), spread)
