"""The words every view shares: how a figure is written and what each table's legend says.

Markdown, HTML, charts and the terminal say the same things the same way; a figure an engine
cannot give is never a bare dash, the wording says why.
"""

from __future__ import annotations

from typing import Any

from tokenreel.analysis.figures import MISSING, figure, multiplier
from tokenreel.analysis.ladder import ITSELF
from tokenreel.analysis.latency import MISSING_REASONS, PERCENTILE_METHOD
from tokenreel.analysis.positions import BASIS_TEXT
from tokenreel.analysis.run_variance import SAYS_LEVEL, SAYS_SHARE, SAYS_TEXT
from tokenreel.analysis.serving_config import SYNTHETIC_LABEL
from tokenreel.analysis.task_time import step_text

STEP_MARKS = "①②③④⑤⑥⑦⑧⑨⑩"


def step_mark(index: int) -> str:
    """A ladder step's mark: ① ② ..., the number past the tenth."""
    return STEP_MARKS[index] if index < len(STEP_MARKS) else str(index + 1)


ESTIMATED_NOTE = (
    "\\* estimated token counts: the server sent no running usage, timings, token ids or logprobs and no"
    " `tokenizer` was configured, so each event counted as one token (the server's final total, if any, on"
    " the last event): decode speed and TPOT are approximate."
)


# Where the report has no headline: fewer than two arms whose acceptance is the model's own.
NO_HEADLINE = "No comparison to claim: fewer than two arms (an arm with synthetic acceptance is never in the headline)."


def fingerprint_text(items: dict[str, str], sep: str = " · ") -> str:
    return sep.join(f"{k} {v}" if k not in ("engine",) else v for k, v in items.items())


# Latency figures: key, label in tables, decimals in ms; the csv has n, min, p50, p90, p99, max of each.
LATENCY_FIGURES = (("ttft_ms", "TTFT", 1), ("tpot_ms", "TPOT", 2), ("itl_ms", "ITL", 2))


def latency_legend(latency: dict[str, Any]) -> str:
    """Which runs the percentiles cover and how they are computed, for every format that shows them."""
    shared = latency["arm_prompts"]
    return (
        "Per arm: every usable run (measured, completed, not contended) on the "
        f"{len(shared)} prompts every arm has ({', '.join(shared) or 'none'}); per cell: that cell's usable runs. "
        "TTFT and TPOT: one value per run. ITL (inter-token latency): one value per token after the first "
        "token event; a chunk of k tokens counts as k tokens arriving together (its first token waited the "
        f"gap since the previous chunk that carried tokens, the other k - 1 waited 0 ms). Percentiles: {PERCENTILE_METHOD}."
    )


def latency_gaps(latency: dict[str, Any]) -> list[str]:
    """One line per missing percentile figure (arm, or arm / prompt) with the reason."""
    missing = []
    for r in [*latency["arms"], *latency["cells"]]:
        where = f"{r['arm']}{' / ' + r['prompt'] if 'prompt' in r else ''}"
        if not r["runs"]:
            missing.append(f"{where}: every figure —: no usable run on the prompts every arm has")
            continue
        missing += [f"{where}: {label} —: {MISSING_REASONS[name]}" for name, label, _ in LATENCY_FIGURES if not r[name]["n"]]
    return missing


def acceptance_text(value: float | None, approximate: bool, synthetic: str = "") -> str:
    """Acceptance length to 2 decimals; ≈ marks one from counters printed in rounded steps; an arm
    whose engine forced acceptance says so beside it (`SYNTHETIC_LABEL`)."""
    text = figure(value, 2)
    text = f"≈{text}" if approximate and value is not None else text
    return f"{text} ({SYNTHETIC_LABEL})" if synthetic else text


def synthetic_notes(report: dict[str, Any]) -> list[str]:
    """One line per arm whose engine forced acceptance: where it was seen, and that its
    acceptance and speed-ups are not the model's and never the headline's."""
    return [f"- {row['label']}: {row['synthetic_acceptance']}; its acceptance and speed-ups are the engine's forced"
            " figures, never the headline's" for row in report["ladder"] if row.get("synthetic_acceptance")]


def rate_text(value: float | None) -> str:
    return figure(None if value is None else value * 100, 0, " %")


def host_text(cell: dict[str, Any]) -> str:
    """The engine host's highest CPU pressure over the cell's runs and how many were flagged."""
    if cell["host_pressure_pct"] is None:
        return f"not watched ({cell['host_note'] or 'recorded before tokenreel watched the host'})"
    flagged = f", {cell['host_contended']} run(s) host contended" if cell["host_contended"] else ""
    return f"max {figure(cell['host_pressure_pct'], 0, ' %')}{flagged}"


def contended_text(cell: dict[str, Any]) -> str:
    if cell["contended"] is None:
        return f"unknown ({cell['contention_note'] or 'not checked'})"
    return "yes" if cell["contended"] else "no"


def acceptance_notes(report: dict[str, Any]) -> list[str]:
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


def position_table(report: dict[str, Any]) -> tuple[list[str], list[list[str]], list[str]]:
    """Acceptance rate per draft position: (headers, one row per drafter arm that has it, one
    line per drafter arm that lacks it and the denominator's words); all empty where no arm has
    it (a report built by an older tokenreel has none)."""
    entries = report.get("acceptance_positions", [])
    have = [e for e in entries if e["rates"] is not None]
    if not have:
        return [], [], []
    width = max(len(e["rates"]) for e in have)
    headers = ["Arm", *(f"Position {i}" for i in range(1, width + 1))]
    rows = [[e["label"], *(rate_text(e["rates"][i]) if i < len(e["rates"]) else "beyond k" for i in range(width))] for e in have]
    bases = list(dict.fromkeys(e["basis"] for e in have))
    notes = [f"Rate at position i: draft tokens accepted at i over {' or '.join(BASIS_TEXT[b] for b in bases)},"
             " pooled over the arm's counted runs."]
    notes += [f"{e['label']}: no per-position counts; {e['missing']}." for e in entries if e["rates"] is None]
    return headers, rows, notes


def engine_notes(report: dict[str, Any]) -> list[str]:
    """The engine's own figures beside ours: decode agreement and prompt-cache hits, per arm,
    each missing one said with its reason (a report built by an older tokenreel has neither)."""
    labels = {a["arm"]: a["label"] for a in report["arms"]}
    lines = []
    for row in report.get("engine_agreement", []):
        if row["runs"]:
            lines.append(f"- {labels[row['arm']]}: decode within {figure(row['median_pct'], 3, ' %')} of the engine's own"
                         f" (median), {figure(row['worst_pct'], 3, ' %')} worst, over {row['runs']} runs")
        else:
            lines.append(f"- {labels[row['arm']]}: engine decode missing: {row['note']}")
    cache = report.get("prompt_cache")
    if cache is not None:
        for row in cache["arms"]:
            if row["cache_hits"]:
                lines.append(f"- {labels[row['arm']]}: {row['cache_hits']} of {row['runs']} runs' TTFT include a prompt-cache"
                             f" hit (up to {row['max_cached_tokens']} prompt tokens served from the cache): not a whole prefill")
            elif row.get("note"):
                lines.append(f"- {labels[row['arm']]}: prompt-cache hits unknown: {row['note']}")
    if not lines:
        return []
    head = "The engine's own figures (decode: tokens after the first over first to last token, both sides)"
    if cache is not None:
        head += f"; prompt cache: {cache['policy_text']}"
    return [head + ":", "", *lines, ""]


# The marks on a cell's figure that leave some of its runs out, and what each says.
TTFT_MARK, DECODE_MARK = "†", "‡"


def left_out_notes(report: dict[str, Any]) -> list[str]:
    """What the cells table's marks mean, for the marks it shows: a run left out of one figure of
    its cell stays in the cell's run count and its other figures."""
    lines = []
    if any(c["ttft_left_out"] for c in report["cells"]):
        lines.append(f"{TTFT_MARK} the TTFT leaves out runs whose first token was read together with later ones.")
    if any(c["decode_left_out"] for c in report["cells"]):
        lines.append(f"{DECODE_MARK} decode and TPOT leave out runs whose whole answer arrived in one read (no decode"
                     " interval); their TTFT and end-to-end figures keep them.")
    return lines


# What the host figure is, by `host_summary`'s measure: others' CPU load, or PSI in older files.
HOST_MEASURES = {
    "others_cpu": "the CPU load of processes other than its engine and the recorder (the share of its CPUs' time"
                  " they used)",
    "psi": "its CPU pressure (Linux PSI, the share of time some task, the engine's own included, waited for a CPU)",
}


def host_notes(report: dict[str, Any]) -> list[str]:
    """The engine's host: how loaded it was during the runs, or why it was not watched."""
    host = report["host"]
    threshold = figure(host["threshold_pct"], 0, " %")
    lines = []
    if host["watched_runs"]:
        flagged = [r for r in report["clocks"] if r["host_contended"]]
        lines.append(
            f"Host: the endpoint runs on the recording machine; {HOST_MEASURES[host['measure']]} was watched over"
            f" {host['watched_runs']} of {host['runs']} measured runs, at most"
            f" {figure(host['max_pressure_pct'], 0, ' %')}; {host['contended_runs']} over {threshold} (host contended)."
        )
        if flagged:
            kept = "left out of the figures" if report["selection"]["exclude_host_contended"] else \
                "kept in the figures, flagged (--exclude-host-contended leaves them out)"
            lines.append(f"Host contended: {run_names(flagged)}; {kept}.")
    for note in host["notes"]:
        lines.append(f"Host not watched: {note}.")
    return [*lines, ""] if lines else []


def gpu_notes(report: dict[str, Any]) -> list[str]:
    """Each arm's GPU as the GPU gate read it (name, memory, driver, clocks, power limit) and its
    verdict; one line for arms never checked (remote endpoints, or sessions from before)."""
    lines, unchecked = [], []
    for entry in report["gpu"]:
        last = entry["last"]
        if last is None:
            unchecked.append(entry["arm"])
            continue
        if last["status"] == "unavailable":
            lines.append(f"GPU ({entry['arm']}): not read: {last['detail']}.")
            continue
        devices = [d for d in last["devices"] if d["index"] in last["checked"]]
        driver = f"driver {last['driver'] or 'not given'}" + (f" (CUDA {last['cuda_driver']})" if last["cuda_driver"] else "")
        shown = "; ".join(gpu_device_text(d) for d in devices) or "no GPU listed"
        flag = " Flagged: an earlier recording found it busy." if entry["flagged"] and last["status"] != "busy" else ""
        verdict = f"busy, recorded anyway (flagged): {last['detail']}" if last["status"] == "busy" else \
            "idle (no other compute process, utilisation within the threshold)" + (f"; {last['detail']}" if last["detail"] else "")
        lines.append(f"GPU ({entry['arm']}): {shown}; {driver}; {verdict}.{flag}")
    if unchecked and lines:
        lines.append(f"GPU not checked for {', '.join(unchecked)} (remote endpoint, replicas, or recorded before"
                     " tokenreel read the GPU).")
    return [*lines, ""] if lines else []


def gpu_device_text(device: dict[str, Any]) -> str:
    """"GPU 0 NVIDIA H200, 140.4 GiB, SM 1980 of 1980 MHz, memory 3201 of 3201 MHz, power limit 700 W"."""
    def clock(now: int | None, top: int | None) -> str:
        return f"{now if now is not None else '—'} of {top if top is not None else '—'} MHz"

    memory = figure(None if device["memory_total_bytes"] is None else device["memory_total_bytes"] / 2**30, 1, " GiB")
    power = figure(None if device["power_limit_mw"] is None else device["power_limit_mw"] / 1000, 0, " W")
    return (f"GPU {device['index']} {device['name']}, {memory}, SM {clock(device['sm_clock_mhz'], device['sm_clock_max_mhz'])},"
            f" memory {clock(device['mem_clock_mhz'], device['mem_clock_max_mhz'])}, power limit {power}")


def run_names(runs: list[dict[str, Any]]) -> str:
    """"bf16 / prose-1 / run 2" for up to 3 runs, else the count per arm."""
    if len(runs) <= 3:
        return ", ".join(f"{r['arm']} / {r['prompt']} / run {r['index']}" for r in runs)
    arms = [r["arm"] for r in runs]
    return f"{len(runs)} runs (" + ", ".join(f"{arm} {arms.count(arm)}" for arm in dict.fromkeys(arms)) + ")"


def arms_shown_lines(not_recorded: list[str], left_out: list[str], config: str = "CONFIG", out: str = "SESSION") -> list[str]:
    """The session's arms a report leaves out, one line for each kind: those not recorded yet (a
    ladder recorded arm by arm), with the command that records them into the session, and
    those --arms left out. Empty when it shows every arm."""
    lines = []
    if not_recorded:
        lines.append(f"Not recorded yet: {', '.join(not_recorded)} (`tokenreel record --config {config} --arms"
                     f" {','.join(not_recorded)} --out {out}` records them into this session).")
    if left_out:
        lines.append(f"Left out by --arms: {', '.join(left_out)}.")
    return lines


def ladder_note(report: dict[str, Any]) -> str:
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
        f"Answers: each arm's first usable run against {reference}'s (the reference); a drafter arm's against the "
        "arm it drafts for (drafts_for; else the one arm with the same declared settings but the drafter, else the arm "
        "before it in the ladder), whose tokens it must keep. The common prefix in "
        "tokens counts the events wholly inside the common text (event-granular, a lower bound); similarity is "
        "the share of words the answers have in common, in order (1 = identical, unrelated prose about 0.2); "
        "» marks the first difference."
    )


def repeats_summary(answers: dict[str, Any]) -> tuple[str, list[str]]:
    """What repeated runs of one arm say (nondeterminism): a sentence, and one line per flagged cell."""
    checked = answers["repeat_checked_cells"]
    gpu = answers.get("gpu_notes", [])
    if answers["nondeterministic"]:
        return (
            f"Nondeterministic at temperature 0: runs of one arm on one prompt whose texts differ, warmups included "
            f"({len(answers['nondeterministic'])} of {checked} cells with repeated runs):",
            [*gpu, *(f"{n['arm']} / {n['prompt']} (runs {', '.join(map(str, n['runs']))}): {n['detail']}"
                     for n in answers["nondeterministic"])],
        )
    if answers["temperature"] == 0:
        if checked:
            return (f"Nondeterminism: none; in each of the {checked} cells with repeated runs (warmups included) every"
                    " run gave the same text (temperature 0).", gpu)
        return "Nondeterminism: not checked, no cell has two runs.", []
    return answers["note"][0].upper() + answers["note"][1:] + ".", []


def ratio_text(value: float | None, ci95: list[float] | None) -> str:
    """"1.22x [1.20–1.23]": a ratio and its 95 % interval, at the ratio's own precision; a ratio
    without one is written alone, and `interval_legend` says why."""
    if ci95 is None or value is None:
        return multiplier(value)
    return f"{multiplier(value)} [{figure(ci95[0], 2)}–{figure(ci95[1], 2)}]"


INTERVAL_MEANING = (
    "[low–high]: the 95 % interval over prompts. Had the suite been drawn again from prompts like these,"
    " 95 % of such intervals would hold the speed-up; each arm keeps the same prompts (paired), the"
    " categories are sampled in their proportions, and run-to-run noise counts through each prompt's median"
    " (delta method on the ratio of means, Cochran 1977, 6.11)."
)


def stopping_text(stopping: dict[str, Any] | None) -> str:
    """How a `record --target-ci` session stopped, and what that does to its intervals; "" otherwise."""
    if stopping is None:
        return ""
    prompts = stopping["looked"][-1] if stopping["looked"] else 0
    why = stopping["stopped"] or "not finished"
    return (
        f" Recorded with --target-ci ±{100 * stopping['target']:g} %: {prompts} of {len(stopping['order'])} prompts drawn"
        f" in {len(stopping['looked'])} of {len(stopping['looks'])} planned looks ({why}). Every interval is taken at"
        f" {100 * stopping['level']:.2f} %, the level at which all the looks together hold the truth 95 % of the time,"
        " so it stays a 95 % interval however the looks decided."
    )


def interval_gaps(rows: list[dict[str, Any]], ratios: tuple[str, ...] = ("vs_prior", "vs_first")) -> list[str]:
    """Why the ladder rows' ratios have no interval, once per reason (an arm against itself is no gap)."""
    return list(dict.fromkeys(
        row[f"{ratio}_ci95_note"] for row in rows for ratio in ratios
        if row[f"{ratio}_ci95"] is None and row[f"{ratio}_ci95_note"] != ITSELF
    ))


def interval_legend(report: dict[str, Any]) -> str:
    """What the brackets mean, and why a ladder ratio has none where it has none (once per reason)."""
    missing = "; ".join(interval_gaps(report["ladder"]))
    return INTERVAL_MEANING + stopping_text(report["stopping"]) + (f" No interval: {missing}." if missing else "")


def category_interval_note(report: dict[str, Any]) -> str:
    """Why a category's last arm vs the first has no interval ("No interval per category for
    code: n = 3 prompts: ..."), or "" when every category has one."""
    gaps = [f"{category}: {gap}" for category, rows in report["category_ladders"].items()
            for gap in interval_gaps(rows[-1:], ("vs_first",))]
    return f"No interval per category for {'; '.join(gaps)}." if gaps else ""


DECOMPOSITION_HEADERS = ["Arm", "Drafts for", "Prompts", "Tokens a step", "Step ratio", "Step ms (target / arm)", "Speed-up"]


def _length_text(value: float | None, ci95: list[float] | None) -> str:
    """"3.05 [2.90–3.21]": an acceptance length and its 95 % interval, 2 decimals."""
    if ci95 is None or value is None:
        return figure(value, 2)
    return f"{figure(value, 2)} [{figure(ci95[0], 2)}–{figure(ci95[1], 2)}]"


def decomposition_table(report: dict[str, Any]) -> tuple[list[str], list[list[str]], list[str]]:
    """A drafter's speed-up over its target as tokens a step x step ratio: (headers, one row per
    arm and scope, the notes: each arm's category sentence, what is missing and why, and how much
    of its run-to-run spread acceptance explains); all empty where no arm drafts."""
    entry = report.get("decomposition") or {}
    found = entry.get("arms", [])
    if not found:
        return [], [], []
    labels = {a["arm"]: a["label"] for a in report["arms"]}
    rows = []
    for d in found:
        name = labels.get(d["arm"], d["arm"]) + ("" if d["scope"] == "suite" else f" · {d['category']}")
        if d["missing"]:
            rows.append([name, labels.get(d["target"], d["target"]), str(d["prompts"]), MISSING, MISSING, MISSING, MISSING])
            continue
        steps = f"{figure(d['target_step_ms'], 2)} / {figure(d['arm_step_ms'], 2)}"
        rows.append([name, labels.get(d["target"], d["target"]), str(d["prompts"]),
                     _length_text(d["acceptance_length"], d["acceptance_ci95"]),
                     ratio_text(d["step_ratio"], d["step_ratio_ci95"]), steps, ratio_text(d["speedup"], d["speedup_ci95"])])
    notes = [
        "Speed-up = tokens a step (the acceptance length, pooled as in the ladder) x step ratio (the target's time per"
        " step, 1 / its decode tok/s, over this arm's, acceptance length / its decode tok/s); the product is the"
        " ladder's decode speed-up over the target. Over several categories the step ratio is a ratio of means over"
        " prompts: the categories' own rows hold each one's step.",
    ]
    gaps = list(dict.fromkeys(d["speedup_ci95_note"] for d in found if not d["missing"] and d["speedup_ci95"] is None
                              and d["speedup_ci95_note"]))
    notes += [f"No interval: {'; '.join(gaps)}."] if gaps else []
    notes += [f"{labels.get(d['arm'], d['arm'])}{'' if d['scope'] == 'suite' else ' · ' + str(d['category'])}: {d['missing']}."
              for d in found if d["missing"]]
    notes += [f"{labels.get(arm, arm)}: {sentence}" for arm, sentence in entry.get("sentences", {}).items() if sentence]
    notes += [_variance_text(v, labels) for v in entry.get("run_variance", [])]
    return DECOMPOSITION_HEADERS, rows, notes


def _variance_text(v: dict[str, Any], labels: dict[str, str]) -> str:
    """"X: acceptance explains 92.3 % of the run-to-run variance ... (12 runs in 3 prompts); ..."."""
    name = labels.get(v["arm"], v["arm"])
    if v["share"] is None:
        return f"{name}: run-to-run variance explained by acceptance missing: {v['note']}."
    text = (f"{name}: acceptance explains {figure(v['share'] * 100, 1, ' %')} of the run-to-run variance of log decode"
            f" speed ({v['runs']} runs on {v['cells']} prompts, each run against its prompt's mean)")
    if v["says"]:
        return f"{text}; {SAYS_TEXT}."
    return f"{text}{'; ' + v['note'] if v['note'] else ''} (said to be acceptance above {figure(SAYS_SHARE * 100, 0, ' %')}" \
           f" with a slope significant at {figure(SAYS_LEVEL * 100, 0, ' %')})."


TASK_TIME_HEADERS = ["Arm", "Prompts", "Tokens per task", "Time per task", "Tokens vs. prior", "Sooner vs. prior",
                     "Decode vs. prior", "Step"]


def _pct_text(value: float | None, ci95: list[float] | None) -> str:
    """"21 % [14 to 28]": a change as a whole-number percentage with its 95 % interval."""
    if value is None:
        return MISSING
    shown = f"{figure(value * 100, 0)} %"
    return shown if ci95 is None else f"{shown} [{figure(ci95[0] * 100, 0)} to {figure(ci95[1] * 100, 0)}]"


def task_time_table(report: dict[str, Any]) -> tuple[list[str], list[list[str]], list[str]]:
    """A natural-length session's tokens and time per task per arm (suite, then each category),
    each step's change over the arm before it beside its decode ratio, and the notes saying what
    each figure is; all empty for a forced-length session."""
    entry = report.get("task_time")
    if not entry:
        return [], [], []
    scopes = [("", entry["suite"]), *((f" · {category}", rows) for category, rows in entry["categories"].items())]
    table = []
    for suffix, rows in scopes:
        for row in rows:
            first = row["sooner"] is None and row["sooner_note"] == ITSELF
            tokens = f"{figure(row['tokens_median'], 0)} (mean {figure(row['tokens_mean'], 1)})"
            table.append([
                f"{row['label']}{suffix}", str(row["prompts"]), tokens, figure(row["seconds_mean"], 2, " s"),
                "" if first else _pct_text(row["tokens_change"], row["tokens_change_ci95"]),
                "" if first else _pct_text(row["sooner"], row["sooner_ci95"]),
                "" if first else multiplier(row["decode_vs_prior"]),
                "the first arm" if first else step_text(row["tokens_change"], row["sooner"], row["sooner_ci95"]),
            ])
    gaps = list(dict.fromkeys(row[note] for _, rows in scopes for row in rows for note in ("sooner_note", "tokens_change_note")
                              if row[note] and row[note] != ITSELF))
    notes = [
        "Recorded at natural length (no ignore_eos, max_tokens a cap): each task ends where the model ends it.",
        "Tokens per task: the median over prompts of each prompt's completion tokens (the mean beside it); time per task:"
        " the mean over prompts of the time from request send to the last token. Each prompt's figure is its median"
        " over the runs counted.",
        "Sooner vs. prior: 1 - this arm's time per task over the prior arm's (negative: later); \"finishes no sooner\""
        " when its 95 % interval [low to high], paired over prompts, holds 0. Tokens vs. prior: mean tokens over the"
        " prior arm's - 1.",
        "Decode vs. prior is the ladder's ratio: its cells compare like for like only where the arms wrote as many"
        " tokens (cells of unequal length are marked in the cells' table); time per task needs no equal lengths.",
    ]
    notes += [f"No interval: {'; '.join(gaps)}."] if gaps else []
    capped = [f"{row['label']} {row['capped']} of {row['prompts']}" for row in entry["suite"] if row.get("capped")]
    notes += [f"Cut at max_tokens ({', '.join(capped)} tasks): those tasks' tokens and times are the cap's, a lower"
              " bound on the task's; raise max_tokens to see them end."] if capped else []
    return TASK_TIME_HEADERS, table, notes
