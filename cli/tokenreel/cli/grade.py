"""`tokenreel grade`: (re)grade an archived session's answers in place, each code answer in the
sandbox; `record` calls `grade_and_save` when its recording ends."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tokenreel.base.safe_text import shown_path
from tokenreel.cli.app import app, err, fail, out, user_errors
from tokenreel.cli.terminal import Command
from tokenreel.session.model import Session


def grade_and_save(session: Session, path: Path, jobs: int | None = None, timeout_s: float | None = None,
                   ungraded_only: bool = False) -> None:
    """Grade with a progress bar, save atomically, print one line per arm and the isolation used.
    The runs are on disk already: an interrupted grading loses none, and grading again redoes it."""
    from tokenreel.analysis.figures import figure
    from tokenreel.cli.progress import RenderBar
    from tokenreel.cli.render_signals import interruptible
    from tokenreel.recorder.grading.sandbox import Limits
    from tokenreel.recorder.grading.session_grades import grade_session
    from tokenreel.session.archive import save

    limits = Limits() if timeout_s is None else Limits(timeout_s=timeout_s)
    with interruptible(f"grading {shown_path(path)}", f"no grade was saved; grade again with `tokenreel grade {shown_path(path)}`"), \
            RenderBar(err, "grading", unit="answers") as bar, user_errors(path):
        graded = grade_session(session, limits, jobs, bar, ungraded_only)
        save(session, path)
    for arm in graded.arms:
        out.print(f"{arm.arm}: {arm.passed} of {arm.graded} passed", markup=False, soft_wrap=True)
    out.print(f"graded in {figure(graded.seconds, 1, ' s')}; sandbox: {graded.isolation}", markup=False, soft_wrap=True)


@app.command(cls=Command, short_help="Grade a session's answers (tests run in a sandbox) and save the grades.")
def grade(
    session_path: Annotated[Path, typer.Argument(metavar="SESSION", help="A session file recorded with a graded suite.")],
    jobs: Annotated[
        int | None, typer.Option(min=1, help="Answers graded at once (default: the CPU count less one, at least 1).")
    ] = None,
    timeout: Annotated[
        float, typer.Option(min=0.1, max=600, metavar="S", help="Each code answer's wall-clock and CPU limit, in seconds.")
    ] = 10.0,
) -> None:
    """Grade every counted run of the session's graded prompts and write each run's grade into the
    session (atomically; grades already there are replaced).

    An `answer` prompt's value is taken from the answer and compared; a `tests` prompt's code
    runs with its tests in a separate process: limited CPU time, memory, file size and process
    count, a wall-clock timeout, no network, an empty environment and a working folder removed
    afterwards. Prints each arm's pass count and the isolation the sandbox got on this machine.

    Examples:

    \b
      tokenreel grade sessions/humaneval.json
      tokenreel grade sessions/arith.json --jobs 4 --timeout 20
    """
    from tokenreel.recorder.grading.session_grades import is_graded, runs_to_grade
    from tokenreel.session.archive import SessionLock, load

    with user_errors():
        lock = SessionLock(session_path).acquire()
    try:
        with user_errors():
            session = load(session_path)
        if not is_graded(session):
            fail(f"{shown_path(session_path)}: no graded prompts; record it with a graded suite (record --suite humaneval, arith:N, "
                 f"or a prompt file with a 'tests' or 'answer' column)")
        if not runs_to_grade(session):
            fail(f"{shown_path(session_path)}: no run of a graded prompt is counted yet; record it first")
        grade_and_save(session, session_path, jobs, timeout)
    finally:
        lock.release()
