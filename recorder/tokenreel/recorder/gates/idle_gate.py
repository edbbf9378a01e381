"""The idle gate and the contention check: a run is measured only on an endpoint nobody else uses.

Before a run, /metrics is polled until nothing runs or waits (up to `idle_wait_s`); a busy
endpoint skips the run, because its numbers would describe the other traffic. After the run
three signals tell whether someone else generated meanwhile: the running/waiting gauges once
our stream has closed (SGLang's and llama.cpp's token counters grow only when a request
finishes, so a request that overlaps the run and ends after it shows only there), SGLang's
per-step decode counter, and the generated-tokens counter. Every counter comparison allows the
counter's printed step (llama.cpp's six significant digits). Without /metrics both checks say
so explicitly ("unavailable", contended None); never a silent pass.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable

import aiohttp

from tokenreel.recorder.engines.engine_metrics import DECODE_COUNTER, EngineSnapshot, MetricsUnavailable, delta, fetch_snapshot, tolerance
from tokenreel.session.model import Gate

POLL_S = 0.2
# Tokens of slack: a counter update that lands one (speculative) step late is not contention.
CONTENTION_SLACK_TOKENS = 16
# After the stream closed, the engine may still count our own request as running for a moment:
# the gauges are re-read this many times, this far apart (~0.3 s), before they count as traffic.
SETTLE_READS = 4
SETTLE_INTERVAL_S = 0.1

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


async def settle_after_run(http: aiohttp.ClientSession, metrics_url: str) -> EngineSnapshot | None:
    """The first snapshot after the run that shows the endpoint idle, else the last of a few reads.

    Our own just-finished request may still be counted as running right after its stream
    closed; a request still running ~0.3 s later is someone else's. None when /metrics fails.
    """
    snapshot: EngineSnapshot | None = None
    for read in range(SETTLE_READS):
        if read:
            await asyncio.sleep(SETTLE_INTERVAL_S)
        try:
            snapshot = await fetch_snapshot(http, metrics_url)
        except MetricsUnavailable:
            return None
        if not (snapshot.running or snapshot.waiting):
            return snapshot
    return snapshot


def contention(before: EngineSnapshot | None, after: EngineSnapshot | None, run_tokens: int) -> tuple[bool | None, str]:
    """(contended, detail) around one run; the detail names each signal that fired.

    `after` is the settled snapshot (settle_after_run): running or waiting there means another
    client's request was in flight after ours ended.
    """
    if before is None or after is None:
        return None, "no /metrics around the run: contention unknown"
    signals: list[str] = []
    running, waiting = after.running or 0.0, after.waiting or 0.0
    if running or waiting:
        signals.append(
            f"{running:g} running, {waiting:g} waiting on the endpoint after this run's stream closed"
            " (another client's request was in flight)"
        )
    decoded = delta(before, after, "decode_tokens")
    if decoded is not None and decoded - run_tokens > CONTENTION_SLACK_TOKENS + tolerance(before, after, "decode_tokens"):
        signals.append(f"{DECODE_COUNTER} grew by {decoded:g} during the run, this run generated {run_tokens}")
    generated = delta(before, after, "generated_tokens")
    slack = CONTENTION_SLACK_TOKENS + tolerance(before, after, "generated_tokens")
    if generated is not None and generated - run_tokens > slack:
        step = tolerance(before, after, "generated_tokens")
        rounding = f" (counter printed in steps of {step:g}, allowed)" if step else ""
        signals.append(f"endpoint generated {generated:g} tokens during the run, this run generated {run_tokens}{rounding}")
    if signals:
        return True, "; ".join(signals)
    if generated is None and decoded is None:
        return None, "the endpoint exposes no generated-tokens counter (or it was reset): contention unknown"
    return False, ""
