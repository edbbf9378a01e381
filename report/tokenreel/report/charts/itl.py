"""The inter-token latency distribution per arm, per token (`tokenreel.analysis.latency`'s definition:
a chunk of k tokens is one gap, then k - 1 zeros), as a cumulative curve: the share of tokens
that waited at most x ms. Over the same runs as the report's per-arm row (every usable run on
the prompts every arm has: the report's "arm_prompts"), and the legend's p50/p90/p99 and token
count are that row's, at the report's digits, so chart and report say the same.

A speculative arm's zeros (the tokens that came with another) show as the jump at 0. The x axis
is linear, unless some gap is a stall far beyond the usual ones: then it is linear up to 1 ms and
logarithmic above (symlog), so a 10 ms step and a 400 ms stall both fit.
"""

from __future__ import annotations

from matplotlib.lines import Line2D

from tokenreel.analysis.figures import figure
from tokenreel.analysis.ladder import usable_runs
from tokenreel.analysis.latency import MISSING_REASONS, Tally, inter_token_latencies_ms, tally
from tokenreel.analysis.selection import DEFAULT_SELECTION, RunSelection
from tokenreel.report.charts.bars import short_label
from tokenreel.report.charts.style import SIZE, Chart, Style, new_figure, set_title, style_axes
from tokenreel.report.data import Report, report_selection
from tokenreel.report.wording import LATENCY_FIGURES
from tokenreel.session.model import Session

TICKS_MS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000)


def arm_samples(session: Session, arm_id: str, prompts: list[str], selection: RunSelection = DEFAULT_SELECTION) -> Tally:
    """Every token's latency (ms) over the arm's usable runs of the given prompts, tallied
    (distinct values and counts: a 1 M-token chunk is one point of the curve, not a million)."""
    runs = (run for p in prompts for run in usable_runs(session, arm_id, p, selection))
    return tally(pair for run in runs for pair in inter_token_latencies_ms(run))


def heavy_tail(tails: list[tuple[float | None, float]]) -> bool:
    """A stall far beyond the usual gaps (max over 4x the largest p90): then the axis turns
    logarithmic above 1 ms, else it stays linear so the usual gaps are not squeezed."""
    usual = max((p90 for p90, _ in tails if p90), default=0.0)
    return any(longest > 4 * usual for _, longest in tails)


def itl_chart(session: Session, report: Report, style: Style) -> Chart:
    chart = Chart("itl", new_figure(style))
    ax = chart.figure.add_subplot()
    style_axes(ax, style)
    latency = report["latency"]
    prompts = latency["arm_prompts"]
    rows = {row["arm"]: row["itl_ms"] for row in latency["arms"]}
    digits = next(d for name, _, d in LATENCY_FIGURES if name == "itl_ms")
    handles, longest = [], 1.0
    tails: list[tuple[float | None, float]] = []  # (p90, max) per arm
    for index, arm in enumerate(session.arms):
        samples = arm_samples(session, arm.id, prompts, report_selection(report))
        d = rows[arm.id]
        if not samples.n:
            why = "no prompt that every arm has a usable run of" if not prompts else MISSING_REASONS["itl_ms"]
            text = f"{short_label(arm.label)} · no data: {why}"
            handles.append(Line2D([], [], color=style.faint, linestyle=(0, (2, 2)), label=text))
            chart.summary.append(text)
            continue
        shares = samples.at_or_below / samples.n
        longest_here = float(samples.values[-1])
        ax.step([0.0, *samples.values], [0.0, *shares], where="post", color=style.arm(index), linewidth=2.0,
                gid=f"itl-{arm.id}")
        ax.plot([longest_here], [1.0], "o", markersize=5, color=style.arm(index))  # the longest wait, however rare
        text = (f"{short_label(arm.label)} · p50 {figure(d['p50'], digits)} · p90 {figure(d['p90'], digits)}"
                f" · p99 {figure(d['p99'], digits)} · max {figure(d['max'], digits)} ms")
        handles.append(Line2D([], [], color=style.arm(index), linewidth=2.0, label=text))
        chart.summary.append(text)
        longest = max(longest, longest_here)
        tails.append((d["p90"], longest_here))
    if heavy_tail(tails):
        ax.set_xscale("symlog", linthresh=1.0, linscale=0.5)
        ticks = [t for t in TICKS_MS if t <= longest * 1.05]
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_xticks([], minor=True)
    ax.set_xlim(0, longest * 1.05)
    ax.set_ylim(0, 1.02)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
    ax.set_xlabel("ms per token (a chunk of k tokens: one gap, then k−1 zeros)",
                  color=style.dim, fontsize=SIZE["small"])
    ax.set_ylabel("share of tokens ≤ x", color=style.dim, fontsize=SIZE["small"])
    runs = f"usable runs of {len(prompts)} prompt{'s' if len(prompts) != 1 else ''}"
    set_title(chart, f"Inter-token latency per arm · {runs}", style)
    chart.figure.legend(handles=handles, loc="outside lower center", fontsize=SIZE["small"], frameon=False,
                        labelcolor=style.text)
    return chart
