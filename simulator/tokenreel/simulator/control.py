"""The simulator's test controls (POST /sim/state): busy gauges, background traffic, faults.

Not part of any engine: tests use these to make an endpoint look busy, make "someone else"
generate tokens, or arm a fault for the next N requests.

Who may use them: any web page open on the machine can send a POST to a
loopback port (text/plain and form bodies need no CORS preflight), so every /sim route
answers only a request that carries this process's token in the `X-Sim-Token` header
(403 otherwise), and POST /sim/state takes only `Content-Type: application/json` (415
otherwise). The token is made once per process (`SIM_TOKEN`): `tokenreel simulate` prints
it at start, and in-process users read it from `SimCluster.token` (or `.control_headers`).
"""

from __future__ import annotations

import hmac
import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tokenreel.simulator.profiles import FAULTS, FaultMode, fault_mode
from tokenreel.simulator.wire import BadRequest

ARMABLE_FAULTS: tuple[FaultMode, ...] = tuple(f for f in FAULTS if f not in ("refuse", "busy"))
# Every number a control takes is bounded, so no body can overflow a gauge or the JSON answer.
MAX_CONTROL_VALUE = 1_000_000_000


TOKEN_HEADER = "X-Sim-Token"
SIM_TOKEN = secrets.token_urlsafe(18)


def control_refusal(method: str, headers: Any) -> tuple[int, str] | None:
    """Why a /sim request is refused, as (status, one line); None when it may proceed."""
    if not hmac.compare_digest(str(headers.get(TOKEN_HEADER, "")).encode(), SIM_TOKEN.encode()):
        return 403, (f"/sim needs the {TOKEN_HEADER} header with the token `tokenreel simulate` printed at start "
                     "(in-process: SimCluster.token)")
    content_type = str(headers.get("Content-Type", "")).split(";")[0].strip().lower()
    if method == "POST" and content_type != "application/json":
        return 415, f"/sim takes only Content-Type: application/json, not {content_type or 'none'!r}"
    return None


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
    fault: FaultMode | None = None
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

    def take_fault(self) -> FaultMode | None:
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
            asked = fault.get("mode")
            mode = fault_mode(asked)
            if asked is not None and (mode is None or mode not in ARMABLE_FAULTS):
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
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not 0 <= seconds <= MAX_CONTROL_VALUE:
        raise BadRequest(f"seconds must be a number from 0 to {MAX_CONTROL_VALUE} or null", "seconds")
    return now + float(seconds)


def _count(spec: dict[str, Any], key: str, default: float = 0) -> float:
    value = spec.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= MAX_CONTROL_VALUE:
        raise BadRequest(f"{key} must be a number from 0 to {MAX_CONTROL_VALUE}", key)
    return value
