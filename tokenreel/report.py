"""`tokenreel report`: the ladder, the per-category table and every cell, as md, json or csv.

The markdown mirrors the seeds' tables (step, what changed, decode speed, vs. prior step,
vs. original) so a write-up can paste it as is.
"""

from __future__ import annotations

import csv
import io
from dataclasses import asdict

import orjson

from tokenreel.archive import Session
from tokenreel.figures import figure, multiplier
from tokenreel.ladder import build_cells, build_ladder, category_table, common_prompts

REPORT_FORMAT = "tokenreel.report"
REPORT_VERSION = 1
CELL_KEYS = (
    "arm", "prompt", "category", "runs", "output_tokens", "ttft_s", "tpot_ms", "decode_tok_s",
    "e2e_tok_s", "spread_tok_s", "acceptance_length", "like_for_like", "contended", "note",
)
STEP_MARKS = "①②③④⑤⑥⑦⑧⑨⑩"


def _round(value: float | int | bool | str | None, digits: int = 3) -> float | int | bool | str | None:
    if isinstance(value, float):
        return round(value, digits)
    return value


def build_report(session: Session, baseline: str | None = None) -> dict:
    """The report as plain data; the json format prints exactly this."""
    if baseline is not None and baseline not in {a.id for a in session.arms}:
        known = ", ".join(a.id for a in session.arms)
        raise ValueError(f"--baseline: no arm {baseline!r} in this session (arms: {known})")
    cells = build_cells(session)
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
        "cells": [{k: _round(v) for k, v in asdict(cell).items()} for cell in cells],
    }


def to_markdown(report: dict, session: Session) -> str:
    labels = {arm.id: arm.label for arm in session.arms}
    lines: list[str] = [f"# {report['session']}", ""]
    if report["simulated"]:
        lines += ["Recorded against simulated endpoints (`tokenreel simulate`), not real GPUs.", ""]
    lines += [
        "| Step | Arm | Decode speed | vs. prior step | vs. original | TTFT | Acceptance length |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, row in enumerate(report["ladder"]):
        mark = STEP_MARKS[i] if i < len(STEP_MARKS) else str(i + 1)
        lines.append(
            f"| {mark} | {row['label']} | {figure(row['decode_tok_s'], 1, ' tok/s')} | {multiplier(row['vs_prior'])} "
            f"| {multiplier(row['vs_first'])} | {figure(row['ttft_s'], 2, ' s')} | {figure(row['acceptance_length'], 2)} |"
        )
    runs = sorted({c["runs"] for c in report["cells"]})
    lines += [
        "",
        f"Median values, {'/'.join(str(r) for r in runs) or 0} runs per cell, mean over "
        f"{report['prompts_compared']} prompts; {report['like_for_like_prompts']} of them like-for-like "
        "(every arm produced the same number of tokens).",
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
        "| Arm | Prompt | Category | Runs | Tokens | TTFT s | TPOT ms | Decode tok/s | E2E tok/s | Spread | Accept. len | Like-for-like | Contended |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in report["cells"]:
        like = "yes" if c["like_for_like"] else f"no ({c['note']})"
        lines.append(
            f"| {c['arm']} | {c['prompt']} | {c['category']} | {c['runs']} | {c['output_tokens']} "
            f"| {figure(c['ttft_s'], 3)} | {figure(c['tpot_ms'], 2)} | {figure(c['decode_tok_s'])} | {figure(c['e2e_tok_s'])} "
            f"| {figure(c['spread_tok_s'])} | {figure(c['acceptance_length'], 2)} | {like} | {'yes' if c['contended'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def to_json(report: dict) -> str:
    return orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n"


def to_csv(report: dict) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CELL_KEYS, lineterminator="\n")
    writer.writeheader()
    for cell in report["cells"]:
        writer.writerow({k: cell[k] for k in CELL_KEYS})
    return out.getvalue()


def render_report(session: Session, fmt: str, baseline: str | None = None) -> str:
    report = build_report(session, baseline)
    if fmt == "md":
        return to_markdown(report, session)
    if fmt == "json":
        return to_json(report)
    if fmt == "csv":
        return to_csv(report)
    raise ValueError(f"--format: unknown format {fmt!r}; use md, json or csv")

