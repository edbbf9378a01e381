"""Each arm's decode as a share of its memory-bandwidth limit at batch 1 (the report's
"roofline"): one bar per arm, the limit the line at 100 %. Drawn only where some arm has the
figure; an arm without it is a labelled gap with the reason, never left out."""

from __future__ import annotations

from tokenreel.analysis.figures import figure
from tokenreel.report.charts.bars import short_label
from tokenreel.report.charts.style import SIZE, Chart, Style, new_figure, set_title, style_axes, wrap_note
from tokenreel.report.data import Report
from tokenreel.report.roofline_text import gigabytes

NOTE_CHARS = 56


def has_roofline(report: Report) -> bool:
    """Whether some arm has a share of its limit to draw (no chart at all where none has)."""
    return any(e["pct_of_limit"] is not None for e in report.get("roofline", []))


def roofline_chart(report: Report, style: Style) -> Chart:
    entries = report["roofline"]
    chart = Chart("roofline", new_figure(style))
    ax = chart.figure.add_subplot()
    style_axes(ax, style)
    index = {row["arm"]: i for i, row in enumerate(report["ladder"])}
    labels = {a["arm"]: a["label"] for a in report["arms"]}
    top = max([100.0, *(e["pct_of_limit"] for e in entries if e["pct_of_limit"] is not None)])
    span = top / 0.42  # the limit (or the longest bar) takes 42 % of the axis, the labels the rest, right of it
    at = top + span * 0.015
    ax.set_xlim(0, span)
    ax.set_ylim(len(entries) - 0.5, -0.5)
    ax.axvline(100, color=style.title, linewidth=1.2, linestyle=(0, (4, 3)), zorder=3)
    ax.text(100, -0.5, " limit", color=style.dim, fontsize=SIZE["small"], va="bottom")
    for y, entry in enumerate(entries):
        label = short_label(labels.get(entry["arm"], entry["arm"]))
        pct = entry["pct_of_limit"]
        if pct is None:
            text = _short_missing(entry["missing"])
            ax.text(at, y, wrap_note([text], 30), color=style.dim, fontsize=SIZE["small"], va="center")
        else:
            ax.barh(y, pct, color=style.arm(index.get(entry["arm"], y)), height=0.6, gid=f"roofline-{entry['arm']}")
            unit = "steps/s" if entry["drafter"] else "tok/s"
            measured = entry["steps_s"] if entry["drafter"] else entry["decode_tok_s"]
            limit = entry["limit_steps_s"] if entry["drafter"] else entry["limit_tok_s"]
            per = "a step" if entry["drafter"] else "a token"
            text = (f"{figure(pct, 1, ' %')}\n{figure(measured, 1)} of {figure(limit, 1)} {unit}"
                    f"\n{gigabytes(entry['bytes_per_step'])} {per}")
            ax.text(at, y, text, color=style.text, fontsize=SIZE["small"], va="center")
        chart.summary.append(f"{label} · {text.replace(chr(10), ' · ')}")
    ax.set_yticks(range(len(entries)), [short_label(labels.get(e["arm"], e["arm"])) for e in entries])
    ticks = [t for t in (0, 25, 50, 75, 100) if t <= span]
    ax.set_xticks(ticks, [f"{t}%" for t in ticks])
    cards = list(dict.fromkeys(f"{e['card'] or 'GPUs'} {figure(e['bandwidth_gbps'] / 1000, 1)} TB/s"
                               for e in entries if e["bandwidth_gbps"] is not None))
    bound = [" weights only (KV cache not counted): a limit's upper bound" if any(e["bound"] for e in entries) else ""]
    note = f"decode as % of the bandwidth limit at batch 1 ({', '.join(cards)});{bound[0]}"
    ax.set_xlabel(wrap_note([note], NOTE_CHARS), wrap=True, color=style.dim, fontsize=SIZE["small"])
    set_title(chart, "Each arm against its memory-bandwidth limit", style)
    return chart


def _short_missing(missing: list[str]) -> str:
    """What a bar lacks, short enough for the chart: the key that would give it (the report has the
    whole reason, which may name a long path)."""
    first = missing[0] if missing else ""
    key = first.rpartition("; set ")[2] if "; set " in first else ""
    return f"no figure: set {key}" if key else "no figure (the report says why)"
