"""What a recording has to do: the arms chosen, and each arm's runs not ok yet.

Re-running `record` on a session redoes only these (resume); a run the figures leave out for a
reason a new recording can change is not done.
"""

from __future__ import annotations

from tokenreel.analysis.arm_view import select_arms_of
from tokenreel.analysis.selection import DEFAULT_SELECTION
from tokenreel.session.model import Arm, Prompt, Session


def select_arms(session: Session, arm_ids: list[str] | None) -> list[Arm]:
    """The arms to record, always in the session's (config) order; unknown ids are an error."""
    return select_arms_of(session.arms, arm_ids)


def done_keys(session: Session) -> set[tuple[str, str, int]]:
    """(arm, prompt, index) of the runs recording would not redo (`runs_todo`)."""
    return {run.key for run in session.runs if run.status == "ok" and (run.warmup or DEFAULT_SELECTION.counts(run))}


def runs_todo(session: Session, arm: Arm, prompts: set[str] | None = None) -> list[tuple[Prompt, int]]:
    """The (prompt, run index) pairs of an arm that are not ok yet: what recording it would do
    (of `prompts` alone when given).

    A measured run the figures leave out for a reason a new recording can change (contended by
    other traffic, or timed late by a busy client on the user-space clock) is redone too:
    `--resume` fills a cell whose runs were all contended. Runs kept by the run selection, host
    contended ones included, are done.
    """
    done = done_keys(session)
    runs = range(session.settings.warmup + session.settings.repeats)
    return [
        (prompt, index) for prompt in session.prompts for index in runs
        if (arm.id, prompt.id, index) not in done and (prompts is None or prompt.id in prompts)
    ]
