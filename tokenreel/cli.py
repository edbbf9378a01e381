"""The `tokenreel` command: record, report, render, verify, simulate, demo.

Every command turns bad input into one line on stderr naming the file, field or endpoint,
and exits with code 2; never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console

from tokenreel import __version__, archive
from tokenreel.archive import ArchiveError, Session

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Measure serving configurations one arm at a time, report the ladder, replay it as video.",
)
out = Console(highlight=False)
err = Console(stderr=True, highlight=False)
EXIT_BAD_INPUT = 2

if TYPE_CHECKING:
    from recorder.config import Config


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """One clear line, then exit (2 for bad input)."""
    err.print(f"tokenreel: {message}", markup=False, soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the project's input errors into one line and exit code 2."""
    try:
        yield
    except (ArchiveError, ValueError, FileExistsError, FileNotFoundError) as exc:
        fail(str(exc))


def load_session(path: Path) -> Session:
    with user_errors():
        return archive.load(path)


def check_writable(path: Path, force: bool) -> None:
    """Output files are never overwritten without --force."""
    if path.exists() and not force:
        fail(f"{path} already exists; pass --force to overwrite it or choose another --out")


def split_ids(value: str | None) -> list[str] | None:
    if value is None:
        return None
    ids = [part.strip() for part in value.split(",") if part.strip()]
    if not ids:
        fail("--arms: give at least one arm id, e.g. --arms bf16,nvfp4")
    return ids


def version_callback(value: bool) -> None:
    if value:
        out.print(f"tokenreel {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=version_callback, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """tokenreel: how much faster did that change make our model, and the video that shows it."""


@app.command()
def report(
    session_path: Annotated[Path, typer.Argument(metavar="SESSION", help="A session file from `tokenreel record`.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="md (tables like the seeds'), json or csv.")] = "md",
    baseline: Annotated[
        str | None, typer.Option(help="Arm that 'vs first' is relative to (default: the first arm).")
    ] = None,
    out_path: Annotated[Path | None, typer.Option("--out", "-o", help="Write to this file instead of stdout.")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite --out if it exists.")] = False,
) -> None:
    """The ladder (each arm vs the prior arm vs the first), per category, and every cell."""
    from tokenreel.report import render_report

    session = load_session(session_path)
    with user_errors():
        text = render_report(session, fmt, baseline)
    if out_path is None:
        sys.stdout.write(text)
        return
    check_writable(out_path, force)
    out_path.write_text(text, encoding="utf-8")
    err.print(f"report written to {out_path}")


def _record_into(session: Session, path: Path, arm_ids: list[str] | None, fail_fast: bool) -> int:
    """Record with the live display; returns the exit code (1 when a run failed or was skipped)."""
    import asyncio

    from recorder.runner import record as record_session
    from tokenreel.console import RecordDisplay, summary_tables

    with user_errors(), RecordDisplay(err) as display:
        result = asyncio.run(record_session(session, path, arm_ids, display, fail_fast))
    for table in summary_tables(session):
        out.print(table)
    out.print(
        f"session: {path}  ({result.ok} runs recorded, {result.already_ok} already done, "
        f"{result.failed} failed, {result.skipped} skipped)"
    )
    if result.interrupted:
        err.print("interrupted: every completed run is saved; continue with `tokenreel record --resume`")
        return 130
    if result.failed or result.skipped:
        err.print("some runs failed or were skipped (lines above); `tokenreel record --resume` retries them")
        return 1
    return 0


@app.command()
def record(
    config: Annotated[Path, typer.Option("--config", "-c", help="TOML config: [session] and [[arms]].")],
    out_path: Annotated[
        Path | None, typer.Option("--out", "-o", help="Session file (default: sessions/<name>.json).")
    ] = None,
    arms: Annotated[
        str | None, typer.Option(help="Record only these arm ids (comma-separated) into the session.")
    ] = None,
    repeats: Annotated[int | None, typer.Option(min=1, help="Measured runs per prompt (config: repeats).")] = None,
    warmup: Annotated[int | None, typer.Option(min=0, help="Discarded warmup runs per prompt (config: warmup).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue an interrupted session: redo only what is not ok yet.")] = False,
    fail_fast: Annotated[bool, typer.Option(help="Stop at the first failed run.")] = False,
    force: Annotated[bool, typer.Option(help="Start over even if the session file exists.")] = False,
) -> None:
    """Record each arm alone, one request at a time, into a self-contained session file.

    Arms run in config order; before every run the endpoint must be idle. A warmup run is
    discarded, then --repeats measured runs per prompt. The session is saved after every run,
    so an interrupted recording loses nothing: rerun with --resume. With one GPU, record arm by
    arm with --arms (swap the served model in between); the session keeps when each arm ran.
    """
    from recorder.config import load_config
    from recorder.runner import new_session, select_arms

    with user_errors():
        cfg = load_config(config)
    if repeats is not None:
        cfg.settings.repeats = repeats
    if warmup is not None:
        cfg.settings.warmup = warmup
    path = out_path or Path("sessions") / f"{cfg.name}.json"
    arm_ids = split_ids(arms)
    if path.exists() and not force:
        if not (resume or arm_ids):
            fail(f"{path} already exists; use --resume to continue it, --arms to add arms, or --force to start over")
        session = load_session(path)
        _merge_config(session, cfg, path)
    else:
        session = new_session(cfg.name, cfg.settings, cfg.prompts, cfg.arms)
    with user_errors():
        select_arms(session, arm_ids)
    raise typer.Exit(_record_into(session, path, arm_ids, fail_fast))


def _merge_config(session: Session, cfg: Config, path: Path) -> None:
    """Resuming or adding arms: the archived prompts and settings stay; new arms are appended."""
    if [p.id for p in session.prompts] != [p.id for p in cfg.prompts]:
        fail(f"{path}: its prompts differ from the config's suite; record into a new --out instead")
    if (cfg.settings.max_tokens, cfg.settings.ignore_eos) != (session.settings.max_tokens, session.settings.ignore_eos):
        fail(f"{path}: max_tokens/ignore_eos differ from the config; runs would not be like-for-like, use a new --out")
    session.settings.repeats = max(session.settings.repeats, cfg.settings.repeats)
    known = {arm.id: arm for arm in session.arms}
    for arm in cfg.arms:
        if arm.id in known:
            archived = known[arm.id]
            arm.fingerprint, arm.recorded = archived.fingerprint, archived.recorded
            session.arms[session.arms.index(archived)] = arm
        else:
            session.arms.append(arm)


@app.command()
def simulate(
    profiles: Annotated[
        str, typer.Option(help="Profiles to serve, comma-separated, one port each (bf16, nvfp4, nvfp4-dflash2).")
    ] = "bf16,nvfp4,nvfp4-dflash2",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port of the first profile; the next get +1, +2...")] = 8100,
    host: Annotated[str, typer.Option(help="Address to listen on (loopback unless you mean otherwise).")] = "127.0.0.1",
    time_scale: Annotated[float, typer.Option(min=0.0001, help="Multiply every delay (0.1 = ten times faster).")] = 1.0,
    fault: Annotated[
        list[str] | None,
        typer.Option(help="PROFILE=MODE, e.g. nvfp4=429 (modes: refuse 401 404 429 500 error_event drop stall malformed no_done early_stop busy)."),
    ] = None,
) -> None:
    """Serve vLLM-like OpenAI endpoints that imitate the seed ladder, without a GPU."""
    import asyncio
    import dataclasses

    from recorder.sim_profiles import FAULTS, profile_by_id
    from recorder.simulate import serve_forever

    chosen = []
    with user_errors():
        faults = dict(_split_fault(item, FAULTS) for item in fault or [])
        for profile_id in split_ids(profiles) or []:
            try:
                profile = profile_by_id(profile_id)
            except KeyError as exc:
                raise ValueError(f"--profiles: {exc.args[0]}") from None
            chosen.append(dataclasses.replace(profile, fault=faults.get(profile_id, profile.fault)))
    for i, profile in enumerate(chosen):
        out.print(f"{profile.id:<16} http://{host}:{port + i}/v1   model {profile.model}   {profile.label}")
    out.print("Ctrl-C stops. Point a config's base_url at these to record them.")
    try:
        asyncio.run(serve_forever(chosen, host, port, time_scale))
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}..: {exc.strerror}; choose another --port")
    except KeyboardInterrupt:
        pass


def _split_fault(item: str, known: tuple[str, ...]) -> tuple[str, str]:
    profile_id, _, mode = item.partition("=")
    if mode not in known:
        raise ValueError(f"--fault {item!r}: expected PROFILE=MODE with MODE one of {', '.join(known)}")
    return profile_id, mode
