"""Every counted run of a session's graded prompts, graded after the recording.

Never between runs: a grading process beside the engine would disturb the timings. Programs
run in parallel on at most the CPU count less one (one core stays with the grader and the
machine), each in its own sandbox; a run keeps its grade as soon as it has one, so the caller
saves whatever was graded.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from tokenreel.analysis.selection import DEFAULT_SELECTION
from tokenreel.recorder.grading.grader import grade_answer
from tokenreel.recorder.grading.sandbox import DEFAULT_LIMITS, Limits, isolation, process_bound
from tokenreel.session.grading import Grading
from tokenreel.session.model import Run, Session

Progress = Callable[[int, int], None]  # (graded, to grade)


@dataclass(frozen=True)
class ArmGrades:
    """One arm's pass count among its graded runs."""

    arm: str
    passed: int
    graded: int


@dataclass(frozen=True)
class SessionGrades:
    """What a grading did: each arm's counts, the sandbox's isolation, its wall time."""

    arms: list[ArmGrades]
    isolation: str
    seconds: float


def default_jobs() -> int:
    return max(1, (os.cpu_count() or 1) - 1)


def is_graded(session: Session) -> bool:
    return any(prompt.grading is not None for prompt in session.prompts)


def runs_to_grade(session: Session, ungraded_only: bool = False) -> list[tuple[Run, Grading]]:
    """The runs the figures count (`RunSelection.counts`) of graded prompts, with their grading."""
    gradings = {prompt.id: prompt.grading for prompt in session.prompts if prompt.grading is not None}
    return [(run, gradings[run.prompt]) for run in session.runs
            if run.prompt in gradings and DEFAULT_SELECTION.counts(run) and not (ungraded_only and run.grade is not None)]


def answer_text(run: Run) -> str:
    """What is graded: the run's content (its reasoning is not the answer)."""
    return "".join(run.chunks.content)


def grade_session(session: Session, limits: Limits = DEFAULT_LIMITS, jobs: int | None = None,
                  progress: Progress | None = None, ungraded_only: bool = False) -> SessionGrades:
    """Grade the runs in place; `ungraded_only`: keep grades already given (record --resume)."""
    started = time.perf_counter()
    todo = runs_to_grade(session, ungraded_only)
    workers = min(jobs or default_jobs(), max(1, len(todo)))
    uses = isolation(limits) if any(grading.kind == "tests" for _, grading in todo) else "no code to run"
    processes = process_bound(limits, workers)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(grade_answer, answer_text(run), grading, limits, processes): run for run, grading in todo}
        try:
            for done, future in enumerate(as_completed(futures), start=1):
                futures[future].grade = future.result()
                if progress is not None:
                    progress(done, len(todo))
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    return SessionGrades(_per_arm(session), uses, time.perf_counter() - started)


def _per_arm(session: Session) -> list[ArmGrades]:
    """Each arm with a graded run (an arm not recorded yet has none), in the session's order."""
    counted = [run for run, _ in runs_to_grade(session) if run.grade is not None]
    grades = [ArmGrades(arm.id, sum(1 for r in counted if r.arm == arm.id and r.grade and r.grade.passed),
                        sum(1 for r in counted if r.arm == arm.id)) for arm in session.arms]
    return [arm for arm in grades if arm.graded]
