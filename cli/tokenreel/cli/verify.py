"""`tokenreel verify`: re-render from render manifests and compare, byte for byte."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tokenreel.base.safe_text import shown_path
from tokenreel.cli.app import app, default_workers, err, out, user_errors
from tokenreel.cli.render_signals import interruptible
from tokenreel.cli.terminal import Command


@app.command(cls=Command, short_help="Re-render from render manifests (or folders of them) and compare.")
def verify(
    manifests: Annotated[
        list[Path], typer.Argument(metavar="PATH...", help="FILE.render.json manifests, or folders of them.")
    ],
    workers: Annotated[int | None, typer.Option(min=1, help="Worker processes for the re-render.")] = None,
    require_output: Annotated[
        bool, typer.Option(help="An output not on disk is a difference (exit 1), not checked against the manifest only."),
    ] = False,
) -> None:
    """Re-render what each manifest describes and compare, frame by frame and byte by byte.

    Besides the re-render, the manifest itself is checked (its seal: an edited field is a
    difference) and the output it names must be a regular file with the recorded hash; an
    output not on disk at all is compared through the manifest's hashes only, and the line says
    "not on disk" (--require-output: a difference).

    A folder stands for every *.render.json under it. Exit 0 when every output is identical;
    1 when one differs (the first differing frame is named, and whether the frames differ or
    only the encoding does); 2 when one could not be re-rendered (the reason is named: a missing
    session, a broken installation...), since that proves nothing either way.

    Examples:

    \b
      tokenreel verify out/ladder-code-1.mp4.render.json
      tokenreel verify out/ --workers 8
    """
    from tokenreel.cli.progress import RenderBar
    from tokenreel.renderer.verify import find_manifests, overall_exit_code, verify_one

    with user_errors():
        paths = find_manifests(manifests)
    results = []
    for path in paths:
        with interruptible(f"verifying {shown_path(path)}", "not verified"), RenderBar(err, f"verifying {shown_path(path.name)}") as bar:
            result = verify_one(path, workers or default_workers(), bar, require_output)
        mark = {0: "ok", 1: "DIFFERS"}.get(result.exit_code, "UNVERIFIED")
        (out if result.ok else err).print(f"{mark}: {shown_path(path)}: {result.message}", markup=False, soft_wrap=True)
        results.append(result)
    raise typer.Exit(overall_exit_code(results))
