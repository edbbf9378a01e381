"""`tokenreel compare A B`: did re-recording give the same numbers? Exit 0 yes, 1 no, 3 can't tell yet."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated

import typer

from tokenreel.base.files import write_atomic
from tokenreel.base.safe_text import shown_path, strip_controls
from tokenreel.cli.app import app, check_writable, err, fail, load_session, report_format, user_errors
from tokenreel.cli.terminal import Command


@app.command(cls=Command, short_help="Did re-recording give the same numbers? Two sessions, cell by cell.")
def compare(
    a_path: Annotated[Path, typer.Argument(metavar="A", help="The reference session file.")],
    b_path: Annotated[Path, typer.Argument(metavar="B", help="The session to check against A (e.g. a re-recording).")],
    tolerance: Annotated[
        str, typer.Option(metavar="PERCENT", help="The band of \"same\": a difference whose 95 % interval lies within ±PERCENT.")
    ] = "2",
    fmt: Annotated[
        str | None,
        typer.Option("--format", "-f", metavar="md|json|csv", help="Wins over the --out extension (default: that, else md)."),
    ] = None,
    out_path: Annotated[
        Path | None,
        typer.Option("--out", "-o", metavar="FILE", help="Write to FILE (.md, .json or .csv) instead of stdout."),
    ] = None,
    force: Annotated[bool, typer.Option(help="Overwrite --out if it exists.")] = False,
) -> None:
    """Compare two sessions of the same ladder: each difference, its 95 % interval and a verdict.

    Arms are matched by id, prompts by id. Every matched cell shows decode tok/s, TTFT, TPOT
    and end-to-end tok/s of both, the difference (B - A) / A in %, and whether it lies within
    the runs' spread. Each decode tok/s difference gets a 95 % interval and a verdict: "same"
    when the interval lies inside ±--tolerance %, "faster" or "slower" when it lies wholly
    outside on that side, else "can't tell yet" with about how many more prompts (ladder) or
    runs (cell) would settle it. Ladder rows (each arm's mean, B / A) and ladder ratios (each
    arm vs the first and vs the prior arm, B's over A's) are judged over prompts, a cell over
    its runs. With too few prompts for that (fewer than 6, or one in a category), the ladder
    rows and ratios are judged from the runs, each arm's scatter pooled over its cells, and
    say so ("from 3 runs a cell, 4 prompts"); a session against a copy of itself is "same".

    Before the tables, for each ladder row or ratio that differs, one line per cause says what
    moved with it: the tokens (counts, answers), the acceptance, the engine's own timing, the
    TTFT, the gates' flags, and the recording facts that differ (kernel, CPU, GPU, driver,
    clocks, power limit, engine build).

    The ladder rows and ratios gate; cells are shown, not gated (a cell's runs miss how it
    moves between sessions). Exit codes:

    \b
      0  reproduced: every ladder row and ratio is "same"
      1  not reproduced: one is "faster" or "slower", or an arm, a prompt or a
         cell is in one session only (listed)
      2  bad input (an unreadable session, a bad option)
      3  can't tell yet: none differs, but one or more can't tell yet

    The format rule is report's.

    Examples:

    \b
      tokenreel compare sessions/ladder.json sessions/ladder-rerun.json
      tokenreel compare sessions/ladder.json sessions/ladder-rerun.json --tolerance 1 -o compare.csv
    """
    from tokenreel.analysis.causes import explain
    from tokenreel.analysis.comparison import EXIT_CODES, compare_sessions
    from tokenreel.report.compare import parse_compare_format, render_comparison, summary_line

    try:
        tolerance_pct = float(tolerance)
    except ValueError:
        tolerance_pct = math.nan
    if not math.isfinite(tolerance_pct) or tolerance_pct < 0:
        fail(f"--tolerance {tolerance}: give a percentage of 0 or more, e.g. --tolerance 2")
    asked = report_format(fmt, out_path)
    session_a, session_b = load_session(a_path), load_session(b_path)
    comparison = compare_sessions(session_a, session_b, tolerance_pct, (str(a_path), str(b_path)))
    with user_errors():
        text = render_comparison(comparison, parse_compare_format(asked), explain(session_a, session_b, comparison))
    if out_path is None:
        sys.stdout.write(strip_controls(text))
    else:
        check_writable(out_path, force)
        with user_errors(out_path):
            write_atomic(out_path, text.encode("utf-8"))
        err.print(f"comparison written to {shown_path(out_path)}", markup=False)
    err.print(strip_controls(summary_line(comparison)), markup=False, soft_wrap=True)
    raise typer.Exit(EXIT_CODES[comparison.outcome])
