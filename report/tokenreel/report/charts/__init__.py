"""Charts of a session as PNG and SVG (`tokenreel plot`, and inlined by the HTML report).

A ladder session's four charts, each in its own module:

- ladder: decode tok/s per arm with its speed-up vs the prior arm and vs the first (bars.py);
- categories: per prompt category, each arm's speed-up over the first arm (bars.py);
- race-<prompt>: cumulative tokens against time from send for one prompt, each arm's median run,
  TTFT marked (race.py);
- itl: the inter-token latency distribution per arm, per token (itl.py);
- positions: acceptance rate per draft position per drafter arm, only where some arm has
  per-position counts (position_chart.py);
- decomposition: each drafter arm's speed-up per category as tokens a step x step ratio, only
  where some arm has them (decomposition_chart.py);
- roofline: each arm's decode as a share of its memory-bandwidth limit, only where some arm
  has the figure (roofline_chart.py).

A sweep session (`tokenreel sweep`) has its own two (sweep_charts.py): sweep-speedup, each arm's
speed-up over the prior arm per request against concurrency, with its interval band and the
crossover marked; sweep-throughput, aggregate tok/s against per-request tok/s per arm, a point
per level; levels that failed or were skipped are left out with a note. Their numbers come
from the sweep's report (`tokenreel.report.sweep_data.sweep_report`).

A ladder's numbers come from the report (`tokenreel.report.build_report`) and are formatted by
`tokenreel.analysis.figures`, so a chart and the report never disagree; colours come from the video's
theme (`tokenreel.base.theme`), arm i in accents[i]. Output is deterministic (style.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from tokenreel.analysis.selection import DEFAULT_SELECTION, RunSelection
from tokenreel.base.files import output_target, write_atomic
from tokenreel.base.safe_text import file_component
from tokenreel.base.theme import load_theme
from tokenreel.report.charts.bars import categories_chart, ladder_chart
from tokenreel.report.charts.decomposition_chart import decomposition_chart, has_decomposition
from tokenreel.report.charts.itl import itl_chart
from tokenreel.report.charts.position_chart import has_positions, positions_chart
from tokenreel.report.charts.race import race_chart
from tokenreel.report.charts.roofline_chart import has_roofline, roofline_chart
from tokenreel.report.charts.style import Chart, Style, drawing, finish, png_bytes, svg_text
from tokenreel.report.charts.sweep_charts import SWEEP_STEMS, sweep_charts
from tokenreel.report.data import Report, build_report, report_view
from tokenreel.report.sweep_data import sweep_report
from tokenreel.session.model import Session

ChartFormat = Literal["png", "svg"]
FORMATS: tuple[ChartFormat, ...] = get_args(ChartFormat)


def parse_chart_formats(spec: str) -> list[ChartFormat]:
    """--format's comma-separated list (any case, each once, in order) as chart formats;
    ValueError names what is not one."""
    asked = list(dict.fromkeys(part.strip().lower() for part in spec.split(",") if part.strip()))
    unknown = [f for f in asked if f not in FORMATS]
    if unknown or not asked:
        raise ValueError(f"--format: {', '.join(unknown) or 'nothing'} is not a chart format; use png, svg or png,svg")
    return [fmt for name in asked for fmt in FORMATS if fmt == name]


def _check_prompt(session: Session, prompt_id: str) -> None:
    ids = [p.id for p in session.prompts]
    if prompt_id not in ids:
        raise ValueError(f"--prompt: no prompt {prompt_id!r} in the session; choose one of {', '.join(ids)}")


def _race_stems(prompt_ids: list[str]) -> dict[str, str]:
    """File stem -> prompt id; two ids that sanitise alike ("a/b", "a_b") keep a file each."""
    stems: dict[str, str] = {}
    for prompt_id in prompt_ids:
        stem = unique = f"race-{file_component(prompt_id)}"
        n = 2
        while unique in stems:
            unique, n = f"{stem}-{n}", n + 1
        stems[unique] = prompt_id
    return stems


def _stems(session: Session, prompt_ids: list[str], report: Report) -> list[str]:
    if session.kind == "sweep":
        return list(SWEEP_STEMS)
    return ["ladder", "categories", *_race_stems(prompt_ids), "itl", *(["positions"] if has_positions(report) else []),
            *(["decomposition"] if has_decomposition(report) else []),
            *(["roofline"] if has_roofline(report) else [])]


def _charts(session: Session, report: Report, prompt_ids: list[str], theme: str) -> dict[str, Chart]:
    """File stem -> finished chart, in `_stems` order."""
    style = Style.of(load_theme(theme))
    with drawing():
        if session.kind == "sweep":
            charts = sweep_charts(session, report, style)
        else:
            charts = {"ladder": ladder_chart(report, style), "categories": categories_chart(report, style)}
            for stem, prompt_id in _race_stems(prompt_ids).items():
                charts[stem] = race_chart(session, report, prompt_id, style, stem)
            charts["itl"] = itl_chart(session, report, style)
            if has_positions(report):
                charts["positions"] = positions_chart(report, style)
            if has_decomposition(report):
                charts["decomposition"] = decomposition_chart(report, style)
            if has_roofline(report):
                charts["roofline"] = roofline_chart(report, style)
    for chart in charts.values():
        finish(chart)
    return charts


def chart_svgs(session: Session, report: Report, prompt_id: str | None = None, theme: str = "dark") -> dict[str, str]:
    """Chart name ("ladder", "categories", "race", "itl") -> SVG text, for inlining in HTML.

    `report` is `build_report(session, ...)`'s dict; the race is for `prompt_id` (default: the
    session's first prompt). The same inputs give the same text, ids included."""
    prompt_id = prompt_id if prompt_id is not None else session.prompts[0].id
    _check_prompt(session, prompt_id)
    charts = _charts(session, report, [prompt_id], theme)
    return {("race" if stem.startswith("race-") else stem): svg_text(chart) for stem, chart in charts.items()}


def sweep_svgs(session: Session, report: Report, theme: str = "dark") -> dict[str, str]:
    """A sweep's charts ("sweep-speedup", "sweep-throughput") -> SVG text, for inlining in HTML;
    `report` is `sweep_report(session)`'s dict."""
    return {stem: svg_text(chart) for stem, chart in _charts(session, report, [], theme).items()}


def chart_paths(
    session: Session, out_dir: Path, formats: list[ChartFormat], prompt_ids: list[str] | None = None,
    report: Report | None = None,
) -> list[Path]:
    """The files `write_charts` writes, in its order (`report`: the session's, built if not given)."""
    ids = [p.id for p in session.prompts] if prompt_ids is None else prompt_ids
    report = report if report is not None else _report(session, DEFAULT_SELECTION)
    return [out_dir / f"{stem}.{fmt}" for stem in _stems(session, ids, report) for fmt in formats]


def _report(session: Session, selection: RunSelection) -> Report:
    return sweep_report(session) if session.kind == "sweep" else build_report(session, selection=selection)


def write_charts(
    session: Session, out_dir: Path, formats: list[ChartFormat], prompt_ids: list[str] | None = None,
    theme: str = "dark", force: bool = False, selection: RunSelection = DEFAULT_SELECTION,
) -> list[Path]:
    """Write every chart in each format into out_dir; returns the paths written.

    The race is drawn for each of `prompt_ids` (default: every prompt of the session, one file
    each). Nothing is written when a file exists and not `force` (ValueError names it)."""
    for prompt_id in prompt_ids or []:
        _check_prompt(session, prompt_id)
    if session.kind != "sweep":
        session = report_view(session).session  # the report's arms alone: an arm not recorded yet has no chart
    report = _report(session, selection)
    paths = chart_paths(session, out_dir, formats, prompt_ids, report)
    for path in paths:
        output_target(path)  # a device or FIFO under a chart's name is refused, --force or not
    existing = [p for p in paths if p.exists()]
    if existing and not force:
        raise ValueError(f"{existing[0]} already exists; pass --force to overwrite it or choose another --out")
    ids = [p.id for p in session.prompts] if prompt_ids is None else prompt_ids
    charts = _charts(session, report, ids, theme)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, chart in charts.items():
        for fmt in formats:
            path = out_dir / f"{stem}.{fmt}"
            write_atomic(path, png_bytes(chart) if fmt == "png" else svg_text(chart).encode("utf-8"))
            written.append(path)
    return written
