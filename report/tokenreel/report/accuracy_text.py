"""Accuracy in every view: the report's data entry, its sentences and its markdown section.

The figures are the core's (`tokenreel.analysis.accuracy`); this module only words and lays them
out, so markdown, HTML, csv and `compare` say one step's flips the same way.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from tokenreel.analysis.accuracy import ALPHA, LEVEL, build_accuracy, graded, p_text
from tokenreel.analysis.figures import figure
from tokenreel.analysis.selection import RunSelection
from tokenreel.report.wording import step_mark
from tokenreel.session.model import Session

ACCURACY_LEGEND = (
    "pass@1: the share of graded problems whose answer passed, one greedy answer a problem: the cell's median run "
    "(the run every speed figure counts); 95 % interval: exact (Clopper-Pearson). A step compares two arms problem "
    "by problem: newly solved failed before and passes now, lost the other way round; p: McNemar's exact test "
    f"(two-sided binomial test of the flips, 0.5 each way); below {ALPHA} the change is detectable. Problems without "
    "a grade (an ungraded prompt, no counted run, a run not graded) are left out and counted."
)
NOT_GRADED = "no run of this session is graded: grade it first (`tokenreel grade SESSION`), or record a graded suite (`record --suite`)"


def accuracy_entry(session: Session, selection: RunSelection) -> dict[str, Any] | None:
    """The report's "accuracy": every figure at full precision and each step's sentence; None
    for a session with no grade (its report stays as it was)."""
    if not graded(session):
        return None
    found = build_accuracy(session, selection)
    marks = {row.arm: step_mark(i) for i, row in enumerate(found.arms)}
    entry = asdict(found)
    entry |= {
        "level": LEVEL, "alpha": ALPHA, "interval": "exact (Clopper-Pearson)",
        "test": "McNemar's exact test: scipy.stats.binomtest(newly_solved, newly_solved + lost, 0.5), two-sided",
        "sentences": {kind: [flip_sentence(f, marks) for f in entry[kind]] for kind in ("vs_prior", "vs_first")},
    }
    return entry


def flip_sentence(flip: dict[str, Any], marks: dict[str, str]) -> str:
    """"step ③ vs ②: 3 problems newly solved, 1 lost, p = 0.62: no detectable change"."""
    solved = flip["newly_solved"]
    return (f"step {marks[flip['arm']]} vs {marks[flip['vs']]}: {solved} problem{'' if solved == 1 else 's'} newly solved, "
            f"{flip['lost']} lost, {p_text(flip['p_value'])}: {flip['verdict']}")


def rate_cell(rate: dict[str, Any]) -> str:
    """pass@1 as "90.9 % (7/8)", or why there is none."""
    if rate["rate"] is None:
        return "— (no graded problem)"
    return f"{figure(rate['rate'] * 100, 1, ' %')} ({rate['passed']}/{rate['graded']})"


def interval_cell(rate: dict[str, Any]) -> str:
    ci = rate["ci95"]
    return "— (no graded problem)" if ci is None else f"{figure(ci[0] * 100, 1)}–{figure(ci[1] * 100, 1, ' %')}"


def left_out_text(row: dict[str, Any]) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in row["left_out"].items()) or "none"


def nondeterministic_lines(entry: dict[str, Any]) -> list[str]:
    """One line per cell whose counted runs' grades disagree."""
    return [f"{row['label']} / {m['prompt']}: nondeterministic: {m['passed_runs']} of {m['runs']} runs passed"
            " (the median run's grade counts)"
            for row in entry["arms"] for m in row["nondeterministic"]]


def categories_of(entry: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(c for row in entry["arms"] for c in row["categories"]))


def category_cell(row: dict[str, Any], category: str) -> str:
    return rate_cell(row["categories"][category]) if category in row["categories"] else "— (none graded)"


def accuracy_markdown(entry: dict[str, Any] | None) -> list[str]:
    """The markdown section: pass@1 per arm and category, then each step's flips."""
    if entry is None:
        return []
    categories = categories_of(entry)
    lines = [
        f"Accuracy ({entry['suite']}, pass@1):", "",
        "| Step | Arm | pass@1 | 95 % interval | Left out |" + "".join(f" {c.capitalize()} |" for c in categories),
        "|---|---|---|---|---|" + "---|" * len(categories),
    ]
    for i, row in enumerate(entry["arms"]):
        per_category = "".join(f" {category_cell(row, c)} |" for c in categories)
        lines.append(f"| {step_mark(i)} | {row['label']} | {rate_cell(row['overall'])} | {interval_cell(row['overall'])} "
                     f"| {left_out_text(row)} |{per_category}")
    lines += ["", "Each step vs the prior step:", "", *(f"- {s}" for s in entry["sentences"]["vs_prior"])]
    if len(entry["vs_first"]) > 1:
        lines += ["", "Each step vs the first:", "", *(f"- {s}" for s in entry["sentences"]["vs_first"])]
    if mixed := nondeterministic_lines(entry):
        lines += ["", *(f"- {line}" for line in mixed)]
    return [*lines, "", ACCURACY_LEGEND, ""]

