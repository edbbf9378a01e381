"""The report as plain data: the core's figures for one session under one run selection.

Every view (markdown, json, csv, html, charts, terminal) prints from this dict and computes
nothing of its own; the json format is exactly this, every figure at full precision.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from tokenreel.analysis.answers import build_answers
from tokenreel.analysis.arm_view import ArmView, arm_view, recorded_arms
from tokenreel.analysis.claims import DEFINITIONS, all_speedups, claim_text, headline, interval_text, scope_text
from tokenreel.analysis.decomposition import category_sentence, decompositions
from tokenreel.analysis.engine_figures import arm_fingerprint, engine_agreement, prompt_cache
from tokenreel.analysis.ladder import Cell, build_cells, build_ladder, category_ladders, category_table, common_prompts, missing_cells
from tokenreel.analysis.latency import PERCENTILE_METHOD, Latency, LatencyRow, build_latency
from tokenreel.analysis.metrics import run_metrics
from tokenreel.analysis.positions import acceptance_positions
from tokenreel.analysis.replica_ladders import replica_ladders, served_model_lines
from tokenreel.analysis.roofline import rooflines
from tokenreel.analysis.run_variance import run_variances
from tokenreel.analysis.selection import DEFAULT_SELECTION, RunSelection, host_contended
from tokenreel.analysis.task_time import category_task_rows, natural_length, task_rows
from tokenreel.report.accuracy_text import accuracy_entry
from tokenreel.report.wording import LATENCY_FIGURES
from tokenreel.session.gpu import gpu_hardware
from tokenreel.session.model import Arm, Run, Session

REPORT_FORMAT = "tokenreel.report"
REPORT_VERSION = 1
# A report as build_report gives it: JSON-shaped data, what the json format prints.
Report = dict[str, Any]


def build_report(
    session: Session, baseline: str | None = None, selection: RunSelection = DEFAULT_SELECTION, arms: list[str] | None = None,
) -> Report:
    """The report as plain data; the json format prints exactly this, every figure at full
    precision (rounding belongs to the tables people read). Its arms are those `report_view`
    shows: the recorded ones of `arms` (all when None); the rest are named, not figured."""
    view = report_view(session, arms)
    shown = [a.id for a in view.session.arms]
    if baseline is not None and baseline not in {a.id for a in session.arms}:
        known = ", ".join(a.id for a in session.arms)
        raise ValueError(f"--baseline: no arm {baseline!r} in this session (arms: {known})")
    if baseline is not None and baseline not in shown:
        why = "left out by --arms" if baseline in recorded_arms(session) else "not recorded yet"
        raise ValueError(f"--baseline: arm {baseline!r} is {why}; the report shows {', '.join(shown)}")
    session = view.session
    cells = build_cells(session, selection)
    ladder = build_ladder(session, cells, baseline)
    shared = common_prompts(session, cells)
    return {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "session": session.name,
        "simulated": session.simulated,
        "baseline": baseline or (session.arms[0].id if session.arms else None),
        "prompts_compared": len(shared),
        "like_for_like_prompts": sum(
            1 for p in shared if all(c.like_for_like for c in cells if c.prompt == p)
        ),
        "selection": {"exclude_host_contended": selection.exclude_host_contended, "rule": selection.describe()},
        "headline": headline_entry(session, cells),
        "stopping": asdict(session.stopping) if session.stopping else None,
        "not_recorded": view.not_recorded,
        "arms_left_out": view.left_out,
        "ladder": [asdict(row) for row in ladder],
        "acceptance_positions": acceptance_positions(session, ladder),
        "decomposition": decomposition_entry(session, cells, selection),
        "roofline": [asdict(r) for r in rooflines(session, ladder, selection)],
        "speedups": [asdict(s) for s in all_speedups(session, cells, selection)],
        "categories": category_table(session, cells),
        "category_ladders": {
            category: [asdict(row) for row in rows] for category, rows in category_ladders(session, cells, baseline).items()
        },
        "cells": [_with_counts(session, asdict(cell)) for cell in cells],
        "arms": [_arm_entry(session, arm) for arm in session.arms],
        "missing_cells": [asdict(missing) for missing in missing_cells(session, selection)],
        "clocks": run_clocks(session, selection),
        "host": host_summary(session),
        "gpu": [gpu_entry(arm) for arm in session.arms],
        "latency": _latency_entry(build_latency(session, cells, selection)),
        "answers": asdict(build_answers(session, baseline, selection)),
        "engine_agreement": engine_agreement(session, selection),
        "prompt_cache": prompt_cache(session),
        **({"replicas": replicas, "replica_warnings": served_model_lines(session)}
           if (replicas := replica_ladders(session, cells, baseline)) else {}),
        **({"task_time": task_time_entry(session, cells, selection)} if natural_length(session) else {}),
        **({"accuracy": accuracy} if (accuracy := accuracy_entry(session, selection)) else {}),
    }


def task_time_entry(session: Session, cells: list[Cell], selection: RunSelection) -> dict[str, Any]:
    """A natural-length session's tokens and time per task, and each step's "finishes N %
    sooner" (`tokenreel.analysis.task_time`), over the suite and per category; absent from a
    forced-length report, whose tasks all have max_tokens' length."""
    return {
        "suite": [asdict(row) for row in task_rows(session, cells, selection=selection)],
        "categories": {category: [asdict(row) for row in rows]
                       for category, rows in category_task_rows(session, cells, selection).items()},
    }


def decomposition_entry(session: Session, cells: list[Cell], selection: RunSelection) -> dict[str, Any]:
    """Each drafter arm's speed-up over its target as acceptance x step ratio, suite and per
    category (`tokenreel.analysis.decomposition`), the sentence comparing its categories, and the
    share of its run-to-run spread that acceptance explains (`tokenreel.analysis.run_variance`)."""
    found = decompositions(session, cells)
    arms = list(dict.fromkeys(d.arm for d in found))
    return {
        "arms": [asdict(d) for d in found],
        "sentences": {arm: category_sentence([d for d in found if d.arm == arm]) for arm in arms},
        "run_variance": [asdict(v) for v in run_variances(session, cells, arms, selection)],
    }


def report_view(session: Session, arms: list[str] | None = None) -> ArmView:
    """The arms a report shows (`tokenreel.analysis.arm_view`), an unknown id named as --arms's."""
    try:
        return arm_view(session, arms)
    except ValueError as error:
        raise ValueError(f"--arms: {error}") from None


def headline_entry(session: Session, cells: list[Cell]) -> dict[str, Any] | None:
    """The session's headline claim (its last arm against its first, decode, over the suite) with
    the words every view prints it with, so the report and the video's end card say the same."""
    claim = headline(session, cells)
    if claim is None:
        return None
    labels = {a.id: a.label for a in session.arms}
    return {
        **asdict(claim),
        "text": claim_text(claim.value, claim.metric),
        "interval_text": interval_text(claim.value, claim.ci95),
        "scope_text": scope_text(claim),
        "arm_label": labels[claim.arm],
        "vs_label": labels[claim.vs],
        "definition": f"{DEFINITIONS[claim.metric]}; each arm's figure is its median over runs per prompt,"
        f" averaged over the {claim.prompts} prompts every arm has",
    }


def report_selection(report: Report) -> RunSelection:
    """The run selection a report was built with (its "selection" entry), for views built on it."""
    return RunSelection(exclude_host_contended=report["selection"]["exclude_host_contended"])


def host_summary(session: Session) -> dict[str, Any]:
    """Whether the engine's host was watched (local endpoints only) and how loaded it was."""
    measured = [r for r in session.runs if not r.warmup and r.status == "ok"]
    watched = [r for r in measured if r.host is not None]
    notes = list(dict.fromkeys(r.host_note for r in measured if r.host is None and r.host_note))
    return {
        "watched_runs": len(watched),
        "runs": len(measured),
        "contended_runs": sum(1 for r in watched if r.host and r.host.contended),
        "threshold_pct": session.settings.host_pressure_pct,
        "max_pressure_pct": max((r.host.load_pct() for r in watched if r.host), default=None),
        "measure": "psi" if any(r.host and r.host.others_pct is None for r in watched) else "others_cpu",
        "notes": notes,
    }


def gpu_entry(arm: Arm) -> dict[str, Any]:
    """The arm's GPU as the GPU gate read it before its last recording (every check kept in
    "checks"), and whether any recording of it found the GPU busy (flagged)."""
    last = asdict(arm.gpu[-1]) if arm.gpu else None
    return {
        "arm": arm.id,
        "status": last["status"] if last else "not checked",
        "flagged": any(check.status == "busy" for check in arm.gpu),
        "hardware": gpu_hardware(arm.gpu),
        "last": last,
        "checks": len(arm.gpu),
    }


def run_clocks(session: Session, selection: RunSelection) -> list[dict[str, Any]]:
    """Which clock stamped each measured ok run, its client delay, and whether it is in the figures."""
    out = []
    for run in session.runs:
        if run.warmup or run.status != "ok":
            continue
        clock = run.clock
        out.append({
            "arm": run.arm, "prompt": run.prompt, "index": run.index,
            "clock": clock.source if clock else "user",
            "reason": clock.reason if clock else "not archived (recorded before tokenreel stated its clock)",
            "client_delay_p50_ms": clock.delay_p50_ms if clock else None,
            "client_delay_p99_ms": clock.delay_p99_ms if clock else None,
            "client_delay_max_ms": clock.delay_max_ms if clock else None,
            "first_token_shared_read": clock.first_shared if clock else None,
            "client_busy": run.client_busy,
            "in_figures": selection.counts(run),
            "ttft_in_figures": selection.counts_ttft(run),
            "decode_in_figures": selection.counts(run) and run_metrics(run).decode_tok_s is not None,
            "host_pressure_pct": run.host.load_pct() if run.host else None,
            "host_contended": host_contended(run),
        })
    return out


def _measured_runs(session: Session, arm: str, prompt: str | None = None) -> list[Run]:
    return [r for r in session.runs if r.arm == arm and (prompt is None or r.prompt == prompt)
            and not r.warmup and r.status == "ok"]


def _with_counts(session: Session, cell: dict[str, Any]) -> dict[str, Any]:
    """How the cell's runs counted tokens ("usage_delta", ..., "per_event") and whether any guessed."""
    runs = _measured_runs(session, cell["arm"], cell["prompt"])
    cell["token_counts"] = ",".join(sorted({r.token_source for r in runs}))
    cell["tokens_estimated"] = any(r.tokens_estimated for r in runs)
    return cell


def _arm_entry(session: Session, arm: Arm) -> dict[str, Any]:
    runs = _measured_runs(session, arm.id)
    return {
        "arm": arm.id,
        "label": arm.label,
        "fingerprint": arm_fingerprint(session, arm.id),
        "settings": dict(arm.settings),
        "token_counts": ",".join(sorted({r.token_source for r in runs})),
        "tokens_estimated": any(r.tokens_estimated for r in runs),
    }


def _latency_row(row: LatencyRow) -> dict[str, Any]:
    entry: dict[str, Any] = {"arm": row.arm, **({} if row.prompt is None else {"prompt": row.prompt}), "runs": row.runs}
    for name, _, _ in LATENCY_FIGURES:
        entry[name] = asdict(getattr(row, name))
    return entry


def _latency_entry(latency: Latency) -> dict[str, Any]:
    """Arms over the prompts every arm has (listed in "arm_prompts"), cells over their own runs."""
    return {
        "method": PERCENTILE_METHOD,
        "arm_prompts": latency.shared_prompts,
        "arms": [_latency_row(row) for row in latency.arms],
        "cells": [_latency_row(row) for row in latency.cells],
    }
