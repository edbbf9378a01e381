"""`tokenreel render`: replay a session side by side as video (mp4, webm, gif, png)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tokenreel.base.safe_text import file_component, shown_path
from tokenreel.cli.app import app, check_writable, default_workers, err, fail, load_session, out, split_ids, user_errors
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
    from tokenreel.renderer.options import RenderOptions

# A GIF is for a README: about as wide as GitHub shows it, at a frame rate that keeps it small.
GIF_SIZE, GIF_FPS = "960x540", 15


def render_to(session_path: Path, out_file: Path, options: RenderOptions, workers: int, force: bool, quiet: bool = False) -> None:
    """Render with a progress bar, then say where the file and its manifest are (`quiet`: the
    caller says where the file is itself)."""
    from tokenreel.cli.progress import RenderBar
    from tokenreel.renderer.encode import EncodeError, OutputFormat
    from tokenreel.renderer.render import WorkerDied
    from tokenreel.renderer.render import render as render_video

    check_writable(out_file, force)
    try:
        bar = RenderBar(err, f"rendering {shown_path(out_file.name)}")
        with interruptible(f"rendering {shown_path(out_file)}"), user_errors(out_file), bar:
            result = render_video(session_path, out_file, options, workers, bar)
    except EncodeError as exc:
        fail(f"ffmpeg failed while writing {shown_path(out_file)}: {exc}", code=1)
    except WorkerDied as exc:
        fail(f"{shown_path(out_file)}: {exc}", code=1)
    for warning in result.warnings:
        err.print(f"warning: {warning}", markup=False)
    if quiet:
        return
    digest = f"sha256 {result.output_sha256[:16]}…"
    if result.format == OutputFormat.PNG:  # one still (the poster frame) of the video the manifest describes
        what = f"image: {shown_path(result.output)}  (one frame of the {result.frame_count}-frame video, {digest})"
    else:
        what = f"video: {shown_path(result.output)}  ({result.frame_count} frames, {digest})"
    out.print(what, markup=False)
    manifest = shown_path(result.manifest)
    out.print(f"manifest: {manifest}  (check it later with `tokenreel verify {manifest}`)", markup=False)


def _default_output(session_path: Path, prompt_id: str) -> Path:
    """out/<session-stem>-<prompt>.mp4, built from sanitised components: a prompt id comes from
    the session file, so anything but letters, digits, '.', '_' and '-' becomes '_', a leading
    '.' too, and the file must land directly in out/ (never elsewhere through '..' or '/')."""
    folder = Path("out")
    target = folder / f"{file_component(Path(session_path).stem)}-{file_component(prompt_id)}.mp4"
    if target.parent != folder or target.resolve().parent != folder.resolve():
        fail(f"--out: the default output {shown_path(target)} would leave {shown_path(folder)}/; pass --out FILE")
    return target


class _RenderCommand(Command):
    optional_values = ("--prompt",)  # a bare --prompt lists the session's prompt ids


@app.command(cls=_RenderCommand, short_help="Replay a session side by side as video (mp4, webm, gif, png).")
def render(
    session_path: Annotated[Path, typer.Argument(metavar="SESSION", help="A session file from `tokenreel record`.")],
    out_file: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", metavar="FILE",
            help="Output: .mp4 (H.264), .webm (VP9), .gif, or .png (poster).  "
            "[default: out/<session-stem>-<prompt>.mp4]",
        ),
    ] = None,
    prompt: Annotated[
        str | None,
        typer.Option(metavar="ID", help="Prompt id (default: the one whose speed-up is nearest the suite's; render names it);"
                     " a bare --prompt lists them."),
    ] = None,
    run: Run = "median",
    arms: Arms = None,
    fps: Annotated[
        int | None, typer.Option(metavar="N", help="Frames per second (1 to 240).  [default: 30; a .gif 15]")
    ] = None,
    size: Annotated[
        str | None,
        typer.Option(
            metavar="WxH",
            help="1920x1080 or 3840x2160 (16:9), 1080x1920 (9:16, arms stacked) or 1080x1080 (1:1, the feed format); "
            "up to 4K.  [default: 1920x1080; a .gif 960x540, for a README]",
        ),
    ] = None,
    speed: Speed = "1",
    theme: Annotated[
        str, typer.Option(metavar="NAME|PATH", help="Colour theme: dark, light, or a JSON theme file.")
    ] = "dark",
    title_s: TitleS = "1.5",
    title: Annotated[
        str | None, typer.Option(metavar="TEXT", help="Title card's title.  [default: the session name]")
    ] = None,
    subtitle: Annotated[
        str | None,
        typer.Option(metavar="TEXT", help="Title card's subtitle ('' for none).  [default: the prompt]"),
    ] = None,
    logo: Logo = None,
    hold: HoldS = "4",
    align: Align = None,
    metric: Metric = MetricValue.DECODE,
    at: Annotated[str | None, typer.Option(metavar="SECONDS", help="Poster time in seconds, for .png output.")] = None,
    workers: Workers = None,
    max_duration: MaxDuration = "1800",
    answer_badge: AnswerBadge = False,
    exclude_host_contended: ExcludeHostContended = False,
    force: Annotated[bool, typer.Option(help="Overwrite --out if it exists.")] = False,
) -> None:
    """Replay a session side by side at real speed into a video, deterministically.

    One prompt, one run per arm: 2 to 4 arms, side by side at 1920x1080 or 3840x2160 (or
    1080x1080, square), or stacked at 1080x1920 for a vertical video (any even 16:9, 9:16 or
    1:1 size up to 4K, as long as every figure fits; other sizes are refused). Every speed-up
    is in one metric (--metric) and appears once both arms it compares are done; the end card
    gives this answer's figure and the suite's. The --out extension picks the format; without --out the video is

    \b
      out/<session-stem>-<prompt>.mp4   (e.g. out/ladder-code-1.mp4)

    Each frame is a pure function of its index, computed from the archived token arrival
    times, so the same session and options give the same file byte for byte on any machine
    of the same platform. A FILE.render.json manifest is written next to the output.

    Examples (the first renders the prompt nearest the suite's speed-up, every arm; the second
    lists the prompt ids):

    \b
      tokenreel render sessions/ladder.json
      tokenreel render sessions/ladder.json --prompt
      tokenreel render sessions/ladder.json --prompt code-1 --arms bf16,nvfp4
      tokenreel render sessions/ladder.json --size 1080x1920 -o out/vertical.mp4
      tokenreel render sessions/ladder.json --metric e2e   # end-to-end speed-ups
      tokenreel render sessions/ladder.json -o out/readme.gif   # 960x540, 15 fps
      tokenreel render sessions/ladder.json --at 5 -o poster.png
      tokenreel render sessions/ladder.json --answer-badge   # same answer as the first arm?
      tokenreel render sessions/ladder.json --title "bf16 vs NVFP4" --logo logo.png --theme my.json
    """
    from tokenreel.renderer.options import RenderOptions, pin_files
    from tokenreel.renderer.render_plan import default_prompt

    session = load_session(session_path)
    prompt_ids = [p.id for p in session.prompts]
    if not prompt_ids:
        fail(f"{shown_path(session_path)}: the session has no prompts; nothing to render")
    if prompt is not None and prompt not in prompt_ids:
        unknown = f"no prompt {prompt!r} in the session; " if prompt else ""
        fail(f"--prompt: {unknown}choose one of {', '.join(prompt_ids)} (session {shown_path(session_path)})")
    arm_ids = split_ids(arms)
    if prompt is None:  # the prompt nearest the suite's speed-up, said in one line
        with user_errors():
            prompt, why = default_prompt(session, RenderOptions(arms=tuple(arm_ids or ()), metric=metric,
                                                                 exclude_host_contended=exclude_host_contended))
        if why:
            out.print(why, markup=False)
    target = out_file or _default_output(session_path, prompt)
    gif = target.suffix.lower() == ".gif"
    options = RenderOptions(
        prompt=prompt, run=run, arms=tuple(arm_ids or ()), speed=speed,
        fps=fps if fps is not None else (GIF_FPS if gif else 30),
        size=size if size is not None else (GIF_SIZE if gif else "1920x1080"),
        theme=theme, title_s=title_s, hold_s=hold, at=at, align=align, metric=metric,
        title=title, subtitle=subtitle, logo=None if logo is None else str(logo), max_duration_s=max_duration,
        answer_badge=answer_badge, exclude_host_contended=exclude_host_contended,
    )
    with user_errors():
        options = pin_files(options)
    render_to(session_path, target, options, workers or default_workers(), force)
