"""The simulator's test controls (POST /sim/state): busy gauges, background traffic, faults.

Not part of any engine: tests use these to make an endpoint look busy, make "someone else"
generate tokens, or arm a fault for the next N requests.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tokenreel.simulator.profiles import FAULTS
from tokenreel.simulator.wire import BadRequest

ARMABLE_FAULTS = tuple(f for f in FAULTS if f not in ("refuse", "busy"))


@dataclass
class SimState:
    """Test-controlled state; times are loop-clock seconds, never scaled."""

    busy_running: int = 0
    busy_waiting: int = 0
    busy_until: float = math.inf
    contention_tok_s: float = 0.0
    contention_until: float = math.inf
    contention_mark: float = 0.0
    contention_carry: float = 0.0
    fault: str | None = None
    fault_count: int = 0

    def describe(self, now: float) -> dict[str, Any]:
        def left(until: float) -> float | None:
            return None if until == math.inf else max(0.0, until - now)

        return {
            "busy": {
                "running": self.busy_running,
                "waiting": self.busy_waiting,
                "seconds": left(self.busy_until),
            },
            "contention": {
                "tok_s": self.contention_tok_s,
                "seconds": left(self.contention_until),
            },
            "fault": {"mode": self.fault, "count": self.fault_count},
        }

    def busy_gauges(self, now: float) -> tuple[int, int]:
        """(running, waiting) the busy control adds right now."""
        if now < self.busy_until:
            return self.busy_running, self.busy_waiting
        return 0, 0

    def background_tokens(self, now: float) -> int:
        """Whole tokens 'someone else' generated since the last call (fractions carried over)."""
        end = min(now, self.contention_until)
        whole = 0
        if end > self.contention_mark and self.contention_tok_s > 0:
            self.contention_carry += self.contention_tok_s * (end - self.contention_mark)
            whole = int(self.contention_carry)
            self.contention_carry -= whole
        self.contention_mark = max(self.contention_mark, end)
        return whole

    def take_fault(self) -> str | None:
        """The armed fault, used up by one request; None when none is armed."""
        if self.fault_count <= 0:
            return None
        fault = self.fault
        self.fault_count -= 1
        if not self.fault_count:
            self.fault = None
        return fault

    def apply(self, body: dict[str, Any], now: float, flush: Callable[[float], None]) -> None:
        """Apply a /sim/state body; `flush(now)` credits pending background tokens first."""
        for key in ("busy", "contention", "fault"):
            if not isinstance(body.get(key, {}), (dict, type(None))):
                raise BadRequest(f"{key} must be an object", key)
        if (busy := body.get("busy")) is not None:
            self.busy_running = int(_count(busy, "running"))
            self.busy_waiting = int(_count(busy, "waiting"))
            self.busy_until = _seconds(busy, now)
        if (contention := body.get("contention")) is not None:
            flush(now)
            self.contention_tok_s = float(_count(contention, "tok_s"))
            self.contention_until = _seconds(contention, now)
            self.contention_mark = now
        if (fault := body.get("fault")) is not None:
            mode = fault.get("mode")
            if mode is not None and mode not in ARMABLE_FAULTS:
                raise BadRequest(
                    f"fault mode must be one of {', '.join(ARMABLE_FAULTS)} ('refuse' and "
                    "'busy' are per-profile; use the 'busy' key for busy gauges)",
                    "mode",
                )
            self.fault_count = int(_count(fault, "count", 1)) if mode else 0
            self.fault = mode if self.fault_count else None


def _seconds(spec: dict[str, Any], now: float) -> float:
    seconds = spec.get("seconds")
    if seconds is None:
        return math.inf
    if not isinstance(seconds, (int, float)) or seconds < 0:
        raise BadRequest("seconds must be a non-negative number or null", "seconds")
    return now + float(seconds)


def _count(spec: dict[str, Any], key: str, default: float = 0) -> float:
    value = spec.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise BadRequest(f"{key} must be a non-negative number", key)
    return value
