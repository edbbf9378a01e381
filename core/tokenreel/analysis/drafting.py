"""Which arm a speculative arm drafts for: the arm whose answers it must repeat.

Speculative decoding at temperature 0 keeps its target's greedy tokens, so a drafter arm's
answer is checked against its target's, not the ladder's first arm (which may be another
quantization). The relation is declared (`drafts_for = "<arm id>"` in the arm's config) or,
where not, inferred from the declared settings when exactly one other arm declares the same
settings apart from the drafter and no drafter of its own (the endpoint cannot say it: llama.cpp's
/props reports no drafter for a server started with one). Otherwise it is not known.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenreel.session.model import Arm

NO_DRAFTER = ("", "none", "no", "off", "false")


@dataclass(frozen=True)
class Target:
    arm: str  # the arm drafted for
    how: str  # "declared" (drafts_for) or "inferred" (from the declared settings)


def declares_drafter(arm: Arm) -> bool:
    return arm.settings.get("drafter", "").strip().lower() not in NO_DRAFTER


def _without_drafter(arm: Arm) -> dict[str, str]:
    return {k: v for k, v in arm.settings.items() if k != "drafter"}


def drafted_arm(arms: list[Arm], arm: Arm) -> Target | None:
    """The arm `arm` drafts for, declared or inferred; None when it drafts for none we know of."""
    if arm.drafts_for is not None:
        return Target(arm.drafts_for, "declared")
    if not declares_drafter(arm):
        return None
    same = [other for other in arms if other is not arm and not declares_drafter(other)
            and other.drafts_for is None and _without_drafter(other) == _without_drafter(arm)]
    return Target(same[0].id, "inferred") if len(same) == 1 else None
