"""Which arms a report shows: the arms recorded so far, or those asked for (`report --arms`).

With one GPU a ladder is recorded arm by arm into one session (`record --arms bf16`, then the
next). Until the last arm is in, the session holds arms without a single run: their missing cells
would leave no prompt that every arm has, and so no figure for the arms that are in. A view
leaves such arms out and names them in one line; every recorded arm keeps its own figures and
the ratios are between the arms that are in. An arm whose runs all failed is recorded: it stays,
its missing cells say why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tokenreel.session.model import Arm, Session


@dataclass(frozen=True)
class ArmView:
    """A session narrowed to the arms a view shows, and the arms it leaves out."""

    session: Session  # the shown arms and their runs alone, in session order
    not_recorded: list[str]  # arms (of those asked for) without a measured run archived yet
    left_out: list[str]  # recorded arms that `--arms` did not ask for


def select_arms_of(arms: list[Arm], arm_ids: list[str] | None) -> list[Arm]:
    """The arms named by arm_ids (all when None), in their own order; unknown ids are an error."""
    if arm_ids is None:
        return list(arms)
    known = [arm.id for arm in arms]
    unknown = [arm_id for arm_id in arm_ids if arm_id not in known]
    if unknown:
        raise ValueError(f"unknown arm {unknown[0]!r}; known arms: {', '.join(known)}")
    return [arm for arm in arms if arm.id in arm_ids]


def recorded_arms(session: Session) -> set[str]:
    """Arms with at least one measured run archived, whatever became of it."""
    return {run.arm for run in session.runs if not run.warmup}


def arm_view(session: Session, arm_ids: list[str] | None = None) -> ArmView:
    """The recorded arms of those asked for (all when None); when none of them is recorded yet,
    all of them (every figure missing, the one line saying why). ValueError on an unknown id."""
    asked = select_arms_of(session.arms, arm_ids)
    recorded = recorded_arms(session)
    shown = [arm for arm in asked if arm.id in recorded] or asked
    ids, asked_ids = {arm.id for arm in shown}, {arm.id for arm in asked}
    narrowed = session if len(shown) == len(session.arms) else replace(
        session, arms=shown, runs=[run for run in session.runs if run.arm in ids],
    )
    return ArmView(
        session=narrowed,
        not_recorded=[arm.id for arm in asked if arm.id not in recorded],
        left_out=[arm.id for arm in session.arms if arm.id in recorded and arm.id not in asked_ids],
    )
