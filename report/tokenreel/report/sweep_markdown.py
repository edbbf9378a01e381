"""A sweep's report as markdown (`tokenreel report SWEEP`): the crossover sentences first, since
they are what a reader came for, then a table per arm and one per pair of adjacent arms. Its own
view, never mixed into a ladder's tables: a sweep's figures are under load, a ladder's alone."""

from __future__ import annotations

import textwrap
from typing import Any

from tokenreel.base.safe_text import strip_controls
from tokenreel.report.sweep_data import sweep_report
from tokenreel.report.sweep_schedule import RULE, SCHEDULE_HEADERS, schedule_lines, schedule_tables
from tokenreel.session.model import Session

LEVEL_HEADERS = ("level", "status", "requests", "aggregate tok/s", "decode tok/s (mean)", "TTFT ms p50 / p90 / p99",
                 "TPOT ms p50 / p90 / p99", "acceptance length", "drafts per step", "peak waiting")
CROSSOVER_MEANING = ("A speed-up pays at a level when its whole 95 % interval lies above 1; the crossover is the lowest"
                     " level where it does not (per request: what one user sees; aggregate: what the GPU serves).")


def _num(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def ratio_cell(figures: dict[str, Any]) -> str:
    """A ratio with its interval, or why it has none, as the sweep's tables print it (markdown and html)."""
    ci = figures["ci95"]
    text = _num(figures["ratio"], 2) + "×"
    return text + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci is not None else f" ({figures['note'] or 'no interval'})")


def level_cells(row: dict[str, Any]) -> list[str]:
    """One arm's level as the sweep's tables print it, in LEVEL_HEADERS order (markdown and html)."""
    ttft, tpot = row["ttft_ms"], row["tpot_ms"]
    return [str(row["level"]), row["status"], str(row["completed"]), _num(row["aggregate_output_tok_s"]),
            _num(row["mean_decode_tok_s"]), " / ".join(_num(ttft[p]) for p in ("p50", "p90", "p99")),
            " / ".join(_num(tpot[p], 2) for p in ("p50", "p90", "p99")), _num(row["acceptance_length"], 2),
            _num(row["drafts_per_step"], 2), _num(row["peak_waiting"], 0)]


def missing_note(rows: list[dict[str, Any]]) -> str:
    """Why an arm's table shows a dash for drafts per step or acceptance length: never a silent one."""
    reasons = []
    if any(row["drafts_per_step"] is None for row in rows):
        notes = sorted({row["metrics_note"] for row in rows if row["drafts_per_step"] is None and row["metrics_note"]})
        reasons.append("drafts per step –: " + ("; ".join(notes) if notes else
                       "the engine's /metrics has no spec-decode counters (vLLM and SGLang give them with a drafter only)"))
    if any(row["acceptance_length"] is None for row in rows):
        reasons.append("acceptance length –: no drafts counted at that level")
    return "; ".join(reasons) + "." if reasons else ""


def sweep_markdown(session: Session) -> str:
    """The whole sweep report as markdown (module docstring)."""
    report = sweep_report(session)
    labels = {arm.id: arm.label for arm in session.arms}
    lines = [f"# Sweep: {session.name}", ""]
    lines += [f"**{s}**" for s in report["summary"]] or ["One arm: nothing to compare."]
    lines += ["", *textwrap.wrap(CROSSOVER_MEANING, 99), ""]
    for arm in session.arms:
        lines += [f"## {arm.label}", "", "| " + " | ".join(LEVEL_HEADERS) + " |",
                  "|---:|---|---:|---:|---:|---|---|---:|---:|---:|"]
        rows = [row for row in report["levels"] if row["arm"] == arm.id]
        lines += ["| " + " | ".join(level_cells(row)) + " |" for row in rows]
        lines += ["", *textwrap.wrap(note, 99)] if (note := missing_note(rows)) else []
        lines.append("")
    for pair in report["crossovers"]:
        lines += [f"## {labels[pair['arm']]} vs {labels[pair['vs']]}", "",
                  "| level | per-request ratio [95 % CI] | aggregate ratio [95 % CI] |", "|---:|---|---|"]
        lines += [f"| {c['level']} | {ratio_cell(c['per_request'])} | {ratio_cell(c['aggregate'])} |" for c in pair["levels"]]
        lines.append("")
    lines += schedule_markdown(report["schedule"], labels)
    return strip_controls("\n".join(lines))


def schedule_markdown(schedule: dict[str, Any], labels: dict[str, str]) -> list[str]:
    """The drafting schedule (`sweep_schedule`): its lines, then why, level by level."""
    if not schedule["drafters"]:
        return []
    lines = ["## Drafting schedule", "", *[f"- {line}" for line in schedule_lines(schedule, labels)], "",
             *textwrap.wrap(RULE, 99), ""]
    lines += [f"- {d['k_missing']}" for d in schedule["drafters"] if d["k_missing"]]
    for title, rows in schedule_tables(schedule, labels, ratio_cell):
        lines += ["", f"### {title}", "", "| " + " | ".join(SCHEDULE_HEADERS) + " |", "|---:|---|---|---:|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]
