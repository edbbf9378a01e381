"""`tokenreel plot`: the session's charts as PNG and SVG (a ladder's four, or a sweep's two)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tokenreel.analysis.selection import RunSelection
from tokenreel.base.safe_text import shown_path
from tokenreel.cli.app import EXCLUDE_HOST_HELP, app, fail, load_session, out, user_errors
from tokenreel.cli.terminal import Command


@app.command(cls=Command, short_help="Charts as PNG and SVG: the ladder, per category, the race, token latency; a sweep's.")
def plot(
    session_path: Annotated[Path, typer.Argument(metavar="SESSION", help="A session file from `tokenreel record` or `tokenreel sweep`.")],
    out_dir: Annotated[
        Path, typer.Option("--out", "-o", metavar="DIR", help="Folder for the chart files (made if missing).")
    ],
    fmt: Annotated[
        str, typer.Option("--format", "-f", metavar="png,svg", help="png, svg, or both comma-separated.")
    ] = "png,svg",
    prompt: Annotated[
        str | None,
        typer.Option(metavar="ID", help="Draw the race for this prompt only (default: every prompt, a file each)."),
    ] = None,
    theme: Annotated[
        str, typer.Option(metavar="NAME|PATH", help="Colour theme, the video's: dark, light, or a JSON theme file.")
    ] = "dark",
    force: Annotated[bool, typer.Option(help="Overwrite chart files that exist in DIR.")] = False,
    exclude_host_contended: Annotated[bool, typer.Option(help=EXCLUDE_HOST_HELP)] = False,
) -> None:
    """Draw the session's charts into DIR, each as PNG (1280x720) and SVG; prints the paths.

    \b
      ladder       decode tok/s per arm, each with its speed-up vs the prior and the first arm
      categories   per prompt category, each arm's decode speed-up over the first arm
      race-ID      one prompt: cumulative tokens vs seconds from send, each arm's median run,
                   TTFT marked (one file per prompt; a prompt id is made safe for a file name)
      itl          inter-token latency per arm, per token (a chunk of k tokens: one gap,
                   then k-1 zeros), as the share of tokens that waited at most x ms

    A sweep session (`tokenreel sweep`) gets its own two instead (no --prompt; every run counts):

    \b
      sweep-speedup     per pair of adjacent arms, the speed-up per request vs concurrency,
                        its 95 % interval as a band, the aggregate ratio dashed, the crossover
                        (and where the engine stopped drafting) marked
      sweep-throughput  per arm, aggregate output tok/s vs per-request decode tok/s, a point
                        per level; levels that failed or were skipped are left out, with a note

    The figures are the report's (same rounding), colours the video's theme (arm i in the
    theme's i-th accent). The same session gives the same bytes. A figure that is missing is
    drawn as "no data: <why>". Existing files are not overwritten without --force.

    Examples:

    \b
      tokenreel plot sessions/ladder.json --out out/charts
      tokenreel plot sessions/ladder.json --out out/charts --format svg --prompt code-1 --theme light
      tokenreel plot sessions/sweep.json --out out/sweep-charts
    """
    from tokenreel.report.charts import parse_chart_formats, write_charts

    session = load_session(session_path, sweep_ok=True)
    if session.kind == "sweep" and (prompt is not None or exclude_host_contended):
        fail(f"{shown_path(session_path)}: a sweep session: its charts take no --prompt or --exclude-host-contended")
    prompt_ids = [p.id for p in session.prompts]
    if prompt is not None and prompt not in prompt_ids:
        fail(f"--prompt: no prompt {prompt!r} in the session; choose one of {', '.join(prompt_ids)} (session {shown_path(session_path)})")
    with user_errors():
        formats = parse_chart_formats(fmt)
    with user_errors(out_dir):
        paths = write_charts(session, out_dir, formats, None if prompt is None else [prompt], theme, force,
                             RunSelection(exclude_host_contended=exclude_host_contended))
    for path in paths:
        out.print(shown_path(path), markup=False, soft_wrap=True)
