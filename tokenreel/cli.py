"""The `tokenreel` command: record, report, render, verify, simulate, demo.

Every command turns bad input into one line on stderr naming the file, field or endpoint,
and exits with code 2; never a traceback.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

from tokenreel import __version__, archive
from tokenreel.model import ArchiveError, Arm, Prompt, Session, Settings
from tokenreel.safe_text import file_component, strip_controls
from tokenreel.selection import DEFAULT_SELECTION, RunSelection
from tokenreel.terminal import CliConsole, Command, Group

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
T = TypeVar("T")

if TYPE_CHECKING:
    from tokenreel.ladder import MissingCell
    from tokenreel.recorder.config import Config
    from tokenreel.renderer.plan import RenderOptions


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
        fail(_os_error_line(exc, output) + (f"; {when_full}" if full else ""))
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


def _os_error_line(exc: OSError, output: Path | None = None) -> str:
    """'PATH: what the system said; what to do', one line (an error we raised ourselves, with
    no errno, keeps its own message)."""
    name = exc.filename2 if exc.filename2 is not None else exc.filename
    if output is not None and (name is None or Path(str(name)).name.startswith(f".{output.name}.")):
        name = output  # a hidden temporary next to the output stands for the output
    if exc.errno is None or name is None:
        return " ".join(str(exc).split()) if name is None else f"{name}: {exc}"
    what = exc.strerror or str(exc)
    return " ".join(f"{name}: {what}; {_OS_ADVICE.get(exc.errno, 'check the path')}".split())


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


REPORT_FORMATS = {".md": "md", ".json": "json", ".csv": "csv", ".html": "html"}
EXCLUDE_HOST_HELP = (
    "Leave out runs recorded while the engine's host (this machine, for a local endpoint) was under CPU"
    " pressure; by default they stay in the figures, flagged."
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
        fail(f"--out {out_path}: no format for {extension or 'a name without an extension'}; "
             f"end it in {known}, or pass --format {'|'.join(REPORT_FORMATS.values())}")
    return implied


@app.command(cls=Command, short_help="The ladder (each arm vs the prior and the first): md, json, csv, html.")
def report(
    session_path: Annotated[Path, typer.Argument(metavar="SESSION", help="A session file from `tokenreel record`.")],
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format", "-f", metavar="md|json|csv|html",
            help="md (tables like the seeds'), json, csv or html (one page with charts and a replay); wins over the --out extension (default: that, else md).",
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
) -> None:
    """The ladder (each arm vs the prior arm vs the first), per category, and every cell.

    The format is --format, else the extension of --out (.md, .json, .csv, .html), else markdown;
    --format wins over the extension (-o report.txt --format csv writes csv).

    Besides the medians: p50/p90/p99, min and max of TTFT, TPOT and inter-token latency
    (per token: a chunk of k tokens is k tokens arriving together), per arm and per cell.

    Examples:

    \b
      tokenreel report sessions/ladder.json
      tokenreel report sessions/ladder.json -o ladder.csv
      tokenreel report sessions/ladder.json --format json --baseline nvfp4
      tokenreel report sessions/ladder.json -o ladder.html   # one self-contained page: charts, replay
      tokenreel report sessions/ladder.json --exclude-host-contended
    """
    from tokenreel.report import render_report

    fmt = report_format(fmt, out_path)
    session = load_session(session_path)
    with user_errors():
        text = render_report(session, fmt, baseline, RunSelection(exclude_host_contended=exclude_host_contended))
    if out_path is None:
        sys.stdout.write(strip_controls(text))  # a report on a terminal: no escapes from session text
        return
    check_writable(out_path, force)
    with user_errors(out_path):
        out_path.write_text(text, encoding="utf-8")
    err.print(f"report written to {out_path}", markup=False)


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
    import math

    from tokenreel.compare import compare_sessions, render_comparison, summary_line

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
            out_path.write_text(text, encoding="utf-8")
        err.print(f"comparison written to {out_path}", markup=False)
    err.print(strip_controls(summary_line(comparison)), markup=False, soft_wrap=True)
    raise typer.Exit(0 if comparison.reproduced else 1)


@app.command(cls=Command, short_help="Charts as PNG and SVG: the ladder, per category, the race, token latency.")
def plot(
    session_path: Annotated[Path, typer.Argument(metavar="SESSION", help="A session file from `tokenreel record`.")],
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

    The figures are the report's (same rounding), colours the video's theme (arm i in the
    theme's i-th accent). The same session gives the same bytes. A figure that is missing is
    drawn as "no data: <why>". Existing files are not overwritten without --force.

    Examples:

    \b
      tokenreel plot sessions/ladder.json --out out/charts
      tokenreel plot sessions/ladder.json --out out/charts --format svg --prompt code-1 --theme light
    """
    from tokenreel.charts import write_charts

    formats = list(dict.fromkeys(part.strip().lower() for part in fmt.split(",") if part.strip()))
    session = load_session(session_path)
    prompt_ids = [p.id for p in session.prompts]
    if prompt is not None and prompt not in prompt_ids:
        fail(f"--prompt: no prompt {prompt!r} in the session; choose one of {', '.join(prompt_ids)} (session {session_path})")
    with user_errors(out_dir):
        paths = write_charts(session, out_dir, formats, None if prompt is None else [prompt], theme, force,
                             RunSelection(exclude_host_contended=exclude_host_contended))
    for path in paths:
        out.print(str(path), markup=False, soft_wrap=True)

def _record_into(
    session: Session, path: Path, arm_ids: list[str] | None, fail_fast: bool, metrics_warned: set[str] | None = None,
    signals: _RecordSignals | None = None,
) -> int:
    """Record with the live display; returns the exit code (1 when a run failed or was skipped)."""
    import asyncio

    from tokenreel.recorder.runner import record as record_session
    from tokenreel.console import RecordDisplay, summary_tables
    from tokenreel.ladder import missing_cells

    # Arms whose missing /metrics the preflight already named are not warned about twice.
    unsaved = f"the last run was not saved; {path} keeps every run saved before it (then --resume)"
    with user_errors(path, unsaved), RecordDisplay(err, metrics_warned) as display:
        recording = record_session(session, path, arm_ids, display, fail_fast)
        result = asyncio.run(signals.run(recording) if signals else recording)
    for table in summary_tables(session):
        out.print(table)
    out.print(
        f"session: {path}  ({result.ok} runs recorded, {result.already_ok} already done, "
        f"{result.failed} failed, {result.skipped} skipped" + (f", {result.invalid} invalid)" if result.invalid else ")")
    )
    if result.interrupted:
        if signals is not None:
            return signals.exit_code(130, interrupted=True)
        err.print("interrupted: every completed run is saved; continue with `tokenreel record --resume`")
        return 130
    busy_machine = [
        f"{result.client_busy} recorded while this machine kept the recorder waiting (exact: kernel receive times)"
        if result.client_busy else "",
        f"{result.retried} retried because the machine was too busy for exact user-clock times" if result.retried else "",
        f"{result.host_contended} recorded while the engine's host was under CPU pressure (kept, flagged"
        " host_contended)" if result.host_contended else "",
    ]
    if any(busy_machine):
        err.print("busy machine: measured runs " + "; ".join(part for part in busy_machine if part) + ".",
                  markup=False, soft_wrap=True)
    # Cells whose runs all completed yet none counts (contended, late user-clock times): a failed
    # run already had its own line.
    missing = [
        cell for cell in missing_cells(session)
        if (arm_ids is None or cell.arm in arm_ids) and cell.runs
        and all(run.status == "ok" for run in session.runs_of(cell.arm, cell.prompt))
    ]
    for cell in missing:  # a cell with no usable run is in no figure: say so, never silently
        err.print(f"{cell.arm} / {cell.prompt}: {cell.reason}", markup=False, soft_wrap=True)
    if missing:
        err.print(
            f"{len(missing)} cell(s) have no usable run (lines above); `tokenreel record --resume` re-records their runs",
            markup=False, soft_wrap=True,
        )
    if result.short:
        err.print(f"{result.short} measured run(s) missed the forced length (lines above): check ignore_eos support"
                  " and max_model_len of the endpoint", markup=False, soft_wrap=True)
    # Exit 1 only for what the endpoint did (errors, timeouts, wrong length, other traffic on it),
    # never because this machine was busy: those runs are kept (exact) or said above.
    endpoint_missing = [cell for cell in missing if _endpoint_caused(session, cell)]
    if result.failed or result.skipped or result.invalid or result.short or endpoint_missing:
        if result.failed or result.skipped or result.invalid:
            err.print("some runs failed, were skipped or invalid (lines above); `tokenreel record --resume` retries them")
        return 1
    return 0


def _endpoint_caused(session: Session, cell: MissingCell) -> bool:
    """A missing cell whose runs the endpoint spoiled (failed, skipped, invalid, contended by
    other traffic), not this machine's load."""
    return any(
        DEFAULT_SELECTION.left_out_because(run) in ("failed", "skipped", "invalid", "contended")
        for run in session.runs_of(cell.arm, cell.prompt)
    )


@app.command(cls=Command, short_help="Record each arm's token timings into a session file.")
def record(
    config: Annotated[
        Path, typer.Option("--config", "-c", metavar="FILE", help="TOML config: [session] and [[arms]] (or builtin:NAME).")
    ],
    out_path: Annotated[
        Path | None, typer.Option("--out", "-o", metavar="FILE", help="Session file (default: sessions/<name>.json).")
    ] = None,
    arms: Annotated[
        str | None, typer.Option(metavar="IDS", help="Record only these arm ids (comma-separated) into the session.")
    ] = None,
    repeats: Annotated[int | None, typer.Option(min=1, help="Measured runs per prompt (config: repeats).")] = None,
    warmup: Annotated[int | None, typer.Option(min=0, help="Discarded warmup runs per prompt (config: warmup).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue an interrupted session: redo only what is not ok yet.")] = False,
    fail_fast: Annotated[bool, typer.Option(help="Stop at the first failed run.")] = False,
    force: Annotated[bool, typer.Option(help="Start over even if the session file exists.")] = False,
    check: Annotated[
        bool, typer.Option("--check", help="Only run the preflight: check every arm's endpoint, record nothing.")
    ] = False,
    preflight: Annotated[
        bool,
        typer.Option(help="Check the arms before the first run (--no-preflight: an endpoint that hides /v1/models)."),
    ] = True,
) -> None:
    """Record each arm alone, one request at a time, into a self-contained session file.

    Before the first run a preflight checks every arm that has runs to do (key variable set,
    endpoint reachable, model served, context long enough, /metrics present) and lists every
    problem at once, exiting 2 before anything is recorded; --check does only that.

    Arms run in config order; before every run the endpoint must be idle. A warmup run is
    discarded, then --repeats measured runs per prompt. The session is saved after every run,
    so an interrupted recording loses nothing: rerun with --resume. With one GPU, record arm by
    arm with --arms (swap the served model in between); the session keeps when each arm ran.

    Examples:

    \b
      tokenreel record --config ladder.toml --check
      tokenreel record --config ladder.toml
      tokenreel record --config ladder.toml --arms nvfp4 --out sessions/ladder.json
      tokenreel record --config ladder.toml --resume
    """
    from tokenreel.recorder.config import load_config
    from tokenreel.recorder.runner import new_session, runs_todo, select_arms, select_arms_of

    with user_errors():
        cfg = load_config(config)
    if repeats is not None:
        cfg.settings.repeats = repeats
    if warmup is not None:
        cfg.settings.warmup = warmup
    path = out_path or Path("sessions") / f"{cfg.name}.json"
    arm_ids = split_ids(arms)
    if check:
        with user_errors():
            selected = select_arms_of(cfg.arms, arm_ids)
        raise typer.Exit(_preflight(selected, cfg.prompts, cfg.settings, verbose=True))
    with user_errors():
        lock = archive.SessionLock(path).acquire()  # one writer per session
    signals = _RecordSignals(f"recording {path}", "every completed run is saved; continue with `tokenreel record --resume`")
    try:
        _remove_stale_temps(path)
        if path.exists() and not force:  # read under the lock: merge with what is on disk now
            if not (resume or arm_ids):
                fail(f"{path} already exists; use --resume to continue it, --arms to add arms, or --force to start over")
            session = load_session(path)
            _merge_config(session, cfg, path)
        else:
            session = new_session(cfg.name, cfg.settings, cfg.prompts, cfg.arms)
        with user_errors():
            selected = select_arms(session, arm_ids)
        metrics_warned: set[str] = set()
        if preflight:
            code = _preflight(
                [arm for arm in selected if runs_todo(session, arm)], session.prompts, session.settings,
                warned=metrics_warned,
            )
            if code:
                raise typer.Exit(code)
        code = _record_into(session, path, arm_ids, fail_fast, metrics_warned, signals)
    except KeyboardInterrupt:
        code = signals.exit_code(130, interrupted=True)
    finally:
        lock.release()
        signals.restore()
    raise typer.Exit(signals.exit_code(code))


class _RecordSignals:
    """Ctrl-C and SIGTERM while recording (issue 11, item 8), the one rule: SIGTERM behaves like
    Ctrl-C. The first stops the recording: during the runs the recording task is cancelled, so
    it stops at its next await with every completed run already saved (never mid-save);
    anywhere else it raises KeyboardInterrupt. One line is printed and the exit code is
    128 + the signal (130 Ctrl-C, 143 SIGTERM). A second signal exits at once and quietly
    with 128 + its number; a save it cuts short leaves a temporary that the next record removes
    (`_remove_stale_temps`), and the file on disk is the previous complete one."""

    def __init__(self, doing: str, outcome: str) -> None:
        import signal

        self.doing, self.outcome = doing, outcome
        self.signum: int | None = None
        self._said = False
        self._cancel: Callable[[], None] | None = None
        self._previous = {sig: signal.signal(sig, self._first) for sig in (signal.SIGINT, signal.SIGTERM)}

    def _first(self, signum: int, frame: object) -> None:
        self.signum = signum
        _second_signal_exits()
        if self._cancel is not None:
            self._cancel()
        else:
            raise _Interrupted(signum)

    async def run(self, recording: Coroutine[Any, Any, T]) -> T:
        """Await the recording so that a signal cancels it (as asyncio.run does on Ctrl-C)."""
        import asyncio

        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        assert task is not None

        def cancel() -> None:
            task.cancel()
            loop.call_soon_threadsafe(lambda: None)  # wake the loop out of its select

        self._cancel = cancel
        try:
            return await recording
        finally:
            self._cancel = None

    def exit_code(self, code: int, interrupted: bool = False) -> int:
        """`code`, or after a signal (or an interruption) the one line and 128 + the signal."""
        import signal

        if self.signum is None and not interrupted:
            return code
        signum = self.signum or signal.SIGINT
        if not self._said:
            self._said = True
            _say_interrupted(signum, self.doing, self.outcome)
        return 128 + signum

    def restore(self) -> None:
        """The handlers from before; after a signal, none: the process is on its way out with
        128 + that signal, and a second one must not cut its last steps short."""
        import signal

        for sig, handler in self._previous.items():
            signal.signal(sig, handler if self.signum is None else signal.SIG_IGN)


def _remove_stale_temps(path: Path) -> None:
    """Remove the temporaries a killed record left next to the session. `archive.save` writes
    `.<name>.XXXXXXXX.tmp` (mkstemp's 8 characters) and renames it, so a SIGKILL mid-save leaves
    one as large as the session. Called only under the session's lock (`SessionLock`, held by
    the one writer for a whole record), so no live writer owns any of them."""
    import re

    pattern = re.compile(rf"\.{re.escape(path.name)}\.[a-z0-9_]{{8}}\.tmp")
    removed = []
    try:
        entries = list(path.parent.iterdir())
    except OSError:
        return
    for entry in entries:
        if pattern.fullmatch(entry.name) and entry.is_file() and not entry.is_symlink():
            try:
                entry.unlink()
            except OSError:
                continue
            removed.append(entry.name)
    if removed:
        err.print(f"removed {len(removed)} temporary file(s) a killed record left next to {path}: {', '.join(removed)}",
                  markup=False, soft_wrap=True)


def _preflight(
    arms: list[Arm], prompts: list[Prompt], settings: Settings, verbose: bool = False, warned: set[str] | None = None
) -> int:
    """Check the arms, print every problem (and warning) once; 2 when any problem stops recording."""
    import asyncio

    from tokenreel.recorder.preflight import preflight

    checks = asyncio.run(preflight(arms, prompts, settings))
    for result in checks:
        for warning in result.warnings:
            err.print(f"warning: {result.arm}: {warning}", markup=False, soft_wrap=True)
            if warned is not None and "/metrics" in warning:  # said once: recording will not repeat it
                warned.add(result.arm)
        if verbose and not result.problems:
            out.print(f"ok: {result.arm}: {'; '.join(result.notes) or 'reachable'}", markup=False, soft_wrap=True)
    problems = [(result.arm, problem) for result in checks for problem in result.problems]
    if problems:
        err.print(f"tokenreel: preflight found {len(problems)} problem(s); nothing was recorded:", soft_wrap=True)
        for arm_id, problem in problems:
            err.print(f"  {arm_id}: {problem}", markup=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    if verbose:
        out.print(f"preflight: {len(checks)} arm(s) ready to record")
    return 0


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


@app.command(cls=Command, short_help="Serve vLLM-like endpoints that imitate the seed ladder (no GPU).")
def simulate(
    profiles: Annotated[
        str,
        typer.Option(metavar="IDS", help="Profiles to serve, comma-separated, one port each (bf16, nvfp4, nvfp4-dflash2)."),
    ] = "bf16,nvfp4,nvfp4-dflash2",
    port: Annotated[
        int, typer.Option(min=1, max=65535, metavar="PORT", help="Port of the first profile; the next get +1, +2...")
    ] = 8100,
    host: Annotated[
        str, typer.Option(metavar="ADDRESS", help="IP address to listen on; one that is not loopback (0.0.0.0) is served with a warning.")
    ] = "127.0.0.1",
    time_scale: Annotated[
        float, typer.Option(min=0.0001, metavar="FACTOR", help="Multiply every delay (0.1 = ten times faster).")
    ] = 1.0,
    fault: Annotated[
        list[str] | None,
        typer.Option(
            metavar="PROFILE=MODE",
            help="Make a profile fail, e.g. nvfp4=429; repeatable (modes: refuse 401 404 429 500 error_event drop "
            "stall malformed no_done early_stop busy).",
        ),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(metavar="NAME", help="Wire shape of every endpoint: vllm (0.33), sglang (0.5) or llamacpp (llama.cpp server)."),
    ] = "vllm",
) -> None:
    """Serve OpenAI endpoints that imitate the seed ladder, without a GPU (vLLM-like unless --engine).

    Each profile gets its own port (/v1/chat/completions, /v1/completions, /v1/models,
    /metrics), streaming at the profile's speed. Point a config's base_url at them. The test
    controls (/sim/state) need the X-Sim-Token header with the token printed at start.

    Examples:

    \b
      tokenreel simulate
      tokenreel simulate --profiles bf16,nvfp4 --port 9000 --time-scale 0.1
      tokenreel simulate --fault nvfp4=429 --fault bf16=stall
      tokenreel simulate --engine llamacpp
    """
    import asyncio
    import dataclasses

    from tokenreel.simulator.control import TOKEN_HEADER
    from tokenreel.simulator.profiles import ENGINES, FAULTS, profile_by_id
    from tokenreel.simulator.server import SIM_TOKEN, exposure, ports_for, serve_forever

    chosen = []
    with user_errors():
        if engine not in ENGINES:
            raise ValueError(f"--engine {engine!r}: expected one of {', '.join(ENGINES)}")
        faults = dict(_split_fault(item, FAULTS) for item in fault or [])
        for profile_id in split_ids(profiles) or []:
            try:
                profile = profile_by_id(profile_id)
            except KeyError as exc:
                raise ValueError(f"--profiles: {exc.args[0]}") from None
            chosen.append(dataclasses.replace(profile, engine=engine, fault=faults.get(profile_id, profile.fault)))
        warning = exposure(host)  # an explicit address only; a non-loopback one is said loudly
        ports = ports_for(chosen, port)
    if warning:
        err.print(f"WARNING: {warning}", markup=False, soft_wrap=True)
    shown = f"[{host}]" if ":" in host else host
    for profile, profile_port in zip(chosen, ports):
        out.print(f"{profile.id:<16} http://{shown}:{profile_port}/v1   model {profile.model}   {profile.label}")
    out.print(f"Test controls (/sim/state, /sim/requests) need the header {TOKEN_HEADER}: {SIM_TOKEN}", soft_wrap=True)
    out.print("Ctrl-C stops. Point a config's base_url at these to record them.")
    try:
        asyncio.run(serve_forever(chosen, host, port, time_scale))
    except (ValueError, OSError) as exc:
        fail(_os_error_line(exc) if isinstance(exc, OSError) else str(exc))
    except KeyboardInterrupt:
        pass


def _split_fault(item: str, known: tuple[str, ...]) -> tuple[str, str]:
    profile_id, _, mode = item.partition("=")
    if mode not in known:
        raise ValueError(f"--fault {item!r}: expected PROFILE=MODE with MODE one of {', '.join(known)}")
    return profile_id, mode


def _second_signal_exits() -> None:
    """After a first Ctrl-C or SIGTERM, a second one exits at once and quietly, 128 + its number."""
    import os
    import signal

    def again(signum: int, frame: object) -> None:
        os._exit(128 + signum)

    signal.signal(signal.SIGINT, again)
    signal.signal(signal.SIGTERM, again)


def _say_interrupted(signum: int, doing: str, outcome: str) -> None:
    """The one line a Ctrl-C or SIGTERM prints: what was stopped and what is left."""
    import signal

    name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    err.print(f"tokenreel: interrupted ({name}) while {doing}; {outcome}", markup=False, soft_wrap=True)


class _Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM, as a KeyboardInterrupt so every clean-up path runs for both."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def _interruptible(doing: str, outcome: str = "nothing was written") -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C: the work stops, workers and temporary files are removed,
    one line is printed, and the exit code is 128 + the signal (130 Ctrl-C, 143 SIGTERM). A
    second Ctrl-C (or SIGTERM) during that clean-up exits at once and quietly with the same
    code; whatever it left behind is removed by the next render."""
    import signal

    def first(signum: int, frame: object) -> None:
        _second_signal_exits()
        raise _Interrupted(signum)

    previous = {sig: signal.signal(sig, first) for sig in (signal.SIGINT, signal.SIGTERM)}
    interrupted = False
    try:
        yield
    except KeyboardInterrupt as exc:
        interrupted = True
        signum = exc.signum if isinstance(exc, _Interrupted) else signal.SIGINT
        _second_signal_exits()
        _say_interrupted(signum, doing, outcome)
        raise typer.Exit(128 + signum) from None
    finally:
        # Once interrupted, the second-signal handler stays until the process exits: a second
        # Ctrl-C right after a quick clean-up must still exit quietly, not as a KeyboardInterrupt.
        if not interrupted:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _render_to(session_path: Path, out_file: Path, options: RenderOptions, workers: int, force: bool) -> None:
    """Render with a progress bar, then say where the file and its manifest are."""
    from tokenreel.renderer.encode import EncodeError
    from tokenreel.renderer.render import render as render_video
    from tokenreel.console import RenderBar

    check_writable(out_file, force)
    try:
        with _interruptible(f"rendering {out_file}"), user_errors(out_file), RenderBar(err, f"rendering {out_file.name}") as bar:
            result = render_video(session_path, out_file, options, workers, bar)
    except EncodeError as exc:
        fail(f"ffmpeg failed while writing {out_file}: {exc}", code=1)
    for warning in result.warnings:
        err.print(f"warning: {warning}", markup=False)
    out.print(
        f"video: {result.output}  ({result.frame_count} frames, sha256 {result.output_sha256[:16]}…)", markup=False
    )
    out.print(f"manifest: {result.manifest}  (check it later with `tokenreel verify {result.manifest}`)", markup=False)


def _default_workers() -> int:
    import os

    return max(1, min(4, os.cpu_count() or 1))


def _default_output(session_path: Path, prompt_id: str) -> Path:
    """out/<session-stem>-<prompt>.mp4, built from sanitised components: a prompt id comes from
    the session file, so anything but letters, digits, '.', '_' and '-' becomes '_', a leading
    '.' too, and the file must land directly in out/ (never elsewhere through '..' or '/')."""
    folder = Path("out")
    target = folder / f"{file_component(Path(session_path).stem)}-{file_component(prompt_id)}.mp4"
    if target.parent != folder or target.resolve().parent != folder.resolve():
        fail(f"--out: the default output {target} would leave {folder}/; pass --out FILE")
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
        typer.Option(metavar="ID", help="Prompt id (default: the session's first prompt); a bare --prompt lists them."),
    ] = None,
    run: Annotated[
        str, typer.Option(metavar="median|N", help="'median' (median-speed measured run of each arm) or a run index.")
    ] = "median",
    arms: Annotated[
        str | None, typer.Option(metavar="IDS", help="Arm ids side by side, comma-separated, at most 4 (default: all).")
    ] = None,
    fps: Annotated[int, typer.Option(metavar="N", help="Frames per second (1 to 240).")] = 30,
    size: Annotated[
        str, typer.Option(metavar="WxH", help="1920x1080, 3840x2160, or 1080x1920 (vertical, arms stacked); 16:9 or 9:16, up to 4K.")
    ] = "1920x1080",
    speed: Annotated[
        str, typer.Option(metavar="FACTOR", help="Playback speed; 1 is real time (fractions like 1/2 work).")
    ] = "1",
    theme: Annotated[
        str, typer.Option(metavar="NAME|PATH", help="Colour theme: dark, light, or a JSON theme file.")
    ] = "dark",
    title_s: Annotated[
        str, typer.Option("--title-s", metavar="SECONDS", help="Seconds of title card before t = 0 (0: none).")
    ] = "1.5",
    title: Annotated[
        str | None, typer.Option(metavar="TEXT", help="Title card's title.  [default: the session name]")
    ] = None,
    subtitle: Annotated[
        str | None,
        typer.Option(metavar="TEXT", help="Title card's subtitle ('' for none).  [default: the prompt]"),
    ] = None,
    logo: Annotated[
        Path | None, typer.Option(metavar="PNG", help="A PNG logo for the title card's top-right corner.")
    ] = None,
    hold: Annotated[
        str,
        typer.Option(
            "--hold-s", metavar="SECONDS",
            help="Seconds the headline end card is shown, after a short pause on the final state (0: none).",
        ),
    ] = "4",
    align: Annotated[
        str,
        typer.Option(
            metavar="send|first-token",
            help="send: every clock starts at request send and speed-ups are end to end (time to done); "
            "first-token: each arm starts at its first token and speed-ups are decode tok/s ratios.",
        ),
    ] = "send",
    at: Annotated[str | None, typer.Option(metavar="SECONDS", help="Poster time in seconds, for .png output.")] = None,
    workers: Annotated[
        int | None, typer.Option(min=1, metavar="N", help="Worker processes (the output is the same for any number).")
    ] = None,
    max_duration: Annotated[
        str,
        typer.Option(
            "--max-duration", metavar="SECONDS",
            help="Refuse a replay longer than this, in seconds of video (default 1800: 30 min; at most 86400).",
        ),
    ] = "1800",
    answer_badge: Annotated[
        bool,
        typer.Option(
            "--answer-badge",
            help="Once an arm's stream is done, badge its column: 'same answer as <first arm>' or "
            "'diverges at token N' (the first arm's says 'reference answer').",
        ),
    ] = False,
    exclude_host_contended: Annotated[bool, typer.Option(help=EXCLUDE_HOST_HELP)] = False,
    force: Annotated[bool, typer.Option(help="Overwrite --out if it exists.")] = False,
) -> None:
    """Replay a session side by side at real speed into a video, deterministically.

    One prompt, one run per arm: 2 to 4 arms, side by side at 1920x1080 or 3840x2160, or
    stacked at 1080x1920 for a vertical video (any even 16:9 or 9:16 size up to 4K, as long
    as every figure fits; other sizes are refused). The --out extension picks the format; without --out the video is

    \b
      out/<session-stem>-<prompt>.mp4   (e.g. out/ladder-code-1.mp4)

    Each frame is a pure function of its index, computed from the archived token arrival
    times, so the same session and options give the same file byte for byte on any machine
    of the same platform. A FILE.render.json manifest is written next to the output.

    Examples (the first renders the first prompt, every arm; the second lists the prompt ids):

    \b
      tokenreel render sessions/ladder.json
      tokenreel render sessions/ladder.json --prompt
      tokenreel render sessions/ladder.json --prompt code-1 --arms bf16,nvfp4
      tokenreel render sessions/ladder.json --size 1080x1920 -o out/vertical.mp4
      tokenreel render sessions/ladder.json --align first-token   # decode speed-ups
      tokenreel render sessions/ladder.json --at 5 -o poster.png
      tokenreel render sessions/ladder.json --answer-badge   # same answer as the first arm?
      tokenreel render sessions/ladder.json --title "bf16 vs NVFP4" --logo logo.png --theme my.json
    """
    from tokenreel.renderer.plan import RenderOptions, pin_files

    session = load_session(session_path)
    prompt_ids = [p.id for p in session.prompts]
    if not prompt_ids:
        fail(f"{session_path}: the session has no prompts; nothing to render")
    if prompt is not None and prompt not in prompt_ids:
        unknown = f"no prompt {prompt!r} in the session; " if prompt else ""
        fail(f"--prompt: {unknown}choose one of {', '.join(prompt_ids)} (session {session_path})")
    arm_ids = split_ids(arms)
    options = RenderOptions(
        prompt=prompt, run=run, arms=tuple(arm_ids or ()), fps=fps, size=size, speed=speed,
        theme=theme, title_s=title_s, hold_s=hold, at=at, align=align,
        title=title, subtitle=subtitle, logo=None if logo is None else str(logo), max_duration_s=max_duration,
        answer_badge=answer_badge, exclude_host_contended=exclude_host_contended,
    )
    with user_errors():
        options = pin_files(options)
    target = out_file or _default_output(session_path, prompt or prompt_ids[0])
    _render_to(session_path, target, options, workers or _default_workers(), force)


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
    from tokenreel.console import RenderBar
    from tokenreel.renderer.verify import find_manifests, overall_exit_code, verify_one

    with user_errors():
        paths = find_manifests(manifests)
    results = []
    for path in paths:
        with _interruptible(f"verifying {path}", "not verified"), RenderBar(err, f"verifying {path.name}") as bar:
            result = verify_one(path, workers or _default_workers(), bar, require_output)
        mark = {0: "ok", 1: "DIFFERS"}.get(result.exit_code, "UNVERIFIED")
        (out if result.ok else err).print(f"{mark}: {path}: {result.message}", markup=False, soft_wrap=True)
        results.append(result)
    raise typer.Exit(overall_exit_code(results))


@app.command(cls=Command, short_help="Record and render the seed ladder on simulated endpoints (no GPU).")
def demo(
    max_tokens: Annotated[
        int, typer.Option(min=16, help="Forced output length per run (720: the bf16 arm races about 8 s).")
    ] = 720,
    repeats: Annotated[
        int, typer.Option(min=1, help="Measured runs per prompt, after one warmup (2 keeps the demo near 3 min).")
    ] = 2,
    time_scale: Annotated[
        float, typer.Option(min=0.001, help="Simulator speed: 1 is real speed; 0.1 records ten times faster.")
    ] = 1.0,
    video: Annotated[bool, typer.Option(help="Also render DIR/demo.mp4.")] = True,
    workers: Annotated[int | None, typer.Option(min=1, help="Render worker processes.")] = None,
    out_dir: Annotated[
        Path, typer.Option("--out", "-o", metavar="DIR", help="A new folder for demo.json, demo.html and demo.mp4.")
    ] = Path("tokenreel-demo"),
    force: Annotated[bool, typer.Option(help="Reuse --out even if it holds files (they are overwritten).")] = False,
) -> None:
    """Record the seed ladder (bf16 → NVFP4 → NVFP4 + DFlash2) on simulated endpoints, then render it.

    Starts vLLM-like simulated endpoints on loopback, records one prompt of each category
    (conversation, reasoning, prose, code) into DIR/demo.json, prints the ladder, writes the HTML
    report (charts and an in-browser replay) to DIR/demo.html and renders the code prompt side by
    side into DIR/demo.mp4, with the same-answer badges (DIR is --out, a new folder). No GPU needed.

    Examples:

    \b
      tokenreel demo
      tokenreel demo --time-scale 0.1 --repeats 1 --no-video --out /tmp/demo
    """
    from tokenreel.recorder.prompts import load_prompts
    from tokenreel.recorder.runner import new_session
    from tokenreel.simulator.profiles import SEED_LADDER
    from tokenreel.simulator.server import running
    from tokenreel.renderer.plan import RenderOptions

    if out_dir.exists() and not out_dir.is_dir():
        fail(f"--out {out_dir} is a file; give a folder for demo.json and demo.mp4")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not force:
        fail(f"--out {out_dir} already holds files; pass --force to overwrite them or choose another --out")
    settings = Settings(prompts="builtin:ladder4", max_tokens=max_tokens, warmup=1, repeats=repeats)
    prompts = load_prompts(settings.prompts, Path.cwd())
    with user_errors():
        out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "demo.json"
    signals = _RecordSignals(f"recording {path}", f"every completed run is saved in {path}")
    try:
        with running(SEED_LADDER, time_scale) as cluster:
            arms = [
                Arm(id=p.id, label=p.label, base_url=cluster.base_url(p.id), model=p.model) for p in SEED_LADDER
            ]
            session = new_session("Qwen3.8-27B seed ladder", settings, prompts, arms)
            out.print(f"recording {len(arms)} arms x {len(prompts)} prompts x {1 + repeats} runs on simulated endpoints")
            code = _record_into(session, path, None, False, None, signals)
    except KeyboardInterrupt:
        code = signals.exit_code(130, interrupted=True)
    finally:
        signals.restore()
    code = signals.exit_code(code)
    if code:
        raise typer.Exit(code)
    from tokenreel.report import render_report

    html = out_dir / "demo.html"
    with user_errors(html):
        html.write_text(render_report(load_session(path), "html"), encoding="utf-8")
    out.print(f"report: {html}  (open it in a browser: charts, percentiles, same answers, a replay)", markup=False)
    if not video:
        raise typer.Exit(0)
    code_prompt = next((p.id for p in prompts if p.category == "code"), None)
    options = RenderOptions(prompt=code_prompt, answer_badge=True)
    _render_to(path, out_dir / "demo.mp4", options, workers or _default_workers(), True)
