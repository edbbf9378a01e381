"""From runs to the seeds' ladder: per-cell medians, like-for-like flags, ratios between arms.

A cell is one arm on one prompt. Its figures are medians over the measured runs that
completed and were not contended (someone else generating during the run measures
contention, not the arm). The ladder row of an arm is the mean of its cell medians over the
prompts that every arm has, so every arm is averaged over the same prompts.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from tokenreel.archive import Run, Session
from tokenreel.metrics import RunMetrics, run_metrics


@dataclass(frozen=True)
class Cell:
    arm: str
    prompt: str
    category: str
    runs: int
    output_tokens: int | None
    ttft_s: float | None
    tpot_ms: float | None
    decode_tok_s: float | None
    e2e_tok_s: float | None
    spread_tok_s: float | None
    acceptance_length: float | None
    like_for_like: bool
    contended: bool
    note: str = ""


@dataclass(frozen=True)
class LadderRow:
    arm: str
    label: str
    decode_tok_s: float | None
    vs_prior: float | None
    vs_first: float | None
    ttft_s: float | None
    acceptance_length: float | None
    prompts: int


def usable_runs(session: Session, arm_id: str, prompt_id: str) -> list[Run]:
    """Measured runs that completed and were not contended, in recording order."""
    return [
        run
        for run in session.runs_of(arm_id, prompt_id)
        if run.status == "ok" and run.contended is not True
    ]


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def median_run(session: Session, arm_id: str, prompt_id: str) -> Run | None:
    """The measured run of median decode speed (lower middle for an even count)."""
    scored = []
    for run in usable_runs(session, arm_id, prompt_id):
        decode = run_metrics(run).decode_tok_s
        if decode is not None:
            scored.append((decode, run.index, run))
    if not scored:
        return None
    scored.sort(key=lambda item: (item[0], item[1]))
    return scored[(len(scored) - 1) // 2][2]


def _cell(session: Session, arm_id: str, prompt_id: str, category: str) -> Cell | None:
    measured_ok = [r for r in session.runs_of(arm_id, prompt_id) if r.status == "ok"]
    runs = usable_runs(session, arm_id, prompt_id)
    if not runs:
        return None
    figures: list[RunMetrics] = [run_metrics(r) for r in runs]
    decodes = [f.decode_tok_s for f in figures if f.decode_tok_s is not None]
    lengths = {f.output_tokens for f in figures}
    note = ""
    forced = session.settings.ignore_eos
    if len(lengths) > 1:
        note = f"runs differ in length ({', '.join(str(n) for n in sorted(lengths))} tokens)"
    elif forced and lengths != {session.settings.max_tokens}:
        note = f"stopped at {next(iter(lengths))} of {session.settings.max_tokens} tokens"
    acceptance = [r.acceptance.mean_length for r in runs if r.acceptance is not None]
    return Cell(
        arm=arm_id,
        prompt=prompt_id,
        category=category,
        runs=len(runs),
        output_tokens=int(statistics.median(f.output_tokens for f in figures)),
        ttft_s=_median([f.ttft_s for f in figures]),
        tpot_ms=_median([f.tpot_ms for f in figures]),
        decode_tok_s=_median([f.decode_tok_s for f in figures]),
        e2e_tok_s=_median([f.e2e_tok_s for f in figures]),
        spread_tok_s=(max(decodes) - min(decodes)) if decodes else None,
        acceptance_length=_median(list(acceptance)),
        like_for_like=not note,
        contended=any(r.contended for r in measured_ok),
        note=note,
    )


def build_cells(session: Session) -> list[Cell]:
    """Cells in arm order, then prompt order; like_for_like also needs every arm to agree on n."""
    cells: list[Cell] = []
    for arm in session.arms:
        for prompt in session.prompts:
            cell = _cell(session, arm.id, prompt.id, prompt.category)
            if cell is not None:
                cells.append(cell)
    by_prompt: dict[str, set[int | None]] = {}
    arms_per_prompt: dict[str, int] = {}
    for cell in cells:
        by_prompt.setdefault(cell.prompt, set()).add(cell.output_tokens)
        arms_per_prompt[cell.prompt] = arms_per_prompt.get(cell.prompt, 0) + 1
    result = []
    for cell in cells:
        agree = len(by_prompt[cell.prompt]) == 1 and arms_per_prompt[cell.prompt] == len(session.arms)
        if cell.like_for_like and not agree:
            note = "arms differ in length" if len(by_prompt[cell.prompt]) > 1 else "not every arm has this prompt"
            cell = replace(cell, like_for_like=False, note=note)
        result.append(cell)
    return result


def common_prompts(session: Session, cells: list[Cell]) -> list[str]:
    """Prompts that every arm has a cell for, in suite order."""
    have: dict[str, set[str]] = {}
    for cell in cells:
        have.setdefault(cell.prompt, set()).add(cell.arm)
    everyone = {arm.id for arm in session.arms}
    return [p.id for p in session.prompts if have.get(p.id) == everyone]


def build_ladder(session: Session, cells: list[Cell], baseline: str | None = None) -> list[LadderRow]:
    """One row per arm in session order; vs_first is relative to `baseline` when given."""
    shared = set(common_prompts(session, cells))
    rows: list[LadderRow] = []
    means: dict[str, float | None] = {}
    for arm in session.arms:
        mine = [c for c in cells if c.arm == arm.id and c.prompt in shared]
        means[arm.id] = _mean([c.decode_tok_s for c in mine])
        rows.append(
            LadderRow(
                arm=arm.id,
                label=arm.label,
                decode_tok_s=means[arm.id],
                vs_prior=None,
                vs_first=None,
                ttft_s=_mean([c.ttft_s for c in mine]),
                acceptance_length=_mean([c.acceptance_length for c in mine]),
                prompts=len(mine),
            )
        )
    reference = means.get(baseline) if baseline else (rows[0].decode_tok_s if rows else None)
    result = []
    for i, row in enumerate(rows):
        prior = rows[i - 1].decode_tok_s if i > 0 else row.decode_tok_s
        result.append(
            replace(row, vs_prior=_ratio(row.decode_tok_s, prior), vs_first=_ratio(row.decode_tok_s, reference))
        )
    return result


def category_table(session: Session, cells: list[Cell]) -> dict[str, dict[str, float | None]]:
    """category -> arm -> mean decode tok/s over that category's shared prompts."""
    shared = set(common_prompts(session, cells))
    categories: list[str] = []
    for prompt in session.prompts:
        if prompt.id in shared and prompt.category not in categories:
            categories.append(prompt.category)
    table: dict[str, dict[str, float | None]] = {}
    for category in categories:
        table[category] = {
            arm.id: _mean(
                [c.decode_tok_s for c in cells if c.arm == arm.id and c.category == category and c.prompt in shared]
            )
            for arm in session.arms
        }
    return table
