"""Which arm a speculative arm drafts for: the arm whose answers it must repeat.

Speculative decoding at temperature 0 keeps its target's greedy tokens, so a drafter arm's
answer is checked against its target's, not the ladder's first arm (which may be another
quantization). The relation is declared (`drafts_for = "<arm id>"` in the arm's config); where
it is not, and the arm is known to draft (a `drafter` or `speculative` setting in
[arms.settings], a speculative flag in its launch command, or drafts counted in its own runs:
llama.cpp's /props reports no drafter for a server started with one), the target is the one
other arm that declares the same settings apart from the drafter, else the nearest arm before
it in the ladder that drafts for none (a ladder adds one change a step: bf16, 4-bit, 4-bit plus
a drafter). An arm that drafts for nothing we know of has no target.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenreel.analysis.serving_config import launch_settings
from tokenreel.session.model import Arm, Session

NO_DRAFTER = ("", "none", "no", "off", "false")
DRAFTER_SETTINGS = ("drafter", "speculative")  # the [arms.settings] keys that declare a drafter
# How a target was found, as the report and the notes say it.
DRAFTED_HOW = {
    "declared": "drafts_for",
    "inferred": "inferred from the declared settings",
    "previous": "the arm before it in the ladder",
}


@dataclass(frozen=True)
class Target:
    arm: str  # the arm drafted for
    how: str  # a DRAFTED_HOW key: "declared" (drafts_for), "inferred" (the settings), "previous" (the ladder)


def declares_drafter(arm: Arm) -> bool:
    """[arms.settings] names a drafter (`drafter` or `speculative`, not "none"), or the launch
    command starts one."""
    if any(arm.settings.get(key, "").strip().lower() not in NO_DRAFTER for key in DRAFTER_SETTINGS):
        return True
    launch = arm.fingerprint.get("launch") if isinstance(arm.fingerprint, dict) else None
    return isinstance(launch, list) and "speculative" in launch_settings([v for v in launch if isinstance(v, str)])


def observes_drafter(session: Session, arm: Arm) -> bool:
    """Some completed run of the arm counted drafts (its engine's acceptance counters)."""
    return any(r.arm == arm.id and r.status == "ok" and r.acceptance is not None
               and bool(r.acceptance.draft_tokens or r.acceptance.drafts) for r in session.runs)


def drafts(session: Session, arm: Arm) -> bool:
    """The arm drafts: declared (drafts_for, settings, launch command) or observed in its runs."""
    return arm.drafts_for is not None or declares_drafter(arm) or observes_drafter(session, arm)


def _without_drafter(arm: Arm) -> dict[str, str]:
    return {k: v for k, v in arm.settings.items() if k not in DRAFTER_SETTINGS}


def drafted_arm(session: Session, arm: Arm) -> Target | None:
    """The arm `arm` drafts for: declared, inferred from the settings, or the nearest arm before it
    that does not draft; None when it does not draft or no arm comes before it."""
    if arm.drafts_for is not None:
        return Target(arm.drafts_for, "declared")
    if not drafts(session, arm):
        return None
    plain = [other for other in session.arms if other is not arm and not drafts(session, other)]
    same = [other for other in plain if _without_drafter(other) == _without_drafter(arm)]
    if arm.settings and len(same) == 1:
        return Target(same[0].id, "inferred")
    before = [other for other in session.arms[: session.arms.index(arm)] if other in plain]
    return Target(before[-1].id, "previous") if before else None
