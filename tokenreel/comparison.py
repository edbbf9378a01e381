"""Did re-recording give the same numbers? Two sessions compared cell by cell (the views of a
comparison, md/json/csv, are in `tokenreel.report.compare`).

Two sessions of the same ladder (a re-recording, another day, another driver) are matched arm by
arm (by id) and prompt by prompt (by id). Every matched cell shows both sessions' figures
(decode tok/s, TTFT, TPOT, end-to-end tok/s), their difference in % of A, and whether the
difference lies within the runs' spread: |B - A| <= the larger of the two cells' spreads (max -
min of that figure over the cell's usable runs), i.e. the re-recording moved no further than
the runs of one recording already scatter; never less than SPREAD_FLOOR_PCT of A, since runs
that agree exactly would otherwise call any difference at all out of spread. When both sessions
ran at temperature 0, each cell also says whether the answers are the same, and if not, the
token where B's first usable run parts from A's (`tokenreel.answers`).

The gate is decode tok/s: a cell reproduces when |B - A| / A <= the tolerance. Decode speed is
the ladder's headline and every speed-up is a ratio of it; TPOT is 1000 / decode, so gating on
it too would count the same thing twice; TTFT is a fraction of a second, where a few ms of
scheduling noise is several per cent, so it would fail reproductions that are not in doubt;
end-to-end speed mixes the two. Those are shown, with their spread, but do not gate. Anything
that cannot be matched (an arm or a prompt in one session only, a prompt id whose text
changed, a cell without a usable run on one side) is listed and counts as not reproduced:
a comparison that silently skipped it would claim more than it checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenreel.answers import compare as compare_answers
from tokenreel.model import Session
from tokenreel.ladder import Cell, LadderRow, build_cells, build_ladder, common_prompts, missing_cells, usable_runs
from tokenreel.metrics import run_metrics

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
    "decode tok/s: a cell reproduces when |B - A| / A <= the tolerance (the ladder's headline; "
    "TPOT is 1000 / decode, TTFT is too short for a relative tolerance, end-to-end mixes both: shown, not gated)"
)


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
    reproduced: bool
    note: str = ""
    answers_diverge_at: int | None = None  # 1-based token where B's answer parts from A's; None: the same, or not compared
    answers_compared: bool = False  # both sessions at temperature 0, a usable run on each side


@dataclass(frozen=True)
class LadderDiff:
    """An arm's ladder row in both sessions: mean decode tok/s and the speed-up vs the first arm."""

    arm: str
    label: str
    decode_tok_s: FigureDiff
    vs_first_a: float | None
    vs_first_b: float | None
    within_tolerance: bool


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
    cells: list[CellDiff]
    unmatched: list[Unmatched]
    notes: list[str]  # differences in settings or models: context, not gated

    @property
    def failing(self) -> list[CellDiff]:
        return [c for c in self.cells if not c.reproduced]

    @property
    def reproduced(self) -> bool:
        return not self.failing and not self.unmatched


def _diff(a: float | None, b: float | None, spread_a: float | None = None, spread_b: float | None = None) -> FigureDiff:
    pct = (b - a) / a * 100 if a and b is not None else None
    spreads = [s for s in (spread_a, spread_b) if s is not None]
    floor = abs(a) * SPREAD_FLOOR_PCT / 100 if a is not None else 0.0
    within = abs(b - a) <= max(*spreads, floor) if a is not None and b is not None and spreads else None
    return FigureDiff(a, b, pct, spread_a, spread_b, within)


def _spreads(session: Session, cell: Cell) -> dict[str, float | None]:
    """max - min of each compared figure over the cell's usable runs (the runs its medians use)."""
    metrics = [run_metrics(run) for run in usable_runs(session, cell.arm, cell.prompt)]
    spreads: dict[str, float | None] = {}
    for key, _, _ in FIGURES:
        values = [getattr(m, key) for m in metrics if getattr(m, key) is not None]
        spreads[key] = max(values) - min(values) if values else None
    return spreads


def _cell_diff(a: Session, b: Session, ca: Cell, cb: Cell, tolerance: float) -> CellDiff:
    spreads_a, spreads_b = _spreads(a, ca), _spreads(b, cb)
    figures = {
        key: _diff(getattr(ca, key), getattr(cb, key), spreads_a[key], spreads_b[key]) for key, _, _ in FIGURES
    }
    gate = figures[GATE].diff_pct
    notes = []
    if gate is None:
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
        reproduced=gate is not None and abs(gate) <= tolerance, note="; ".join(notes),
        answers_diverge_at=diverges, answers_compared=compared,
    )


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
    """Match arms and prompts by id (in A's order, then B's extras) and compare every cell."""
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
    all_a, all_b = build_cells(a), build_cells(b)
    cells_a = {(c.arm, c.prompt): c for c in all_a}
    cells_b = {(c.arm, c.prompt): c for c in all_b}
    diffs = []
    for arm in (arm.id for arm in a.arms if arm.id in arms_b):
        for prompt in shared_prompts:
            ca, cb = cells_a.get((arm, prompt)), cells_b.get((arm, prompt))
            if ca is not None and cb is not None:
                diffs.append(_cell_diff(a, b, ca, cb, tolerance_pct))
                continue
            why = [f"no usable run in {side}: {_missing_reason(s, arm, prompt)}"
                   for side, s, c in (("A", a, ca), ("B", b, cb)) if c is None]
            unmatched.append(Unmatched("cell", arm, prompt, "; ".join(why)))
    notes = _notes(a, b)
    shared_a, shared_b = common_prompts(a, all_a), common_prompts(b, all_b)
    if shared_a != shared_b:  # each ladder row is a mean over its session's shared prompts
        notes.append(
            f"the ladder rows average different prompts: A over {', '.join(shared_a) or 'none'}, "
            f"B over {', '.join(shared_b) or 'none'}; compare the cells"
        )
    return Comparison(
        a=names[0], b=names[1], session_a=a.name, session_b=b.name, tolerance_pct=tolerance_pct,
        ladder=_ladder_diffs(build_ladder(a, all_a), build_ladder(b, all_b), tolerance_pct),
        cells=diffs, unmatched=unmatched, notes=notes,
    )


def _ladder_diffs(ladder_a: list[LadderRow], ladder_b: list[LadderRow], tolerance: float) -> list[LadderDiff]:
    """Ladder rows of the arms in both sessions (each session's own ladder: its first arm, its
    shared prompts). Shown, not gated: a row is the mean of its cells, which are gated."""
    rows_b = {row.arm: row for row in ladder_b}
    result = []
    for row in ladder_a:
        other = rows_b.get(row.arm)
        if other is None:
            continue
        diff = _diff(row.decode_tok_s, other.decode_tok_s)
        result.append(LadderDiff(
            arm=row.arm, label=row.label, decode_tok_s=diff, vs_first_a=row.vs_first, vs_first_b=other.vs_first,
            within_tolerance=diff.diff_pct is not None and abs(diff.diff_pct) <= tolerance,
        ))
    return result
