"""`tokenreel compare A B`: did re-recording give the same numbers? Exit 0 yes, 1 no."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated

import typer

from tokenreel.cli.app import app, check_writable, err, fail, load_session, report_format, user_errors
from tokenreel.cli.terminal import Command
from tokenreel.files import write_atomic
from tokenreel.safe_text import shown_path, strip_controls


@app.command(cls=Command, short_help="Did re-recording give the same numbers? Two sessions, cell by cell.")
def compare(
    a_path: Annotated[Path, typer.Argument(metavar="A", help="The reference session file.")],
    b_path: Annotated[Path, typer.Argument(metavar="B", help="The session to check against A (e.g. a re-recording).")],
    tolerance: Annotated[
        str, typer.Option(metavar="PERCENT", help="Largest |B - A| / A of a cell's decode tok/s that still reproduces.")
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
    """Compare two sessions of the same ladder: per arm and cell, both figures and the difference.

    Arms are matched by id, prompts by id. Every matched cell shows decode tok/s, TTFT, TPOT
    and end-to-end tok/s of both, the difference (B - A) / A in %, and whether it lies within
    the runs' spread: |B - A| <= the larger of the two cells' spreads (max - min of that figure
    over the cell's usable runs). The ladder rows (mean decode tok/s, speed-up vs the first
    arm) are compared too.

    Decode tok/s gates (the ladder's headline; TPOT is 1000 / decode and TTFT is too short for a
    relative tolerance): exit 0 when every matched cell's decode tok/s is within --tolerance %;
    1 when one is not, or when anything could not be matched (an arm or prompt in one session
    only, a prompt whose text changed, a cell without a usable run on one side: all listed);
    2 for bad input. The format rule is report's.

    Examples:

    \b
      tokenreel compare sessions/ladder.json sessions/ladder-rerun.json
      tokenreel compare sessions/ladder.json sessions/ladder-rerun.json --tolerance 1 -o compare.csv
    """
    from tokenreel.comparison import compare_sessions
    from tokenreel.report.compare import render_comparison, summary_line

    try:
        tolerance_pct = float(tolerance)
    except ValueError:
        tolerance_pct = math.nan
    if not math.isfinite(tolerance_pct) or tolerance_pct < 0:
        fail(f"--tolerance {tolerance}: give a percentage of 0 or more, e.g. --tolerance 2")
    fmt = report_format(fmt, out_path)
    comparison = compare_sessions(
        load_session(a_path), load_session(b_path), tolerance_pct, (str(a_path), str(b_path))
    )
    with user_errors():
        text = render_comparison(comparison, fmt)
    if out_path is None:
        sys.stdout.write(strip_controls(text))
    else:
        check_writable(out_path, force)
        with user_errors(out_path):
            write_atomic(out_path, text.encode("utf-8"))
        err.print(f"comparison written to {shown_path(out_path)}", markup=False)
    err.print(strip_controls(summary_line(comparison)), markup=False, soft_wrap=True)
    raise typer.Exit(0 if comparison.reproduced else 1)
