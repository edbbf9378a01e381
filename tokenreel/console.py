"""What the CLI shows while it works: the recording display, the render bar, the summary table.

Kept apart from the recorder and renderer so that they stay free of terminal code: they emit
events or call a progress callback, and this module draws them with rich.
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
from rich.table import Table
from rich.text import Text

from tokenreel.recorder.runner import (
    ArmFinished,
    ArmStarted,
    MAX_BUSY_RETRIES,
    GateWaiting,
    HostUnwatched,
    HostWaitedOut,
    NoMetrics,
    RecordEvent,
    RunFinished,
    RunProgress,
    RunRetried,
    RunStarted,
)
from tokenreel.figures import figure, multiplier
from tokenreel.ladder import build_cells, build_ladder, category_table
from tokenreel.model import Session
from tokenreel.terminal import FitTable


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
        if isinstance(event, HostUnwatched):  # once per reason: an unwatched host is said, never silently
            self.console.print(f"note: {event.arm}: engine host not watched: {event.reason}", markup=False, highlight=False)
            return
        if isinstance(event, HostWaitedOut):
            self.console.print(
                f"{event.arm} / {event.prompt} / run {event.index}: the engine's host stayed under CPU pressure"
                f" ({figure(event.pressure_pct, 0, ' %')}) for {event.waited_s:.0f} s: recording anyway, runs flagged"
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
        if isinstance(event, ArmStarted):
            self.tasks[event.arm] = self.progress.add_task(
                "", total=event.runs_todo, arm=event.arm, status=f"{event.label}: checking the endpoint"
            )
            return
        task = self.tasks.get(event.arm)
        if task is None:
            return
        if isinstance(event, GateWaiting):
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
                self.console.print(
                    f"{event.arm} / {event.prompt} / run {event.index}: {kind}: {event.error}",
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
    """A progress callback (frames done, total) drawn as a bar with frames/s and ETA."""

    def __init__(self, console: Console, label: str) -> None:
        self.progress = Progress(
            TextColumn(label),
            BarColumn(bar_width=32),
            MofNCompleteColumn(),
            TextColumn("{task.fields[fps]} frames/s"),
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


def summary_tables(session: Session) -> list[Table]:
    """The ladder and the per-category table, as `tokenreel report` computes them."""
    cells = build_cells(session)
    ladder = build_ladder(session, cells)
    title = session.name + (" (simulated endpoints)" if session.simulated else "")
    table = FitTable(title=Text(title, style="table.title"), title_justify="left")
    table.number_column("Step", justify="left")
    table.label_column("Arm")
    # The acceptance rate gets a column only in a ladder that has one (a speculative arm).
    rates = any(row.acceptance_rate is not None for row in ladder)
    for column in ("Decode tok/s", "vs prior", "vs first", "TTFT s", "Accept. len") + (("Accept. rate",) if rates else ()):
        table.number_column(column)
    for i, row in enumerate(ladder, start=1):
        length = figure(row.acceptance_length, 2)
        if row.acceptance_approximate and row.acceptance_length is not None:
            length = f"≈{length}"  # from counters printed in rounded steps
        rate = (figure(None if row.acceptance_rate is None else row.acceptance_rate * 100, 0, " %"),) if rates else ()
        table.add_row(
            str(i),
            Text(row.label),
            figure(row.decode_tok_s),
            multiplier(row.vs_prior),
            multiplier(row.vs_first),
            figure(row.ttft_s, 2),
            length,
            *rate,
        )
    categories = category_table(session, cells)
    by_category = FitTable(title="Decode tok/s by prompt category", title_justify="left")
    by_category.label_column("Category")
    for row in ladder:
        by_category.number_column(Text(row.arm))
    for category, values in categories.items():
        by_category.add_row(Text(category), *(figure(values.get(row.arm)) for row in ladder))
    return [table, by_category]
