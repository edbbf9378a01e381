"""A sweep's crossover as a schedule an engine takes: where the drafter pays, draft; elsewhere not.

For each drafter arm against the arm it drafts for (`drafting.drafted_arm`; in a sweep, also an
arm whose level counters counted drafts, against the nearest arm before it that drafted none):
- per level, k where its per-request speed-up pays with 95 % confidence (`sweep_compare.pays`:
  the whole interval above 1) and 0 where it does not;
- vLLM's `num_speculative_tokens_per_batch_size` (a `--speculative-config` key: inclusive
  `[range_start, range_end, k]` batch-size ranges, the first from 1), one range per run of levels
  with the same value;
- a "disable drafting above N concurrent requests" threshold: N = the crossover level - 1.
Between two levels the lower level's value holds (the schedule changes only at a measured level);
below the lowest level, the lowest level's. k is the arm's recorded draft length
(`draft_length`); where none is recorded the mapping carries K_PLACEHOLDER and `k_missing` says
which key to set, never a guessed k. Per request, not aggregate: a drafter is there for the
speed one user sees, and the aggregate crossover is the report's other figure.

With several drafter arms of different k drafting for one arm (a sweep of draft lengths), the
best k per level: the k whose speed-up over that arm is highest among those that pay, with its
interval; 0 where none pays.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tokenreel.analysis.draft_length import K_KEY, draft_length
from tokenreel.analysis.drafting import DRAFTED_HOW, drafted_arm
from tokenreel.report.sweep_compare import compare, pays
from tokenreel.session.model import Session

K_PLACEHOLDER = K_KEY.upper()  # where k is unknown: the value to write in its place
VLLM_KEY = "num_speculative_tokens_per_batch_size"
RULE = ("A level drafts where the drafter's per-request speed-up over the arm it drafts for pays with 95 % confidence"
        " (its whole interval above 1), k there; elsewhere 0. Between two levels the lower level's value holds.")
ENGINES = {
    "vllm": f"--speculative-config '{{\"{K_KEY}\": MAX_K, \"{VLLM_KEY}\": [[range_start, range_end, k], ...]}}'"
            " (inclusive batch-size ranges from 1; vLLM carries the last range's k to larger batches)",
    "disable_above": "drafting off when more than N requests run: vLLM before its V1 engine, --speculative-disable-by-batch-size N",
}


def _drafts_counted(rows: list[dict[str, Any]], arm: str) -> bool:
    return any((row["counters"].get("drafts") or 0) > 0 for row in rows if row["arm"] == arm)


def _base(session: Session, rows: list[dict[str, Any]], arm_id: str) -> tuple[str, str] | None:
    """The arm `arm_id` drafts for and how that was found, or None for an arm that does not draft."""
    arm = session.arm(arm_id)
    if (target := drafted_arm(session, arm)) is not None:
        return target.arm, DRAFTED_HOW[target.how]
    if not _drafts_counted(rows, arm_id):
        return None
    before = [a.id for a in session.arms[: session.arms.index(arm)] if not _drafts_counted(rows, a.id)]
    return (before[-1], "the nearest arm before it that counted no drafts") if before else None


def vllm_ranges(values: list[tuple[int, int | str]]) -> list[list[int | str]]:
    """(level, k) rising -> vLLM's inclusive ranges: a run of equal values is one range; a range
    holds until the next level, the first starts at 1, the last ends at its level (vLLM carries it on)."""
    ranges: list[list[int | str]] = []
    for i, (level, k) in enumerate(values):
        end = values[i + 1][0] - 1 if i + 1 < len(values) else level
        if ranges and ranges[-1][2] == k:
            ranges[-1][1] = end
        else:
            ranges.append([1 if not ranges else level, end, k])
    return ranges


def _threshold(levels: list[dict[str, Any]]) -> tuple[int | None, int | None]:
    """(crossover level, disable above N): the first level that does not pay and N = that level - 1
    (0 when the lowest level does not pay); (None, None) when every level pays."""
    cut = next((entry["level"] for entry in levels if not entry["pays"]), None)
    if cut is None:
        return None, None
    return cut, 0 if cut == levels[0]["level"] else cut - 1


def _drafter(session: Session, rows: list[dict[str, Any]], arm_id: str, base: str, how: str) -> dict[str, Any]:
    length = draft_length(session.arm(arm_id))
    k: int | str = length.k if length.k is not None else K_PLACEHOLDER
    pair = compare(session, rows, base, arm_id)
    levels = [{"level": c["level"], "pays": pays(c["per_request"]), **c["per_request"]} for c in pair["levels"]]
    for entry in levels:
        entry["k"] = k if entry["pays"] else 0
    cut, above = _threshold(levels)
    missing = "" if length.k is not None else (
        f"k unknown: no --speculative-config {K_KEY} in the launch command and no {K_KEY} in [arms.settings];"
        f" set {K_KEY} in the arm's [arms.settings] to the k it ran with, or write it for {K_PLACEHOLDER} in the mapping")
    return {"arm": arm_id, "vs": base, "vs_how": how, "k": length.k, "k_source": length.source, "k_missing": missing,
            "levels": levels, "crossover_level": cut, "disable_above": above,
            "vllm": {VLLM_KEY: vllm_ranges([(e["level"], e["k"]) for e in levels]) if levels else None}}


def _best_k(drafters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per arm drafted for with two or more known k: the best k per level (module docstring)."""
    out = []
    for base in dict.fromkeys(d["vs"] for d in drafters):
        group = [d for d in drafters if d["vs"] == base and d["k"] is not None]
        if len({d["k"] for d in group}) < 2:
            continue
        levels = []
        for level in sorted(set.intersection(*({e["level"] for e in d["levels"]} for d in group))):
            candidates = [{"arm": d["arm"], "k": d["k"], **next(e for e in d["levels"] if e["level"] == level)} for d in group]
            paying = [c for c in candidates if c["pays"]]
            best = max(paying, key=lambda c: c["ratio"]) if paying else None
            levels.append({"level": level, "k": best["k"] if best else 0, "arm": best["arm"] if best else None,
                           "ratio": best["ratio"] if best else None, "ci95": best["ci95"] if best else None,
                           "pays": best is not None,
                           "candidates": [{key: c[key] for key in ("arm", "k", "ratio", "ci95", "pays")} for c in candidates]})
        cut, above = _threshold(levels)
        out.append({"vs": base, "arms": [d["arm"] for d in group], "levels": levels, "crossover_level": cut,
                    "disable_above": above, "vllm": {VLLM_KEY: vllm_ranges([(e["level"], e["k"]) for e in levels]) or None}})
    return out


def schedule_path(session_path: Path) -> Path:
    """Where `tokenreel sweep` writes the schedule: beside the session, sweep.json -> sweep.schedule.json."""
    return session_path.with_name(session_path.stem + ".schedule.json")


def schedule_json(schedule: dict[str, Any]) -> bytes:
    """The schedule file's bytes: full precision, as the report's json gives them."""
    return orjson.dumps({"format": "tokenreel-schedule", "version": 1, **schedule}, option=orjson.OPT_INDENT_2) + b"\n"


def sweep_schedule(session: Session, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The schedule of every drafter arm, the best k per level where several k were swept, the rule and the engines' keys."""
    drafters = [_drafter(session, rows, arm.id, *found) for arm in session.arms if (found := _base(session, rows, arm.id))]
    return {"session": session.name, "measure": "per_request", "confidence": 0.95, "rule": RULE, "engines": ENGINES,
            "drafters": drafters, "best_k": _best_k(drafters)}


def schedule_lines(schedule: dict[str, Any], labels: dict[str, str]) -> list[str]:
    """One line per drafter (and per best-k table): where it drafts, where not, what each engine takes."""
    lines = []
    for d in schedule["drafters"]:
        k = f"k {d['k']}" if d["k"] is not None else f"k unknown ({K_PLACEHOLDER} in the mapping)"
        lines.append(f"{labels[d['arm']]} vs {labels[d['vs']]}, {k}: {_where(d)}; vLLM {VLLM_KEY}"
                     f" {_compact(d['vllm'][VLLM_KEY])}{_above(d)}.")
    for b in schedule["best_k"]:
        per_level = ", ".join(f"{e['level']}: k {e['k']}" for e in b["levels"])
        lines.append(f"Best k over {labels[b['vs']]} per level ({per_level}); vLLM {VLLM_KEY}"
                     f" {_compact(b['vllm'][VLLM_KEY])}{_above(b)}.")
    return lines


def _where(entry: dict[str, Any]) -> str:
    cut, paying = entry["crossover_level"], [e["level"] for e in entry["levels"] if e["pays"]]
    if not paying:
        return "pays at no level measured: do not draft"
    said = f"pays at {', '.join(map(str, paying))} concurrent requests"
    return said + (f", not from {cut} on" if cut is not None else " (every level measured)")


def _above(entry: dict[str, Any]) -> str:
    if entry["disable_above"] is None:
        last = entry["levels"][-1]["level"] if entry["levels"] else None
        return f"; no threshold: it pays up to the highest level measured ({last}), sweep higher to find one"
    return f"; disable above {entry['disable_above']} concurrent requests"


def _compact(ranges: list[list[int | str]] | None) -> str:
    return "none (no level compared)" if ranges is None else "[" + ", ".join("[" + ", ".join(map(str, r)) + "]" for r in ranges) + "]"


SCHEDULE_HEADERS = ("level", "per-request ratio [95 % CI]", "pays", "k")


def schedule_tables(schedule: dict[str, Any], labels: dict[str, str],
                    cell: Any) -> list[tuple[str, list[list[str]]]]:
    """(title, rows in SCHEDULE_HEADERS order) per drafter and per best-k table: why each level
    drafts or not; `cell` writes a ratio with its interval (the sweep views' `ratio_cell`)."""
    tables = [(f"{labels[d['arm']]} vs {labels[d['vs']]} ({d['vs_how']})",
               [[str(e["level"]), cell(e), "yes" if e["pays"] else "no", str(e["k"])] for e in d["levels"]])
              for d in schedule["drafters"]]
    for b in schedule["best_k"]:
        rows = [[str(e["level"]), cell(e) + (f", {labels[e['arm']]}" if e["arm"] else ""), "yes" if e["pays"] else "no",
                 str(e["k"])] for e in b["levels"]]
        tables.append((f"Best k over {labels[b['vs']]}", rows))
    return tables
