"""`tokenreel render-all`: every prompt of sessions in every layout and theme, with an index page."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tokenreel.base.files import write_atomic
from tokenreel.base.safe_text import shown_path
from tokenreel.cli.app import app, default_workers, err, fail, load_session, out, split_ids, user_errors
from tokenreel.cli.ray_cluster import RAY_HELP, ray_cluster
from tokenreel.cli.render_options import (
    Align,
    AnswerBadge,
    Arms,
    ExcludeHostContended,
    HoldS,
    Logo,
    MaxDuration,
    Metric,
    Run,
    Speed,
    TitleS,
    Workers,
)
from tokenreel.cli.render_signals import interruptible
from tokenreel.cli.terminal import Command
from tokenreel.renderer.options import Metric as MetricValue

if TYPE_CHECKING:
    from tokenreel.renderer.catalogue.run_jobs import StoppableChunks


def _names(value: str, option: str, example: str) -> list[str]:
    """A comma-separated list of at least one name."""
    names = [part.strip() for part in value.split(",") if part.strip()]
    if not names:
        fail(f"{option}: give at least one, e.g. {option} {example}")
    return names


@app.command(name="render-all", cls=Command, short_help="Render every prompt in every layout and theme, with an index page.")
def render_all(
    sessions: Annotated[list[Path], typer.Argument(metavar="SESSION...", help="Session files from `tokenreel record`.")],
    out_dir: Annotated[
        Path, typer.Option("--out", "-o", metavar="DIR", help="The catalogue's folder (made if missing).")
    ],
    layouts: Annotated[
        str,
        typer.Option(
            metavar="L1,L2", help="16:9 (1920x1080), 9:16 (1080x1920, arms stacked), 1:1 (1080x1080), 4k (3840x2160), "
            "or sizes as `render --size` takes them.",
        ),
    ] = "16:9,9:16,4k",
    themes: Annotated[str, typer.Option(metavar="T1,T2", help="Colour themes: dark, light, or JSON theme files.")] = "dark,light",
    prompts: Annotated[
        str, typer.Option(metavar="all|ID,ID", help="Prompt ids, in every session given; all: each session's prompts.")
    ] = "all",
    run: Run = "median",
    arms: Arms = None,
    fps: Annotated[int, typer.Option(metavar="N", help="Frames per second (1 to 240).")] = 30,
    speed: Speed = "1",
    title_s: TitleS = "1.5",
    logo: Logo = None,
    hold: HoldS = "4",
    align: Align = None,
    metric: Metric = MetricValue.DECODE,
    workers: Workers = None,
    max_duration: MaxDuration = "1800",
    answer_badge: AnswerBadge = False,
    exclude_host_contended: ExcludeHostContended = False,
    force: Annotated[bool, typer.Option(help="Render every video again, even one already finished.")] = False,
    ray: Annotated[
        str | None, typer.Option("--ray", metavar="ADDRESS|local", help=RAY_HELP),
    ] = None,
) -> None:
    """Render a catalogue: every prompt of each session in every layout and theme, as mp4.

    Each video is what `tokenreel render` writes for the same options, byte for byte, with its
    manifest and a poster (the end card's first frame, as `render -o X.png` writes it):

    \b
      DIR/<session-stem>/<prompt>-<layout>-<theme>.mp4   (+ .mp4.render.json)
      DIR/<session-stem>/<prompt>-<layout>-<theme>.png   (+ .png.render.json)
      DIR/index.html   every video with its poster, by session and prompt

    Resumable: a video whose file and manifest are already those of its options (same session,
    options and versions) is kept, not rendered again (--force renders it anyway); an
    interrupted catalogue leaves no half-written file. A video that cannot be rendered (an arm
    with no usable run of that prompt) is reported and the others go on. One line per video at
    the end; exit 0 when every video is there, 1 when one failed, 2 for bad input (an unknown
    layout, theme, prompt or arm, a missing session). `tokenreel verify DIR` re-renders them all.

    Examples:

    \b
      tokenreel render-all sessions/ladder.json --out out/catalogue
      tokenreel render-all sessions/*.json --layouts 16:9,1:1 --themes dark --prompts code-1 -o out/cat
      tokenreel render-all sessions/ladder.json --out out/catalogue --ray 10.0.0.1:6379
      tokenreel verify out/catalogue

    With --ray each video's chunks (the same fixed frame boundaries as local workers) run as Ray
    tasks across the cluster, several videos at once to keep its CPUs busy; the bytes are those
    of a local render. tokenreel[ray] must be installed at the same version on every node.
    """
    from tokenreel.cli.progress import RenderBar
    from tokenreel.renderer.catalogue.index_page import INDEX, index_page
    from tokenreel.renderer.catalogue.jobs import catalogue
    from tokenreel.renderer.catalogue.jobs import layouts as parse_layouts
    from tokenreel.renderer.catalogue.run_jobs import FAILED, KEPT, RENDERED, render_catalogue
    from tokenreel.renderer.options import RenderOptions

    for path in sessions:
        load_session(path)  # a missing file or a sweep: one line, exit 2, as `render` says it
    chosen = None if prompts.strip() == "all" else _names(prompts, "--prompts", "code-1,prose-1")
    base = RenderOptions(
        run=run, arms=tuple(split_ids(arms) or ()), fps=fps, speed=speed, title_s=title_s, hold_s=hold,
        align=align, metric=metric, logo=None if logo is None else str(logo), max_duration_s=max_duration,
        answer_badge=answer_badge, exclude_host_contended=exclude_host_contended,
    )
    with user_errors(out_dir):
        jobs = catalogue(
            sessions, out_dir, base, parse_layouts(_names(layouts, "--layouts", "16:9,9:16")),
            _names(themes, "--themes", "dark,light"), chosen,
        )
        out_dir.mkdir(parents=True, exist_ok=True)
    with ray_cluster(ray) if ray is not None else nullcontext():
        chunks: StoppableChunks | None = None
        cpus: int | None = None
        if ray is not None:
            from tokenreel.renderer.ray_chunks import cluster_cpus, run_chunks
            chunks, cpus = run_chunks, cluster_cpus()  # several videos at once, as many as fill the cluster with chunks
        with interruptible(f"rendering the catalogue in {shown_path(out_dir)}", "every finished video is kept: run it again to go on"), \
                user_errors(out_dir), RenderBar(err, "catalogue") as bar:
            outcomes = render_catalogue(jobs, workers or default_workers(), bar, force, chunks, cpus)
    index = out_dir / INDEX
    with user_errors(index):
        write_atomic(index, index_page(outcomes, out_dir))
    for warning in dict.fromkeys(w for outcome in outcomes for w in outcome.warnings):
        err.print(f"warning: {warning}", markup=False, soft_wrap=True)
    for outcome in outcomes:
        what = f"{outcome.status}: {shown_path(outcome.job.video)}" + (f": {outcome.reason}" if outcome.reason else "")
        (err if outcome.status == FAILED else out).print(what, markup=False, soft_wrap=True)
    counts = {status: sum(o.status == status for o in outcomes) for status in (RENDERED, KEPT, FAILED)}
    summary = ", ".join(f"{count} {status}" for status, count in counts.items())
    videos = f"{len(outcomes)} video" + ("" if len(outcomes) == 1 else "s")
    out.print(f"index: {shown_path(index)}  ({videos}: {summary})", markup=False)
    raise typer.Exit(1 if counts[FAILED] else 0)
