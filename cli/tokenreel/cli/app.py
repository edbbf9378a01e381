"""The `tokenreel` command's shared floor: the typer app, its consoles, and the one-line errors.

Every command turns bad input into one line on stderr naming the file, field or endpoint, and
exits with code 2; never a traceback. Each command lives in its own module of this package
(init, record, report, compare, plot, render, verify, simulate, demo, prompts) and imports what it drives when
it runs, so `tokenreel --help` starts fast.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from tokenreel.base import files
from tokenreel.base.safe_text import shown_path
from tokenreel.base.version import __version__
from tokenreel.cli.terminal import CliConsole, Group
from tokenreel.session import archive
from tokenreel.session.model import ArchiveError, Session

# Help pages use click's plain formatting: a paragraph after a line holding only "\b" keeps its
# line breaks, so examples stay one command a line.
app = typer.Typer(
    cls=Group,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="""Measure serving configurations one arm at a time, report the ladder, replay it as video.

Example (simulated endpoints, no GPU; `tokenreel demo` does all of it at once):

\b
  tokenreel simulate &
  tokenreel record --config builtin:simulated-ladder
  tokenreel report sessions/simulated-ladder.json -o ladder.md
  tokenreel plot sessions/simulated-ladder.json --out out/charts
  tokenreel render sessions/simulated-ladder.json --prompt code-1
  tokenreel verify out/

`tokenreel COMMAND --help` explains each command, with an example.""",
)


# To a terminal, output fits its width; to a pipe or a CI log, no line is ever wrapped.
out = CliConsole(highlight=False)


err = CliConsole(stderr=True, highlight=False)


EXIT_BAD_INPUT = 2


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """One clear line, then exit (2 for bad input)."""
    err.print(f"tokenreel: {message}", markup=False, soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def user_errors(output: Path | None = None, when_full: str = "") -> Iterator[None]:
    """Turn the project's input errors, and every error the operating system raises (no
    permission, a read-only or full disk, a folder where a file goes...), into one line and
    exit code 2 (`_os_error_line`). `output` is what the block writes: the line names it when
    the error names no file or only a temporary next to it; `when_full` is said after a full disk."""
    try:
        yield
    except ArchiveError as exc:
        fail(str(exc))
    except OSError as exc:
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT) and when_full
        fail(os_error_line(exc, output) + (f"; {when_full}" if full else ""))
    except ValueError as exc:
        fail(str(exc))


_OS_ADVICE = {
    errno.EACCES: "no permission to write or read there: fix the folder's permissions or choose another path",
    errno.EPERM: "not permitted there: fix the folder's permissions or choose another path",
    errno.EROFS: "a read-only file system: choose another path",
    errno.ENOSPC: "the disk is full: free some space or choose another path",
    errno.EDQUOT: "the disk quota is used up: free some space or choose another path",
    errno.EISDIR: "a folder is in the way: give the path of a file, or remove the folder",
    errno.ENOTDIR: "part of the path is a file, not a folder: fix the path",
    errno.ENOENT: "no such file or folder: check the path",
    errno.EEXIST: "it already exists: remove it or choose another path",
}


def os_error_line(exc: OSError, output: Path | None = None) -> str:
    """'PATH: what the system said; what to do', one line (an error we raised ourselves, with
    no errno, keeps its own message)."""
    name = exc.filename2 if exc.filename2 is not None else exc.filename
    if output is not None and (name is None or Path(str(name)).name.startswith(f".{output.name}.")):
        name = output  # a hidden temporary next to the output stands for the output
    if exc.errno is None or name is None:
        return " ".join(str(exc).split()) if name is None else f"{shown_path(name)}: {exc}"
    what = exc.strerror or str(exc)
    return " ".join(f"{shown_path(name)}: {what}; {_OS_ADVICE.get(exc.errno, 'check the path')}".split())


def load_session(path: Path, sweep_ok: bool = False) -> Session:
    """The session at `path`, or one line and exit 2: a sweep session (`tokenreel sweep`) is
    refused by the commands that read ladder sessions (`sweep_ok` False)."""
    with user_errors():
        session = archive.load(path)
    if session.kind == "sweep" and not sweep_ok:
        fail(f"{shown_path(path)}: a sweep session (tokenreel sweep): this command reads ladder sessions;"
             " a sweep's report: tokenreel report SWEEP (--format md, json or html); its charts: tokenreel plot SWEEP")
    return session


def check_writable(path: Path, force: bool) -> None:
    """Output files are never overwritten without --force, and never at all when they are not
    regular files (a device, a FIFO: `files.output_target`)."""
    with user_errors():
        files.output_target(path)
    if path.exists() and not force:
        fail(f"{shown_path(path)} already exists; pass --force to overwrite it or choose another --out")


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


REPORT_FORMATS = {".md": "md", ".json": "json", ".csv": "csv", ".html": "html"}


EXCLUDE_HOST_HELP = (
    "Leave out runs recorded while other processes loaded the CPUs of the engine's host (this machine, for a"
    " local endpoint); by default they stay in the figures, flagged."
)


def report_format(fmt: str | None, out_path: Path | None) -> str:
    """--format, else the extension of --out, else md. --format wins over the extension
    (`-o report.txt --format csv`, or `-o x.csv --format json` writes json), as users expect."""
    if fmt is not None or out_path is None:
        return fmt or "md"
    extension = out_path.suffix.lower()
    implied = REPORT_FORMATS.get(extension)
    if implied is None:
        known = ", ".join(REPORT_FORMATS)
        fail(f"--out {shown_path(out_path)}: no format for {extension or 'a name without an extension'}; "
             f"end it in {known}, or pass --format {'|'.join(REPORT_FORMATS.values())}")
    return implied


def default_workers() -> int:
    """Render workers: up to 4, never more than the CPUs (the output is the same for any number)."""
    return max(1, min(4, os.cpu_count() or 1))
