"""`tokenreel report --format html`: the whole report as one page, with the race replayed in the browser.

Why one file with everything inline (CSS, script, SVG charts, the runs as JSON): a report is
mailed, attached to a ticket or opened from a CI artefact, often offline; the shell
(`html_shell.page`) forbids every fetch and allows only the page's own script, by its hash.
This module builds the sections; the replay's data and player are `html_replay`'s.

The figures are the markdown report's (same data, same rounding: `tokenreel.analysis.figures`).
The page is deterministic: the same session gives the same bytes.
"""
from __future__ import annotations

import re
from typing import Any

from tokenreel import assets
from tokenreel.analysis.figures import MISSING, figure
from tokenreel.analysis.metrics import output_tokens, run_metrics
from tokenreel.analysis.selection import RunSelection, first_token_late
from tokenreel.base.safe_text import esc
from tokenreel.base.theme import load_theme
from tokenreel.report.accuracy_text import (
    ACCURACY_LEGEND,
    categories_of,
    category_cell,
    interval_cell,
    left_out_text,
    nondeterministic_lines,
    rate_cell,
)
from tokenreel.report.data import Report, report_selection
from tokenreel.report.html_replay import replay_data, replay_section, script_json
from tokenreel.report.html_shell import THEME, arm_colors, arm_name, html_table, inline_svg, page
from tokenreel.report.roofline_text import ROOFLINE_TITLE, roofline_lines
from tokenreel.report.wording import (
    DECODE_MARK,
    ESTIMATED_NOTE,
    LATENCY_FIGURES,
    NO_HEADLINE,
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
    step_mark,
    synthetic_notes,
    task_time_table,
)
from tokenreel.session.model import Run, Session


def _markdown_inline(text: str) -> str:
    """The markdown report's notes as HTML: escaped, `code` spans kept, markdown escapes dropped."""
    escaped = esc(text.replace("\\*", "*"))
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


def _ratio(value: float | None, ci95: list[float] | None) -> str:
    """`ratio_text`'s "1.22x [1.20–1.23]", its interval in a span of its own (dimmed, and kept
    whole when a phone's card wraps it under the ratio)."""
    ratio, _, interval = ratio_text(value, ci95).partition(" ")
    return esc(ratio) + (f' <span class="ci">{esc(interval)}</span>' if interval else "")


# ---------------------------------------------------------------------------------------------
# Sections


def _header(report: Report, session: Session) -> str:
    s = session.settings
    forced = f"max_tokens {s.max_tokens}" + (" forced (ignore_eos)" if s.ignore_eos else "")
    facts = [
        f"{len(session.arms)} arms", f"{len(session.prompts)} prompts", f"{s.warmup} warmup + {s.repeats} measured runs each",
        forced, f"temperature {figure(s.temperature, 1)}", f"recorded {session.created_at or 'at an unknown time'}",
        f"tokenreel {session.tool_version or 'version unknown'}",
    ]
    banner = (
        '<p class="banner">Recorded against simulated endpoints (<code>tokenreel simulate</code>), not real GPUs.</p>'
        if report["simulated"] else ""
    )
    facts_line = f"<p class=facts>{esc(' · '.join(facts))}</p>"
    return f"<header><h1>{esc(report['session'])}</h1>{_headline(report['headline'])}{facts_line}{banner}</header>"


def _headline(claim: dict[str, Any] | None) -> str:
    """The story first: the report's headline claim in its own words (no figure computed here)."""
    if claim is None:
        return f'<p class="claim none">{esc(NO_HEADLINE)}</p>'
    interval = claim["interval_text"] or claim["ci95_note"]  # the interval, or why there is none
    return (
        f'<p class="claim"><span class="claim-text">{esc(claim["text"])}</span>'
        f'<span class="claim-scope">{esc(claim["arm_label"])} vs {esc(claim["vs_label"])}, {esc(claim["scope_text"])}</span>'
        f'<span class="claim-interval">{esc(interval)}</span>'
        f'<span class="claim-definition">{esc(claim["definition"])}</span></p>'
    )


def _ladder(report: Report, colors: dict[str, str]) -> str:
    estimated = {a["arm"] for a in report["arms"] if a["tokens_estimated"]}
    best = max((r["decode_tok_s"] for r in report["ladder"] if r["decode_tok_s"] is not None), default=None)
    rows = []
    for i, row in enumerate(report["ladder"]):
        decode = figure(row["decode_tok_s"], 1, " tok/s") + ("*" if row["arm"] in estimated and row["decode_tok_s"] is not None else "")
        width = 0 if best is None or row["decode_tok_s"] is None else 100 * row["decode_tok_s"] / best
        bar = f'<span class="bar" style="--accent:{colors[row["arm"]]};--w:{width:.1f}%"></span>'
        rows.append([
            step_mark(i), arm_name(row["label"], colors[row["arm"]]), f"{esc(decode)}{bar}", _ratio(row["vs_prior"], row["vs_prior_ci95"]),
            _ratio(row["vs_first"], row["vs_first_ci95"]), figure(row["ttft_s"], 2, " s"),
            esc(acceptance_text(row["acceptance_length"], row["acceptance_approximate"], row["synthetic_acceptance"])),
            esc(rate_text(row["acceptance_rate"])),
        ])
    notes = [f"<p class=note>{_markdown_inline(line)}</p>" for line in arms_shown_lines(report["not_recorded"], report["arms_left_out"])]
    notes += [f"<p class=note>{esc(ladder_note(report))}</p>", f"<p class=note>{esc(interval_legend(report))}</p>"]
    if estimated:
        notes.append(f"<p class=note>{_markdown_inline(ESTIMATED_NOTE)}</p>")
    if synthetic := synthetic_notes(report):
        items = "".join(f"<li>{esc(line.removeprefix('- '))}</li>" for line in synthetic)
        notes.append(f"<p class=note>Synthetic acceptance (the engine forced its drafts' acceptance):</p><ul class=note>{items}</ul>")
    acceptance = [line.removeprefix("- ") for line in acceptance_notes(report) if line.startswith("- ")]
    if acceptance:
        items = "".join(f"<li>{esc(line)}</li>" for line in acceptance)
        notes.append(f"<p class=note>Acceptance length and rate, where not measured exactly:</p><ul class=note>{items}</ul>")
    headers, rows_, lines = position_table(report)
    if headers:
        positions = html_table(headers, [[esc(c) for c in row] for row in rows_], numeric=tuple(range(1, len(headers))), labelled=True)
        items = "".join(f"<li>{esc(line)}</li>" for line in lines)
        notes.append(f"<p class=note>Acceptance rate per draft position:</p>{positions}<ul class=note>{items}</ul>")
    if roofline := roofline_lines(report):
        items = "".join(f"<li>{esc(line)}</li>" for line in roofline)
        notes.append(f"<p class=note>{esc(ROOFLINE_TITLE)}</p><ul class=note>{items}</ul>")
    engine = engine_notes(report)
    if engine:
        items = "".join(f"<li>{esc(line.removeprefix('- '))}</li>" for line in engine if line.startswith("- "))
        notes.append(f"<p class=note>{esc(engine[0])}</p><ul class=note>{items}</ul>")
    table = html_table(
        ["Step", "Arm", "Decode speed", "vs. prior step", "vs. original", "TTFT", "Acceptance length", "Acceptance rate"],
        rows, numeric=(3, 4, 5, 6, 7), labelled=True,
    )
    return f'<section id="ladder"><h2>The ladder</h2>{table}{"".join(notes)}</section>'


def _decomposition(report: Report) -> str:
    """A drafter's speed-up as tokens a step x step ratio, in a section of its own; "" where no arm drafts."""
    headers, rows, lines = decomposition_table(report)
    if not headers:
        return ""
    table = html_table(headers, [[esc(c) for c in row] for row in rows], numeric=tuple(range(2, len(headers))), labelled=True)
    items = "".join(f"<li>{esc(line)}</li>" for line in lines)
    return f'<section id="decomposition"><h2>Speed-up decomposed</h2>{table}<ul class=note>{items}</ul></section>'


def _task_time(report: Report) -> str:
    """Tokens and time per task at natural length, in a section of its own; "" at a forced length."""
    headers, rows, lines = task_time_table(report)
    if not headers:
        return ""
    table = html_table(headers, [[esc(c) for c in row] for row in rows], numeric=tuple(range(1, len(headers) - 1)), labelled=True)
    items = "".join(f"<li>{esc(line)}</li>" for line in lines)
    return f'<section id="task-time"><h2>Time per task at natural length</h2>{table}<ul class=note>{items}</ul></section>'


def _categories(report: Report, labels: dict[str, str]) -> str:
    if not report["categories"]:
        return ""
    arm_ids = [row["arm"] for row in report["ladder"]]
    base = report["baseline"]
    rows = []
    for category, row in report["categories"].items():
        last = report["category_ladders"][category][-1]
        speedup = _ratio(last["vs_first"], last["vs_first_ci95"])
        rows.append([esc(category.capitalize()), *(figure(row.get(a)) for a in arm_ids), speedup])
    headers = ["Category", *(f"{step_mark(i)} {esc(labels[a])}" for i, a in enumerate(arm_ids)), "vs. original"]
    table = html_table(headers, rows, numeric=tuple(range(1, len(arm_ids) + 2)))
    gaps = category_interval_note(report)
    return (
        f'<section id="categories"><h2>Per category</h2>{table}'
        f"<p class=note>Decode tok/s, mean over each category's prompts; vs. original: the last arm over "
        f"{esc(labels.get(base, base))}, with its 95 % interval over the category's prompts where it has one.</p>"
        + (f"<p class=note>{esc(gaps)}</p>" if gaps else "") + "</section>"
    )


def _charts(session: Session, report: Report) -> str:
    """The charts of `tokenreel plot`, inline; the race is the first prompt's (the video's default)."""
    if not session.prompts:
        return ""
    from tokenreel.report.charts import chart_svgs  # noqa: PLC0415  (matplotlib: 1.4 s of imports, HTML only)

    svgs = chart_svgs(session, report, session.prompts[0].id, THEME)
    figures = "".join(
        f'<figure class="chart" id="chart-{esc(name)}">{inline_svg(svg)}</figure>' for name, svg in svgs.items()
    )
    return f'<section id="charts"><h2>Charts</h2><div class="charts">{figures}</div></section>'


def _distribution(d: dict[str, Any], digits: int) -> str:
    if not d["n"]:
        return MISSING
    spread = f'<span class="dim">{figure(d["min"], digits)}–{figure(d["max"], digits)}</span>'
    return f'{" / ".join(figure(d[p], digits) for p in ("p50", "p90", "p99"))}<br>{spread}'


def _latency(report: Report, labels: dict[str, str], colors: dict[str, str]) -> str:
    latency = report["latency"]
    spread = "<br><span class=dim>p50 / p90 / p99<br>min–max</span>"
    headers = ["Arm", "Runs", *(f"{label} ms{spread}" for _, label, _ in LATENCY_FIGURES), "ITL tokens"]

    def rows(entries: list[dict[str, Any]], with_prompt: bool) -> list[list[str]]:
        return [
            [
                arm_name(labels.get(r["arm"], r["arm"]), colors.get(r["arm"], "")) + (f" · {esc(r['prompt'])}" if with_prompt else ""),
                str(r["runs"]), *(_distribution(r[name], digits) for name, _, digits in LATENCY_FIGURES), str(r["itl_ms"]["n"]),
            ]
            for r in entries
        ]

    numeric = tuple(range(1, len(LATENCY_FIGURES) + 3))
    missing = "".join(f"<li>{esc(line)}</li>" for line in latency_gaps(latency))
    return (
        '<section id="latency"><h2>Latency percentiles</h2>'
        f"{html_table(headers, rows(latency['arms'], False), numeric)}<p class=note>{esc(latency_legend(latency))}</p>"
        + (f"<p class=note>Percentiles missing:</p><ul class=note>{missing}</ul>" if missing else "")
        + f"<details><summary>Per cell (arm × prompt)</summary>{html_table(headers, rows(latency['cells'], True), numeric)}</details>"
        "</section>"
    )


def _answer_row(row: dict[str, Any]) -> list[str]:
    """Same answer, common prefix, similarity, divergence, both sides' context, note (the markdown's columns)."""
    note = esc(row["note"])
    if row["identical"] is None:
        return ["not compared", MISSING, MISSING, MISSING, MISSING, MISSING, note]
    prefix = f"{row['common_prefix_tokens']} tokens, {row['common_prefix_chars']} chars"
    similarity = f"{row['similarity']:.4f}"
    if row["identical"]:
        return ['<span class="good">yes</span>', f"all: {prefix}", similarity, "never", "same text", "same text", note]
    return [
        '<span class="warn">no</span>', prefix, similarity, f"token {row['diverges_at_token']}",
        f"<q>{esc(row['reference_context'])}</q>", f"<q>{esc(row['arm_context'])}</q>", note,
    ]


def _answers(report: Report, labels: dict[str, str], colors: dict[str, str]) -> str:
    """Each arm's answer against the reference arm's, then runs of one arm that differ among themselves."""
    answers = report["answers"]
    reference = answers["reference_arm"]
    if reference is None:
        return ""
    rows = [
        [esc(prompt["prompt"]), arm_name(labels.get(row["arm"], row["arm"]), colors.get(row["arm"], "")), *_answer_row(row)]
        for prompt in answers["prompts"]
        for row in prompt["arms"]
        if row["arm"] != reference
    ]
    table = html_table(
        ["Prompt", "Arm", "Same answer", "Common prefix", "Similarity", "Diverges at", "Reference says", "This arm says", "Note"],
        rows, numeric=(4,),
    )
    summary, flagged = repeats_summary(answers)
    items = "".join(f"<li>{esc(line)}</li>" for line in flagged)
    repeats = f'<p class="note{" warn" if flagged else ""}">{esc(summary)}</p>' + (f"<ul class=note>{items}</ul>" if flagged else "")
    legend = answers_legend(labels.get(reference, reference))
    return f'<section id="answers"><h2>Same answers?</h2><p class=note>{esc(legend)}</p>{table}{repeats}</section>'


def _accuracy(entry: dict[str, Any] | None, colors: dict[str, str]) -> str:
    """The HTML section: the markdown's table and sentences (same wording, escaped)."""
    if entry is None:
        return ""
    categories = categories_of(entry)
    rows = [[step_mark(i), arm_name(row["label"], colors.get(row["arm"], "")), esc(rate_cell(row["overall"])),
             esc(interval_cell(row["overall"])), esc(left_out_text(row)), *(esc(category_cell(row, c)) for c in categories)]
            for i, row in enumerate(entry["arms"])]
    headers = ["Step", "Arm", "pass@1", "95 % interval", "Left out", *(esc(c.capitalize()) for c in categories)]
    table = html_table(headers, rows, numeric=(2, 3), labelled=True)
    steps = [*entry["sentences"]["vs_prior"], *(entry["sentences"]["vs_first"] if len(entry["vs_first"]) > 1 else [])]
    items = "".join(f"<li>{esc(line)}</li>" for line in [*steps, *nondeterministic_lines(entry)])
    return (f'<section id="accuracy"><h2>Accuracy: {esc(entry["suite"])}, pass@1</h2>{table}'
            f'<ul class=note>{items}</ul><p class=note>{esc(ACCURACY_LEGEND)}</p></section>')


def _recorded(spans: list[dict[str, str]]) -> str:
    if not spans:
        return "not recorded in this archive"
    return "<br>".join(
        f"<span class=nowrap>{esc(s.get('started_at', '?'))}</span> → <span class=nowrap>{esc(s.get('finished_at', '?'))}</span>"
        for s in spans
    )


def _arms(report: Report, session: Session, colors: dict[str, str]) -> str:
    rows = []
    for entry, arm in zip(report["arms"], session.arms, strict=False):
        counts = entry["token_counts"] + (" (estimated*)" if entry["tokens_estimated"] else "")
        settings = "<br>".join(f"{esc(k)} = {esc(v)}" for k, v in entry["settings"].items())
        rows.append([
            arm_name(entry["label"], colors[entry["arm"]]) + f"<br><span class=dim>{esc(arm.id)} · {esc(arm.model)}</span>",
            esc(fingerprint_text(entry["fingerprint"])) or "none archived",
            settings or "none declared", esc(counts or MISSING), _recorded(arm.recorded),
        ])
    host = " · ".join(f"{k} {v}" for k, v in session.host.items())
    table = html_table(["Arm", "Endpoint says", "Declared settings", "Token counts", "Recorded (start → end)"], rows)
    return f'<section id="arms"><h2>Arms</h2>{table}<p class=note>Recorded on {esc(host or "an unknown host")}.</p></section>'


def _cells(report: Report) -> str:
    rows = []
    for c in report["cells"]:
        star = "*" if c["tokens_estimated"] else ""
        decode_mark = DECODE_MARK if c["decode_left_out"] else ""
        rows.append([
            esc(c["arm"]), esc(c["prompt"]), esc(c["category"]), str(c["runs"]), esc(c["output_tokens"]),
            figure(c["ttft_s"], 3) + (TTFT_MARK if c["ttft_left_out"] else ""),
            figure(c["tpot_ms"], 2) + (star if c["tpot_ms"] is not None else "") + decode_mark,
            figure(c["decode_tok_s"]) + (star if c["decode_tok_s"] is not None else "") + decode_mark, figure(c["e2e_tok_s"]),
            figure(c["spread_tok_s"]), esc(acceptance_text(c["acceptance_length"], c["acceptance_approximate"])),
            esc(rate_text(c["acceptance_rate"])), "yes" if c["like_for_like"] else f"no ({esc(c['note'])})", esc(contended_text(c)),
            _yes(bool(c["host_contended"]), host_text(c)) if c["host_contended"] else esc(host_text(c)),
        ])
    table = html_table(
        ["Arm", "Prompt", "Category", "Runs", "Tokens", "TTFT s", "TPOT ms", "Decode tok/s", "E2E tok/s", "Spread",
         "Accept. len", "Accept. rate", "Like-for-like", "Contended", "Host CPU load"],
        rows, numeric=tuple(range(3, 12)),
    )
    lines = [report["selection"]["rule"], *host_notes(report), *gpu_notes(report), *left_out_notes(report)]
    notes = "".join(f"<p class=note>{esc(line)}</p>" for line in lines if line)
    missing = ""
    if report["missing_cells"]:
        missing = "<h3>Missing cells</h3><p class=note>No usable run, so not in any figure above.</p>" + html_table(
            ["Arm", "Prompt", "Category", "Runs", "Why"],
            ([esc(m["arm"]), esc(m["prompt"]), esc(m["category"]), str(m["runs"]), esc(m["reason"])] for m in report["missing_cells"]),
            numeric=(3,),
        )
    return f'<section id="cells"><h2>Every cell</h2>{table}{notes}{missing}</section>'


def _yes(flag: bool, text: str = "yes") -> str:
    return f'<span class="flag">{esc(text)}</span>' if flag else "no"


def _run_contended(run: Run) -> str:
    if run.contended is None:
        why = run.contention_detail or run.gate.detail or "not checked"
        return f"unknown ({esc(why)})"
    return _yes(run.contended, f"yes: {run.contention_detail}" if run.contention_detail else "yes")


def _run_clock(run: Run, selection: RunSelection) -> str:
    """Which clock stamped the run, the client's delay, and what the policy made of it."""
    clock = run.clock
    if clock is None:
        return "user (recorded before kernel times)"
    late = " · first token read with later ones: TTFT left out" if first_token_late(run) else ""
    if clock.source != "kernel":
        text = f"user ({esc(clock.reason)})" if clock.reason else "user"
        busy = f" · {_yes(True, 'client busy: left out')}" if selection.left_out_because(run) == "client busy" else ""
        return text + busy + late
    text = f"kernel · client delay p99 {figure(clock.delay_p99_ms, 2)} ms"
    if run.client_busy:
        text += " · client busy (kernel times exact: kept)"
    return text + late


def _counted(run: Run, selection: RunSelection) -> str:
    """Whether the run is in the figures (and the replay) under the report's selection, else why not."""
    why = selection.left_out_because(run)
    return "yes" if why is None else _yes(True, f"no: {why}")


def _run_host(run: Run) -> str:
    """The engine host's load over the run (HostPressure.load_pct), flagged when over the threshold."""
    if run.host is None:
        return esc(run.host_note or "not watched")
    text = f"{figure(run.host.load_pct(), 0)} %"
    return _yes(True, f"{text}: host contended") if run.host.contended else text


def _runs(session: Session, replayed: set[tuple[str, str, int]], selection: RunSelection) -> str:
    s = session.settings
    rows = []
    for run in session.runs:
        m = run_metrics(run)
        n = output_tokens(run)
        if not s.ignore_eos:
            short = "not forced"
        elif run.status != "ok":
            short = MISSING
        else:
            short = _yes(n < s.max_tokens, f"yes ({n} of {s.max_tokens})")
        status = esc(run.status) if run.status == "ok" else f'<span class="flag">{esc(run.status)}</span> {esc(run.error)}'
        rows.append([
            esc(run.arm), esc(run.prompt), str(run.index) + (" ▶" if run.key in replayed else ""), "yes" if run.warmup else "no", status,
            _counted(run, selection),
            _run_contended(run), str(n), short,
            _yes(True, f"yes ({run.token_source})") if run.tokens_estimated else esc(run.token_source),
            figure(m.ttft_s, 3), figure(m.decode_tok_s), _run_clock(run, selection), _run_host(run),
            f"<span class=nowrap>{esc(run.started_at or MISSING)}</span>",
        ])
    table = html_table(
        ["Arm", "Prompt", "Run", "Warmup", "Status", "In the figures", "Contended", "Tokens", "Short", "Token counts", "TTFT s",
         "Decode tok/s", "Clock", "Host CPU load", "Started"],
        rows, numeric=(2, 7, 10, 11),
    )
    return (
        '<section id="runs"><h2>Every run</h2><p class=note>In the figures: whether the run counts in the medians and the '
        "replay under this report's run selection (the rule under Every cell), else why not; a short run (fewer tokens "
        "than the forced max_tokens) is not like-for-like; the clock is the kernel's receive "
        "time of each read where the platform gives it (exact however late the recorder woke); host CPU load is the share "
        "of the engine's CPUs' time that processes other than the engine and the recorder used (older files: the "
        "share of time some task waited for a CPU, Linux PSI); ▶ marks the run the replay "
        f"plays.</p><details><summary>{len(session.runs)} runs</summary>{table}</details></section>"
    )


def to_html(report: Report, session: Session) -> str:
    """The report (build_report's data) as one self-contained HTML page; its notes, tables and
    replay all follow the run selection the report was built with, so they cannot disagree."""
    selection = report_selection(report)
    theme = load_theme(THEME)
    colors = arm_colors(session, theme)
    labels = {arm.id: arm.label for arm in session.arms}
    data = replay_data(session, report)
    replay, replayed = replay_section(session, data, colors)
    sections = [
        _header(report, session), _ladder(report, colors), replay, _categories(report, labels), _decomposition(report), _task_time(report),
        _charts(session, report), _latency(report, labels, colors), _answers(report, labels, colors),
        _accuracy(report.get("accuracy"), colors),
        _arms(report, session, colors), _cells(report), _runs(session, replayed, selection),
    ]
    script = assets.file("html", "replay.js").read_text(encoding="utf-8")
    tail = f'<script type="application/json" id="replay-data">{script_json(data)}</script>'
    return page(f"{report['session']} · tokenreel report", sections, theme, tail, script)
