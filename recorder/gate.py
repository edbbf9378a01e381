"""The idle gate and the contention check: a run is measured only on an endpoint nobody else uses.

Before a run, /metrics is polled until nothing runs or waits (up to `idle_wait_s`); a busy
endpoint skips the run, because its numbers would describe the other traffic. After the run,
the engine's generated-tokens counter tells whether someone else generated meanwhile. Without
/metrics both checks say so explicitly ("unavailable", contended None); never a silent pass.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable

import aiohttp

from tokenreel.recorder.engine_metrics import EngineSnapshot, MetricsUnavailable, delta, fetch_snapshot
from tokenreel.archive import Gate

POLL_S = 0.2
# Tokens of slack: a counter update that lands one (speculative) step late is not contention.
CONTENTION_SLACK_TOKENS = 16

WaitFn = Callable[[float, float, float], None]  # (running, waiting, seconds waited so far)


async def wait_idle(
    http: aiohttp.ClientSession, metrics_url: str, idle_wait_s: float, on_wait: WaitFn | None = None
) -> tuple[Gate, EngineSnapshot | None]:
    """Poll until idle or `idle_wait_s` passed; returns the verdict and the last snapshot."""
    start = time.monotonic()
    while True:
        waited = time.monotonic() - start
        try:
            snapshot = await fetch_snapshot(http, metrics_url)
        except MetricsUnavailable as exc:
            detail = f"{exc}; the run was not checked for other traffic"
            return Gate(status="unavailable", waited_s=round(waited, 3), detail=detail), None
        running, waiting = snapshot.running or 0.0, snapshot.waiting or 0.0
        if running == 0 and waiting == 0:
            detail = f"waited {waited:.1f} s for the endpoint to be idle" if waited >= POLL_S else ""
            return Gate("idle", running, snapshot.waiting, round(waited, 3), detail), snapshot
        if waited >= idle_wait_s:
            detail = (
                f"endpoint busy: {running:g} running, {waiting:g} waiting after {idle_wait_s:g} s;"
                " free it or raise idle_wait_s"
            )
            return Gate("busy", running, snapshot.waiting, round(waited, 3), detail), snapshot
        if on_wait is not None:
            on_wait(running, waiting, waited)
        await asyncio.sleep(min(POLL_S, idle_wait_s - waited))


def contention(before: EngineSnapshot | None, after: EngineSnapshot | None, run_tokens: int) -> tuple[bool | None, str]:
    """(contended, detail) from the generated-tokens counter around one run."""
    if before is None or after is None:
        return None, "no /metrics around the run: contention unknown"
    generated = delta(before, after, "generated_tokens")
    if generated is None:
        return None, "the endpoint exposes no generated-tokens counter (or it was reset): contention unknown"
    if generated - run_tokens > CONTENTION_SLACK_TOKENS:
        return True, f"endpoint generated {generated:g} tokens during the run, this run generated {run_tokens}"
    return False, ""
