"""`tokenreel report`: the ladder, the per-category table and every cell, as md, json or csv.

The markdown mirrors the seeds' tables (step, what changed, decode speed, vs. prior step,
vs. original) so a write-up can paste it as is. A figure an engine cannot give is never a bare
dash: the report says why (not speculative, no spec counters, no /metrics), and a cell with no
usable run is listed with its reason instead of vanishing.
"""

from __future__ import annotations

import csv
import io
from dataclasses import asdict

import orjson

from tokenreel.archive import Arm, Session
from tokenreel.figures import figure, multiplier
from tokenreel.ladder import build_cells, build_ladder, category_table, common_prompts, missing_cells, skewed_by_client

REPORT_FORMAT = "tokenreel.report"
REPORT_VERSION = 1
CELL_KEYS = (
    "arm", "prompt", "category", "runs", "output_tokens", "ttft_s", "tpot_ms", "decode_tok_s",
    "e2e_tok_s", "spread_tok_s", "acceptance_length", "like_for_like", "contended", "note",
    "acceptance_rate", "acceptance_approximate", "acceptance_note", "contention_note",
    "token_counts", "tokens_estimated", "clock", "client_delay_p99_ms", "client_busy", "client_busy_left_out",
)
STEP_MARKS = "①②③④⑤⑥⑦⑧⑨⑩"


def _round(value: float | int | bool | str | None, digits: int = 3) -> float | int | bool | str | None:
    if isinstance(value, float):
        return round(value, digits)
    return value


def build_report(session: Session, baseline: str | None = None, keep_client_busy: bool = False) -> dict:
    """The report as plain data; the json format prints exactly this."""
    if baseline is not None and baseline not in {a.id for a in session.arms}:
        known = ", ".join(a.id for a in session.arms)
        raise ValueError(f"--baseline: no arm {baseline!r} in this session (arms: {known})")
    cells = build_cells(session, keep_client_busy)
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
        "ladder": [{k: _round(v) for k, v in asdict(row).items()} for row in ladder],
        "categories": {
            category: {arm: _round(value) for arm, value in row.items()}
            for category, row in category_table(session, cells).items()
        },
        "cells": [_with_counts(session, {k: _round(v) for k, v in asdict(cell).items()}) for cell in cells],
        "arms": [_arm_entry(session, arm) for arm in session.arms],
        "missing_cells": [asdict(missing) for missing in missing_cells(session, keep_client_busy)],
        "clocks": run_clocks(session, keep_client_busy),
    }


def run_clocks(session: Session, keep_client_busy: bool) -> list[dict]:
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
            "in_figures": run.contended is not True and (keep_client_busy or not skewed_by_client(run)),
        })
    return out


# Per arm in the csv (one row per cell): what the endpoint said and what the config declared.
ARM_CSV_KEYS = ("arm_fingerprint", "arm_settings")
ESTIMATED_NOTE = (
    "\\* estimated token counts: the server sent no running usage, timings, token ids or logprobs and no"
    " `tokenizer` was configured, so each event counted as one token (the server's final total, if any, on"
    " the last event): decode speed and TPOT are approximate."
)


def _measured_runs(session: Session, arm: str, prompt: str | None = None) -> list:
    return [r for r in session.runs if r.arm == arm and (prompt is None or r.prompt == prompt)
            and not r.warmup and r.status == "ok"]


def _with_counts(session: Session, cell: dict) -> dict:
    """How the cell's runs counted tokens ("usage_delta", ..., "per_event") and whether any guessed."""
    runs = _measured_runs(session, cell["arm"], cell["prompt"])
    cell["token_counts"] = ",".join(sorted({r.token_source for r in runs}))
    cell["tokens_estimated"] = any(r.tokens_estimated for r in runs)
    return cell


def fingerprint_summary(arm: Arm) -> dict[str, str]:
    """The recorder's summary of what the endpoint said; for older archives, version and context."""
    fp = arm.fingerprint
    if isinstance(fp.get("summary"), dict):
        return {str(k): str(v) for k, v in fp["summary"].items()}
    out = {}
    version = fp.get("version")
    if isinstance(version, dict) and version.get("version") is not None:
        out["version"] = str(version["version"])
    if isinstance(fp.get("max_model_len"), int):
        out["max_model_len"] = str(fp["max_model_len"])
    return out


def _pairs(items: dict[str, str], sep: str = " · ") -> str:
    return sep.join(f"{k} {v}" if k not in ("engine",) else v for k, v in items.items())


def _arm_entry(session: Session, arm: Arm) -> dict:
    runs = _measured_runs(session, arm.id)
    return {
        "arm": arm.id,
        "label": arm.label,
        "fingerprint": fingerprint_summary(arm),
        "settings": dict(arm.settings),
        "token_counts": ",".join(sorted({r.token_source for r in runs})),
        "tokens_estimated": any(r.tokens_estimated for r in runs),
    }


def _arms_table(report: dict) -> list[str]:
    """Each arm: what its endpoint said (fingerprint) and what the config declared ([arms.settings])."""
    lines = ["| Arm | Endpoint says | Declared settings | Token counts |", "|---|---|---|---|"]
    for a in report["arms"]:
        counts = a["token_counts"] + (" (estimated\\*)" if a["tokens_estimated"] else "")
        settings = "; ".join(f"{k} = {v}" for k, v in a["settings"].items())
        lines.append(f"| {a['label']} | {_pairs(a['fingerprint']) or '—'} | {settings or '—'} | {counts or '—'} |")
    return [*lines, ""]


def _est(text: str, estimated: bool) -> str:
    return f"{text}\\*" if estimated and text != "—" else text


def _acceptance(value: float | None, approximate: bool) -> str:
    """Acceptance length to 2 decimals; ≈ marks one from counters printed in rounded steps."""
    text = figure(value, 2)
    return f"≈{text}" if approximate and value is not None else text


def _rate(value: float | None) -> str:
    return figure(None if value is None else value * 100, 0, " %")


def _contended(cell: dict) -> str:
    if cell["contended"] is None:
        return f"unknown ({cell['contention_note'] or 'not checked'})"
    return "yes" if cell["contended"] else "no"


def _acceptance_notes(report: dict) -> list[str]:
    """One line per arm whose acceptance length is missing (why) or approximate (how far off)."""
    lines = []
    for row in report["ladder"]:
        reasons = list(dict.fromkeys(
            c["acceptance_note"] for c in report["cells"]
            if c["arm"] == row["arm"] and c["acceptance_note"]
            and (c["acceptance_length"] is None or c["acceptance_approximate"])
        ))
        if reasons:
            mark = "≈" if row["acceptance_approximate"] else "—"
            lines.append(f"- {row['label']} ({mark}): {'; '.join(reasons)}")
    if not lines:
        return []
    return ["Acceptance length and rate, where not measured exactly:", "", *lines, ""]


def _clock_notes(report: dict, session: Session) -> list[str]:
    """Which clock timed the runs (one line when all agree), the reason for every user-clock
    group, and every client_busy run with what became of it."""
    runs = report["clocks"]
    if not runs:
        return []
    kernel = [r for r in runs if r["clock"] == "kernel"]
    user = [r for r in runs if r["clock"] == "user"]
    reasons = list(dict.fromkeys(r["reason"] for r in user))
    p99 = max((r["client_delay_p99_ms"] for r in kernel if r["client_delay_p99_ms"] is not None), default=None)
    delay = f" (the recorder's own delay, user-space stamp - kernel, p99 up to {figure(p99, 2, ' ms')})" if p99 is not None else ""
    if not user:
        lines = [f"Clock: all {len(runs)} measured runs timed by the kernel's receive time of each read{delay}."]
    elif not kernel and len(reasons) == 1:
        lines = [f"Clock: all {len(runs)} measured runs timed by their user-space read stamps: {reasons[0]}."]
    else:
        lines = [f"Clock: {len(kernel)} of {len(runs)} measured runs timed by the kernel's receive time of each read{delay};"
                 " the others by their user-space read stamps:", ""]
        for reason in reasons:
            lines.append(f"- {_run_names([r for r in user if r['reason'] == reason])}: {reason}")
    threshold = figure(session.settings.client_busy_p99_ms, 1, " ms")
    busy = [r for r in runs if r["client_busy"]]
    if busy:
        lines += ["", f"Client busy (the recorder read the network more than {threshold} late at p99):", ""]
    for r in busy:
        verdict = (
            "in the figures, its kernel times hold" if r["in_figures"] and not r["first_token_shared_read"]
            else "in the figures (--include-client-busy)" if r["in_figures"]
            else "left out of the figures: its first token was read together with later ones"
        )
        lines.append(
            f"- {_run_names([r])}: client delay p99 {figure(r['client_delay_p99_ms'], 1, ' ms')},"
            f" max {figure(r['client_delay_max_ms'], 1, ' ms')}; {verdict}"
        )
    return [*lines, ""]


def _run_names(runs: list[dict]) -> str:
    """"bf16 / prose-1 / run 2" for up to 3 runs, else the count per arm."""
    if len(runs) <= 3:
        return ", ".join(f"{r['arm']} / {r['prompt']} / run {r['index']}" for r in runs)
    arms = [r["arm"] for r in runs]
    return f"{len(runs)} runs (" + ", ".join(f"{arm} {arms.count(arm)}" for arm in dict.fromkeys(arms)) + ")"


def to_markdown(report: dict, session: Session) -> str:
    labels = {arm.id: arm.label for arm in session.arms}
    lines: list[str] = [f"# {report['session']}", ""]
    if report["simulated"]:
        lines += ["Recorded against simulated endpoints (`tokenreel simulate`), not real GPUs.", ""]
    lines += [
        "| Step | Arm | Decode speed | vs. prior step | vs. original | TTFT | Acceptance length | Acceptance rate |",
        "|---|---|---|---|---|---|---|---|",
    ]
    estimated_arms = {a["arm"] for a in report["arms"] if a["tokens_estimated"]}
    for i, row in enumerate(report["ladder"]):
        mark = STEP_MARKS[i] if i < len(STEP_MARKS) else str(i + 1)
        decode = _est(figure(row["decode_tok_s"], 1, " tok/s"), row["arm"] in estimated_arms)
        lines.append(
            f"| {mark} | {row['label']} | {decode} | {multiplier(row['vs_prior'])} "
            f"| {multiplier(row['vs_first'])} | {figure(row['ttft_s'], 2, ' s')} "
            f"| {_acceptance(row['acceptance_length'], row['acceptance_approximate'])} | {_rate(row['acceptance_rate'])} |"
        )
    runs = sorted({c["runs"] for c in report["cells"]})
    lines += [
        "",
        f"Median values, {'/'.join(str(r) for r in runs) or 0} runs per cell, mean over "
        f"{report['prompts_compared']} prompts; {report['like_for_like_prompts']} of them like-for-like "
        "(every arm produced the same number of tokens).",
        "",
    ]
    if estimated_arms:
        lines += [ESTIMATED_NOTE, ""]
    lines += _acceptance_notes(report)
    lines += _clock_notes(report, session)
    lines += _arms_table(report)
    if report["missing_cells"]:
        lines += [
            "Missing cells (no usable run, so not in any figure above):",
            "",
            "| Arm | Prompt | Category | Runs | Why |",
            "|---|---|---|---|---|",
            *(f"| {m['arm']} | {m['prompt']} | {m['category']} | {m['runs']} | {m['reason']} |" for m in report["missing_cells"]),
            "",
        ]
    arm_ids = [row["arm"] for row in report["ladder"]]
    if report["categories"]:
        header = " | ".join(f"{STEP_MARKS[i] if i < len(STEP_MARKS) else i + 1} {labels[a]}" for i, a in enumerate(arm_ids))
        lines += [f"| Prompt | {header} | vs. original |", "|---|" + "---|" * (len(arm_ids) + 1)]
        base = report["baseline"]
        for category, row in report["categories"].items():
            values = " | ".join(figure(row.get(a)) for a in arm_ids)
            last, first = row.get(arm_ids[-1]), row.get(base)
            speedup = multiplier(last / first) if last is not None and first else "—"
            lines.append(f"| {category.capitalize()} | {values} | {speedup} |")
        lines.append("")
    lines += [
        "| Arm | Prompt | Category | Runs | Tokens | TTFT s | TPOT ms | Decode tok/s | E2E tok/s | Spread | Accept. len | Accept. rate | Like-for-like | Contended |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in report["cells"]:
        like = "yes" if c["like_for_like"] else f"no ({c['note']})"
        lines.append(
            f"| {c['arm']} | {c['prompt']} | {c['category']} | {c['runs']} | {c['output_tokens']} "
            f"| {figure(c['ttft_s'], 3)} | {_est(figure(c['tpot_ms'], 2), c['tokens_estimated'])} "
            f"| {_est(figure(c['decode_tok_s']), c['tokens_estimated'])} | {figure(c['e2e_tok_s'])} "
            f"| {figure(c['spread_tok_s'])} | {_acceptance(c['acceptance_length'], c['acceptance_approximate'])} "
            f"| {_rate(c['acceptance_rate'])} | {like} | {_contended(c)} |"
        )
    return "\n".join(lines) + "\n"


def to_json(report: dict) -> str:
    return orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n"


def to_csv(report: dict) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=(*CELL_KEYS, *ARM_CSV_KEYS), lineterminator="\n")
    writer.writeheader()
    arms = {a["arm"]: a for a in report["arms"]}
    for cell in report["cells"]:
        arm = arms[cell["arm"]]
        writer.writerow({
            **{k: cell[k] for k in CELL_KEYS},
            "arm_fingerprint": _pairs(arm["fingerprint"], "; "),
            "arm_settings": "; ".join(f"{k}={v}" for k, v in arm["settings"].items()),
        })
    return out.getvalue()


def render_report(session: Session, fmt: str, baseline: str | None = None, keep_client_busy: bool = False) -> str:
    report = build_report(session, baseline, keep_client_busy)
    if fmt == "md":
        return to_markdown(report, session)
    if fmt == "json":
        return to_json(report)
    if fmt == "csv":
        return to_csv(report)
    raise ValueError(f"--format: unknown format {fmt!r}; use md, json or csv")

