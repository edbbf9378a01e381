"""`tokenreel report`: the ladder, per category and every cell, in the format asked for."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tokenreel.analysis.selection import RunSelection
from tokenreel.base.files import write_atomic
from tokenreel.base.safe_text import shown_path, strip_controls
from tokenreel.cli.app import (
    EXCLUDE_HOST_HELP,
    app,
    check_writable,
    err,
    fail,
    load_session,
    report_format,
    split_ids,
    user_errors,
)
from tokenreel.cli.terminal import Command
from tokenreel.session.model import Session

if TYPE_CHECKING:
    from tokenreel.report import ReportFormat


@app.command(cls=Command, short_help="The ladder (each arm vs the prior and the first): md, json, csv, html.")
def report(
    session_path: Annotated[Path, typer.Argument(metavar="SESSION", help="A session file from `tokenreel record` or `tokenreel sweep`.")],
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format", "-f", metavar="md|json|csv|html|accuracy-csv",
            help="md (tables like the seeds'), json, csv, html (one page with charts and a replay) or accuracy-csv "
            "(a graded session's pass@1 and flips per step); "
            "wins over the --out extension (default: that, else md).",
        ),
    ] = None,
    baseline: Annotated[
        str | None, typer.Option(metavar="ARM", help="Arm that 'vs first' is relative to (default: the first arm).")
    ] = None,
    out_path: Annotated[
        Path | None,
        typer.Option("--out", "-o", metavar="FILE", help="Write to FILE (.md, .json, .csv or .html) instead of stdout."),
    ] = None,
    force: Annotated[bool, typer.Option(help="Overwrite --out if it exists.")] = False,
    exclude_host_contended: Annotated[
        bool, typer.Option(help=EXCLUDE_HOST_HELP),
    ] = False,
    arms: Annotated[
        str | None,
        typer.Option(metavar="IDS", help="The ladder of these arms alone (comma-separated ids, in the session's order)."),
    ] = None,
) -> None:
    """The ladder (each arm vs the prior arm vs the first), per category, and every cell.

    The format is --format, else the extension of --out (.md, .json, .csv, .html), else markdown;
    --format wins over the extension (-o report.txt --format csv writes csv).

    A ladder recorded arm by arm (record --arms) is reported as each arm lands: every recorded
    arm with its own figures, the ratios between the arms that are in, and one line naming the
    arms not recorded yet. --arms limits the ladder to the arms named.

    Besides the medians: p50/p90/p99, min and max of TTFT, TPOT and inter-token latency
    (per token: a chunk of k tokens is k tokens arriving together), per arm and per cell.

    A graded session (its runs carry grades) adds each arm's pass@1 and each step's flips with
    McNemar's exact test (docs/accuracy.md); --format accuracy-csv writes them as a table.

    A sweep session (`tokenreel sweep`) gets its own report: each pair's crossover in one line,
    the ratios per level with their intervals, each arm's levels; as md, json, or html (with its
    two charts); no csv, no --baseline.

    Examples:

    \b
      tokenreel report sessions/ladder.json
      tokenreel report sessions/ladder.json -o ladder.csv
      tokenreel report sessions/ladder.json --format json --baseline nvfp4
      tokenreel report sessions/ladder.json -o ladder.html   # one self-contained page: charts, replay
      tokenreel report sessions/ladder.json --exclude-host-contended
      tokenreel report graded.json --format accuracy-csv -o accuracy.csv
      tokenreel report sessions/ladder.json --arms bf16,nvfp4
      tokenreel report sessions/sweep.json -o sweep.html   # crossovers, ratio tables, both charts
    """
    from tokenreel.report import parse_report_format, render_report

    asked = report_format(fmt, out_path)
    session = load_session(session_path, sweep_ok=True)
    with user_errors():
        chosen = parse_report_format(asked)
    arm_ids = split_ids(arms)
    if session.kind == "sweep":
        text = _sweep_report(session_path, session, chosen, baseline, arm_ids)
    else:
        with user_errors():
            text = render_report(session, chosen, baseline, RunSelection(exclude_host_contended=exclude_host_contended), arm_ids)
    if out_path is None:
        sys.stdout.write(strip_controls(text))  # a report on a terminal: no escapes from session text
        return
    check_writable(out_path, force)
    with user_errors(out_path):
        write_atomic(out_path, text.encode("utf-8"))
    err.print(f"report written to {shown_path(out_path)}", markup=False)


def _sweep_report(path: Path, session: Session, fmt: ReportFormat, baseline: str | None, arms: list[str] | None) -> str:
    """A sweep's report (`report.sweep`) as json, markdown or html; csv, --baseline or --arms: one line and exit 2."""
    from tokenreel.report.sweep_data import sweep_json
    from tokenreel.report.sweep_html import sweep_html
    from tokenreel.report.sweep_markdown import sweep_markdown

    if fmt == "csv" or baseline is not None or arms is not None:
        fail(f"{shown_path(path)}: a sweep session (tokenreel sweep): its report is --format md, json or html, no"
             " --baseline or --arms (no csv for a sweep: its rows are in the json)")
    views: dict[ReportFormat, Callable[[Session], str]] = {"json": sweep_json, "md": sweep_markdown, "html": sweep_html}
    return views[fmt](session)
