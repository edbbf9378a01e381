"""`tokenreel sweep`: each arm alone, at rising concurrency levels.

For each arm in turn (never two arms at once), and for each level N in rising order: the idle
gate (the endpoint must be idle, as before every `record` run), then N warmup requests at once
(kept, flagged warmup), then N requests kept in flight, each finished one replaced at once,
until `requests` measured requests were sent (or `duration_s` passed), then the fill: while a
measured request still runs, each finished request is again replaced, by one flagged warmup (not
measured), so every measured request decodes beside N - 1 others to its end (a drain would let
the last ones run in a shrinking batch, faster, and an engine that stops drafting above a batch
size draft again); then the requests in flight finish. Prompts cycle through the suite in order. Every request is a `Run`
with `level` N and `index` its number within the level (warmup first), its token timings
recorded exactly as `record` does (`stream_run`). The engine's counters (LEVEL_COUNTERS) are
read from /metrics before and after the measured window, and its running/waiting gauges are
sampled during it (`LevelRecord`).

Failures are the level's, never the sweep's: an endpoint that refuses requests (HTTP 429 or 503,
after `stream_run`'s own retries) fails the level with one line, and the arm's higher levels
are skipped (they would be refused too); a busy endpoint skips the level; levels above the
concurrency the endpoint reports (llama.cpp's slots) are skipped. The session is saved after
every level, so Ctrl-C keeps the levels already done (the interrupted one is kept, marked
"interrupted", with the requests it completed).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import aiohttp

import tokenreel.base.version
from tokenreel.recorder.client.kernel_clock import stamping_session
from tokenreel.recorder.client.sse_client import stream_run
from tokenreel.recorder.client.wakeup import prompt_wakeups
from tokenreel.recorder.config import default_metrics_url
from tokenreel.recorder.engines.engine_metrics import EngineSnapshot, MetricsUnavailable, fetch_snapshot
from tokenreel.recorder.engines.fingerprint import fingerprint
from tokenreel.recorder.gates.idle_gate import wait_idle
from tokenreel.session.archive import save
from tokenreel.session.model import LEVEL_COUNTERS, Arm, Gate, LevelRecord, Run, Session
from tokenreel.session.quarantine import quarantine

MAX_LEVEL = 1024  # the highest level `--concurrency` takes when the endpoint reports no limit
MIN_REQUESTS = 8  # the default measured requests per level: max(MIN_REQUESTS, 4 * N)
REFUSING = (429, 503)  # HTTP statuses that mean the endpoint refuses this much concurrency
REFUSED = "the endpoint refused concurrency"
SAMPLE_S = 0.25  # how often the running/waiting gauges are read during a level


def parse_levels(text: str, limit: int = MAX_LEVEL) -> list[int]:
    """'1,2,4,8' -> [1, 2, 4, 8]; ValueError (one line naming --concurrency) for a non-integer,
    a level below 1 or above `limit`, or levels that do not increase."""
    parts = [part.strip() for part in text.split(",")]
    levels: list[int] = []
    for part in parts:
        try:
            level = int(part)
        except ValueError:
            raise ValueError(f"--concurrency: {part!r} is not a whole number; give rising levels such as 1,2,4,8") from None
        if level < 1:
            raise ValueError(f"--concurrency: level {level} keeps no request in flight; levels start at 1")
        if level > limit:
            raise ValueError(f"--concurrency: level {level} is above the limit of {limit} requests in flight")
        if levels and level <= levels[-1]:
            raise ValueError(f"--concurrency: levels must increase, but {level} follows {levels[-1]}")
        levels.append(level)
    return levels


def default_requests(level: int) -> int:
    """Measured requests per level when neither --requests nor --duration is given."""
    return max(MIN_REQUESTS, 4 * level)


def endpoint_limit(arm: Arm) -> int | None:
    """The most requests the endpoint says it serves at once (llama.cpp's /props total_slots),
    or None when its fingerprint says none."""
    props = arm.fingerprint.get("props")
    slots = props.get("total_slots") if isinstance(props, dict) else None
    return slots if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0 else None


async def over_limits(arms: list[Arm], levels: list[int]) -> list[str]:
    """One line per arm whose endpoint reports serving fewer requests at once than the highest
    level (`endpoint_limit`): bad input, said before anything is recorded. Fingerprints the arms."""
    problems = []
    async with aiohttp.ClientSession(headers={"User-Agent": f"tokenreel/{tokenreel.base.version.__version__}"}) as http:
        for arm in arms:
            arm.fingerprint = await fingerprint(http, arm) or arm.fingerprint
            limit = endpoint_limit(arm)
            if limit is not None and levels[-1] > limit:
                problems.append(f"--concurrency: level {levels[-1]} is above the {limit} requests arm {arm.id!r} serves at once"
                                f" (its slots); give levels up to {limit}, or start the server with more slots")
    return problems


@dataclass(frozen=True)
class LevelStarted:
    arm: str
    level: int
    position: int  # 1-based among all (arm, level) pairs
    total: int


@dataclass(frozen=True)
class LevelDone:
    record: LevelRecord


SweepEventFn = Callable[[Any], None]


@dataclass
class SweepResult:
    path: Path
    ok: int = 0  # levels
    failed: int = 0
    skipped: int = 0
    interrupted: bool = False


def new_sweep(session: Session) -> Session:
    """Mark a fresh session (runner.new_session) as a sweep."""
    session.kind = "sweep"
    return session


async def sweep(session: Session, path: str | Path, levels: list[int], requests: int | None = None,
                duration_s: float | None = None, on_event: SweepEventFn | None = None) -> SweepResult:
    """Sweep every arm of `session` over `levels` into `path` (this module's docstring).

    Ctrl-C or cancellation stops cleanly: the levels done are saved, the one under way is kept
    as "interrupted", and the result says `interrupted`. The caller holds the session's lock."""
    emit = on_event or (lambda event: None)
    result = SweepResult(Path(path))
    session.kind = "sweep"
    save(session, result.path)
    with prompt_wakeups():  # as `record`: the reading thread woken ahead of busy neighbours
        return await _sweep(session, result, levels, requests, duration_s, emit)


async def _sweep(session: Session, result: SweepResult, levels: list[int], requests: int | None,
                 duration_s: float | None, emit: SweepEventFn) -> SweepResult:
    total = len(session.arms) * len(levels)
    position = 0
    async with stamping_session(
        # Room for the highest level, the /metrics reads beside it and a spare: never a request queued here.
        # A fresh connection per request (as `vllm bench serve`, a session per request): llama-server
        # closes a connection after a stream although its headers offer keep-alive, and a request sent
        # at once on that pooled connection was lost ("connection dropped before any response": 1 to 3
        # of 8 per level at 2 and 4). On loopback a connect costs ~0.1 ms of TTFT; `record`, which
        # waits between runs, keeps its connections. "Connection: keep-alive" all the same, so that
        # the client closes after the response, not the server: aiohttp would send "close", and
        # the server's FIN, read with the last token, gives that read the FIN's later kernel time
        # (its decode ran 0.2-1.3 % slow against the simulator's log at 8 in flight).
        {"User-Agent": f"tokenreel/{tokenreel.base.version.__version__}", "Connection": "keep-alive"},
        max(levels) + 4,
        fresh=True,
    ) as http:
        try:
            for arm in session.arms:
                recording = {"started_at": _now()}
                arm.recorded.append(recording)
                try:
                    arm.fingerprint = await fingerprint(http, arm) or arm.fingerprint
                    if arm.fingerprint.get("version", {}).get("simulated") is True:
                        session.simulated = True
                    refused = ""
                    limit = endpoint_limit(arm)
                    for level in levels:
                        position += 1
                        emit(LevelStarted(arm.id, level, position, total))
                        record = LevelRecord(arm.id, level, warmup=level, requests=None if duration_s else requests
                                             or default_requests(level), duration_s=duration_s, started_at=_now())
                        session.levels.append(record)
                        if refused:
                            record.status, record.error = "skipped", f"not tried: {refused}"
                        elif limit is not None and level > limit:
                            record.status = "skipped"
                            record.error = f"level {level} is above the {limit} requests the endpoint serves at once (its slots)"
                        else:
                            await _Level(session, arm, record, http).run()
                            if record.status == "failed" and record.error.startswith(REFUSED):
                                refused = f"level {record.level} was refused"
                        record.finished_at = record.finished_at or _now()
                        setattr(result, record.status, getattr(result, record.status) + 1)
                        save(session, result.path)
                        emit(LevelDone(record))
                finally:
                    recording["finished_at"] = _now()
        except (asyncio.CancelledError, KeyboardInterrupt):
            result.interrupted = True
            for record in session.levels:
                if not record.finished_at:
                    record.status, record.finished_at = "interrupted", _now()
                    record.error = record.error or "interrupted (Ctrl-C): its completed requests are kept"
        finally:
            save(session, result.path)
    return result


class _Level:
    """One level of one arm: gate, warmup, the measured window, the fill (module docstring)."""

    def __init__(self, session: Session, arm: Arm, record: LevelRecord, http: aiohttp.ClientSession) -> None:
        self.session, self.arm, self.record, self.http = session, arm, record, http
        self.metrics_url = arm.metrics_url or default_metrics_url(arm.base_url)
        self.refusal = ""  # the first 429/503 line: stop sending
        self.notes: list[str] = []
        self.gate = Gate()
        self.measuring = 0  # measured requests in flight: the fill goes on while any is

    async def run(self) -> None:
        record, settings = self.record, self.session.settings
        gate, _ = await wait_idle(self.http, self.metrics_url, settings.idle_wait_s)
        self.gate = gate  # every run of the level carries the verdict of the gate before it
        if gate.status == "busy":
            record.status, record.error = "skipped", gate.detail
            return
        n = record.level
        await asyncio.gather(*(self._request(i, warmup=True) for i in range(n)))
        if self.refusal:
            record.status, record.error = "failed", self.refusal
            return
        record.before = await self._counters()
        sampler = asyncio.ensure_future(self._sample())
        issued = [n]  # the next index (warmup took 0..n-1)
        start = time.monotonic()
        deadline = start + record.duration_s if record.duration_s else None
        last = n + (record.requests or 0)

        def window_open() -> bool:
            return not self.refusal and (time.monotonic() < deadline if deadline is not None else issued[0] < last)

        def next_index() -> int:
            issued[0] += 1
            return issued[0] - 1

        async def keep_one_in_flight() -> None:
            while window_open():
                await self._request(next_index(), warmup=False)
            while self.measuring and not self.refusal:  # the fill (module docstring)
                await self._request(next_index(), warmup=True)

        try:
            await asyncio.gather(*(keep_one_in_flight() for _ in range(n)))
        finally:
            record.wall_s = round(time.monotonic() - start, 3)
            sampler.cancel()
            try:
                await sampler
            except asyncio.CancelledError:
                pass
        record.after = await self._counters()
        record.metrics_note = "; ".join(dict.fromkeys(self.notes))
        record.finished_at = _now()
        if self.refusal:
            record.status, record.error = "failed", self.refusal
        elif record.completed == 0:
            record.status = "failed"
            record.error = f"no request completed at concurrency {n}: " + self._first_error()
        elif record.failed:
            record.error = f"{record.failed} of {record.completed + record.failed} requests failed: " + self._first_error()

    async def _request(self, index: int, warmup: bool) -> None:
        prompts = self.session.prompts
        prompt = prompts[index % len(prompts)]
        run = Run(arm=self.arm.id, prompt=prompt.id, index=index, warmup=warmup, level=self.record.level,
                  gate=replace(self.gate))
        self.measuring += not warmup
        try:
            await stream_run(self.http, self.arm, prompt, self.session.settings, run)
        finally:
            self.measuring -= not warmup
        quarantine(run)
        self.session.runs.append(run)
        if run.status != "ok" and run.http_status in REFUSING and not self.refusal:
            self.refusal = (
                f"{REFUSED} {self.record.level} (HTTP {run.http_status}): {run.error}"
            )
        if not warmup:
            if run.status == "ok":
                self.record.completed += 1
            else:
                self.record.failed += 1

    def _first_error(self) -> str:
        level = self.record.level
        errors = [r.error for r in self.session.runs if r.arm == self.arm.id and r.level == level and r.status != "ok"]
        return errors[0] if errors else "unknown"

    async def _counters(self) -> dict[str, float]:
        snapshot = await self._snapshot()
        if snapshot is None:
            return {}
        return {name: value for name in LEVEL_COUNTERS if (value := getattr(snapshot, name)) is not None}

    async def _snapshot(self) -> EngineSnapshot | None:
        try:
            return await fetch_snapshot(self.http, self.metrics_url)
        except MetricsUnavailable as exc:
            self.notes.append(str(exc))
            return None

    async def _sample(self) -> None:
        """The running/waiting gauges' peaks during the measured window."""
        record = self.record
        while True:
            snapshot = await self._snapshot()
            if snapshot is not None:
                for name in ("running", "waiting"):
                    value = getattr(snapshot, name)
                    peak = getattr(record, f"peak_{name}")
                    if value is not None and (peak is None or value > peak):
                        setattr(record, f"peak_{name}", value)
            await asyncio.sleep(SAMPLE_S)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
