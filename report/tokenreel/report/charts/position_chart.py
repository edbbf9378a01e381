"""Acceptance rate per draft position, one line per drafter arm (the report's
"acceptance_positions": Σ accepted at i over Σ verify steps that reached i, pooled over the arm's
counted runs). Drawn only where some arm has per-position counts; a drafter arm without them is
a dashed legend entry with the reason, and the note under the axes names the denominator."""

from __future__ import annotations

from matplotlib.lines import Line2D

from tokenreel.report.charts.bars import short_label
from tokenreel.report.charts.style import SIZE, Chart, Style, new_figure, set_title, style_axes
from tokenreel.report.data import Report
from tokenreel.report.wording import position_table, rate_text


def has_positions(report: Report) -> bool:
    """Whether the report has per-position rates to draw (no chart at all where it has none)."""
    return any(e["rates"] is not None for e in report.get("acceptance_positions", []))


def positions_chart(report: Report, style: Style) -> Chart:
    chart = Chart("positions", new_figure(style))
    ax = chart.figure.add_subplot()
    style_axes(ax, style)
    index = {row["arm"]: i for i, row in enumerate(report["ladder"])}
    handles: list[Line2D] = []
    width = 1
    for entry in report["acceptance_positions"]:
        label = short_label(entry["label"])
        if entry["rates"] is None:
            text = f"{label} · no data: {entry['missing']}"
            handles.append(Line2D([], [], color=style.faint, linestyle=(0, (2, 2)), label=text))
            chart.summary.append(text)
            continue
        points = [(i + 1, r) for i, r in enumerate(entry["rates"]) if r is not None]
        width = max(width, len(entry["rates"]))
        color = style.arm(index[entry["arm"]])
        ax.plot([p for p, _ in points], [r for _, r in points], "o-", color=color, linewidth=2.0, markersize=6,
                gid=f"positions-{entry['arm']}")
        text = f"{label} · " + " · ".join(rate_text(r) for _, r in points)
        handles.append(Line2D([], [], color=color, linewidth=2.0, marker="o", label=text))
        chart.summary.append(text)
    ax.set_xlim(0.5, width + 0.5)
    ax.set_xticks(range(1, width + 1), [str(i) for i in range(1, width + 1)])
    ax.set_ylim(0, 1.02)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
    _, _, notes = position_table(report)
    ax.set_xlabel(f"draft position · {notes[0]}", color=style.dim, fontsize=SIZE["small"], wrap=True)
    ax.set_ylabel("accepted", color=style.dim, fontsize=SIZE["small"])
    set_title(chart, "Acceptance rate per draft position", style)
    chart.figure.legend(handles=handles, loc="outside lower center", fontsize=SIZE["small"], frameon=False,
                        labelcolor=style.text)
    return chart
