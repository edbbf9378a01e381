"""`tokenreel plan`: how many prompts and hours a target interval needs, from a pilot session."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tokenreel.cli.app import app, load_session, out, user_errors
from tokenreel.cli.terminal import Command
from tokenreel.session.model import MAX_RUNS, Session


def print_plan(session: Session, target: float, suite_size: int | None) -> None:
    """The plan as one table and its notes (shared with `record --check --target-ci`)."""
    from tokenreel.analysis.figures import figure
    from tokenreel.analysis.intervals import STOP_LEVEL
    from tokenreel.analysis.planning import plan  # lazy: scipy and numpy load only when a plan is made

    plans = plan(session, target, suite_size)
    suite = suite_size or len(session.prompts)
    table = Table(title=f"Prompts for ±{100 * target:g} % (95 %), from {len(session.prompts)}-prompt pilot {session.name!r}",
                  title_justify="left")
    for column in ("Ratio", "Pilot's interval", "One look", "--target-ci stops at", "Per category", "Recording"):
        table.add_column(column)
    for p in plans:
        hours = _duration(p.hours)
        table.add_row(
            p.name, f"±{figure(100 * p.half_width, 1)} %" if p.half_width is not None else "none",
            str(p.fixed_prompts or "—"), str(p.sequential_prompts or "—"),
            ", ".join(f"{c} {n}" for c, n in p.per_category.items()) or "—", hours,
        )
    out.print(table)
    out.print(f"Out of a suite of {suite} prompts. One look: a fixed number chosen now; --target-ci looks as it goes"
              f" (its intervals, at {100 * STOP_LEVEL:g} %, are a little wider), so it stops at one of its planned looks.",
              markup=False, soft_wrap=True)
    for p in plans:
        if p.note:
            out.print(f"{p.name}: {p.note}", markup=False, soft_wrap=True)


def _duration(hours: float | None) -> str:
    """'42 min' under an hour, '3.4 h' above; '—' when the pilot has no run times."""
    if hours is None:
        return "—"
    return f"{max(1, round(60 * hours))} min" if hours < 1 else f"{hours:.1f} h"


@app.command(cls=Command, short_help="How many prompts a target interval needs, from a pilot session.")
def plan(
    session_path: Annotated[Path, typer.Argument(metavar="SESSION", help="A pilot session (a few prompts per category).")],
    target_ci: Annotated[str, typer.Option("--target-ci", metavar="PCT", help="The half-width to aim at, e.g. 2%.")],
    suite_size: Annotated[
        int | None, typer.Option(min=1, max=MAX_RUNS, help="Prompts in the suite to draw from (default: the pilot's suite).")
    ] = None,
) -> None:
    """Estimate, from a pilot session, how many prompts each ladder ratio needs for a 95 %
    interval within +-PCT, per category, and how long recording them takes at the pilot's speeds.

    "One look" is a fixed number of prompts chosen now; "--target-ci stops at" is the look at
    which `record --target-ci PCT` would likely stop (it takes its intervals at 96.5 %, so they
    are a little wider). A pilot of a few prompts per category gives a rough
    estimate; record --target-ci decides as it goes.

    Example:

    \b
      tokenreel record --config ladder.toml --target-ci 2% --max-prompts 12 --out pilot.json
      tokenreel plan pilot.json --target-ci 2% --suite-size 880
    """
    from tokenreel.cli.values import percent

    with user_errors():
        target = percent(target_ci)
    print_plan(load_session(session_path), target, suite_size)
