"""The two bar charts, drawn from the report's own numbers so they cannot disagree with it:
the ladder (decode tok/s per arm, with its speed-up vs the prior arm and vs the first) and the
per-category speed-ups (each arm vs the first, per prompt category).

Labels are formatted with `tokenreel.analysis.figures` from the same rounded values the report prints.
A missing figure is drawn as a labelled gap ("no data: <reason>"), never left out. A speed-up's
95 % interval (the report's) is a whisker on its bar; where the report has none, the note under
the axis gives its reason.
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Text

from tokenreel.analysis.figures import figure, multiplier
from tokenreel.base.safe_text import strip_controls
from tokenreel.report.charts.style import SIZE, Chart, Style, legend_columns, new_figure, no_data, set_title, style_axes, wrap_note
from tokenreel.report.data import Report
from tokenreel.report.wording import interval_gaps, ratio_text

LABEL_CHARS = 28  # an arm label longer than this is cut with "…" on the axis
BAR_ROOM = 0.55  # the longest bar takes this share of the axis; its labels use the rest
NOTE_CHARS = 78  # a chart's note wraps at this many characters (its axes' width in small type)
LINE_PT = 14  # the ladder's label lines, this many points apart


def short_label(label: str) -> str:
    """An arm's label as a chart shows it: cut to LABEL_CHARS, without control or bidi characters."""
    label = strip_controls(label)
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"


def _estimated(report: Report) -> set[str]:
    return {a["arm"] for a in report["arms"] if a["tokens_estimated"]}


def ladder_gap_reason(report: Report, arm: str) -> str:
    """Why an arm has no ladder decode speed, in the words of the report's missing cells."""
    missing = [m for m in report["missing_cells"] if m["arm"] == arm]
    if report["prompts_compared"] == 0:
        if missing:
            return f"no usable run ({missing[0]['reason']})"
        return "no prompt that every arm has a usable run of"
    return "no decode speed in its runs (no token after the first chunk)"


def _vs(value: float | None, ci95: list[float] | None, what: str) -> str:
    return f"{ratio_text(value, ci95)} vs {what}" if value is not None else f"vs {what}: no data"


def _whisker(ax: Axes, x: float, y: float, low: float, high: float, style: Style, horizontal: bool) -> None:
    """An interval [low, high] around a bar's end at (x, y), capped, across the bar's direction."""
    value = x if horizontal else y
    spread = [[value - low], [high - value]]
    ax.errorbar(x, y, xerr=spread if horizontal else None, yerr=None if horizontal else spread, fmt="none",
                ecolor=style.title, elinewidth=1.4, capsize=5, capthick=1.4, zorder=3)


def ladder_chart(report: Report, style: Style) -> Chart:
    """Decode tok/s per arm, first arm on top; each bar says its figure and both speed-ups with
    their intervals. The whisker is the vs-first interval on the tok/s axis: the first arm's
    speed times its bounds, so it brackets the bar's end (the first arm's speed times the ratio)."""
    rows = report["ladder"]
    chart = Chart("ladder", new_figure(style))
    ax = chart.figure.add_subplot()
    style_axes(ax, style)
    ax.grid(True, axis="x", color=style.edge, linewidth=0.8)
    ax.grid(False, axis="y")
    estimated = _estimated(report)
    first = report["baseline"]
    values = [r["decode_tok_s"] for r in rows if r["decode_tok_s"] is not None]
    span = max(values) / BAR_ROOM if values else 1.0
    ax.set_xlim(0, span)
    if not values:
        ax.set_xticks([])  # no scale to read: every row is a gap
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_yticks(range(len(rows)), [f"{i + 1} {short_label(r['label'])}" for i, r in enumerate(rows)])
    ax.tick_params(axis="y", length=0, labelsize=SIZE["label"])
    pad = span * 0.012
    labels: list[Text] = []
    base = next((r["decode_tok_s"] for r in rows if r["arm"] == first), None)
    whiskers = False
    for i, row in enumerate(rows):
        value = row["decode_tok_s"]
        if value is None:
            reason = ladder_gap_reason(report, row["arm"])
            ax.barh(i, span, height=0.6, color="none", edgecolor=style.faint, hatch="//", linewidth=0.8)
            ax.text(pad, i, f"no data: {reason}", va="center", color=style.text, fontsize=SIZE["small"], clip_on=True,
                    bbox={"facecolor": style.panel, "edgecolor": "none", "pad": 3})
            chart.summary.append(f"{row['label']}: no data: {reason}")
            continue
        speed = figure(value, 1, " tok/s") + ("*" if row["arm"] in estimated else "")
        vs = [_vs(row["vs_prior"], row["vs_prior_ci95"], "prior"), _vs(row["vs_first"], row["vs_first_ci95"], first)]
        ax.barh(i, value, height=0.6, color=style.arm(i))
        right = value
        if row["vs_first_ci95"] is not None and base is not None:
            low, right = (base * bound for bound in row["vs_first_ci95"])
            _whisker(ax, value, i, low, right, style, horizontal=True)
            whiskers = True
        lines = ((speed, style.title, SIZE["value"], "bold"), *((text, style.dim, SIZE["small"], "normal") for text in vs))
        labels += [
            ax.annotate(text, (right + pad, i), xytext=(0, LINE_PT * (1 - n)), textcoords="offset points", va="center",
                        color=color, fontsize=size, fontweight=weight)
            for n, (text, color, size, weight) in enumerate(lines)
        ]
        chart.summary.append(f"{row['label']}: {speed}, {' · '.join(vs)}")
    chart.fit = lambda: _fit_right(chart.figure, ax, labels)
    gaps = interval_gaps(rows)
    notes = [f"[low–high]: 95 % interval over prompts; whisker: the vs-{first} interval in tok/s"] if whiskers else []
    notes += [f"No interval: {'; '.join(gaps)}"] if gaps else []
    if notes:  # at the foot of the figure, from its left edge: wider than the axes
        chart.figure.supxlabel(wrap_note(notes, NOTE_CHARS), x=0.015, ha="left", color=style.dim, fontsize=SIZE["small"])
    ax.set_xlabel("decode tok/s" + (" (* estimated token counts)" if estimated else ""), color=style.dim,
                  fontsize=SIZE["small"])
    prompts = report["prompts_compared"]
    set_title(chart, f"Decode speed per arm · mean over {prompts} prompt{'s' if prompts != 1 else ''}", style)
    return chart


def _fit_right(figure: Figure, ax: Axes, labels: list[Text]) -> None:
    """Widen the x axis until every label right of its bar ends inside the axes (text keeps its
    size in pixels while the bars shrink, so a few rounds settle it)."""
    for _ in range(4):
        figure.draw_without_rendering()
        box = ax.get_window_extent()
        right = max((label.get_window_extent().x1 for label in labels), default=box.x0)
        overflow = right - (box.x1 - 8)
        if overflow <= 0:
            return
        low, high = ax.get_xlim()
        ax.set_xlim(low, high * (1 + overflow / box.width * 1.1))


def categories_chart(report: Report, style: Style) -> Chart:
    """Per prompt category, each arm's speed-up over the first arm (dashed line: 1.00x)."""
    arms = [(i, r) for i, r in enumerate(report["ladder"])]
    base = report["baseline"]
    others = [(i, r) for i, r in arms if r["arm"] != base]
    categories = list(report["categories"])
    chart = Chart("categories", new_figure(style))
    ax = chart.figure.add_subplot()
    style_axes(ax, style)
    ax.grid(False, axis="x")
    base_label = next((r["label"] for _, r in arms if r["arm"] == base), base)
    set_title(chart, f"Decode speed-up per category · vs {short_label(base_label)}", style)
    if not categories or not others:
        reason = "only one arm, nothing to compare" if not others else "no prompt that every arm has a usable run of"
        return no_data(chart, ax, reason, style)
    # Each arm's row of the category's own ladder: its speed-up over the first arm, with its interval.
    speedups = {(r["arm"], c): r for c in categories for r in report["category_ladders"][c] if r["arm"] != base}
    top = max([b for r in speedups.values() for b in [r["vs_first"], *(r["vs_first_ci95"] or [])] if b is not None] + [1.0])
    ax.set_ylim(0, top * 1.18)
    width = 0.8 / len(others)
    for j, (index, row) in enumerate(others):
        for c, category in enumerate(categories):
            x = c - 0.4 + (j + 0.5) * width
            speedup = speedups[(row["arm"], category)]
            ratio, interval = speedup["vs_first"], speedup["vs_first_ci95"]
            if ratio is None:
                reason = "no data: no decode speed"
                ax.text(x, top * 0.02, reason, rotation=90, ha="center", va="bottom", color=style.dim,
                        fontsize=SIZE["small"])
                chart.summary.append(f"{category} {row['label']}: {reason}")
                continue
            ax.bar(x, ratio, width * 0.88, color=style.arm(index))
            if interval is not None:
                low, high = interval
                _whisker(ax, x, ratio, low, high, style, horizontal=False)
            ax.text(x, (interval[1] if interval else ratio) + top * 0.015, multiplier(ratio), ha="center", va="bottom",
                    color=style.title, fontsize=SIZE["small"] if len(others) * len(categories) > 8 else SIZE["label"],
                    rotation=90 if len(others) * len(categories) > 16 else 0)
            chart.summary.append(f"{category} {row['label']}: {ratio_text(ratio, interval)}")
    ax.axhline(1.0, color=style.dim, linewidth=1.0, linestyle=(0, (4, 3)))
    ax.set_xticks(range(len(categories)), [c.capitalize() for c in categories])
    ax.tick_params(axis="x", length=0)
    ax.set_xlabel(wrap_note(_category_notes(report, categories), NOTE_CHARS), loc="left", color=style.dim, fontsize=SIZE["small"])
    ax.set_ylabel("speed-up (x)", color=style.dim, fontsize=SIZE["small"])
    reference = Line2D([], [], color=style.dim, linewidth=1.0, linestyle=(0, (4, 3)), label=f"{short_label(base_label)} = 1.00x")
    handles = [reference, *(Patch(color=style.arm(i), label=short_label(r["label"])) for i, r in others)]
    columns = legend_columns([str(h.get_label()) for h in handles])
    chart.figure.legend(handles=handles, loc="outside lower center", ncols=columns, fontsize=SIZE["small"], frameon=False,
                        labelcolor=style.text)
    return chart


def _category_notes(report: Report, categories: list[str]) -> list[str]:
    """What a whisker is, if any is drawn, and why the speed-ups without one have none (each
    reason once, with its categories)."""
    missing: dict[str, list[str]] = {}
    for category in categories:
        for gap in interval_gaps(report["category_ladders"][category], ("vs_first",)):
            missing.setdefault(gap, []).append(category)
    drawn = any(r["vs_first_ci95"] is not None for c in categories for r in report["category_ladders"][c])
    notes = ["whisker: 95 % interval of the speed-up over the category's prompts"] if drawn else []
    return notes + [f"No interval for {', '.join(names)}: {gap}" for gap, names in missing.items()]
