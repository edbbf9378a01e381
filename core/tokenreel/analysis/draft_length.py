"""An arm's draft length k (vLLM's `num_speculative_tokens`) where something recorded says it.

Read from the launch command's `--speculative-config` (kept in the fingerprint), else from
[arms.settings]: a `num_speculative_tokens` key, or a value holding a speculative config (JSON)
or a command line with one. Never from the counters or the arm's name: a schedule an engine
takes must carry the k that was measured, so where none is said the caller says which key to set.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from tokenreel.analysis.serving_config import launch_speculative_config
from tokenreel.session.model import Arm

K_KEY = "num_speculative_tokens"  # vLLM's name, in --speculative-config and as an [arms.settings] key


@dataclass(frozen=True)
class DraftLength:
    k: int | None
    source: str  # where k was read ("" when unknown)


def _k(value: Any) -> int | None:
    """A positive whole number of draft tokens, or None (bools, fractions and text are not k)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    return value if isinstance(value, int) and value > 0 else None


def _from_value(text: str) -> int | None:
    """k in a settings value: a speculative config as JSON, or a command line with one."""
    stripped = text.strip()
    try:
        argv = ["--speculative-config", stripped] if stripped.startswith("{") else shlex.split(stripped)
    except ValueError:
        return None
    return _k(launch_speculative_config(argv).get(K_KEY))


def draft_length(arm: Arm) -> DraftLength:
    """The arm's k and where it was read; DraftLength(None, "") when nothing recorded says it."""
    launch = arm.fingerprint.get("launch") if isinstance(arm.fingerprint, dict) else None
    argv = [v for v in launch if isinstance(v, str)] if isinstance(launch, list) else []
    if (k := _k(launch_speculative_config(argv).get(K_KEY))) is not None:
        return DraftLength(k, "the launch command's --speculative-config")
    if (k := _k(arm.settings.get(K_KEY))) is not None:
        return DraftLength(k, f"[arms.settings] {K_KEY}")
    for key, value in arm.settings.items():
        if (k := _from_value(value)) is not None:
            return DraftLength(k, f"[arms.settings] {key}")
    return DraftLength(None, "")
