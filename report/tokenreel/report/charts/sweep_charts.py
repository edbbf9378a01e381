"""A sweep's two charts, drawn from its report (`report.sweep_data.sweep_report`)
so they cannot disagree with it:

- speedup: per pair of adjacent arms, the per-request speed-up against concurrency with its
  95 % interval as a band, the aggregate ratio dashed, 1.00x as the line to beat, the crossover
  (`per_request_level`) and the level where the engine stopped drafting marked;
- throughput: per arm, aggregate output tok/s against per-request decode tok/s, one point per
  level: the curve engineers pick an operating point on (right: faster for one user; up: more
  served; each level moves it left and up until the batch stops paying).

A level that failed or was skipped, or has no figure, is left out and the note under the axes
says which and why; an arm or pair with nothing to draw is a "no data: <why>" entry.
"""

from __future__ import annotations

import textwrap
from typing import Any, Literal

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Annotation
from matplotlib.ticker import NullLocator
from matplotlib.transforms import Bbox

from tokenreel.analysis.figures import figure, multiplier
from tokenreel.report.charts.bars import NOTE_CHARS, short_label
from tokenreel.report.charts.style import SIZE, Chart, Style, legend_columns, new_figure, no_data, set_title, style_axes, wrap_note
from tokenreel.report.wording import ratio_text
from tokenreel.session.model import Session

SWEEP_STEMS = ("sweep-speedup", "sweep-throughput")  # the charts' names and file stems, as `plot` writes them
Spot = tuple[int, int, Literal["left", "right"], Literal["top", "bottom"]]  # (dx, dy) points, alignment
# Where a level's label may sit around its point, in order.
SPOTS: tuple[Spot, ...] = ((7, -4, "left", "top"), (7, 4, "left", "bottom"), (-7, 4, "right", "bottom"), (-7, -4, "right", "top"))
TITLE_CHARS = 60  # a longer title wraps (monospace bold at the title's size across the figure)


def _left_out(row: dict[str, Any], key: str) -> str | None:
    """Why a level's row has no point on a chart (None: it has one)."""
    status: str = row["status"]
    if status != "ok":
        return status + (f": {row['error']}" if row["error"] else "")
    return None if row[key] is not None else "no completed request with a decode speed"


def _level_axis(ax: Axes, levels: list[int]) -> None:
    """Concurrency on a log2 axis, each measured level a tick."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(levels, [str(level) for level in levels])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(levels[0] / 1.35, levels[-1] * 1.35)


def _marker(ax: Axes, level: int, text: str, row: int, color: str, style: Style, dotted: bool) -> None:
    """A vertical line at `level` and its label above the axes, clear of the data, one row per label."""
    ax.axvline(level, color=color, linewidth=1.4, linestyle=(0, (1, 2)) if dotted else (0, (5, 3)), zorder=2)
    ax.annotate(text, (level, 1.0), xycoords=("data", "axes fraction"), xytext=(0, 4 + 17 * row), textcoords="offset points",
                ha="center", va="bottom", color=color, fontsize=SIZE["small"], fontweight="bold")


def _draw_pair(ax: Axes, shown: list[dict[str, Any]], color: str, style: Style, values: bool) -> float:
    """One pair's per-request line over its interval band, its aggregate dashed, and (`values`)
    each per-request ratio written by its point; returns the highest figure drawn."""
    x = [c["level"] for c in shown]
    per = [c["per_request"] for c in shown]
    bands = [(c["level"], *f["ci95"]) for c, f in zip(shown, per, strict=False) if f["ci95"] is not None]
    if bands:
        bx, low, high = zip(*bands, strict=False)
        ax.fill_between(bx, low, high, color=color, alpha=0.25, linewidth=0, zorder=2)
    ax.plot(x, [f["ratio"] for f in per], "o-", color=color, linewidth=2.2, markersize=6, zorder=4)
    aggregate = [(c["level"], c["aggregate"]["ratio"]) for c in shown if c["aggregate"]["ratio"] is not None]
    if aggregate:
        ax.plot(*zip(*aggregate, strict=False), "s--", color=color, linewidth=1.4, markersize=4, alpha=0.85, zorder=3)
    for level, f in zip(x, per, strict=False) if values else ():
        ax.annotate(multiplier(f["ratio"]), (level, f["ratio"]), xytext=(7, 5), textcoords="offset points",
                    color=style.title, fontsize=SIZE["small"], zorder=5)
    top: float = max([f["ratio"] for f in per] + [r for _, r in aggregate] + [b[2] for b in bands])
    return top


def _legend(pairs: list[tuple[str, str]], style: Style) -> list[Any]:
    """1.00x, then what the lines are: in the pair's colour for one pair (the title names it);
    in neutral colour, then a swatch per pair, for several."""
    one = pairs[0][1] if len(pairs) == 1 else style.dim
    handles: list[Any] = [
        Line2D([], [], color=style.dim, linewidth=1.0, linestyle=(0, (4, 3)), label="1.00x: as fast"),
        Patch(facecolor=one, alpha=0.6, label="per request, 95 % band"),
        Line2D([], [], color=one, linewidth=1.4, linestyle="--", marker="s", markersize=4, label="aggregate"),
    ]
    return handles + ([Patch(facecolor=color, label=name) for name, color in pairs] if len(pairs) > 1 else [])


def speedup_chart(session: Session, report: dict[str, Any], style: Style) -> Chart:
    """Each arm's speed-up over its prior arm per request against concurrency (module docstring)."""
    chart = Chart(SWEEP_STEMS[0], new_figure(style))
    ax = chart.figure.add_subplot()
    style_axes(ax, style)
    labels = {arm.id: short_label(arm.label) for arm in session.arms}
    index = {arm.id: i for i, arm in enumerate(session.arms)}
    pairs = report["crossovers"]
    what = (f"{labels[pairs[0]['arm']]} over {labels[pairs[0]['vs']]}" if len(pairs) == 1
            else "each arm over the prior arm")
    set_title(chart, textwrap.fill(f"Speed-up of {what} per request vs concurrency · 95 % interval", TITLE_CHARS), style)
    rows = {(row["arm"], row["level"]): row for row in report["levels"]}
    drawn = [(pair, [c for c in pair["levels"] if _pair_gap(rows, pair, c) is None]) for pair in pairs]
    levels = sorted({c["level"] for _, shown in drawn for c in shown})
    if not levels:
        return no_data(chart, ax, "only one arm, nothing to compare" if not pairs else "no level both arms of a pair completed", style)
    _level_axis(ax, levels)
    ax.axhline(1.0, color=style.dim, linewidth=1.0, linestyle=(0, (4, 3)))
    notes, named, top = [], [], 1.0
    placed: list[tuple[int, int]] = []  # (level's tick, label row) of the markers drawn
    for pair, shown in drawn:
        color, name = style.arm(index[pair["arm"]]), f"{labels[pair['arm']]} vs {labels[pair['vs']]}"
        notes += [f"{name}: level {c['level']} left out: {_pair_gap(rows, pair, c)}" for c in pair["levels"] if c not in shown]
        if not shown:
            notes.append(f"{name}: no data: no level both arms completed")
            continue
        named.append((name, color))
        top = max(top, _draw_pair(ax, shown, color, style, values=len(pairs) == 1))
        for key, text, dotted in (("per_request_level", "crossover", False), ("drafting_off_level", "drafting off", True)):
            if pair[key] in [c["level"] for c in shown]:
                tick = levels.index(pair[key])  # its label's row: the first that no label at this or a next tick uses
                row = next(r for r in range(len(placed) + 1) if r not in {n for t, n in placed if abs(t - tick) <= 1})
                _marker(ax, pair[key], f"{text} {pair[key]}", row, color, style, dotted)
                placed.append((tick, row))
        chart.summary += [f"{name} at {c['level']}: {ratio_text(c['per_request']['ratio'], c['per_request']['ci95'])} per request,"
                          f" {ratio_text(c['aggregate']['ratio'], c['aggregate']['ci95'])} aggregate" for c in shown]
        chart.summary.append(pair["sentence"])
    ax.set_ylim(0, top * 1.15)
    ax.set_ylabel("speed-up (x)", color=style.dim, fontsize=SIZE["small"])
    ax.set_xlabel(wrap_note(["concurrent requests (log scale)", *notes], NOTE_CHARS), loc="left", color=style.dim,
                  fontsize=SIZE["small"])
    handles = _legend(named, style)
    chart.figure.legend(handles=handles, loc="outside lower center", ncols=legend_columns([str(h.get_label()) for h in handles]),
                        fontsize=SIZE["small"], frameon=False, labelcolor=style.text)
    return chart


def _pair_gap(rows: dict[tuple[str, int], dict[str, Any]], pair: dict[str, Any], compared: dict[str, Any]) -> str | None:
    """Why a pair's level has no point: an arm's level did not go well, or no ratio (the report's note)."""
    for arm in (pair["vs"], pair["arm"]):
        row = rows[(arm, compared["level"])]
        if row["status"] != "ok":
            return f"{short_label(row['label'])} {_left_out(row, 'mean_decode_tok_s')}"
    if compared["per_request"]["ratio"] is None:
        return compared["per_request"]["note"] or "no ratio"
    return None


def throughput_chart(session: Session, report: dict[str, Any], style: Style) -> Chart:
    """Aggregate output tok/s against per-request decode tok/s per arm, a point per level."""
    chart = Chart(SWEEP_STEMS[1], new_figure(style))
    ax = chart.figure.add_subplot()
    style_axes(ax, style)
    set_title(chart, "Aggregate throughput vs speed per request, per arm", style)
    handles, notes, right, top = [], [], 0.0, 0.0
    levels: list[Annotation] = []
    for i, arm in enumerate(session.arms):
        rows = [row for row in report["levels"] if row["arm"] == arm.id]
        gaps = [(row, _left_out(row, "mean_decode_tok_s") or _left_out(row, "aggregate_output_tok_s")) for row in rows]
        notes += [f"{short_label(arm.label)}: level {row['level']} left out: {why}" for row, why in gaps if why]
        shown = [row for row, why in gaps if why is None]
        if not shown:
            text = f"{short_label(arm.label)} · no data: no level with a completed request"
            handles.append(Line2D([], [], color=style.faint, linestyle=(0, (2, 2)), label=text))
            chart.summary.append(text)
            continue
        x = [row["mean_decode_tok_s"] for row in shown]
        y = [row["aggregate_output_tok_s"] for row in shown]
        ax.plot(x, y, "o-", color=style.arm(i), linewidth=2.2, markersize=7, zorder=3, gid=f"throughput-{arm.id}")
        levels += [ax.annotate(str(row["level"]), (px, py), xytext=SPOTS[0][:2], textcoords="offset points", ha=SPOTS[0][2],
                               va=SPOTS[0][3], color=style.arm(i), fontsize=SIZE["small"], zorder=4)
                   for row, px, py in zip(shown, x, y, strict=False)]
        handles.append(Line2D([], [], color=style.arm(i), linewidth=2.2, marker="o", label=short_label(arm.label)))
        right, top = max(right, *x), max(top, *y)
        chart.summary += [f"{arm.label} at {row['level']}: {figure(row['aggregate_output_tok_s'], 1, ' tok/s')} aggregate,"
                          f" {figure(row['mean_decode_tok_s'], 1, ' tok/s')} per request" for row in shown]
    if not right:
        return no_data(chart, ax, "no level with a completed request", style)
    chart.fit = lambda: _spread(chart.figure, levels)
    ax.set_xlim(0, right * 1.12)
    ax.set_ylim(0, top * 1.1)
    ax.set_ylabel("aggregate output tok/s", color=style.dim, fontsize=SIZE["small"])
    ax.set_xlabel(wrap_note(["decode tok/s per request (mean) · numbers: concurrent requests", *notes], NOTE_CHARS),
                  loc="left", color=style.dim, fontsize=SIZE["small"])
    chart.figure.legend(handles=handles, loc="outside lower center", ncols=legend_columns([str(h.get_label()) for h in handles]),
                        fontsize=SIZE["small"], frameon=False, labelcolor=style.text)
    return chart


def _spread(fig: Figure, labels: list[Annotation]) -> None:
    """Move each level's label to the first spot around its point (SPOTS) where it overlaps no
    label placed before it: two levels whose points nearly coincide stay readable."""
    fig.draw_without_rendering()
    placed: list[Bbox] = []
    for label in labels:
        spot = next((s for s in SPOTS if not any(_put(label, s).overlaps(box) for box in placed)), SPOTS[0])
        placed.append(_put(label, spot))


def _put(label: Annotation, spot: Spot) -> Bbox:
    """Place a label at a spot around its point; its box on the canvas."""
    dx, dy, ha, va = spot
    label.xyann = (dx, dy)
    label.set_horizontalalignment(ha)
    label.set_verticalalignment(va)
    return label.get_window_extent()


def sweep_charts(session: Session, report: dict[str, Any], style: Style) -> dict[str, Chart]:
    """File stem -> drawn chart (not yet finished), in the order `plot` writes them."""
    charts = (speedup_chart(session, report, style), throughput_chart(session, report, style))
    return {chart.name: chart for chart in charts}

