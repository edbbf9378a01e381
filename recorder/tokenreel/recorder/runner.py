"""Record a session: arms strictly one after another, one request at a time, saved after every run.

Sequential arms are the method (each arm alone on its endpoint, so nothing competes); saving
the whole archive atomically after every run means a crash or Ctrl-C never loses a completed
run, and re-running `record` on the same session redoes only what is not ok yet (resume). An arm
with `launch` has its engine started for its turn and stopped before the next (recorder.launch).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import aiohttp

import tokenreel.base.version
from tokenreel.analysis.metrics import NS_PER_S, output_tokens, run_metrics
from tokenreel.analysis.selection import client_busy_inexact
from tokenreel.recorder.client.kernel_clock import stamping_session
from tokenreel.recorder.client.sse_client import ProgressFn, stream_run
from tokenreel.recorder.client.wakeup import prompt_wakeups
from tokenreel.recorder.config import default_metrics_url, launch_of
from tokenreel.recorder.engines.engine_metrics import merge_acceptance, missing_acceptance
from tokenreel.recorder.engines.fingerprint import fingerprint, scrubbed_argv
from tokenreel.recorder.engines.launch import Engine, EngineFailed, engine_for
from tokenreel.recorder.engines.preflight import check_arm
from tokenreel.recorder.events import (
    ArmFinished,
    ArmStarted,
    EngineFailedEvent,
    EngineLaunching,
    EngineLogLost,
    EventFn,
    GateWaiting,
    GpuFlagged,
    GpuUnchecked,
    GpuWaiting,
    HostUnwatched,
    HostWaitedOut,
    NoMetrics,
    RecordEvent,
    RunFinished,
    RunProgress,
    RunRetried,
    RunStarted,
)
from tokenreel.recorder.gates.gpu_gate import (
    EngineProcesses,
    GpuWait,
    NoNvml,
    gpu_gate,
    gpu_pids,
    listener_pids,
    unavailable,
    with_descendants,
)
from tokenreel.recorder.gates.host_gate import HostWatch, Load, Unwatched, endpoint_is_local, endpoint_port, find_engine
from tokenreel.recorder.gates.idle_gate import contention, settle_after_run, wait_idle
from tokenreel.recorder.host_facts import host_facts
from tokenreel.recorder.replicas import replica_arm, replica_name, rotated, shards
from tokenreel.recorder.target import LookDone, TargetPlan
from tokenreel.recorder.todo import done_keys, runs_todo, select_arms
from tokenreel.session.archive import save
from tokenreel.session.model import Arm, Prompt, Run, Session, Settings, replica_count
from tokenreel.session.quarantine import quarantine

# A measured run whose times are not exact because this machine was busy (user-space clock,
# client busy) is recorded again at once, at most this many times; each retry is said.
MAX_BUSY_RETRIES = 2


@dataclass
class RecordResult:
    """What this call recorded; runs already ok in the session are counted in `already_ok`."""

    path: Path
    ok: int = 0
    failed: int = 0
    skipped: int = 0
    invalid: int = 0
    already_ok: int = 0
    short: int = 0  # measured ok runs that missed the forced length (the endpoint's doing)
    retried: int = 0  # measured runs recorded again because this machine was busy (bounded)
    client_busy: int = 0  # measured runs whose recorder woke late; kept when their times are exact
    host_contended: int = 0  # measured runs recorded while the engine's host was under CPU pressure
    interrupted: bool = False
    stopped_on_failure: bool = False
    lost: list[str] = field(default_factory=list)  # record --ray: one line per recorder worker that died


def new_session(name: str, settings: Settings, prompts: list[Prompt], arms: list[Arm]) -> Session:
    """A fresh session stamped with the tool version, the recording host and the time."""
    return Session(
        name=name,
        settings=settings,
        prompts=prompts,
        arms=arms,
        tool_version=tokenreel.base.version.__version__,
        host=host_facts(),
        created_at=_now(),
    )


async def record(
    session: Session,
    path: str | Path,
    arm_ids: list[str] | None = None,
    on_event: EventFn | None = None,
    fail_fast: bool = False,
    plan: TargetPlan | None = None,
) -> RecordResult:
    """Record the selected arms (all by default) in config order into `path`.

    Runs already ok in `session` (by arm, prompt, index) are kept; failed and skipped ones are
    retried and replaced. Ctrl-C or cancellation stops cleanly: completed runs are already
    saved, the result says `interrupted` (the cancellation is absorbed so the caller gets it).
    The caller holds `archive.SessionLock(path)` for the whole call, as `tokenreel record` does.
    With a `plan` (`record --target-ci`), the arms record the plan's looks in turn until it
    stops; in a session recorded under a stopping rule, other calls record only the prompts drawn.
    """
    arms = select_arms(session, arm_ids)
    result = RecordResult(Path(path))
    selected = {arm.id for arm in arms}
    result.already_ok = sum(1 for key in done_keys(session) if key[0] in selected)
    emit = on_event or (lambda event: None)
    save(session, result.path)
    async with _recording_http() as http:
        try:
            if plan is None and replica_count(arms) > 1:
                async with asyncio.TaskGroup() as group:  # a replica that fails goes on alone (under fail_fast it stops alone)
                    for replica in range(replica_count(arms)):
                        group.create_task(record_replica(session, result, emit, fail_fast, http, arms, replica))
            elif plan is None:
                drawn = set(session.stopping.drawn) if session.stopping else None
                await _Recorder(session, result, emit, fail_fast).arms(http, arms, drawn)
            else:
                await _record_looks(_Recorder(session, result, emit, fail_fast), http, arms, plan)
        except (asyncio.CancelledError, KeyboardInterrupt):
            result.interrupted = True
    return result


@asynccontextmanager
async def _recording_http() -> AsyncIterator[aiohttp.ClientSession]:
    """One HTTP session for a whole recording: fingerprint, gate, metrics and runs share its connections,
    each of which logs the kernel's receive time of every read (recorder.kernel_clock); the
    thread reading them is woken ahead of busy neighbours (recorder.wakeup)."""
    with prompt_wakeups():
        async with stamping_session({"User-Agent": f"tokenreel/{tokenreel.base.version.__version__}"}) as http:
            yield http


async def record_replica(session: Session, result: RecordResult, emit: EventFn, fail_fast: bool,
                         http: aiohttp.ClientSession | None, arms: list[Arm], replica: int | None,
                         persist: Callable[[], None] | None = None, node: str | None = None) -> None:
    """One replica's part of a recording: its shard of the prompts over the arms in its rotated
    order (recorder.replicas), its events naming it; `replica` None: arms of one endpoint, every
    prompt. With `http` None it opens the recording's own HTTP session: a `record --ray` worker
    (recorder.ray_recording) runs this next to the replica's engines, `persist` sending what
    changed to the driver that saves, `node` naming where its runs were recorded."""
    if http is None:
        async with _recording_http() as own:
            return await record_replica(session, result, emit, fail_fast, own, arms, replica, persist, node)
    if replica is None:
        await _Recorder(session, result, emit, fail_fast, None, persist, node).arms(http, arms, None)
        return

    def tagged(event: RecordEvent) -> None:
        emit(event if isinstance(event, LookDone) else replace(event, arm=replica_name(event.arm, replica)))

    recorder = _Recorder(session, result, tagged, fail_fast, replica, persist, node)
    views = rotated([replica_arm(arm, replica) for arm in arms], replica)
    await recorder.arms(http, views, set(shards(session.prompts, replica_count(arms))[replica]))


async def _record_looks(recorder: _Recorder, http: aiohttp.ClientSession, arms: list[Arm], plan: TargetPlan) -> None:
    """Each look's prompts on every arm in turn, then the look; until the plan stops."""
    for prompts in plan.batches():
        if not await recorder.arms(http, arms, prompts, plan.out_of_time) and not plan.out_of_time():
            return  # fail_fast: a failed run stops everything
        done = plan.look(len(prompts))  # out of time: the look says so (its intervals over what was recorded)
        recorder.persist()
        recorder.emit(done)
        if done.stopped:
            return


class _Recorder:
    """Per-call state: the session, the running tally and the event sink."""

    def __init__(self, session: Session, result: RecordResult, emit: EventFn, fail_fast: bool,
                 replica: int | None = None, persist: Callable[[], None] | None = None, node: str | None = None) -> None:
        self.session, self.result, self.emit, self.fail_fast = session, result, emit, fail_fast
        self.replica = replica  # which of the arms' replicas this records (None: they have one)
        self.node = node  # the Ray node recording (record --ray); None: this process
        # After every change: the whole session saved atomically, or (a Ray worker) sent to the driver that saves.
        self.persist = persist or (lambda: save(session, result.path))
        self.warned_no_metrics = False  # NoMetrics goes out once per arm
        self.log_lost: list[Engine] = []  # engines whose log problem was said
        self.host_reasons_said: set[str] = set()  # HostUnwatched goes out once per reason
        self.host: HostWatch | None = None  # the arm's host gate; None: not watched (host_note says why)
        self.host_note = ""
        self.gpu_reason = ""  # why NVML cannot be read (said once, archived per arm): not tried again

    async def arms(self, http: aiohttp.ClientSession, arms: list[Arm], prompts: set[str] | None,
                   out_of_time: Callable[[], bool] = lambda: False) -> bool:
        """Record the arms one after another (of `prompts` alone when given); False when recording
        must stop (fail_fast, or out of time)."""
        for position, arm in enumerate(arms, start=1):
            if not await self.arm(http, arm, position, len(arms), prompts) or out_of_time():
                return False
        return True

    async def arm(self, http: aiohttp.ClientSession, arm: Arm, position: int, arms: int, prompts: set[str] | None) -> bool:
        """Record one arm; False when recording must stop (fail_fast)."""
        session = self.session
        todo = runs_todo(session, arm, prompts)
        if not todo:
            return True
        self.emit(ArmStarted(arm.id, arm.label, position, arms, len(todo)))
        tally = {"ok": 0, "failed": 0, "skipped": 0, "invalid": 0}
        self.warned_no_metrics = False
        recording = {"started_at": _now()} | ({} if self.replica is None else {"replica": str(self.replica)}) | (
            {} if self.node is None else {"node": self.node, "hostname": socket.gethostname()})
        arm.recorded.append(recording)
        launch, engine, owner = launch_of(arm), None, None
        left = todo  # the runs not recorded yet: an engine failing fails these
        try:
            if launch is not None:  # its engine starts now and stops in the finally below, before the next arm
                engine, arm = engine_for(arm, launch, self.result.path)
                owner = await self._launch(http, engine, arm)
            arm.fingerprint = await fingerprint(http, arm) or arm.fingerprint  # keep the last one if none answers
            if launch is not None:
                arm.fingerprint["launch"] = scrubbed_argv(launch.argv)
            if self.replica in (None, 0):  # a replica's or launched arm is a view (arm_view): the archive keeps replica 0's
                session.arm(arm.id).fingerprint = arm.fingerprint
            if arm.fingerprint.get("version", {}).get("simulated") is True:
                session.simulated = True
            self.persist()
            local = await endpoint_is_local(arm.base_url)
            if local and self.replica is None:  # replicas record at once: each other's engines share the machine
                await self._check_gpu(arm, owner)
            self._watch_host(arm, local, engine.process.pid if engine is not None and engine.process else None)
            for done, (prompt, index) in enumerate(todo):
                left = todo[done:]
                run = await self._run(http, arm, prompt, index)
                for attempt in range(1, MAX_BUSY_RETRIES + 1):
                    if run.warmup or run.status != "ok" or not client_busy_inexact(run):
                        break
                    self.result.retried += 1
                    self.emit(RunRetried(arm.id, prompt.id, index, attempt, _client_busy_line(run)))
                    run = await self._run(http, arm, prompt, index)
                if run.status == "failed" and engine is not None:
                    await engine.raise_if_exited()  # then this run and the rest fail with its exit code and last lines
                self._store(run)
                self._count(run)
                self._say_log_problem(arm, engine)
                if run.gate.status == "unavailable" and not self.warned_no_metrics:
                    self.warned_no_metrics = True
                    url = arm.metrics_url or default_metrics_url(arm.base_url)
                    self.emit(NoMetrics(arm.id, url, run.gate.detail, metrics_flag_hint(arm, run.gate.detail)))
                tally[run.status] += 1
                setattr(self.result, run.status, getattr(self.result, run.status) + 1)
                self.emit(_finished(run))
                if self.fail_fast and run.status in ("failed", "invalid"):
                    self.result.stopped_on_failure = True
                    return False
        except EngineFailed as exc:
            self._engine_failed(arm, left, str(exc), tally)
            if self.fail_fast:
                self.result.stopped_on_failure = True
                return False
        finally:
            if engine is not None:
                engine.stop()
                recording.update(engine.times())
                self._say_log_problem(arm, engine)
            recording["finished_at"] = _now()
            self.persist()
            self.emit(ArmFinished(arm.id, **tally))
        return True

    def _say_log_problem(self, arm: Arm, engine: Engine | None) -> None:
        """The engine log's problem, once per engine."""
        if engine is not None and engine.log_problem and all(e is not engine for e in self.log_lost):
            self.log_lost.append(engine)
            self.emit(EngineLogLost(arm.id, engine.log_problem))

    async def _launch(self, http: aiohttp.ClientSession, engine: Engine, arm: Arm) -> EngineProcesses:
        """Start the arm's engine, wait until it answers, then check it as the preflight would have
        (model served, context, key): EngineFailed with one line when any of that fails. Returns its
        processes for the GPU gate: its own and what was on the GPU before it started."""
        self.emit(EngineLaunching(arm.id, engine.argv[0], engine.ready_url, str(engine.log_path)))
        before = None if self.gpu_reason else gpu_pids()  # what is on the GPU before it is never the engine's
        engine.start()
        await engine.wait_ready(http)
        check = await check_arm(http, arm, self.session.prompts, self.session.settings)
        if check.problems:
            raise EngineFailed(f"engine of arm {arm.id} ({engine.argv[0]}) answers, but: {check.problems[0]}")
        assert engine.process is not None  # started above, or EngineFailed
        return EngineProcesses(pids=with_descendants(frozenset({engine.process.pid})), before=before)

    def _engine_failed(self, arm: Arm, todo: list[tuple[Prompt, int]], line: str, tally: dict[str, int]) -> None:
        """The arm's runs fail with the engine's one line (said once); `--resume` relaunches for them."""
        self.emit(EngineFailedEvent(arm.id, line))
        started = _now()
        failed = [Run(arm=arm.id, prompt=prompt.id, index=index, warmup=index < self.session.settings.warmup,
                      status="failed", error=line, started_at=started, replica=self.replica, node=self.node)
                  for prompt, index in todo]
        keys = {run.key for run in failed}
        self.session.runs = [r for r in self.session.runs if r.key not in keys] + failed
        tally["failed"] += len(failed)
        self.result.failed += len(failed)

    async def _check_gpu(self, arm: Arm, engine: EngineProcesses | None = None) -> None:
        """The GPU gate before the arm (recorder.gpu_gate), archived with the arm. The engine is
        the endpoint port's listener unless given: one tokenreel starts itself passes its process
        group and the GPU's processes from before it started."""
        settings = self.session.settings
        if self.gpu_reason:
            check = unavailable(self.gpu_reason)
        else:
            engine = engine or EngineProcesses(pids=_engine_pids(arm.base_url))
            try:
                check = await gpu_gate(GpuWait(settings.gpu_util_pct, settings.gpu_wait_s, engine),
                                       lambda seen: self.emit(GpuWaiting(arm.id, seen, settings.gpu_wait_s)))
            except NoNvml as exc:
                self.gpu_reason = str(exc)
                if exc.gpu_here:  # a machine without an NVIDIA driver has no GPU to check: archived only
                    self.emit(GpuUnchecked(arm.id, self.gpu_reason))
                check = unavailable(self.gpu_reason)
            else:
                if check.status == "busy":
                    self.emit(GpuFlagged(arm.id, check.detail))
        check.at = _now()
        arm.gpu.append(check)
        self.persist()

    def _watch_host(self, arm: Arm, local: bool, launched_pid: int | None) -> None:
        """Set up the host gate for this arm: only an endpoint on this machine whose engine's
        processes are known (launched, the port's listener, or the GPU gate's processes)."""
        self.host, self.host_note = None, ""
        if not local:
            self.host_note = "remote endpoint: its host's CPU load is not visible from here"
        else:
            try:
                settings = self.session.settings
                engine = find_engine(arm.base_url, launched_pid, arm.gpu[-1] if arm.gpu else None)
                self.host = HostWatch(engine, settings.host_pressure_pct, settings.host_wait_s)
            except Unwatched as exc:
                self.host_note = str(exc)
            except (OSError, ValueError) as exc:
                self.host_note = _unreadable(exc)
        self._say_host_note(arm)

    def _host_lost(self, arm: Arm, exc: Exception) -> None:
        """The host gate stops for the rest of the arm (the engine's processes gone, /proc unreadable), said once."""
        self.host, self.host_note = None, str(exc) if isinstance(exc, Unwatched) else _unreadable(exc)
        self._say_host_note(arm)

    def _say_host_note(self, arm: Arm) -> None:
        """HostUnwatched, once per reason: never once per run."""
        if self.host_note and self.host_note not in self.host_reasons_said:
            self.host_reasons_said.add(self.host_note)
            self.emit(HostUnwatched(arm.id, self.host_note))

    def _count(self, run: Run) -> None:
        """The tallies `record` reports at the end (exit code and the busy-machine summary)."""
        if run.warmup or run.status != "ok":
            return
        settings = self.session.settings
        if settings.ignore_eos and output_tokens(run) != settings.max_tokens:
            self.result.short += 1
        self.result.client_busy += bool(run.client_busy)
        self.result.host_contended += bool(run.host and run.host.contended)

    async def _run(self, http: aiohttp.ClientSession, arm: Arm, prompt: Prompt, index: int) -> Run:
        settings = self.session.settings
        run = Run(arm=arm.id, prompt=prompt.id, index=index, warmup=index < settings.warmup, replica=self.replica,
                  node=self.node)
        metrics_url = arm.metrics_url or default_metrics_url(arm.base_url)

        def on_wait(running: float, waiting: float, waited_s: float) -> None:
            self.emit(GateWaiting(arm.id, prompt.id, index, running, waiting, waited_s))

        run.gate, before = await wait_idle(http, metrics_url, settings.idle_wait_s, on_wait)
        if run.gate.status == "busy":
            run.status, run.error, run.started_at = "skipped", run.gate.detail, _now()
            return run
        host_before: Load | None = None  # the gate's reading before the run; none when host_wait_s is 0
        waited_s, waited_out = 0.0, False
        if self.host is not None:
            try:
                if settings.host_wait_s > 0:
                    host_before, waited_s, waited_out = await self.host.settle()
                self.host.begin_run()
            except (Unwatched, OSError, ValueError) as exc:
                self._host_lost(arm, exc)
            else:
                if waited_out and host_before is not None:
                    self.emit(HostWaitedOut(arm.id, prompt.id, index, host_before.others_pct, waited_s))
        self.emit(RunStarted(arm.id, prompt.id, index, run.warmup, run.gate.status))
        await stream_run(http, arm, prompt, settings, run, self._progress(run))
        if self.host is not None:
            try:
                run.host = self.host.end_run(host_before, waited_s)
            except (Unwatched, OSError, ValueError) as exc:
                self._host_lost(arm, exc)
        run.host_note = self.host_note
        after = await settle_after_run(http, metrics_url) if before is not None else None
        run.contended, run.contention_detail = contention(before, after, output_tokens(run))
        # The response's own counts win; the counters fill what it lacks (llama.cpp's verify steps).
        run.acceptance = merge_acceptance(run.acceptance, before, after)
        run.acceptance_note = missing_acceptance(run.acceptance, before, after) if run.status == "ok" else ""
        return run

    def _progress(self, run: Run) -> ProgressFn:
        """Turn the stream's throttled (tokens, t_ns) callbacks into RunProgress events."""
        first: tuple[int, int] | None = None  # (tokens, t_ns) at the first callback with tokens

        def progress(tokens: int, t_ns: int) -> None:
            nonlocal first
            if tokens and first is None:
                first = (tokens, t_ns)
            tok_s = None
            if first is not None and t_ns > first[1]:
                tok_s = (tokens - first[0]) * NS_PER_S / (t_ns - first[1])
            self.emit(RunProgress(run.arm, run.prompt, run.index, run.warmup, tokens, t_ns / NS_PER_S, tok_s))

        return progress

    def _store(self, run: Run) -> None:
        """Replace an earlier failed/skipped attempt of the same run, then save at once.

        The run is checked first (tokenreel.session.quarantine), so one that the loader would reject is
        reported and counted as `invalid` rather than poisoning the session."""
        quarantine(run, str(self.result.path))
        self.session.runs = [r for r in self.session.runs if r.key != run.key]
        self.session.runs.append(run)
        self.persist()


def metrics_flag_hint(arm: Arm, detail: str = "") -> str:
    """The server flag that turns /metrics on, for the engine the fingerprint (or a 501) names."""
    fp = arm.fingerprint
    if fp.get("props") is not None or "(HTTP 501)" in detail:  # llama.cpp answers 501 without --metrics
        return "llama.cpp serves /metrics only when started with --metrics"
    if fp.get("server_info") is not None:
        return "SGLang serves /metrics only when started with --enable-metrics"
    return "start SGLang with --enable-metrics or llama.cpp with --metrics (vLLM serves it by default), or set metrics_url"


def _finished(run: Run) -> RunFinished:
    metrics = run_metrics(run)
    return RunFinished(
        arm=run.arm,
        prompt=run.prompt,
        index=run.index,
        warmup=run.warmup,
        status=run.status,
        error=run.error,
        tokens=metrics.output_tokens,
        ttft_s=metrics.ttft_s,
        decode_tok_s=metrics.decode_tok_s,
        gate=run.gate.status,
        contended=run.contended,
        client_busy=_client_busy_line(run),
    )


def _engine_pids(base_url: str) -> frozenset[int] | None:
    """The processes of an engine on this machine: the one listening on the endpoint's port and
    its descendants; None when that is not visible here."""
    roots = listener_pids(endpoint_port(base_url))
    return with_descendants(roots) if roots else None


def _unreadable(exc: Exception) -> str:
    """The note when /proc cannot be read for the host gate."""
    return f"the host's CPU load could not be read ({exc}): runs are not checked for a busy host"


def _client_busy_line(run: Run) -> str:
    """For a run left out because its client was busy on the user-space clock: why, else ""."""
    if not client_busy_inexact(run):
        return ""
    why = run.clock.reason if run.clock and run.clock.reason else "no kernel receive times"
    return f"this machine was busy and the run was timed by the user-space clock ({why}): its times are late, left out"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
