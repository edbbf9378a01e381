"""A sweep's report as one HTML page (`tokenreel report SWEEP --format html`): the crossover
sentences first, then both charts inline as SVG, the pairs' ratios with their intervals and
each arm's levels. The HTML views' shell (`html_shell.page`: its Content-Security-Policy, here
with no script at all, its stylesheet, its escaping) and the markdown view's cells
(`sweep_markdown`), so the three views of a sweep print the same figures. Deterministic: the same
session gives the same bytes.
"""

from __future__ import annotations

from typing import Any

from tokenreel.base.safe_text import esc
from tokenreel.base.theme import load_theme
from tokenreel.report.charts import sweep_svgs
from tokenreel.report.html_shell import THEME, arm_colors, arm_name, html_table, inline_svg, page
from tokenreel.report.sweep_data import sweep_report
from tokenreel.report.sweep_markdown import CROSSOVER_MEANING, LEVEL_HEADERS, level_cells, missing_note, ratio_cell
from tokenreel.report.sweep_schedule import RULE, SCHEDULE_HEADERS, schedule_lines, schedule_tables
from tokenreel.session.model import Session


def _header(report: dict[str, Any], session: Session) -> str:
    levels = sorted({row["level"] for row in report["levels"]})
    facts = [f"{len(session.arms)} arms", f"concurrency {', '.join(map(str, levels))}",
             f"max_tokens {session.settings.max_tokens}", f"recorded {session.created_at or 'at an unknown time'}",
             f"tokenreel {session.tool_version or 'version unknown'}"]
    claims = ("".join(f'<p class="claim"><span class="claim-scope">{esc(s)}</span></p>' for s in report["summary"])
              or '<p class="claim none">One arm: nothing to compare.</p>')
    banner = ('<p class="banner">Recorded against simulated endpoints (<code>tokenreel simulate</code>), not real GPUs.</p>'
              if report["simulated"] else "")
    return (f"<header><h1>Sweep: {esc(report['session'])}</h1>"
            f"{claims}"
            f"<p class=note>{esc(CROSSOVER_MEANING)}</p><p class=facts>{esc(' · '.join(facts))}</p>{banner}</header>")


def _charts(session: Session, report: dict[str, Any]) -> str:
    figures = "".join(f'<figure class="chart" id="chart-{esc(name)}">{inline_svg(svg)}</figure>'
                      for name, svg in sweep_svgs(session, report, THEME).items())
    return f'<section id="charts"><h2>Charts</h2><div class="charts">{figures}</div></section>'


def _pairs(report: dict[str, Any], labels: dict[str, str]) -> str:
    tables = "".join(
        f"<h3>{esc(labels[pair['arm']])} vs {esc(labels[pair['vs']])}</h3>"
        + html_table(["Level", "Per-request ratio [95 % CI]", "Aggregate ratio [95 % CI]"],
                     ([str(c["level"]), esc(ratio_cell(c["per_request"])), esc(ratio_cell(c["aggregate"]))]
                      for c in pair["levels"]), numeric=(0,))
        for pair in report["crossovers"])
    return f'<section id="pairs"><h2>Each arm vs the prior arm, level by level</h2>{tables}</section>' if tables else ""


def _arms(report: dict[str, Any], session: Session, colors: dict[str, str]) -> str:
    tables = "".join(_arm_table(arm.label, colors[arm.id], [row for row in report["levels"] if row["arm"] == arm.id])
                     for arm in session.arms)
    return f'<section id="levels"><h2>Each arm, level by level</h2>{tables}</section>'


def _arm_table(label: str, color: str, rows: list[dict[str, Any]]) -> str:
    note = missing_note(rows)
    return (f"<h3>{arm_name(label, color)}</h3>"
            + html_table([esc(h[0].upper() + h[1:]) for h in LEVEL_HEADERS], ([esc(cell) for cell in level_cells(row)] for row in rows),
                         numeric=(0, *range(2, len(LEVEL_HEADERS))))
            + (f"<p class=note>{esc(note)}</p>" if note else ""))


def _schedule(report: dict[str, Any], labels: dict[str, str]) -> str:
    schedule = report["schedule"]
    if not schedule["drafters"]:
        return ""
    said = "".join(f"<p class=claim>{esc(line)}</p>" for line in schedule_lines(schedule, labels))
    missing = "".join(f"<p class=note>{esc(d['k_missing'])}</p>" for d in schedule["drafters"] if d["k_missing"])
    tables = "".join(f"<h3>{esc(title)}</h3>" + html_table([esc(h[0].upper() + h[1:]) for h in SCHEDULE_HEADERS],
                                                           ([esc(c) for c in row] for row in rows), numeric=(0, 3))
                     for title, rows in schedule_tables(schedule, labels, ratio_cell))
    return f'<section id="schedule"><h2>Drafting schedule</h2>{said}<p class=note>{esc(RULE)}</p>{missing}{tables}</section>'


def sweep_html(session: Session) -> str:
    """The sweep's report as one self-contained page (module docstring)."""
    report = sweep_report(session)
    theme = load_theme(THEME)
    colors = arm_colors(session, theme)
    labels = {arm.id: arm.label for arm in session.arms}
    sections = [_header(report, session), _charts(session, report), _pairs(report, labels), _schedule(report, labels),
                _arms(report, session, colors)]
    return page(f"Sweep: {report['session']} · tokenreel report", sections, theme)
