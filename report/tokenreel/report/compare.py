"""`tokenreel compare A B` as md, json or csv: both sessions' figures per cell, the difference,
its 95 % interval and verdict, the spread (the comparison itself is `tokenreel.analysis.comparison`)."""

from __future__ import annotations

import io
from dataclasses import asdict
from typing import Any, Literal, assert_never, get_args

from tokenreel.analysis.accuracy import Flips, PassRate, p_text, pct_text
from tokenreel.analysis.causes import Cause
from tokenreel.analysis.comparison import (
    EXIT_CODES,
    FIGURES,
    GATE,
    GATE_RULE,
    NOT_REPRODUCED,
    REPRODUCED,
    SPREAD_RULE,
    Basis,
    CellDiff,
    Comparison,
    LadderDiff,
    RatioDiff,
)
from tokenreel.analysis.figures import figure, multiplier
from tokenreel.analysis.figures import signed_pct as _pct
from tokenreel.analysis.verdicts import CANT_TELL, VERDICTS, Verdict
from tokenreel.base.safe_text import strip_controls
from tokenreel.report.csv_format import CsvWriter, csv_value
from tokenreel.report.json_format import to_json

COMPARE_FORMAT = "tokenreel.compare"
COMPARE_VERSION = 3  # 2: verdicts with intervals; cells no longer gate. 3: too few prompts, ladder verdicts from the runs
METHOD = (
    "a ladder figure's over prompts (paired by prompt, stratified by category: the delta method on "
    "Cochran's combined ratio estimate, *Sampling Techniques* 1977, 6.11-6.12), a cell's over its runs "
    "(Welch's t on the log of the ratio of the means)"
)
RUNS_METHOD = (
    "with too few prompts for an interval over prompts, a ladder figure's over the runs: the prompts held "
    "as they are, each arm's relative run-to-run variance in each session pooled over its cells, the delta "
    "method on the log of the ratio of the means over prompts of the cells' means, Satterthwaite's degrees "
    "of freedom and Student's t; B's runs the same as A's: a difference of 0 exactly"
)
METHODS = {"prompts": METHOD, "runs": RUNS_METHOD}


def _interval(v: Verdict) -> str:
    return figure(None) if v.diff_ci95 is None else f"[{_pct(v.diff_ci95[0])}, {_pct(v.diff_ci95[1])}]"


def _yes(value: bool | None) -> str:
    return "—" if value is None else ("yes" if value else "no")


def _counts(verdicts: list[Verdict]) -> str:
    """"1 same, 2 slower, 33 can't tell yet": the verdicts present, in VERDICTS' order."""
    counts = {name: sum(v.verdict == name for v in verdicts) for name in VERDICTS}
    return ", ".join(f"{k} {name}" for name, k in counts.items() if k) or "none"


def _judged(what: str, v: Verdict) -> str:
    """"q4_0 decode slower (-5.00 % [-5.50 %, -4.50 %])", or "... : about 8 more prompts"."""
    shown = f"{_pct(v.estimate_pct)} {_interval(v)}" if v.diff_ci95 is not None else _pct(v.estimate_pct)
    if v.verdict == CANT_TELL:
        return f"{what} {shown}: {v.reason}"
    return f"{what} {v.verdict} ({shown})"


def _with_basis(v: Verdict, basis: Basis) -> str:
    """The verdict in words, and what it was judged from unless an interval over prompts."""
    return f"{v.text} ({basis.text})" if basis.text else v.text


def _bases(c: Comparison) -> str:
    """", from 3 runs a cell, 4 prompts": what the gated verdicts were judged from, where not prompts."""
    sizes = dict.fromkeys(b.size for b in c.bases if b.method != "prompts")
    return f", from {' or '.join(sizes)}" if sizes else ""


def _named(gated: list[tuple[str, Verdict]]) -> list[str]:
    """The gated figures that are not "same": those that differ, then those that can't tell yet,
    a reason without an interval said once for all it holds for."""
    unsettled = [(what, v) for what, v in gated if v.verdict == CANT_TELL]
    named = [_judged(what, v) for what, v in gated if v.differs]
    named += [_judged(what, v) for what, v in unsettled if v.diff_ci95 is not None]
    for note in dict.fromkeys(v.note for _, v in unsettled if v.diff_ci95 is None):
        whats = [what for what, v in unsettled if v.diff_ci95 is None and v.note == note]
        named.append(f"{'all' if len(whats) == len(gated) else ', '.join(whats)}: {note}")
    return named


def summary_line(c: Comparison) -> str:
    """One line for the terminal: the outcome, led by what was not matched, then the ladder's
    verdict counts (naming what is not "same") and the cells'."""
    matched = len(c.cells)
    parts = []
    cells = [u for u in c.unmatched if u.what == "cell"]
    if cells:
        shown = "; ".join(f"{u.arm} / {u.prompt}: {u.reason}" for u in cells[:3])
        more = f"; and {len(cells) - 3} more" if len(cells) > 3 else ""
        parts.append(f"{len(cells)} of {matched + len(cells)} cells have no usable run on one side ({shown}{more})")
    parts += [f"{u.what} {u.arm or u.prompt} {u.reason}" for u in c.unmatched if u.what != "cell"]
    named = _named(c.gated)
    parts.append(f"ladder (decode tok/s, gated, ±{c.tolerance_pct:g} %{_bases(c)}): {_counts([v for _, v in c.gated])}"
                 + (f" ({'; '.join(named)})" if named else ""))
    parts.append(f"{matched} cell{'' if matched == 1 else 's'} (not gated): {_counts([d.verdict for d in c.cells])}")
    parted = [d for d in c.cells if d.answers_diverge_at is not None]
    if parted:
        parts.append("answers differ in " + ", ".join(f"{d.arm} / {d.prompt} (from token {d.answers_diverge_at})"
                                                      for d in parted))
    return f"{'NOT reproduced' if c.outcome == NOT_REPRODUCED else c.outcome}: " + "; ".join(parts)


def to_markdown(c: Comparison, causes: list[Cause]) -> str:
    tol = f"±{c.tolerance_pct:g} %"
    lines = [
        f"# Compare: {c.session_a} vs {c.session_b}",
        "",
        f"A: `{c.a}` (session {c.session_a}); B: `{c.b}` (session {c.session_b}). Δ is (B - A) / A.",
        "",
        f"**{summary_line(c)}**",
        "",
        f"Verdicts: \"same\" when the 95 % interval of Δ lies inside {tol}, \"faster\" or \"slower\" when it lies "
        f"wholly outside on that side, else \"can't tell yet\", with about how many more prompts or runs would settle it. "
        f"Intervals: {METHOD}{'; ' + RUNS_METHOD if _bases(c) else ''}. Gate: {GATE_RULE}. In spread: {SPREAD_RULE}.",
        "",
    ]
    differ = [(what, v) for what, v in c.gated if v.differs]
    if differ:
        lines += ["Not reproduced:", "", *(f"- {_judged(what, v)}, outside {tol}" for what, v in differ), ""]
    if causes:
        lines += ["What moved (one line per cause, for each figure that differs):", "", *(f"- {cause.line}" for cause in causes), ""]
    moved = [d for d in c.cells if d.verdict.differs]
    if moved:
        lines += ["Cells that differ (shown, not gated):", "",
                  *(f"- {_judged(f'{d.arm} / {d.prompt}', d.verdict)}" for d in moved), ""]
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
        "| Arm | Decode tok/s A | Decode tok/s B | Δ | 95 % interval | vs. original A | vs. original B | Verdict |",
        "|---|---|---|---|---|---|---|---|",
        *(
            f"| {r.label} | {figure(r.decode_tok_s.a)} | {figure(r.decode_tok_s.b)} | {_pct(r.decode_tok_s.diff_pct)} "
            f"| {_interval(r.verdict)} | {multiplier(r.vs_first_a)} | {multiplier(r.vs_first_b)} | {_with_basis(r.verdict, r.basis)} |"
            for r in c.ladder
        ),
        "",
    ]
    if c.ratios:
        lines += [
            "| Ladder ratio | A | B | Δ | 95 % interval | Verdict |",
            "|---|---|---|---|---|---|",
            *(
                f"| {r.arm} / {r.base} (vs {r.vs}) | {multiplier(r.a)} | {multiplier(r.b)} | {_pct(r.verdict.estimate_pct)} "
                f"| {_interval(r.verdict)} | {_with_basis(r.verdict, r.basis)} |"
                for r in c.ratios
            ),
            "",
        ]
    lines += _task_time(c)
    header = " | ".join(f"{label} A → B | Δ | In spread" for _, label, _ in FIGURES)
    lines += [
        f"| Arm | Prompt | Runs A/B | {header} | Tokens A/B | Decode 95 % interval | Verdict |",
        "|---|---|---|" + "---|---|---|" * len(FIGURES) + "---|---|---|",
    ]
    for d in c.cells:
        values = " | ".join(
            f"{figure(d.figures[key].a, digits)} → {figure(d.figures[key].b, digits)} "
            f"| {_pct(d.figures[key].diff_pct)} | {_yes(d.figures[key].within_spread)}"
            for key, _, digits in FIGURES
        )
        verdict = f"**{d.verdict.text}**" if d.verdict.differs else d.verdict.text
        lines.append(
            f"| {d.arm} | {d.prompt} | {d.runs_a}/{d.runs_b} | {values} | {d.tokens_a}/{d.tokens_b} "
            f"| {_interval(d.verdict)} | {verdict}{' (' + d.note + ')' if d.note else ''} |"
        )
    return "\n".join([*lines, *_accuracy_lines(c)]) + "\n"


def _rate(rate: PassRate | None) -> str:
    return "not graded" if rate is None else pct_text(rate)


def _step(flip: Flips | None) -> str:
    """A step's flips as "+3 / −1, p = 0.62", or why there is none."""
    if flip is None:
        return "no step"
    return f"+{flip.newly_solved} / −{flip.lost}, {p_text(flip.p_value)}"


def _accuracy_lines(c: Comparison) -> list[str]:
    """Each arm's pass@1 in A and B, and its step's flips (vs the arm before it) in each: shown, not gated."""
    if not c.accuracy:
        return []
    return [
        "", "Accuracy (pass@1 on the cells' median runs; a step: problems newly solved / lost vs the arm before it, "
        "McNemar's exact test; shown, not gated):", "",
        "| Arm | pass@1 A | pass@1 B | Step A | Step B |", "|---|---|---|---|---|",
        *(f"| {d.arm} | {_rate(d.a)} | {_rate(d.b)} | {_step(d.step_a)} | {_step(d.step_b)} |" for d in c.accuracy),
    ]


def _task_time(c: Comparison) -> list[str]:
    """Natural-length sessions' tokens and time per task and each step's words, A beside B (not
    gated); nothing when both were recorded at a forced length."""
    if not c.task_time:
        return []
    forced = "forced length: no task time"
    rows = []
    for pair in c.task_time:
        sides = [(r.seconds_mean, r.tokens_median, r.text) if r else None for r in (pair.a, pair.b)]
        times = " | ".join(figure(s[0], 2, " s") if s else forced for s in sides)
        tokens = " | ".join(figure(s[1], 0) if s else forced for s in sides)
        steps = " | ".join((s[2] or "the first arm") if s else forced for s in sides)
        rows.append(f"| {pair.label} | {times} | {tokens} | {steps} |")
    return ["Time per task at natural length (context, not gated):", "",
            "| Arm | Time per task A | Time per task B | Tokens per task A | Tokens per task B | Step A | Step B |",
            "|---|---|---|---|---|---|---|", *rows, ""]


def _verdict_data(v: Verdict) -> dict[str, Any]:
    """A verdict's figures, flat beside the row's own: full precision, the interval in %."""
    return {"estimate_pct": v.estimate_pct, "diff_ci95": v.diff_ci95, "diff_ci95_note": v.note,
            "verdict": v.verdict, f"more_{v.unit}": v.more}


def _judged_data(item: LadderDiff | RatioDiff | CellDiff) -> dict[str, Any]:
    data = asdict(item)
    del data["verdict"]
    return {**data, **_verdict_data(item.verdict)}


def to_data(c: Comparison, causes: list[Cause]) -> dict[str, Any]:
    """The comparison as plain data; the json format prints exactly this."""
    def plain(item: object) -> object:
        if isinstance(item, dict):
            return {k: plain(v) for k, v in item.items()}
        if isinstance(item, list):
            return [plain(v) for v in item]
        return item + 0.0 if isinstance(item, float) else item  # no -0.0 from a tiny negative difference

    data = {
        "format": COMPARE_FORMAT,
        "version": COMPARE_VERSION,
        "a": {"path": c.a, "session": c.session_a},
        "b": {"path": c.b, "session": c.session_b},
        "tolerance_pct": c.tolerance_pct,
        "gate": GATE,
        "gate_rule": GATE_RULE,
        "spread_rule": SPREAD_RULE,
        "methods": METHODS,
        "outcome": c.outcome,
        "exit_code": EXIT_CODES[c.outcome],
        "reproduced": c.outcome == REPRODUCED,
        "verdicts": {
            "ladder": {name: sum(v.verdict == name for _, v in c.gated) for name in VERDICTS},
            "cells": {name: sum(d.verdict.verdict == name for d in c.cells) for name in VERDICTS},
        },
        "cells_compared": len(c.cells),
        "cells_with_other_answers": sum(cell.answers_diverge_at is not None for cell in c.cells),
        "not_matched": len(c.unmatched),
        "ladder": [_judged_data(row) for row in c.ladder],
        "ratios": [_judged_data(ratio) for ratio in c.ratios],
        "cells": [_judged_data(cell) for cell in c.cells],
        "unmatched": [asdict(u) for u in c.unmatched],
        "notes": c.notes,
        "causes": [{**asdict(cause), "line": cause.line} for cause in causes],
        **({"task_time": [asdict(pair) for pair in c.task_time]} if c.task_time else {}),
        **({"accuracy": [asdict(d) for d in c.accuracy]} if c.accuracy else {}),
    }
    return {key: plain(value) for key, value in data.items()}


FIGURE_CSV_PARTS = ("a", "b", "diff_pct", "spread_a", "spread_b", "within_spread")
BASIS_CSV_KEYS = ("method", "method_prompts", "method_runs_min", "method_runs_max")
VERDICT_CSV_KEYS = ("estimate_pct", "diff_ci95_low", "diff_ci95_high", "diff_ci95_note", "verdict", "more_prompts", "more_runs")
CSV_KEYS = (
    "row", "arm", "prompt", "category", "runs_a", "runs_b", "tokens_a", "tokens_b",
    *(f"{key}_{part}" for key, _, _ in FIGURES for part in FIGURE_CSV_PARTS),
    "vs_first_a", "vs_first_b", "base", "ratio_a", "ratio_b", *VERDICT_CSV_KEYS, *BASIS_CSV_KEYS, "note",
)


def _verdict_csv(row: dict[str, Any]) -> dict[str, Any]:
    low, high = row["diff_ci95"] or (None, None)
    basis = dict(zip(BASIS_CSV_KEYS, (row["basis"]["method"], row["basis"]["prompts"], *row["basis"]["runs_a_cell"]), strict=True)) \
        if "basis" in row else {}
    return {**{k: row[k] for k in VERDICT_CSV_KEYS if k in row}, "diff_ci95_low": low, "diff_ci95_high": high, **basis}


def to_csv(c: Comparison, causes: list[Cause]) -> str:
    """One row per ladder row ("ladder"), ladder ratio ("ratio", `base` its denominator), matched
    cell ("cell"), unmatched item ("unmatched arm"...) and cause ("cause", its line in `note`)."""
    data = to_data(c, causes)
    out = io.StringIO()
    writer = CsvWriter(out, CSV_KEYS)
    writer.writeheader()

    def write(row: dict[str, Any]) -> None:
        writer.writerow({k: csv_value(v) for k, v in row.items()})

    for r in data["ladder"]:
        write({
            "row": "ladder", "arm": r["arm"], "vs_first_a": r["vs_first_a"], "vs_first_b": r["vs_first_b"],
            **{f"{GATE}_{part}": r["decode_tok_s"][part] for part in FIGURE_CSV_PARTS}, **_verdict_csv(r),
        })
    for r in data["ratios"]:
        write({"row": "ratio", "arm": r["arm"], "base": r["base"], "ratio_a": r["a"], "ratio_b": r["b"], **_verdict_csv(r)})
    for d in data["cells"]:
        write({
            "row": "cell", **{k: d[k] for k in ("arm", "prompt", "category", "runs_a", "runs_b", "tokens_a", "tokens_b")},
            **{f"{key}_{part}": d["figures"][key][part] for key, _, _ in FIGURES for part in FIGURE_CSV_PARTS},
            **_verdict_csv(d), "note": d["note"],
        })
    for u in data["unmatched"]:
        write({"row": f"unmatched {u['what']}", "arm": u["arm"], "prompt": u["prompt"], "note": u["reason"]})
    for cause in data["causes"]:
        write({"row": "cause", "arm": cause["subject"], "note": cause["line"]})
    for d in data.get("accuracy", []):
        write({"row": "accuracy", "arm": d["arm"], "note": _accuracy_note(d)})
    return out.getvalue()


def _accuracy_note(d: dict[str, Any]) -> str:
    """An arm's accuracy row in the csv: each session's pass@1 (passed/graded, full precision) and step."""
    parts = []
    for side in ("a", "b"):
        rate, step = d[side], d[f"step_{side}"]
        said = "not graded" if rate is None else f"pass@1 {rate['rate']!r} ({rate['passed']}/{rate['graded']})"
        if step is not None:
            said += f"; step vs {step['vs']}: newly solved {step['newly_solved']}, lost {step['lost']}, p {step['p_value']!r}"
        parts.append(f"{side.upper()}: {said}")
    return " | ".join(parts)


CompareFormat = Literal["md", "json", "csv"]
COMPARE_FORMATS: tuple[CompareFormat, ...] = get_args(CompareFormat)


def parse_compare_format(text: str) -> CompareFormat:
    """--format as one of COMPARE_FORMATS (no html: a comparison is tables, not a page)."""
    for fmt in COMPARE_FORMATS:
        if text == fmt:
            return fmt
    raise ValueError(f"--format: compare writes md, json or csv, not {text!r}")


def render_comparison(c: Comparison, fmt: CompareFormat, causes: list[Cause]) -> str:
    if fmt == "md":
        return strip_controls(to_markdown(c, causes))  # text for people, as the report's (render_report)
    if fmt == "json":
        return to_json(to_data(c, causes))
    if fmt == "csv":
        return strip_controls(to_csv(c, causes))
    assert_never(fmt)
