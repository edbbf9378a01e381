"""The report as markdown: tables like the seeds' (step, what changed, decode speed, vs. prior
step, vs. original), so a write-up can paste it as is."""

from __future__ import annotations

import re
from typing import Any

from tokenreel.analysis.claims import RATIO_METRICS
from tokenreel.analysis.figures import figure
from tokenreel.report.accuracy_text import accuracy_markdown
from tokenreel.report.data import Report
from tokenreel.report.roofline_text import ROOFLINE_TITLE, roofline_lines
from tokenreel.report.wording import (
    DECODE_MARK,
    ESTIMATED_NOTE,
    LATENCY_FIGURES,
    NO_HEADLINE,
    STEP_MARKS,
    TTFT_MARK,
    acceptance_notes,
    acceptance_text,
    answers_legend,
    arms_shown_lines,
    category_interval_note,
    contended_text,
    decomposition_table,
    engine_notes,
    fingerprint_text,
    gpu_notes,
    host_notes,
    host_text,
    interval_legend,
    ladder_note,
    latency_gaps,
    latency_legend,
    left_out_notes,
    position_table,
    rate_text,
    ratio_text,
    repeats_summary,
    run_names,
    synthetic_notes,
    task_time_table,
)
from tokenreel.session.model import Session


def _latency_figures(row: dict[str, Any]) -> str:
    """'p50 / p90 / p99 | min–max' of each latency figure, then the ITL token count."""
    parts = []
    for name, _, digits in LATENCY_FIGURES:
        d = row[name]
        parts.append(" / ".join(figure(d[p], digits) for p in ("p50", "p90", "p99")))
        parts.append(f"{figure(d['min'], digits)}–{figure(d['max'], digits)}" if d["n"] else "—")
    return " | ".join([*parts, str(row["itl_ms"]["n"])])


def _latency_tables(report: Report) -> list[str]:
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


def _arms_table(report: Report) -> list[str]:
    """Each arm: what its endpoint said (fingerprint) and what the config declared ([arms.settings])."""
    lines = ["| Arm | Endpoint says | Declared settings | Token counts |", "|---|---|---|---|"]
    for a in report["arms"]:
        counts = a["token_counts"] + (" (estimated\\*)" if a["tokens_estimated"] else "")
        settings = "; ".join(f"{k} = {v}" for k, v in a["settings"].items())
        lines.append(f"| {a['label']} | {fingerprint_text(a['fingerprint']) or '—'} | {settings or '—'} | {counts or '—'} |")
    return [*lines, ""]


def _est(text: str, estimated: bool) -> str:
    return f"{text}\\*" if estimated and text != "—" else text


def _clock_notes(report: Report, session: Session) -> list[str]:
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
            lines.append(f"- {run_names([r for r in user if r['reason'] == reason])}: {reason}")
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
            f"- {run_names([r])}: client delay p99 {figure(r['client_delay_p99_ms'], 1, ' ms')},"
            f" max {figure(r['client_delay_max_ms'], 1, ' ms')}; {verdict}"
        )
    if late:
        lines += ["", f"TTFT left out of TTFT figures for {run_names(late)}: the first token was read together"
                  " with later ones, so its time is a later packet's (decode figures keep these runs)."]
    whole = [r for r in runs if r["in_figures"] and not r["decode_in_figures"]]
    if whole:
        lines += ["", f"Decode left out of decode and TPOT figures for {run_names(whole)}: the whole answer arrived in"
                  " one read, so there is no interval between its first and last token (TTFT and end-to-end figures"
                  " keep these runs)."]
    return [*lines, "", *host_notes(report), *gpu_notes(report)]


def _ratios_table(report: Report, labels: dict[str, str]) -> list[str]:
    """Every arm against the prior and the first over the suite, in decode, end to end and first
    token, each with its interval (or the reason it has none)."""
    suite = {(s["metric"], s["arm"], s["vs"]): s for s in report["speedups"] if s["scope"] == "suite"}
    arms = [row["arm"] for row in report["ladder"]]
    lines = ["| Arm | vs. | Decode | End to end | First token |", "|---|---|---|---|---|"]
    for i, arm in enumerate(arms[1:], start=1):
        for vs in dict.fromkeys((arms[i - 1], arms[0])):
            cells = [suite.get((metric, arm, vs)) for metric in RATIO_METRICS]
            shown = " | ".join(ratio_text(s["value"], s["ci95"]) if s else "—" for s in cells)
            lines.append(f"| {labels[arm]} | {labels[vs]} | {shown} |")
    if len(lines) == 2:
        return []
    missing = list(dict.fromkeys(s["ci95_note"] for s in suite.values() if s["ci95"] is None))
    legend = (
        "Speed-ups over the suite (x times faster: a rate over a rate, or the other arm's time over this arm's;"
        " first token is the mean TTFT's)." + (f" No interval: {'; '.join(missing)}." if missing else "")
    )
    return [legend, "", *lines, ""]


def _headline(claim: dict[str, Any] | None) -> list[str]:
    """The story first, in the report's own words (the video's end card says the same)."""
    if claim is None:
        return [NO_HEADLINE, ""]
    interval = f" ({claim['interval_text']})" if claim["interval_text"] else ""
    return [f"**{claim['text']}**{interval}: {claim['arm_label']} vs {claim['vs_label']}, {claim['scope_text']}."
            f" Speed-up in {claim['definition']}.", ""]


def _positions_table(report: Report) -> list[str]:
    """Acceptance rate per draft position (wording.position_table); nothing where no arm has it."""
    headers, rows, notes = position_table(report)
    if not headers:
        return []
    return ["Acceptance rate per draft position:", "", f"| {' | '.join(headers)} |", f"|{'---|' * len(headers)}",
            *(f"| {' | '.join(row)} |" for row in rows), "", *(f"- {note}" for note in notes), ""]


def _noted_table(title: str, table: tuple[list[str], list[list[str]], list[str]]) -> list[str]:
    """A titled table with its notes as a list under it; nothing where it has no headers."""
    headers, rows, notes = table
    if not headers:
        return []
    return [title, "", f"| {' | '.join(headers)} |", f"|{'---|' * len(headers)}",
            *(f"| {' | '.join(row)} |" for row in rows), "", *(f"- {note}" for note in notes), ""]


def _decomposition(report: Report) -> list[str]:
    """A drafter's speed-up as tokens a step x step ratio (wording.decomposition_table); nothing where no arm drafts."""
    return _noted_table("Speed-up decomposed:", decomposition_table(report))


def _task_time(report: Report) -> list[str]:
    """Tokens and time per task, and each step's "finishes N % sooner" (wording.task_time_table); nothing at a forced length."""
    return _noted_table("Time per task at natural length:", task_time_table(report))


def to_markdown(report: Report, session: Session) -> str:
    labels = {arm.id: arm.label for arm in session.arms}
    lines: list[str] = [f"# {report['session']}", "", *_headline(report["headline"])]
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
            f"| {mark} | {row['label']} | {decode} | {ratio_text(row['vs_prior'], row['vs_prior_ci95'])} "
            f"| {ratio_text(row['vs_first'], row['vs_first_ci95'])} | {figure(row['ttft_s'], 2, ' s')} "
            f"| {acceptance_text(row['acceptance_length'], row['acceptance_approximate'], row['synthetic_acceptance'])}"
            f" | {rate_text(row['acceptance_rate'])} |"
        )
    shown = arms_shown_lines(report["not_recorded"], report["arms_left_out"])
    lines += ["", *(part for line in shown for part in (line, "")), ladder_note(report), "", interval_legend(report), ""]
    if synthetic := synthetic_notes(report):
        lines += ["Synthetic acceptance (the engine forced its drafts' acceptance):", "", *synthetic, ""]
    lines += _ratios_table(report, labels)
    if estimated_arms:
        lines += [ESTIMATED_NOTE, ""]
    lines += acceptance_notes(report)
    lines += _positions_table(report)
    lines += _decomposition(report)
    lines += _task_time(report)
    if roofline := roofline_lines(report):
        lines += [ROOFLINE_TITLE, "", *(f"- {line}" for line in roofline), ""]
    lines += engine_notes(report)
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
        for category, row in report["categories"].items():
            values = " | ".join(figure(row.get(a)) for a in arm_ids)
            last = report["category_ladders"][category][-1]
            lines.append(f"| {category.capitalize()} | {values} | {ratio_text(last['vs_first'], last['vs_first_ci95'])} |")
        lines += ["", category_interval_note(report), ""]
    lines += [
        "| Arm | Prompt | Category | Runs | Tokens | TTFT s | TPOT ms | Decode tok/s | E2E tok/s | Spread | Accept. len | Accept. rate"
        " | Like-for-like | Contended | Host CPU load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in report["cells"]:
        like = "yes" if c["like_for_like"] else f"no ({c['note']})"
        ttft_mark, decode_mark = TTFT_MARK if c["ttft_left_out"] else "", DECODE_MARK if c["decode_left_out"] else ""
        lines.append(
            f"| {c['arm']} | {c['prompt']} | {c['category']} | {c['runs']} | {c['output_tokens']} "
            f"| {figure(c['ttft_s'], 3)}{ttft_mark} | {_est(figure(c['tpot_ms'], 2), c['tokens_estimated'])}{decode_mark} "
            f"| {_est(figure(c['decode_tok_s']), c['tokens_estimated'])}{decode_mark} | {figure(c['e2e_tok_s'])} "
            f"| {figure(c['spread_tok_s'])} | {acceptance_text(c['acceptance_length'], c['acceptance_approximate'])} "
            f"| {rate_text(c['acceptance_rate'])} | {like} | {contended_text(c)} | {host_text(c)} |"
        )
    marks = left_out_notes(report)
    lines += ["", *([*marks, ""] if marks else []), *_latency_tables(report)]
    lines += _answers_section(report, labels)
    lines += accuracy_markdown(report.get("accuracy"))
    lines += _replicas_section(report, labels)
    return "\n".join(lines) + "\n"


def _md_code(text: str) -> str:
    """Answer text as a code span in a table cell: no markdown inside it, pipes escaped."""
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    escaped = text.replace("|", "\\|")
    return f"{fence} {escaped} {fence}"


def _answer_cells(row: dict[str, Any]) -> str:
    if row["identical"] is None:
        return f"not compared | — | — | — | — | — | {row['note']}"
    prefix = f"{row['common_prefix_tokens']} tokens, {row['common_prefix_chars']} chars"
    if row["identical"]:
        return f"yes | all: {prefix} | {row['similarity']:.4f} | never | same text | same text | {row['note']}"
    return (f"no | {prefix} | {row['similarity']:.4f} | token {row['diverges_at_token']} "
            f"| {_md_code(row['reference_context'])} | {_md_code(row['arm_context'])} | {row['note']}")


def _answers_section(report: Report, labels: dict[str, str]) -> list[str]:
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


def _replicas_section(report: Report, labels: dict[str, str]) -> list[str]:
    """Each replica alone (`tokenreel.analysis.replica_ladders`): a slow, failed or contended one shows."""
    replicas = report.get("replicas") or []
    if not replicas:
        return []
    arms = [row["arm"] for row in report["ladder"]]
    last, first = labels[arms[-1]], labels[arms[0]]
    lines = [
        "", "## Replicas", "",
        "Each replica recorded every arm on its own shard of the prompts; the figures above pool them, each ratio"
        " formed within a replica. Per replica, decode tok/s over its shard:", "",
        f"| Replica | Prompts | Runs | Contended | {' | '.join(labels[a] for a in arms)} | {last} vs {first} |",
        "|---|---|---|---|" + "---|" * (len(arms) + 1),
    ]
    for entry in replicas:
        runs = ", ".join(f"{n} {status}" for status, n in entry["runs"].items()) or "none"
        rates = " | ".join(figure(row["decode_tok_s"]) for row in entry["ladder"])
        top = entry["ladder"][-1]
        lines.append(f"| {entry['replica']} | {entry['prompts']} | {runs} | {entry['contended']} | {rates} "
                     f"| {ratio_text(top['vs_first'], top['vs_first_ci95'])} |")
    warnings = report.get("replica_warnings") or []
    return [*lines, *([""] + [f"**Replicas disagree**: {line}." for line in warnings] if warnings else []), ""]
