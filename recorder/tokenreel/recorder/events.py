"""The recorder's progress events: small frozen records a live display draws (`cli.progress`).

The recorder stays free of terminal code: `runner.record` hands each event to the caller's
`EventFn`; every event but `LookDone` names the arm it is about (a replica's events name the
replica's arm, `replicas.replica_name`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from tokenreel.recorder.target import LookDone


@dataclass(frozen=True)
class ArmStarted:
    arm: str
    label: str
    position: int  # 1-based among the arms being recorded
    arms: int
    runs_todo: int


@dataclass(frozen=True)
class GateWaiting:
    """The endpoint is busy; the gate keeps polling until idle or idle_wait_s."""

    arm: str
    prompt: str
    index: int
    running: float
    waiting: float
    waited_s: float


@dataclass(frozen=True)
class HostWaitedOut:
    """Other processes kept the engine's CPUs (this machine) loaded for the whole host gate: the
    run is recorded anyway and flagged host_contended; the arm does not wait again while it lasts."""

    arm: str
    prompt: str
    index: int
    pressure_pct: float  # others' share of the engine's CPUs' time (HostPressure.others_pct)
    waited_s: float


@dataclass(frozen=True)
class HostUnwatched:
    """Once per reason: the engine host's load is not read (remote endpoint, the engine's processes not found)."""

    arm: str
    reason: str


@dataclass(frozen=True)
class GpuWaiting:
    """The arm's GPU is busy (another compute process, or utilisation over gpu_util_pct): the
    GPU gate waits, at most gpu_wait_s, before the arm's first run."""

    arm: str
    detail: str
    wait_s: float


@dataclass(frozen=True)
class GpuFlagged:
    """The GPU stayed busy through the whole GPU gate: the arm is recorded anyway, flagged."""

    arm: str
    detail: str


@dataclass(frozen=True)
class GpuUnchecked:
    """Once per record: NVML cannot be read here, so no arm's GPU is checked or archived."""

    arm: str
    reason: str


@dataclass(frozen=True)
class RunRetried:
    """A measured run recorded again because this machine was too busy for exact times."""

    arm: str
    prompt: str
    index: int
    attempt: int  # 1-based retry number, at most runner.MAX_BUSY_RETRIES
    reason: str


@dataclass(frozen=True)
class RunStarted:
    arm: str
    prompt: str
    index: int
    warmup: bool
    gate: str  # idle | unavailable


@dataclass(frozen=True)
class RunProgress:
    """At most ~10 per second per run; tok_s is the decode rate since the first token seen."""

    arm: str
    prompt: str
    index: int
    warmup: bool
    tokens: int
    elapsed_s: float
    tok_s: float | None


@dataclass(frozen=True)
class RunFinished:
    arm: str
    prompt: str
    index: int
    warmup: bool
    status: str  # ok | failed | skipped | invalid
    error: str  # one line; for ok runs a note (forced length not met), usually empty
    tokens: int
    ttft_s: float | None
    decode_tok_s: float | None
    gate: str
    contended: bool | None
    client_busy: str = ""  # for a client_busy run left out: its client delay and why


@dataclass(frozen=True)
class EngineLaunching:
    """The arm's engine is starting (its `launch`); the arm waits until ready_url answers."""

    arm: str
    command: str
    ready_url: str
    log: str


@dataclass(frozen=True)
class EngineFailedEvent:
    """The arm's engine exited or never answered: its runs failed; `line` names the command and the log's tail."""

    arm: str
    line: str


@dataclass(frozen=True)
class EngineLogLost:
    """Once per engine: its log could not be written (disk full, quota, a link at its name); its
    output is drained and not kept, so the engine never blocks on it."""

    arm: str
    problem: str


@dataclass(frozen=True)
class NoMetrics:
    """Once per arm: /metrics did not answer, so runs go unchecked for other traffic."""

    arm: str
    metrics_url: str
    detail: str  # the gate's one line (why /metrics failed)
    hint: str  # the server flag that enables metrics, for the engine the fingerprint names


@dataclass(frozen=True)
class ArmFinished:
    arm: str
    ok: int
    failed: int
    skipped: int
    invalid: int = 0  # runs with an impossible value from the server (tokenreel.session.quarantine)


# Every event about one arm (all but LookDone, which is about the whole look).
ArmEvent = Union[
    ArmStarted, GateWaiting, RunStarted, RunProgress, RunFinished, ArmFinished, NoMetrics, HostWaitedOut, HostUnwatched,
    RunRetried, EngineLaunching, EngineFailedEvent, EngineLogLost, GpuWaiting, GpuFlagged, GpuUnchecked,
]
RecordEvent = Union[ArmEvent, LookDone]
EventFn = Callable[[RecordEvent], None]
