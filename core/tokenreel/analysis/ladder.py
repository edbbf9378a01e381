"""From runs to the seeds' ladder: per-cell medians, like-for-like flags, ratios between arms.

A cell is one arm on one prompt. Its figures are medians over the runs the run-selection policy
counts (`tokenreel.analysis.selection.RunSelection`, decided once per command: measured, completed, not
contended by other traffic; exact times kept however busy the recording machine was), its TTFT
over those whose first token's time is exact. The ladder row of an arm is the mean of its cell
medians over the prompts that every arm has, so every arm is averaged over the same prompts.

A cell with no usable run is not dropped silently: `missing_cells` says why each one is
missing (all runs contended, failed, skipped, not recorded), and where an engine cannot give a
figure (acceptance length, contention) the cell carries the reason, for the report to print.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

from tokenreel.analysis.acceptance import PerPosition, Pooled, pool, spread
from tokenreel.analysis.intervals import LEVEL, MIN_PER_CATEGORY, Interval, Pair, ratio_interval
from tokenreel.analysis.metrics import RunMetrics, run_metrics
from tokenreel.analysis.selection import DEFAULT_SELECTION, RunSelection, client_busy_inexact, first_token_late, host_contended
from tokenreel.analysis.serving_config import synthetic_text
from tokenreel.session.model import Run, Session


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
    contended: bool | None  # None: not checked (no /metrics), contention_note says why
    note: str = ""
    acceptance_rate: float | None = None
    acceptance_approximate: bool = False  # from counters printed in rounded steps
    acceptance_note: str = ""  # why there is no acceptance length (or why it is approximate)
    contention_note: str = ""  # why contention is unknown
    clock: str = ""  # which clock stamped its runs: "kernel", "user", or the mix ("kernel 2, user 1")
    client_delay_p99_ms: float | None = None  # the worst run's client delay p99 (kernel clock only)
    client_busy: int = 0  # runs flagged client_busy (the recorder woke late)
    client_busy_left_out: int = 0  # of those, runs left out (user clock only: kernel times stay exact)
    ttft_left_out: int = 0  # usable runs whose first token shared a read with later ones: no TTFT
    # usable runs with no decode interval (the whole answer arrived in one read): no decode or TPOT
    decode_left_out: int = 0
    host_contended: int = 0  # runs whose host (this machine) was under CPU pressure
    host_pressure_pct: float | None = None  # the highest host load over the cell's runs (HostPressure.load_pct), in %
    host_note: str = ""  # why the host's load is unknown (a remote endpoint, the engine's processes not found)
    e2e_s: float | None = None  # median seconds from request send to the last token
    replica: int | None = None  # the replica that served its runs (None: the arm has one)
    # The acceptance counts summed over the runs (tokenreel.analysis.acceptance); None where some
    # run lacked one, and then acceptance_pooled is False: the length is the runs' median.
    acceptance_drafts: float | None = None
    acceptance_per_position: PerPosition | None = None  # counts per draft position, summed over runs
    acceptance_draft_tokens: float | None = None
    acceptance_accepted: float | None = None
    acceptance_pooled: bool = False


@dataclass(frozen=True)
class MissingCell:
    """An arm × prompt with no usable measured run, and why."""

    arm: str
    prompt: str
    category: str
    runs: int  # measured runs archived
    reason: str


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
    acceptance_rate: float | None = None
    acceptance_approximate: bool = False
    acceptance_note: str = ""
    # 95 % intervals of vs_prior and vs_first over the prompts (tokenreel.analysis.intervals), [low, high],
    # or None with the reason ("n = 4 prompts: no interval (it needs 6)").
    vs_prior_ci95: list[float] | None = None
    vs_prior_ci95_note: str = ""
    vs_first_ci95: list[float] | None = None
    vs_first_ci95_note: str = ""
    acceptance_pooled: bool = False  # 1 + Σaccepted / Σdrafts over the arm's counted runs
    acceptance_length_prompts: list[float] | None = None  # [lowest, highest] of its prompts' lengths
    # SYNTHETIC_LABEL and where it was seen, for an arm whose engine forced acceptance; "" otherwise.
    synthetic_acceptance: str = ""
    acceptance_per_position: PerPosition | None = None  # pooled over its cells (tokenreel.analysis.acceptance)


ITSELF = "the arm itself: no interval"  # an arm's ratio to itself (the first row's), always 1


def usable_runs(session: Session, arm_id: str, prompt_id: str, selection: RunSelection = DEFAULT_SELECTION) -> list[Run]:
    """Measured runs the policy counts, in recording order."""
    return [run for run in session.runs_of(arm_id, prompt_id) if selection.counts(run)]


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def mean_of(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def median_run(session: Session, arm_id: str, prompt_id: str, selection: RunSelection = DEFAULT_SELECTION) -> Run | None:
    """The measured run of median decode speed (lower middle for an even count)."""
    scored = []
    for run in usable_runs(session, arm_id, prompt_id, selection):
        decode = run_metrics(run).decode_tok_s
        if decode is not None:
            scored.append((decode, run.index, run))
    if not scored:
        return None
    scored.sort(key=lambda item: (item[0], item[1]))
    return scored[(len(scored) - 1) // 2][2]


def _cell(session: Session, arm_id: str, prompt_id: str, category: str, selection: RunSelection) -> Cell | None:
    measured_ok = [r for r in session.runs_of(arm_id, prompt_id) if r.status == "ok"]
    runs = usable_runs(session, arm_id, prompt_id, selection)
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
    acceptance = pool([r.acceptance for r in runs if r.acceptance is not None])
    approximate = any(r.acceptance.approximate for r in runs if r.acceptance and r.acceptance.mean_length is not None)
    contended = _contended(measured_ok)
    return Cell(
        arm=arm_id,
        prompt=prompt_id,
        category=category,
        runs=len(runs),
        output_tokens=int(statistics.median(f.output_tokens for f in figures)),
        ttft_s=_median([f.ttft_s for f, r in zip(figures, runs, strict=False) if selection.counts_ttft(r)]),
        tpot_ms=_median([f.tpot_ms for f in figures]),
        decode_tok_s=_median([f.decode_tok_s for f in figures]),
        e2e_tok_s=_median([f.e2e_tok_s for f in figures]),
        e2e_s=_median([f.e2e_s for f in figures]),
        spread_tok_s=(max(decodes) - min(decodes)) if decodes else None,
        acceptance_length=acceptance.length,
        like_for_like=not note,
        contended=contended,
        note=note,
        acceptance_rate=acceptance.rate,
        replica=runs[0].replica,
        acceptance_approximate=approximate,
        acceptance_note=_acceptance_note(runs),
        contention_note=_contention_note(measured_ok) if contended is None else "",
        clock=_clocks(runs),
        client_delay_p99_ms=max((r.clock.delay_p99_ms for r in runs if r.clock and r.clock.delay_p99_ms is not None), default=None),
        client_busy=sum(1 for r in measured_ok if r.client_busy),
        client_busy_left_out=sum(1 for r in measured_ok if client_busy_inexact(r)),
        ttft_left_out=sum(1 for r in runs if first_token_late(r)),
        decode_left_out=sum(1 for f in figures if f.decode_tok_s is None),
        host_contended=sum(1 for r in measured_ok if host_contended(r)),
        host_pressure_pct=max((r.host.load_pct() for r in measured_ok if r.host is not None), default=None),
        host_note=next((r.host_note for r in measured_ok if r.host is None and r.host_note), ""),
        acceptance_drafts=acceptance.drafts,
        acceptance_draft_tokens=acceptance.draft_tokens,
        acceptance_accepted=acceptance.accepted,
        acceptance_pooled=acceptance.pooled,
        acceptance_per_position=acceptance.per_position,
    )


def _clocks(runs: list[Run]) -> str:
    """"kernel", "user", or the mix in a fixed order ("kernel 2, user 1"); runs recorded before
    the clock was archived count as "user"."""
    sources = [r.clock.source if r.clock else "user" for r in runs]
    kinds = sorted(set(sources))
    return kinds[0] if len(kinds) == 1 else ", ".join(f"{kind} {sources.count(kind)}" for kind in kinds)


def _contended(runs: list[Run]) -> bool | None:
    """True when any run was contended; None when some run could not be checked; else False."""
    if any(r.contended for r in runs):
        return True
    if any(r.contended is None for r in runs):
        return None
    return False


def _contention_note(runs: list[Run]) -> str:
    """Why contention is unknown: no /metrics (with the endpoint's answer), or no counter."""
    for run in runs:
        if run.contended is None:
            if run.gate.status == "unavailable":
                why = run.gate.detail.split(";")[0].removeprefix("no /metrics at ")
                return f"no /metrics: {why}" if why else "no /metrics"
            return run.contention_detail or "not checked"
    return ""


def _acceptance_note(runs: list[Run]) -> str:
    """Why the cell has no acceptance length, or why it is approximate; empty when exact."""
    lengths = [r.acceptance for r in runs if r.acceptance is not None and r.acceptance.mean_length is not None]
    if lengths:
        approximate = [a.note for a in lengths if a.approximate]
        return approximate[0] if approximate else ""
    notes = [r.acceptance_note for r in runs if r.acceptance_note]
    if notes:
        return _commonest(notes)
    return "none archived (recorded before tokenreel kept the reason; most likely not speculative)"


def missing_cells(session: Session, selection: RunSelection = DEFAULT_SELECTION) -> list[MissingCell]:
    """Every arm × prompt without a usable measured run, with the reason, in ladder order. Under
    `record --target-ci` only the prompts drawn count: the rest of the suite was never asked for."""
    drawn = set(session.stopping.drawn) if session.stopping else None
    missing = []
    for arm in session.arms:
        for prompt in session.prompts:
            if (drawn is not None and prompt.id not in drawn) or usable_runs(session, arm.id, prompt.id, selection):
                continue
            runs = session.runs_of(arm.id, prompt.id)
            missing.append(MissingCell(arm.id, prompt.id, prompt.category, len(runs), _missing_reason(runs, selection)))
    return missing


def _missing_reason(runs: list[Run], selection: RunSelection) -> str:
    """"all 3 runs contended: <detail>", or the mix of what happened to the runs."""
    if not runs:
        return "no measured run recorded"
    kinds: dict[str, list[Run]] = {}
    for run in runs:
        kinds.setdefault(selection.left_out_because(run) or "", []).append(run)
    parts = []
    for kind in ("contended", "client busy", "host contended", "failed", "skipped", "invalid"):
        group = kinds.get(kind)
        if group:
            parts.append((kind, len(group), _left_out_detail(kind, group[-1])))
    if len(parts) == 1:
        kind, count, detail = parts[0]
        return f"all {count} run{'s' if count != 1 else ''} {kind}: {detail}"
    return "no usable run: " + "; ".join(f"{count} {kind} ({detail})" for kind, count, detail in parts)


def _left_out_detail(kind: str, run: Run) -> str:
    """The last such run's own words: its contention, clock or pressure figure, or its error."""
    if kind == "contended":
        return run.contention_detail
    if kind == "client busy":
        why = run.clock.reason if run.clock and run.clock.reason else "no kernel receive times"
        return f"the recorder woke late on the user-space clock ({why}), so its times are late too"
    if kind == "host contended":
        what, figure = (run.host.measure(), f"{run.host.gate_pct():.0f} %") if run.host else ("CPU load", "unknown")
        return f"{what} {figure} on the engine's host (--exclude-host-contended left it out)"
    return run.error


def build_cells(session: Session, selection: RunSelection = DEFAULT_SELECTION) -> list[Cell]:
    """Cells in arm order, then prompt order; like_for_like also needs every arm to agree on n."""
    cells: list[Cell] = []
    for arm in session.arms:
        for prompt in session.prompts:
            cell = _cell(session, arm.id, prompt.id, prompt.category, selection)
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


def _cell_acceptance(cell: Cell) -> Pooled:
    """A cell's acceptance as `pool` takes it: its counts where it had them, else its figures."""
    return Pooled(cell.acceptance_length, cell.acceptance_rate, cell.acceptance_drafts,
                  cell.acceptance_draft_tokens, cell.acceptance_accepted, cell.acceptance_per_position)


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
        means[arm.id] = mean_of([c.decode_tok_s for c in mine])
        acceptance = pool([_cell_acceptance(c) for c in mine if c.acceptance_length is not None or c.acceptance_rate is not None])
        rows.append(
            LadderRow(
                arm=arm.id,
                label=arm.label,
                decode_tok_s=means[arm.id],
                vs_prior=None,
                vs_first=None,
                ttft_s=mean_of([c.ttft_s for c in mine]),
                acceptance_length=acceptance.length,
                prompts=len(mine),
                acceptance_rate=acceptance.rate,
                acceptance_approximate=any(c.acceptance_approximate for c in mine),
                acceptance_note=_row_acceptance_note(mine),
                acceptance_pooled=acceptance.pooled,
                acceptance_length_prompts=spread([c.acceptance_length for c in mine]),
                synthetic_acceptance=synthetic_text(arm),
                acceptance_per_position=acceptance.per_position,
            )
        )
    reference_id = baseline or (rows[0].arm if rows else None)
    reference = means.get(reference_id) if reference_id else None
    result = []
    for i, row in enumerate(rows):
        prior = rows[i - 1].decode_tok_s if i > 0 else row.decode_tok_s
        level = interval_level(session)
        prior_ci = _row_interval(cells, shared, row.arm, rows[i - 1].arm if i > 0 else row.arm, level)
        first_ci = _row_interval(cells, shared, row.arm, reference_id or row.arm, level)
        result.append(replace(
            row, vs_prior=_ratio(row.decode_tok_s, prior), vs_first=_ratio(row.decode_tok_s, reference),
            vs_prior_ci95=prior_ci.as_list(), vs_prior_ci95_note=prior_ci.note,
            vs_first_ci95=first_ci.as_list(), vs_first_ci95_note=first_ci.note,
        ))
    return result


def paired(cells: list[Cell], prompts: set[str], figure: Callable[[Cell], float | None], arm: str, base: str) -> list[Pair]:
    """Per prompt of `prompts` where both have the figure: `base`'s cell figure and `arm`'s,
    in suite order (the sample an interval on arm / base is taken over). Its strata are the
    categories; in a session recorded on replicas, category x replica (a prompt's
    two cells share its replica, so the ratio is formed within one) wherever every such stratum
    holds MIN_PER_CATEGORY prompts, else the categories alone (a wider, still valid interval)."""
    mine = {c.prompt: c for c in cells if c.arm == arm and c.prompt in prompts}
    found = []
    for cell in cells:
        if cell.arm == base and cell.prompt in mine:
            a, b = figure(cell), figure(mine[cell.prompt])
            if a is not None and b is not None:
                found.append((cell, a, b))
    by_replica = [Pair(f"{cell.category} on replica {cell.replica}", a, b) for cell, a, b in found]
    strata = Counter(p.category for p in by_replica)
    if any(cell.replica is not None for cell, _, _ in found) and min(strata.values()) >= MIN_PER_CATEGORY:
        return by_replica  # replicas as strata: a replica's own speed drops out of the interval
    return [Pair(cell.category, a, b) for cell, a, b in found]


def _row_interval(cells: list[Cell], shared: set[str], arm: str, base: str, level: float) -> Interval:
    """The interval of the ladder's decode ratio arm / base; an arm against itself has none."""
    if arm == base:
        return Interval(1.0, None, None, 0, note=ITSELF)
    return ratio_interval(paired(cells, shared, lambda c: c.decode_tok_s, arm, base), level)


def interval_level(session: Session) -> float:
    """The level a session's intervals are taken at: 95 %, or under `record --target-ci` the
    stopping rule's repeated level, at which they are 95 % intervals whenever it stopped."""
    return session.stopping.level if session.stopping else LEVEL


def category_ladders(session: Session, cells: list[Cell], baseline: str | None = None) -> dict[str, list[LadderRow]]:
    """category -> the ladder over that category's prompts alone, with its intervals."""
    categories = list(dict.fromkeys(c.category for c in cells))
    return {category: build_ladder(session, [c for c in cells if c.category == category], baseline) for category in categories}


def _commonest(items: list[str]) -> str:
    """The most frequent item, the earliest on a tie (reports must not vary run to run)."""
    return max(dict.fromkeys(items), key=items.count)


def _row_acceptance_note(cells: list[Cell]) -> str:
    """The arm's reason for no (or an approximate) acceptance length: its cells' commonest."""
    with_length = [c for c in cells if c.acceptance_length is not None]
    relevant = [c.acceptance_note for c in (with_length or cells) if c.acceptance_note]
    if with_length and not any(c.acceptance_approximate for c in with_length):
        return ""
    return _commonest(relevant) if relevant else ""


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
            arm.id: mean_of(
                [c.decode_tok_s for c in cells if c.arm == arm.id and c.category == category and c.prompt in shared]
            )
            for arm in session.arms
        }
    return table
