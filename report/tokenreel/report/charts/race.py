"""The race as a curve: cumulative tokens against time from request send, one prompt, each
arm's median run (`tokenreel.analysis.ladder.median_run`, the run the video replays by default).

A step curve, as tokens arrive: it stays at zero until the first token (TTFT, marked with a
circle) and reaches the run's token count at its last token (marked with a dot). The curve
counts the same chunks the video shows (`Chunks.tokens`), so it is the video's progress bar
drawn over time, and its times read like the video's clock (`figures.clock_seconds`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

from matplotlib.lines import Line2D

from tokenreel.analysis.figures import clock_seconds
from tokenreel.analysis.ladder import median_run
from tokenreel.analysis.metrics import NS_PER_S, first_token_index, last_token_index
from tokenreel.analysis.selection import DEFAULT_SELECTION, RunSelection
from tokenreel.report.charts.bars import short_label
from tokenreel.report.charts.style import SIZE, Chart, Style, new_figure, set_title, style_axes
from tokenreel.report.data import Report, report_selection
from tokenreel.session.model import Session


@dataclass(frozen=True)
class Curve:
    """One arm's arrivals up to its last token: seconds from send, tokens so far."""

    seconds: list[float]
    tokens: list[int]
    ttft_index: int  # where the curve leaves zero
    ttft_ns: int
    done_ns: int  # the last token's arrival


def race_curve(session: Session, arm_id: str, prompt_id: str, selection: RunSelection = DEFAULT_SELECTION) -> Curve | None:
    """The median run's curve, starting at (0 s, 0 tokens); None when no run has a decode speed."""
    run = median_run(session, arm_id, prompt_id, selection)
    if run is None:
        return None
    chunks = run.chunks
    first, last = first_token_index(chunks), last_token_index(chunks)
    if first is None or last is None:
        return None
    counts = list(accumulate(chunks.tokens[: last + 1]))
    seconds = [0.0] + [t / NS_PER_S for t in chunks.t_ns[: last + 1]]
    return Curve(seconds, [0, *counts], first + 1, chunks.t_ns[first], chunks.t_ns[last])


def race_gap_reason(report: Report, arm: str, prompt: str) -> str:
    for missing in report["missing_cells"]:
        if missing["arm"] == arm and missing["prompt"] == prompt:
            reason: str = missing["reason"]
            return reason
    return "no run with a decode speed (no token after the first chunk)"


def race_chart(session: Session, report: Report, prompt_id: str, style: Style, name: str = "race") -> Chart:
    """`name`: the chart's file stem (race-<prompt>), which scopes its SVG ids."""
    chart = Chart(name, new_figure(style))
    ax = chart.figure.add_subplot()
    style_axes(ax, style)
    handles = []
    for index, arm in enumerate(session.arms):
        curve = race_curve(session, arm.id, prompt_id, report_selection(report))
        color = style.arm(index)
        if curve is None:
            text = f"{short_label(arm.label)} · no data: {race_gap_reason(report, arm.id, prompt_id)}"
            handles.append(Line2D([], [], color=style.faint, linestyle=(0, (2, 2)), label=text))
            chart.summary.append(text)
            continue
        ttft, done = curve.seconds[curve.ttft_index], curve.seconds[-1]
        ax.step(curve.seconds, curve.tokens, where="post", color=color, linewidth=2.0, gid=f"race-{arm.id}")
        ax.plot([ttft], [curve.tokens[curve.ttft_index]], "o", markersize=7, markerfacecolor=style.panel,
                markeredgecolor=color, markeredgewidth=2.0)
        ax.plot([done], [curve.tokens[-1]], "o", markersize=5, color=color)
        text = (f"{short_label(arm.label)} · TTFT {clock_seconds(curve.ttft_ns)} · {curve.tokens[-1]} tok"
                f" in {clock_seconds(curve.done_ns)}")
        handles.append(Line2D([], [], color=color, linewidth=2.0, label=text))
        chart.summary.append(text)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds from request send  (◯ first token: TTFT · ● last token)", color=style.dim, fontsize=SIZE["small"])
    ax.set_ylabel("tokens received", color=style.dim, fontsize=SIZE["small"])
    set_title(chart, f"The race · {prompt_id} · median run of each arm", style)
    chart.figure.legend(handles=handles, loc="outside lower center", fontsize=SIZE["small"], frameon=False,
                        labelcolor=style.text)
    return chart
