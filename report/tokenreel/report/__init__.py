"""`tokenreel.report`: every view of a session: markdown, json, csv, html, charts, terminal tables,
and the comparison of two sessions. Views print the core's figures (`report.data`), one module
per format; `render_report` picks one.
"""

from __future__ import annotations

from typing import Literal, assert_never, get_args

from tokenreel.analysis.selection import DEFAULT_SELECTION, RunSelection
from tokenreel.base.safe_text import strip_controls
from tokenreel.report.csv_format import to_accuracy_csv, to_csv
from tokenreel.report.data import build_report, report_view
from tokenreel.report.html_page import to_html
from tokenreel.report.json_format import to_json
from tokenreel.report.markdown import to_markdown
from tokenreel.session.model import Session

ReportFormat = Literal["md", "json", "csv", "html", "accuracy-csv"]
FORMATS: tuple[ReportFormat, ...] = get_args(ReportFormat)
__all__ = ["FORMATS", "ReportFormat", "build_report", "parse_report_format", "render_report", "to_csv", "to_html", "to_json", "to_markdown"]


def parse_report_format(text: str) -> ReportFormat:
    """--format as one of FORMATS (exactly as spelled); ValueError says which are known."""
    for fmt in FORMATS:
        if text == fmt:
            return fmt
    raise ValueError(f"--format: unknown format {text!r}; use md, json, csv, html or accuracy-csv")


def render_report(
    session: Session, fmt: ReportFormat, baseline: str | None = None, selection: RunSelection = DEFAULT_SELECTION,
    arms: list[str] | None = None,
) -> str:
    """The session's report in one of FORMATS, its figures under `selection`, of the recorded
    arms of `arms` (all when None). A sweep session (`tokenreel sweep`) is refused: its views
    are `report.sweep` (json), `sweep_md`, `sweep_html`."""
    if session.kind == "sweep":
        raise ValueError(f"session {session.name!r} is a sweep: its report is report.sweep (sweep_rows, sweep_json)")
    report = build_report(session, baseline, selection, arms)
    session = report_view(session, arms).session  # the views show the report's arms alone
    if fmt == "md":
        return strip_controls(to_markdown(report, session))  # text for people: no escapes, no bidi tricks
    if fmt == "json":
        return to_json(report)  # data: values kept exact, read through a JSON parser
    if fmt == "csv":
        return strip_controls(to_csv(report))
    if fmt == "html":
        return to_html(report, session)
    if fmt == "accuracy-csv":
        return strip_controls(to_accuracy_csv(report))
    assert_never(fmt)
