"""What the CLI shows while it works.

- RecordDisplay draws the recorder's events (a bar per arm, a line per run that needs
  attention); RenderBar draws a render's progress callback. The recorder and the renderer stay
  free of terminal code: they emit events or call a callback, and this module draws them.
"""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from tokenreel.analysis.figures import figure
from tokenreel.recorder.events import (
    ArmFinished,
    ArmStarted,
    EngineFailedEvent,
    EngineLaunching,
    EngineLogLost,
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
from tokenreel.recorder.runner import MAX_BUSY_RETRIES
from tokenreel.recorder.target import LookDone


def look_line(event: LookDone) -> str:
    """"look 3 of 11, 50 prompts: nvfp4 vs bf16 +-2.6 % ... (target +-2 %): going on"."""
    widths = ", ".join(
        f"{name} ±{figure(100 * width, 1, ' %')}" if width is not None else f"{name}: no interval yet"
        for name, width in event.widths.items()
    )
    verdict = f"stopped: {event.stopped}" if event.stopped else "going on"
    return f"look {event.look} of {event.looks}, {event.prompts} prompts: {widths} (target ±{100 * event.target:g} %): {verdict}"


class RecordDisplay:
    """A progress bar per arm plus one line per finished run that needs attention."""

    def __init__(self, console: Console, metrics_warned: set[str] | None = None) -> None:
        self.console = console
        self.metrics_warned = set(metrics_warned or ())  # arms already warned about (the preflight)
        self.progress = Progress(
            TextColumn("{task.fields[arm]:<16}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.tasks: dict[str, TaskID] = {}
        self.totals: dict[str, int] = {}  # runs to do per arm, over every look so far

    def __enter__(self) -> RecordDisplay:
        self.progress.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.progress.stop()

    def __call__(self, event: RecordEvent) -> None:
        if isinstance(event, NoMetrics):  # once per arm: unchecked runs must not pass silently
            if event.arm in self.metrics_warned:
                return
            self.metrics_warned.add(event.arm)
            why = event.detail.split(";")[0]
            self.console.print(
                f"warning: {event.arm}: {why}: its runs are recorded without the idle gate or the contention"
                f" check (contended: unknown); {event.hint}",
                markup=False,
                highlight=False,
            )
            return
        if isinstance(event, EngineLogLost):
            self.console.print(f"warning: {event.arm}: engine log {event.problem}: its output is drained, not kept",
                               markup=False, highlight=False)
            return
        if isinstance(event, HostUnwatched):  # once per reason: an unwatched host is said, never silently
            self.console.print(f"note: {event.arm}: engine host not watched: {event.reason}", markup=False, highlight=False)
            return
        if isinstance(event, GpuUnchecked):  # once per record: NVML is absent for every arm alike
            self.console.print(f"note: {event.reason}", markup=False, highlight=False)
            return
        if isinstance(event, GpuWaiting):
            self.console.print(f"note: {event.arm}: GPU busy ({event.detail}): waiting up to {event.wait_s:g} s",
                               markup=False, highlight=False)
            return
        if isinstance(event, GpuFlagged):
            self.console.print(f"note: {event.arm}: GPU still busy, recording anyway, arm flagged: {event.detail}",
                               markup=False, highlight=False)
            return
        if isinstance(event, HostWaitedOut):
            self.console.print(  # about the arm's host, not one run: said once per wait
                f"note: {event.arm}: other processes kept the engine's CPUs busy ({figure(event.pressure_pct, 0, ' %')} of their time)"
                f" for {event.waited_s:.0f} s before {event.prompt} run {event.index}: recording anyway, runs flagged"
                " host_contended while it lasts (`report --exclude-host-contended` leaves them out)",
                markup=False, highlight=False,
            )
            return
        if isinstance(event, RunRetried):
            self.console.print(
                f"{event.arm} / {event.prompt} / run {event.index}: retry {event.attempt} of {MAX_BUSY_RETRIES}: {event.reason}",
                markup=False, highlight=False,
            )
            return
        if isinstance(event, EngineFailedEvent):  # one line for the arm: its runs are not tried one by one
            self.console.print(f"{event.arm}: failed: {event.line}", markup=False, highlight=False)
            return
        if isinstance(event, LookDone):
            self.console.print(look_line(event), markup=False, highlight=False)
            return
        if isinstance(event, ArmStarted):  # under --target-ci once per look: one bar per arm grows
            self.totals[event.arm] = self.totals.get(event.arm, 0) + event.runs_todo
            if event.arm in self.tasks:
                self.progress.update(self.tasks[event.arm], total=self.totals[event.arm], status=f"{event.label}: next look")
            else:
                self.tasks[event.arm] = self.progress.add_task(
                    "", total=event.runs_todo, arm=event.arm, status=f"{event.label}: checking the endpoint"
                )
            return
        task = self.tasks.get(event.arm)
        if task is None:
            return
        if isinstance(event, EngineLaunching):
            status = f"starting {event.command}, waiting for {event.ready_url} (log: {event.log})"
        elif isinstance(event, GateWaiting):
            status = f"waiting for idle: {event.running:g} running, {event.waiting:g} queued ({event.waited_s:.0f} s)"
        elif isinstance(event, RunStarted):
            status = f"{event.prompt} {self._run_name(event.index, event.warmup)}"
        elif isinstance(event, RunProgress):
            status = (
                f"{event.prompt} {self._run_name(event.index, event.warmup)}  {event.tokens} tok"
                f"  {figure(event.tok_s)} tok/s"
            )
        elif isinstance(event, RunFinished):
            self.progress.advance(task)
            status = f"{event.prompt} {self._run_name(event.index, event.warmup)} {event.status}"
            if event.status != "ok" or event.error:
                kind = "note" if event.status == "ok" else event.status
                detail = event.error.removeprefix(f"{kind}: ")  # a quarantined run's error says "invalid:" itself
                self.console.print(
                    f"{event.arm} / {event.prompt} / run {event.index}: {kind}: {detail}",
                    markup=False,
                    highlight=False,
                )
            if event.client_busy:  # a run left out: never silently
                self.console.print(
                    f"{event.arm} / {event.prompt} / run {event.index}: client busy: {event.client_busy}",
                    markup=False,
                    highlight=False,
                )
        elif isinstance(event, ArmFinished):
            status = f"done: {event.ok} ok, {event.failed} failed, {event.skipped} skipped"
        else:
            return
        self.progress.update(task, status=status)

    @staticmethod
    def _run_name(index: int, warmup: bool) -> str:
        return f"warmup {index}" if warmup else f"run {index}"


class RenderBar:
    """A progress callback (frames done, total) drawn as a bar with frames/s (or `unit`/s) and ETA."""

    def __init__(self, console: Console, label: str, unit: str = "frames") -> None:
        self.progress = Progress(
            TextColumn(label),
            BarColumn(bar_width=32),
            MofNCompleteColumn(),
            TextColumn(f"{{task.fields[fps]}} {unit}/s"),
            TimeRemainingColumn(),
            console=console,
        )
        self.task = self.progress.add_task("", total=None, fps="—")
        self.started = 0.0

    def __enter__(self) -> RenderBar:
        self.started = time.perf_counter()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.progress.live.is_started:
            self.progress.stop()

    def __call__(self, done: int, total: int) -> None:
        """Drawn from the first report of progress on: a render refused up front shows no bar."""
        if not self.progress.live.is_started:
            self.progress.start()
        elapsed = time.perf_counter() - self.started
        fps = f"{done / elapsed:.0f}" if elapsed > 0 and done else "—"
        self.progress.update(self.task, completed=done, total=total, fps=fps)
