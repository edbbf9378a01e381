"""A drafter's speed-up per category, split in its two factors (the report's "decomposition"):
on a log axis a faint bar runs to the tokens a step (what acceptance alone would give) and a
solid bar to the speed-up; the gap between them is what the step's cost takes back. Drawn only
where some drafter arm has the figures; its rows are the categories, highest speed-up first."""

from __future__ import annotations

import math
from typing import Any

from matplotlib.patches import Patch

from tokenreel.analysis.decomposition import step_cost
from tokenreel.analysis.figures import figure, multiplier
from tokenreel.report.charts.bars import short_label
from tokenreel.report.charts.style import SIZE, Chart, Style, new_figure, set_title, style_axes
from tokenreel.report.data import Report


def _rows(report: Report) -> list[dict[str, Any]]:
    entries = (report.get("decomposition") or {}).get("arms", [])
    return sorted((d for d in entries if d["scope"] == "category" and not d["missing"]),
                  key=lambda d: (d["arm"], -d["speedup"]))


def has_decomposition(report: Report) -> bool:
    """Whether some drafter arm has per-category factors to draw (no chart where none has)."""
    return bool(_rows(report))


def decomposition_chart(report: Report, style: Style) -> Chart:
    chart = Chart("decomposition", new_figure(style))
    ax = chart.figure.add_subplot()
    style_axes(ax, style)
    rows = _rows(report)
    labels = {a["arm"]: a["label"] for a in report["arms"]}
    index = {row["arm"]: i for i, row in enumerate(report["ladder"])}
    arms = list(dict.fromkeys(d["arm"] for d in rows))
    names = []
    for y, d in enumerate(reversed(rows)):
        color = style.arm(index.get(d["arm"], 0))
        ax.barh(y, d["acceptance_length"] - 1, left=1, color=color, alpha=0.3, height=0.7, gid=f"tokens-{d['category']}")
        ax.barh(y, d["speedup"] - 1, left=1, color=color, height=0.42, gid=f"speedup-{d['category']}")
        text = (f"{figure(d['acceptance_length'], 2)} tokens a step, step {multiplier(step_cost(d['step_ratio']))}:"
                f" {multiplier(d['speedup'])}")
        ax.text(d["acceptance_length"] * 1.04, y, text, va="center", color=style.text, fontsize=SIZE["small"])
        name = d["category"] if len(arms) == 1 else f"{short_label(labels.get(d['arm'], d['arm']))} · {d['category']}"
        names.append(name)
        chart.summary.append(f"{name} · {text}")
    ax.set_xscale("log", base=2)
    top = max(d["acceptance_length"] for d in rows)
    ax.set_xlim(1, top * 8)
    ticks = [2.0**i for i in range(int(math.log2(top * 8)) + 1)]
    ax.set_xticks(ticks, [multiplier(t) for t in ticks])
    ax.minorticks_off()
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("x the target's decode speed (log scale)", color=style.dim, fontsize=SIZE["small"])
    title = "Speed-up = tokens a step x step ratio" + (f" · {short_label(labels.get(arms[0], arms[0]))}" if len(arms) == 1 else "")
    set_title(chart, title, style)
    first = style.arm(index.get(arms[0], 0))  # the legend in the bars' own colour and shades
    handles = [Patch(color=first, alpha=0.3, label="tokens a step (acceptance length)"),
               Patch(color=first, label="speed-up (the gap: the step's cost)")]
    chart.figure.legend(handles=handles, loc="outside lower center", fontsize=SIZE["small"], frameon=False,
                        labelcolor=style.text, ncols=2)
    return chart
