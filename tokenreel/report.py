"""`tokenreel report`: the ladder, the per-category table and every cell, as md, json or csv.

The markdown mirrors the seeds' tables (step, what changed, decode speed, vs. prior step,
vs. original) so a write-up can paste it as is. A figure an engine cannot give is never a bare
dash: the report says why (not speculative, no spec counters, no /metrics), and a cell with no
usable run is listed with its reason instead of vanishing.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import asdict

import orjson

from tokenreel.answers import build_answers
from tokenreel.figures import figure, multiplier
from tokenreel.ladder import build_cells, build_ladder, category_table, common_prompts, missing_cells
from tokenreel.latency import MISSING_REASONS, PERCENTILE_METHOD, Latency, LatencyRow, build_latency
from tokenreel.model import Arm, Session
from tokenreel.selection import DEFAULT_SELECTION, RunSelection, host_contended

REPORT_FORMAT = "tokenreel.report"
REPORT_VERSION = 1
CELL_KEYS = (
    "arm", "prompt", "category", "runs", "output_tokens", "ttft_s", "tpot_ms", "decode_tok_s",
    "e2e_tok_s", "spread_tok_s", "acceptance_length", "like_for_like", "contended", "note",
    "acceptance_rate", "acceptance_approximate", "acceptance_note", "contention_note",
    "token_counts", "tokens_estimated", "clock", "client_delay_p99_ms", "client_busy", "client_busy_left_out",
    "ttft_left_out", "host_contended", "host_pressure_pct", "host_note",
)
STEP_MARKS = "①②③④⑤⑥⑦⑧⑨⑩"


def build_report(session: Session, baseline: str | None = None, selection: RunSelection = DEFAULT_SELECTION) -> dict:
    """The report as plain data; the json format prints exactly this, every figure at full
    precision (rounding belongs to the tables people read)."""
    if baseline is not None and baseline not in {a.id for a in session.arms}:
        known = ", ".join(a.id for a in session.arms)
        raise ValueError(f"--baseline: no arm {baseline!r} in this session (arms: {known})")
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
        "ladder": [asdict(row) for row in ladder],
        "categories": category_table(session, cells),
        "cells": [_with_counts(session, asdict(cell)) for cell in cells],
        "arms": [_arm_entry(session, arm) for arm in session.arms],
        "missing_cells": [asdict(missing) for missing in missing_cells(session, selection)],
        "clocks": run_clocks(session, selection),
        "host": host_summary(session),
        "latency": _latency_entry(build_latency(session, cells, selection)),
        "answers": asdict(build_answers(session, baseline, selection)),
    }


def report_selection(report: dict) -> RunSelection:
    """The run selection a report was built with (its "selection" entry), for views built on it."""
    return RunSelection(exclude_host_contended=report["selection"]["exclude_host_contended"])


def host_summary(session: Session) -> dict:
    """Whether the engine's host was watched (local endpoints only) and how loaded it was."""
    measured = [r for r in session.runs if not r.warmup and r.status == "ok"]
    watched = [r for r in measured if r.host is not None]
    notes = list(dict.fromkeys(r.host_note for r in measured if r.host is None and r.host_note))
    return {
        "watched_runs": len(watched),
        "runs": len(measured),
        "contended_runs": sum(1 for r in watched if r.host and r.host.contended),
        "threshold_pct": session.settings.host_pressure_pct,
        "max_pressure_pct": max((r.host.some_pct for r in watched if r.host), default=None),
        "notes": notes,
    }


def run_clocks(session: Session, selection: RunSelection) -> list[dict]:
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
            "host_pressure_pct": run.host.some_pct if run.host else None,
            "host_contended": host_contended(run),
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


def fingerprint_text(items: dict[str, str], sep: str = " · ") -> str:
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


# Latency figures: key, label in tables, decimals in ms; the csv has n, min, p50, p90, p99, max of each.
LATENCY_FIGURES = (("ttft_ms", "TTFT", 1), ("tpot_ms", "TPOT", 2), ("itl_ms", "ITL", 2))
LATENCY_STATS = ("n", "min", "p50", "p90", "p99", "max")
LATENCY_CSV_KEYS = tuple(f"{name}_{stat}" for name, _, _ in LATENCY_FIGURES for stat in LATENCY_STATS)


def _latency_row(row: LatencyRow) -> dict:
    entry: dict = {"arm": row.arm, **({} if row.prompt is None else {"prompt": row.prompt}), "runs": row.runs}
    for name, _, _ in LATENCY_FIGURES:
        entry[name] = asdict(getattr(row, name))
    return entry


def _latency_entry(latency: Latency) -> dict:
    """Arms over the prompts every arm has (listed in "arm_prompts"), cells over their own runs."""
    return {
        "method": PERCENTILE_METHOD,
        "arm_prompts": latency.shared_prompts,
        "arms": [_latency_row(row) for row in latency.arms],
        "cells": [_latency_row(row) for row in latency.cells],
    }


def _latency_figures(row: dict) -> str:
    """'p50 / p90 / p99 | min–max' of each latency figure, then the ITL token count."""
    parts = []
    for name, _, digits in LATENCY_FIGURES:
        d = row[name]
        parts.append(" / ".join(figure(d[p], digits) for p in ("p50", "p90", "p99")))
        parts.append(f"{figure(d['min'], digits)}–{figure(d['max'], digits)}" if d["n"] else "—")
    return " | ".join([*parts, str(row["itl_ms"]["n"])])


def _latency_tables(report: dict) -> list[str]:
    """Percentile tables per arm and per cell, with their populations; an empty one says why."""
    latency = report["latency"]
    labels = {a["arm"]: a["label"] for a in report["arms"]}
    columns = " | ".join(f"{label} ms p50 / p90 / p99 | {label} min–max" for _, label, _ in LATENCY_FIGURES)
    rule = "---|" * (2 * len(LATENCY_FIGURES) + 1)
    lines = [
        f"Latency percentiles. {latency_legend(latency)}",
        "",
        f"| Arm | Runs | {columns} | ITL tokens |",
        "|---|---|" + rule,
        *(f"| {labels.get(r['arm'], r['arm'])} | {r['runs']} | {_latency_figures(r)} |" for r in latency["arms"]),
        "",
        f"| Arm | Prompt | Runs | {columns} | ITL tokens |",
        "|---|---|---|" + rule,
        *(f"| {r['arm']} | {r['prompt']} | {r['runs']} | {_latency_figures(r)} |" for r in latency["cells"]),
        "",
    ]
    missing = [f"- {line}" for line in latency_gaps(latency)]
    return [*lines, *(["Percentiles missing:", "", *missing, ""] if missing else [])]


def latency_legend(latency: dict) -> str:
    """Which runs the percentiles cover and how they are computed, for every format that shows them."""
    shared = latency["arm_prompts"]
    return (
        "Per arm: every usable run (measured, completed, not contended) on the "
        f"{len(shared)} prompts every arm has ({', '.join(shared) or 'none'}); per cell: that cell's usable runs. "
        "TTFT and TPOT: one value per run. ITL (inter-token latency): one value per token after the first "
        "token event; a chunk of k tokens counts as k tokens arriving together (its first token waited the "
        f"gap since the previous chunk that carried tokens, the other k - 1 waited 0 ms). Percentiles: {PERCENTILE_METHOD}."
    )


def latency_gaps(latency: dict) -> list[str]:
    """One line per missing percentile figure (arm, or arm / prompt) with the reason."""
    missing = []
    for r in [*latency["arms"], *latency["cells"]]:
        where = f"{r['arm']}{' / ' + r['prompt'] if 'prompt' in r else ''}"
        if not r["runs"]:
            missing.append(f"{where}: every figure —: no usable run on the prompts every arm has")
            continue
        missing += [f"{where}: {label} —: {MISSING_REASONS[name]}" for name, label, _ in LATENCY_FIGURES if not r[name]["n"]]
    return missing


def _arms_table(report: dict) -> list[str]:
    """Each arm: what its endpoint said (fingerprint) and what the config declared ([arms.settings])."""
    lines = ["| Arm | Endpoint says | Declared settings | Token counts |", "|---|---|---|---|"]
    for a in report["arms"]:
        counts = a["token_counts"] + (" (estimated\\*)" if a["tokens_estimated"] else "")
        settings = "; ".join(f"{k} = {v}" for k, v in a["settings"].items())
        lines.append(f"| {a['label']} | {fingerprint_text(a['fingerprint']) or '—'} | {settings or '—'} | {counts or '—'} |")
    return [*lines, ""]


def _est(text: str, estimated: bool) -> str:
    return f"{text}\\*" if estimated and text != "—" else text


def acceptance_text(value: float | None, approximate: bool) -> str:
    """Acceptance length to 2 decimals; ≈ marks one from counters printed in rounded steps."""
    text = figure(value, 2)
    return f"≈{text}" if approximate and value is not None else text


def rate_text(value: float | None) -> str:
    return figure(None if value is None else value * 100, 0, " %")


def host_text(cell: dict) -> str:
    """The engine host's highest CPU pressure over the cell's runs and how many were flagged."""
    if cell["host_pressure_pct"] is None:
        return f"not watched ({cell['host_note'] or 'recorded before tokenreel watched the host'})"
    flagged = f", {cell['host_contended']} run(s) host contended" if cell["host_contended"] else ""
    return f"max {figure(cell['host_pressure_pct'], 0, ' %')}{flagged}"


def contended_text(cell: dict) -> str:
    if cell["contended"] is None:
        return f"unknown ({cell['contention_note'] or 'not checked'})"
    return "yes" if cell["contended"] else "no"


def acceptance_notes(report: dict) -> list[str]:
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
    late = [r for r in runs if r["first_token_shared_read"] and r["in_figures"]]
    if busy:
        lines += ["", f"Client busy: the recorder read the network more than {threshold} late at p99 (this machine"
                  " was busy). On the kernel clock its times are still exact (each read keeps the kernel's receive"
                  " time), so such runs stay in the figures; on the user-space clock they are left out:", ""]
    for r in busy:
        verdict = "in the figures" if r["in_figures"] else "left out of the figures (user-space clock)"
        lines.append(
            f"- {_run_names([r])}: client delay p99 {figure(r['client_delay_p99_ms'], 1, ' ms')},"
            f" max {figure(r['client_delay_max_ms'], 1, ' ms')}; {verdict}"
        )
    if late:
        lines += ["", f"TTFT left out of TTFT figures for {_run_names(late)}: the first token was read together"
                  " with later ones, so its time is a later packet's (decode figures keep these runs)."]
    return [*lines, "", *host_notes(report)]


def host_notes(report: dict) -> list[str]:
    """The engine's host: how loaded it was during the runs, or why it was not watched."""
    host = report["host"]
    threshold = figure(host["threshold_pct"], 0, " %")
    lines = []
    if host["watched_runs"]:
        flagged = [r for r in report["clocks"] if r["host_contended"]]
        lines.append(
            f"Host: the endpoint runs on the recording machine; its CPU pressure (Linux PSI, the share of time some"
            f" task waited for a CPU) was watched over {host['watched_runs']} of {host['runs']} measured runs, at most"
            f" {figure(host['max_pressure_pct'], 0, ' %')}; {host['contended_runs']} over {threshold} (host contended)."
        )
        if flagged:
            kept = "left out of the figures" if report["selection"]["exclude_host_contended"] else \
                "kept in the figures, flagged (--exclude-host-contended leaves them out)"
            lines.append(f"Host contended: {_run_names(flagged)}; {kept}.")
    for note in host["notes"]:
        lines.append(f"Host not watched: {note}.")
    return [*lines, ""] if lines else []


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
            f"| {acceptance_text(row['acceptance_length'], row['acceptance_approximate'])} | {rate_text(row['acceptance_rate'])} |"
        )
    lines += ["", ladder_note(report), ""]
    if estimated_arms:
        lines += [ESTIMATED_NOTE, ""]
    lines += acceptance_notes(report)
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
        "| Arm | Prompt | Category | Runs | Tokens | TTFT s | TPOT ms | Decode tok/s | E2E tok/s | Spread | Accept. len | Accept. rate | Like-for-like | Contended | Host CPU pressure |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in report["cells"]:
        like = "yes" if c["like_for_like"] else f"no ({c['note']})"
        lines.append(
            f"| {c['arm']} | {c['prompt']} | {c['category']} | {c['runs']} | {c['output_tokens']} "
            f"| {figure(c['ttft_s'], 3)}{'†' if c['ttft_left_out'] else ''} | {_est(figure(c['tpot_ms'], 2), c['tokens_estimated'])} "
            f"| {_est(figure(c['decode_tok_s']), c['tokens_estimated'])} | {figure(c['e2e_tok_s'])} "
            f"| {figure(c['spread_tok_s'])} | {acceptance_text(c['acceptance_length'], c['acceptance_approximate'])} "
            f"| {rate_text(c['acceptance_rate'])} | {like} | {contended_text(c)} | {host_text(c)} |"
        )
    lines += ["", *_latency_tables(report)]
    lines += _answers_section(report, labels)
    return "\n".join(lines) + "\n"


# Same answers (tokenreel/answers.py): per cell in the csv, a section in the markdown.
ANSWER_CSV_KEYS = ("identical", "common_prefix_tokens", "common_prefix_chars", "similarity", "diverges_at_token")


def _answer_rows(report: dict) -> dict[tuple[str, str], dict]:
    return {(row["arm"], p["prompt"]): row for p in report["answers"]["prompts"] for row in p["arms"]}


def _md_code(text: str) -> str:
    """Answer text as a code span in a table cell: no markdown inside it, pipes escaped."""
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    escaped = text.replace("|", "\\|")
    return f"{fence} {escaped} {fence}"


def _answer_cells(row: dict) -> str:
    if row["identical"] is None:
        return f"not compared | — | — | — | — | — | {row['note']}"
    prefix = f"{row['common_prefix_tokens']} tokens, {row['common_prefix_chars']} chars"
    if row["identical"]:
        return f"yes | all: {prefix} | {row['similarity']:.4f} | never | same text | same text | {row['note']}"
    return (f"no | {prefix} | {row['similarity']:.4f} | token {row['diverges_at_token']} "
            f"| {_md_code(row['reference_context'])} | {_md_code(row['arm_context'])} | {row['note']}")


def _answers_section(report: dict, labels: dict[str, str]) -> list[str]:
    """Each arm's answer against the reference's, then runs of one arm that differ among themselves."""
    answers = report["answers"]
    if answers["reference_arm"] is None:
        return []
    lines = [
        answers_legend(labels.get(answers["reference_arm"], answers["reference_arm"])),
        "",
        "| Prompt | Arm | Same answer | Common prefix | Similarity | Diverges at | Reference says | This arm says | Note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for prompt in answers["prompts"]:
        for row in prompt["arms"]:
            if row["arm"] != answers["reference_arm"]:
                lines.append(f"| {prompt['prompt']} | {labels.get(row['arm'], row['arm'])} | {_answer_cells(row)} |")
    summary, flagged = repeats_summary(answers)
    lines += ["", summary]
    if flagged:
        lines += ["", *(f"- {line}" for line in flagged)]
    return [*lines, ""]


def ladder_note(report: dict) -> str:
    """What the ladder's figures are (medians of how many runs, over which prompts), for every format."""
    runs = sorted({c["runs"] for c in report["cells"]})
    return (
        f"Median values, {'/'.join(str(r) for r in runs) or 0} runs per cell, mean over "
        f"{report['prompts_compared']} prompts; {report['like_for_like_prompts']} of them like-for-like "
        "(every arm produced the same number of tokens)."
    )


def answers_legend(reference: str) -> str:
    """What the answers table's columns mean, for every format that shows it."""
    return (
        f"Answers: each arm's first usable run against {reference}'s (the reference). The common prefix in "
        "tokens counts the events wholly inside the common text (event-granular, a lower bound); similarity is "
        "the share of words the answers have in common, in order (1 = identical, unrelated prose about 0.2); "
        "» marks the first difference."
    )


def repeats_summary(answers: dict) -> tuple[str, list[str]]:
    """What repeated runs of one arm say (nondeterminism): a sentence, and one line per flagged cell."""
    checked = answers["repeat_checked_cells"]
    if answers["nondeterministic"]:
        return (
            f"Nondeterministic at temperature 0: runs of one arm on one prompt whose texts differ "
            f"({len(answers['nondeterministic'])} of {checked} cells with repeated runs):",
            [f"{n['arm']} / {n['prompt']} (runs {', '.join(map(str, n['runs']))}): {n['detail']}" for n in answers["nondeterministic"]],
        )
    if answers["temperature"] == 0:
        if checked:
            return f"Nondeterminism: none; in each of the {checked} cells with repeated runs every run gave the same text (temperature 0).", []
        return "Nondeterminism: not checked, no cell has two runs.", []
    return answers["note"][0].upper() + answers["note"][1:] + ".", []


def to_json(report: dict) -> str:
    return orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n"


def csv_value(value: object) -> object:
    """Booleans as `true`/`false` (what spreadsheets and pandas read as booleans), None as empty."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def to_csv(report: dict) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(
        out, fieldnames=(*CELL_KEYS, *ARM_CSV_KEYS, *LATENCY_CSV_KEYS, *ANSWER_CSV_KEYS, "answer_note"), lineterminator="\n"
    )
    answers = _answer_rows(report)
    writer.writeheader()
    arms = {a["arm"]: a for a in report["arms"]}
    for cell, latency in zip(report["cells"], report["latency"]["cells"], strict=True):
        arm = arms[cell["arm"]]
        writer.writerow({
            **{k: csv_value(cell[k]) for k in CELL_KEYS},
            "arm_fingerprint": fingerprint_text(arm["fingerprint"], "; "),
            "arm_settings": "; ".join(f"{k}={v}" for k, v in arm["settings"].items()),
            **{f"{name}_{stat}": latency[name][stat] for name, _, _ in LATENCY_FIGURES for stat in LATENCY_STATS},
            **{k: csv_value(answers[cell["arm"], cell["prompt"]][k]) for k in ANSWER_CSV_KEYS},
            "answer_note": answers[cell["arm"], cell["prompt"]]["note"],
        })
    return out.getvalue()


def render_report(session: Session, fmt: str, baseline: str | None = None, selection: RunSelection = DEFAULT_SELECTION) -> str:
    report = build_report(session, baseline, selection)
    if fmt == "md":
        return to_markdown(report, session)
    if fmt == "json":
        return to_json(report)
    if fmt == "csv":
        return to_csv(report)
    if fmt == "html":
        from tokenreel.html_report import to_html  # it builds on this module's helpers

        return to_html(report, session, selection)
    raise ValueError(f"--format: unknown format {fmt!r}; use md, json, csv or html")

