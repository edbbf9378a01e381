"""`tokenreel compare A B` as md, json or csv: both sessions' figures per cell, the difference,
the spread and the verdict (the comparison itself is `tokenreel.comparison`)."""

from __future__ import annotations

import csv
import io
from dataclasses import asdict

from tokenreel.comparison import FIGURES, GATE, GATE_RULE, SPREAD_RULE, Comparison
from tokenreel.figures import figure, multiplier
from tokenreel.report.csv_format import csv_value
from tokenreel.report.json_format import to_json
from tokenreel.safe_text import strip_controls

COMPARE_FORMAT = "tokenreel.compare"
COMPARE_VERSION = 1


def _pct(value: float | None) -> str:
    """A signed difference in %, 2 decimals (a 2 % tolerance needs more than one)."""
    if value is None:
        return figure(None)
    text = figure(abs(value), 2)
    sign = "" if text == figure(0.0, 2) else ("+" if value > 0 else "-")
    return f"{sign}{text} %"


def _yes(value: bool | None) -> str:
    return "—" if value is None else ("yes" if value else "no")


def summary_line(c: Comparison) -> str:
    """One line for the terminal: the verdict, led by its reason."""
    matched, tol = len(c.cells), f"±{c.tolerance_pct:g} %"
    total = matched + sum(u.what == "cell" for u in c.unmatched)
    parted = [d for d in c.cells if d.answers_diverge_at is not None]
    answers = ""
    if parted:
        answers = "; answers differ in " + ", ".join(f"{d.arm} / {d.prompt} (from token {d.answers_diverge_at})" for d in parted)
    if c.reproduced:
        return f"reproduced: all {matched} cells agree within {tol} on decode tok/s{answers}"
    reasons = []
    if c.unmatched:
        cells = [u for u in c.unmatched if u.what == "cell"]
        others = [u for u in c.unmatched if u.what != "cell"]
        if cells:
            shown = "; ".join(f"{u.arm} / {u.prompt}: {u.reason}" for u in cells[:3])
            more = f"; and {len(cells) - 3} more" if len(cells) > 3 else ""
            reasons.append(f"{len(cells)} of {total} cells have no usable run on one side ({shown}{more})")
        reasons += [f"{u.what} {u.arm or u.prompt} {u.reason}" for u in others]
    if c.failing:
        outside = ", ".join(f"{d.arm} / {d.prompt} ({_pct(d.figures[GATE].diff_pct)})" for d in c.failing)
        reasons.append(f"{len(c.failing)} of {matched} matched cells are outside {tol} on decode tok/s: {outside}")
    agree = matched - len(c.failing)
    rest = f"; the {agree} other matched cells agree within {tol}" if c.failing and agree else (
        f"; the {agree} matched agree within {tol}" if agree else "")
    return "NOT reproduced: " + "; ".join(reasons) + rest + answers


def to_markdown(c: Comparison) -> str:
    tol = f"±{c.tolerance_pct:g} %"
    lines = [
        f"# Compare: {c.session_a} vs {c.session_b}",
        "",
        f"A: `{c.a}` (session {c.session_a}); B: `{c.b}` (session {c.session_b}). Δ is (B - A) / A.",
        "",
        f"**{summary_line(c)}**",
        "",
        f"Gate: {GATE_RULE}. Tolerance {tol}. In spread: {SPREAD_RULE}.",
        "",
    ]
    if c.failing:
        lines += ["Not reproduced:", ""]
        for d in c.failing:
            g = d.figures[GATE]
            lines.append(
                f"- {d.arm} / {d.prompt}: decode {figure(g.a)} → {figure(g.b)} tok/s ({_pct(g.diff_pct)}), "
                f"outside {tol}" + (f"; {d.note}" if d.note else "")
            )
        lines.append("")
    if c.unmatched:
        lines += [
            "Not matched (counted as not reproduced):", "",
            "| What | Arm | Prompt | Why |", "|---|---|---|---|",
            *(f"| {u.what} | {u.arm or '—'} | {u.prompt or '—'} | {u.reason} |" for u in c.unmatched),
            "",
        ]
    if c.notes:
        lines += ["Recorded differently (context, not gated):", "", *(f"- {n}" for n in c.notes), ""]
    lines += [
        f"| Arm | Decode tok/s A | Decode tok/s B | Δ | vs. original A | vs. original B | Within {tol} |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| {r.label} | {figure(r.decode_tok_s.a)} | {figure(r.decode_tok_s.b)} | {_pct(r.decode_tok_s.diff_pct)} "
            f"| {multiplier(r.vs_first_a)} | {multiplier(r.vs_first_b)} | {_yes(r.within_tolerance)} |"
            for r in c.ladder
        ),
        "",
    ]
    header = " | ".join(f"{label} A → B | Δ | In spread" for _, label, _ in FIGURES)
    lines += [
        f"| Arm | Prompt | Runs A/B | {header} | Tokens A/B | Reproduced |",
        "|---|---|---|" + "---|---|---|" * len(FIGURES) + "---|---|",
    ]
    for d in c.cells:
        values = " | ".join(
            f"{figure(d.figures[key].a, digits)} → {figure(d.figures[key].b, digits)} "
            f"| {_pct(d.figures[key].diff_pct)} | {_yes(d.figures[key].within_spread)}"
            for key, _, digits in FIGURES
        )
        verdict = "yes" if d.reproduced else "**no**"
        lines.append(
            f"| {d.arm} | {d.prompt} | {d.runs_a}/{d.runs_b} | {values} | {d.tokens_a}/{d.tokens_b} "
            f"| {verdict}{' (' + d.note + ')' if d.note else ''} |"
        )
    return "\n".join(lines) + "\n"


def to_data(c: Comparison) -> dict:
    """The comparison as plain data; the json format prints exactly this."""
    def plain(item: object) -> object:
        if isinstance(item, dict):
            return {k: plain(v) for k, v in item.items()}
        if isinstance(item, list):
            return [plain(v) for v in item]
        return item + 0.0 if isinstance(item, float) else item  # no -0.0 from a tiny negative difference

    return plain({
        "format": COMPARE_FORMAT,
        "version": COMPARE_VERSION,
        "a": {"path": c.a, "session": c.session_a},
        "b": {"path": c.b, "session": c.session_b},
        "tolerance_pct": c.tolerance_pct,
        "gate": GATE,
        "gate_rule": GATE_RULE,
        "spread_rule": SPREAD_RULE,
        "reproduced": c.reproduced,
        "cells_compared": len(c.cells),
        "cells_reproduced": len(c.cells) - len(c.failing),
        "cells_with_other_answers": sum(cell.answers_diverge_at is not None for cell in c.cells),
        "not_matched": len(c.unmatched),
        "ladder": [asdict(row) for row in c.ladder],
        "cells": [asdict(cell) for cell in c.cells],
        "unmatched": [asdict(u) for u in c.unmatched],
        "notes": c.notes,
    })


FIGURE_CSV_PARTS = ("a", "b", "diff_pct", "spread_a", "spread_b", "within_spread")
CSV_KEYS = (
    "row", "arm", "prompt", "category", "runs_a", "runs_b", "tokens_a", "tokens_b",
    *(f"{key}_{part}" for key, _, _ in FIGURES for part in FIGURE_CSV_PARTS),
    "vs_first_a", "vs_first_b", "reproduced", "note",
)


def to_csv(c: Comparison) -> str:
    """One row per ladder row ("ladder"), matched cell ("cell") and unmatched item ("unmatched arm"...)."""
    data = to_data(c)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_KEYS, lineterminator="\n")
    writer.writeheader()

    def write(row: dict) -> None:
        writer.writerow({k: csv_value(v) for k, v in row.items()})

    for r in data["ladder"]:
        write({
            "row": "ladder", "arm": r["arm"], "vs_first_a": r["vs_first_a"], "vs_first_b": r["vs_first_b"],
            "reproduced": r["within_tolerance"],
            **{f"{GATE}_{part}": r["decode_tok_s"][part] for part in FIGURE_CSV_PARTS},
        })
    for d in data["cells"]:
        write({
            "row": "cell", **{k: d[k] for k in ("arm", "prompt", "category", "runs_a", "runs_b", "tokens_a", "tokens_b")},
            **{f"{key}_{part}": d["figures"][key][part] for key, _, _ in FIGURES for part in FIGURE_CSV_PARTS},
            "reproduced": d["reproduced"], "note": d["note"],
        })
    for u in data["unmatched"]:
        write({"row": f"unmatched {u['what']}", "arm": u["arm"], "prompt": u["prompt"], "reproduced": False,
               "note": u["reason"]})
    return out.getvalue()


def render_comparison(c: Comparison, fmt: str) -> str:
    if fmt == "md":
        return strip_controls(to_markdown(c))  # text for people, as the report's (render_report)
    if fmt == "json":
        return to_json(to_data(c))
    if fmt == "csv":
        return strip_controls(to_csv(c))
    raise ValueError(f"--format: compare writes md, json or csv, not {fmt!r}")
