"""The report as CSV: one row per cell, with its arm, percentiles and answer check; booleans as
`true`/`false` (what spreadsheets and pandas read as booleans)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

from tokenreel.report.accuracy_text import NOT_GRADED, left_out_text
from tokenreel.report.data import Report
from tokenreel.report.wording import LATENCY_FIGURES, fingerprint_text

CELL_KEYS = (
    "arm", "prompt", "category", "runs", "output_tokens", "ttft_s", "tpot_ms", "decode_tok_s",
    "e2e_tok_s", "spread_tok_s", "acceptance_length", "like_for_like", "contended", "note",
    "acceptance_rate", "acceptance_approximate", "acceptance_note", "contention_note",
    "token_counts", "tokens_estimated", "clock", "client_delay_p99_ms", "client_busy", "client_busy_left_out",
    "ttft_left_out", "decode_left_out", "host_contended", "host_pressure_pct", "host_note", "e2e_s",
)


# Per arm in the csv (one row per cell): what the endpoint said and what the config declared.
ARM_CSV_KEYS = ("arm_fingerprint", "arm_settings", "arm_synthetic_acceptance")
# Per arm, its acceptance rate per draft position at full precision ("; " between positions 1..k),
# and the denominator it was taken over (or why the drafter arm has none); empty for other arms.
POSITION_CSV_KEYS = ("arm_position_rates", "arm_position_basis")


def _position_columns(entry: dict[str, Any] | None) -> dict[str, Any]:
    if entry is None:
        return dict.fromkeys(POSITION_CSV_KEYS, "")
    if entry["rates"] is None:
        return {"arm_position_rates": "", "arm_position_basis": f"missing: {entry['missing']}"}
    rates = "; ".join("" if r is None else repr(r) for r in entry["rates"])
    return {"arm_position_rates": rates, "arm_position_basis": entry["basis"]}


# Per arm, its ladder ratios over the suite with their 95 % intervals (empty, and the note says
# why, where there is none); per cell, its category's vs_first likewise.
RATIO_CSV_KEYS = tuple(
    f"{scope}_{ratio}{part}" for scope, ratios in (("arm", ("vs_prior", "vs_first")), ("category", ("vs_first",)))
    for ratio in ratios for part in ("", "_ci95_low", "_ci95_high", "_ci95_note")
)


def _ratio_columns(scope: str, row: dict[str, Any], ratios: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for ratio in ratios:
        ci = row[f"{ratio}_ci95"] or [None, None]
        out |= {f"{scope}_{ratio}": row[ratio], f"{scope}_{ratio}_ci95_low": ci[0], f"{scope}_{ratio}_ci95_high": ci[1],
                f"{scope}_{ratio}_ci95_note": row[f"{ratio}_ci95_note"]}
    return out


# A natural-length session's tokens and time per task, per arm over the suite and per cell's
# category: the step over the prior arm with its 95 % interval (empty, the note says why); not in
# a forced-length session's csv, whose tasks all have max_tokens' length.
TASK_FIGURES = ("tokens_median", "tokens_mean", "seconds_mean", "seconds_median", "tokens_change", "sooner")
TASK_CSV_KEYS = tuple(
    f"{scope}_task_{name}{part}" for scope in ("arm", "category") for name in TASK_FIGURES
    for part in (("", "_ci95_low", "_ci95_high", "_ci95_note") if name in ("tokens_change", "sooner") else ("",))
)


def _task_columns(scope: str, row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in TASK_FIGURES:
        out[f"{scope}_task_{name}"] = row[name]
        if name in ("tokens_change", "sooner"):
            ci = row[f"{name}_ci95"] or [None, None]
            out |= {f"{scope}_task_{name}_ci95_low": ci[0], f"{scope}_task_{name}_ci95_high": ci[1],
                    f"{scope}_task_{name}_ci95_note": row[f"{name}_note"]}
    return out


LATENCY_STATS = ("n", "min", "p50", "p90", "p99", "max")


LATENCY_CSV_KEYS = tuple(f"{name}_{stat}" for name, _, _ in LATENCY_FIGURES for stat in LATENCY_STATS)


# Same answers (core/tokenreel/analysis/answers.py): per cell in the csv, a section in the markdown.
ANSWER_CSV_KEYS = ("identical", "common_prefix_tokens", "common_prefix_chars", "similarity", "diverges_at_token")


def _answer_rows(report: Report) -> dict[tuple[str, str], dict[str, Any]]:
    return {(row["arm"], p["prompt"]): row for p in report["answers"]["prompts"] for row in p["arms"]}


def csv_value(value: object) -> object:
    """Booleans as `true`/`false` (what spreadsheets and pandas read as booleans), None as empty."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


# A spreadsheet runs a cell that starts with one of these as a formula (=HYPERLINK(...), +cmd|...,
# @SUM(...)); text from a session (prompt ids, categories, labels, notes) may.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class CsvWriter(csv.DictWriter):  # type: ignore[type-arg]
    """Every CSV tokenreel writes: a text cell a spreadsheet would run as a formula gets a leading
    apostrophe (shown as text, OWASP's advice); numbers are written as they are."""

    def __init__(self, out: io.StringIO, fieldnames: tuple[str, ...]) -> None:
        super().__init__(out, fieldnames=fieldnames, lineterminator="\n")

    def writerow(self, rowdict: Mapping[str, Any]) -> Any:
        return super().writerow({k: _inert(v) for k, v in rowdict.items()})


def _inert(value: object) -> object:
    return f"'{value}" if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def to_csv(report: Report) -> str:
    out = io.StringIO()
    task = report.get("task_time")
    fieldnames = (*CELL_KEYS, *ARM_CSV_KEYS, *POSITION_CSV_KEYS, *RATIO_CSV_KEYS, *LATENCY_CSV_KEYS, *ANSWER_CSV_KEYS, "answer_note",
                  *(TASK_CSV_KEYS if task else ()))
    writer = CsvWriter(out, fieldnames)
    answers = _answer_rows(report)
    writer.writeheader()
    arms = {a["arm"]: a for a in report["arms"]}
    ladder = {row["arm"]: row for row in report["ladder"]}
    positions = {e["arm"]: e for e in report.get("acceptance_positions", [])}
    by_category = {(category, row["arm"]): row for category, rows in report["category_ladders"].items() for row in rows}
    task_rows = {(None, row["arm"]): row for row in task["suite"]} | {
        (category, row["arm"]): row for category, rows in task["categories"].items() for row in rows} if task else {}
    for cell, latency in zip(report["cells"], report["latency"]["cells"], strict=True):
        arm = arms[cell["arm"]]
        writer.writerow({
            **{k: csv_value(cell[k]) for k in CELL_KEYS},
            "arm_fingerprint": fingerprint_text(arm["fingerprint"], "; "),
            "arm_settings": "; ".join(f"{k}={v}" for k, v in arm["settings"].items()),
            "arm_synthetic_acceptance": ladder[cell["arm"]]["synthetic_acceptance"],
            **_position_columns(positions.get(cell["arm"])),
            **_ratio_columns("arm", ladder[cell["arm"]], ("vs_prior", "vs_first")),
            **_ratio_columns("category", by_category[cell["category"], cell["arm"]], ("vs_first",)),
            **{f"{name}_{stat}": latency[name][stat] for name, _, _ in LATENCY_FIGURES for stat in LATENCY_STATS},
            **{k: csv_value(answers[cell["arm"], cell["prompt"]][k]) for k in ANSWER_CSV_KEYS},
            "answer_note": answers[cell["arm"], cell["prompt"]]["note"],
            **(_task_columns("arm", task_rows[None, cell["arm"]]) | _task_columns("category", task_rows[cell["category"], cell["arm"]])
               if task else {}),
        })
    return out.getvalue()


# `--format accuracy-csv`: accuracy's own table (report.accuracy_text words the same figures).
ACCURACY_CSV_KEYS = (
    "row", "arm", "label", "category", "passed", "graded", "pass_at_1", "ci95_low", "ci95_high", "left_out",
    "nondeterministic", "vs", "kind", "paired", "newly_solved", "lost", "p_value", "verdict",
)


def to_accuracy_csv(report: Report) -> str:
    """Accuracy as a table of its own: a row per arm (category "all") and per arm and category,
    then a row per step (kind "prior" or "first"); every figure at full precision."""
    entry = report.get("accuracy")
    if entry is None:
        raise ValueError(f"--format accuracy-csv: {NOT_GRADED}")
    out = io.StringIO()
    writer = CsvWriter(out, ACCURACY_CSV_KEYS)
    writer.writeheader()
    for row in entry["arms"]:
        mixed = len(row["nondeterministic"])
        for category, rate in (("all", row["overall"]), *row["categories"].items()):
            ci = rate["ci95"] or [None, None]
            writer.writerow({"row": "arm", "arm": row["arm"], "label": row["label"], "category": category,
                             "passed": rate["passed"], "graded": rate["graded"], "pass_at_1": rate["rate"],
                             "ci95_low": ci[0], "ci95_high": ci[1],
                             "left_out": left_out_text(row) if category == "all" else "",
                             "nondeterministic": mixed if category == "all" else ""})
    for kind in ("prior", "first"):
        for flip in entry[f"vs_{kind}"]:
            writer.writerow({"row": "step", "arm": flip["arm"], "vs": flip["vs"], "kind": kind, "paired": flip["paired"],
                             "newly_solved": flip["newly_solved"], "lost": flip["lost"],
                             "p_value": flip["p_value"], "verdict": flip["verdict"]})
    return out.getvalue()
