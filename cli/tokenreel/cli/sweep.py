"""`tokenreel sweep`: each arm alone at rising concurrency levels into a sweep session (the
recording itself lives in `tokenreel.recorder.sweep_recording`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tokenreel.base.safe_text import shown_path
from tokenreel.cli.app import app, err, fail, out, user_errors
from tokenreel.cli.record import preflight_arms, record_signals
from tokenreel.cli.terminal import Command
from tokenreel.cli.values import duration

if TYPE_CHECKING:
    from tokenreel.recorder.stop_signals import RecordSignals
    from tokenreel.session.model import LevelRecord, Session


@app.command(cls=Command, short_help="Record each arm at rising concurrency levels into a sweep session.")
def sweep(
    config: Annotated[
        Path, typer.Option("--config", "-c", metavar="FILE", help="TOML config: [session] and [[arms]] (or builtin:NAME).")
    ],
    concurrency: Annotated[
        str, typer.Option("--concurrency", metavar="LEVELS", help="Rising levels of requests in flight, e.g. 1,2,4,8,16.")
    ],
    requests: Annotated[
        int | None, typer.Option(min=1, help="Measured requests per level (default: 4 x the level, at least 8).")
    ] = None,
    duration_text: Annotated[
        str | None, typer.Option("--duration", metavar="DURATION", help="Measure each level this long instead (30s, 5m).")
    ] = None,
    out_path: Annotated[
        Path | None, typer.Option("--out", "-o", metavar="FILE", help="Session file (default: sessions/<name>-sweep.json).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Overwrite the session file if it exists.")] = False,
    preflight: Annotated[
        bool, typer.Option(help="Check the arms before the first level (--no-preflight: an endpoint that hides /v1/models).")
    ] = True,
) -> None:
    """Record each arm alone at rising concurrency levels into a sweep session file.

    For each arm in config order (never two at once) and each level N: the endpoint must be
    idle, then N warmup requests, then N requests kept in flight (each finished one replaced at
    once) until --requests measured ones were sent or --duration passed, then the drain. Every
    request's token timings are archived as `record` does, with its level; the engine's
    counters (drafts, accepted tokens, running and waiting requests) are read per level.

    An endpoint that refuses a level (HTTP 429 or 503) fails that level, kept in the session, and
    the arm's higher levels are skipped; the session is saved after every level, so Ctrl-C keeps
    the levels done. A sweep does not resume: record into a new --out.

    Examples:

    \b
      tokenreel sweep --config ladder.toml --concurrency 1,2,4,8,16,32,64
      tokenreel sweep --config ladder.toml --concurrency 1,4,16 --duration 60s --out sessions/sweep.json
    """
    signals = record_signals("starting the sweep", "nothing was recorded")
    try:
        code = _sweep(signals, config, concurrency, requests, duration_text, out_path, force, preflight)
    except KeyboardInterrupt:
        code = signals.exit_code(130, interrupted=True)
    finally:
        signals.restore()
    raise typer.Exit(signals.exit_code(code))


def _sweep(signals: RecordSignals, config: Path, concurrency: str, requests: int | None, duration_text: str | None,
           out_path: Path | None, force: bool, preflight: bool) -> int:
    import asyncio

    from tokenreel.base.files import output_target
    from tokenreel.recorder.config import launch_of, load_config
    from tokenreel.recorder.runner import new_session
    from tokenreel.recorder.sweep_recording import new_sweep, over_limits, parse_levels
    from tokenreel.session.archive import SessionLock

    with user_errors():
        levels = parse_levels(concurrency)
    if requests is not None and duration_text is not None:
        fail("--requests and --duration both end a level: give one of them")
    duration_s = None
    if duration_text is not None:
        try:
            duration_s = duration(duration_text)
        except ValueError:
            fail(f"--duration: expected a duration such as 30s, 5m or 1h, got {duration_text!r}")
    with user_errors():
        cfg = load_config(config)
    replicated = [arm.id for arm in cfg.arms if arm.replicas > 1]
    if replicated:
        fail(f"{shown_path(config)}: arm {replicated[0]!r} has replicas (base_urls); a sweep loads one endpoint per arm:"
             " give each arm one base_url")
    launched = [arm.id for arm in cfg.arms if launch_of(arm) is not None]
    if launched:
        fail(f"{shown_path(config)}: arm {launched[0]!r} has launch; a sweep does not start engines yet: start it yourself"
             " and give its base_url")
    signals.check()
    path = out_path or Path("sessions") / f"{cfg.name}-sweep.json"
    with user_errors():
        output_target(path)
        lock = SessionLock(path).acquire()
    try:
        if path.exists() and not force:
            fail(f"{shown_path(path)} already exists; a sweep does not resume: pass --force to start over or choose another --out")
        session = new_sweep(new_session(cfg.name, cfg.settings, cfg.prompts, cfg.arms))
        signals.check()
        if preflight:
            code = preflight_arms(session.arms, session.prompts, session.settings, signals=signals)
            if code:
                return code
        try:
            problems = asyncio.run(signals.run(over_limits(session.arms, levels)))
        except asyncio.CancelledError:  # Ctrl-C: the command's handler says it, exit 130
            raise KeyboardInterrupt from None
        if problems:
            fail(problems[0])
        return sweep_into(session, path, levels, requests, duration_s, signals)
    finally:
        lock.release()


def sweep_into(session: Session, path: Path, levels: list[int], requests: int | None, duration_s: float | None,
               signals: RecordSignals) -> int:
    """Sweep a fresh sweep session into `path` (the caller holds its lock), print a line per level
    as it ends, the outcome and the crossover; returns the exit code (`tokenreel sweep`'s, and the demo's sweep)."""
    from tokenreel.recorder.client import event_loop
    from tokenreel.recorder.sweep_recording import sweep as sweep_session
    from tokenreel.report.sweep_data import sweep_report

    labels = {arm.id: arm.label for arm in session.arms}  # arms by label, as the report names them
    signals.doing = f"sweeping into {shown_path(path)}"
    signals.outcome = "every completed level is saved"
    say = _LevelLines(labels)
    with user_errors(path, f"{shown_path(path)} keeps every level saved before it"):
        result = event_loop.run(signals.run(sweep_session(session, path, levels, requests, duration_s, say)))
    for record in session.levels:  # the levels never run (skipped after a failure), once each
        if id(record) not in say.said:
            say.level(record)
    out.print(f"session: {shown_path(path)}  ({result.ok} levels ok, {result.failed} failed, {result.skipped} skipped)",
              markup=False, soft_wrap=True)
    if result.ok:
        report = sweep_report(session)
        for line in report["summary"]:
            out.print(line, markup=False, soft_wrap=True)
        _write_schedule(path, report["schedule"], labels)
    lost = [record for record in session.levels if record.status == "ok" and record.failed]
    for record in lost:  # its figures are over fewer requests than asked, and failures may be the load's
        err.print(f"{labels[record.arm]} level {record.level}: {record.failed} of {record.completed + record.failed} requests"
                  f" failed; its figures are over the {record.completed} that completed (lines above say why)",
                  markup=False, soft_wrap=True)
    if result.interrupted:
        return signals.exit_code(130, interrupted=True)
    return 1 if result.failed or result.skipped or lost else 0


def _write_schedule(path: Path, schedule: dict[str, Any], labels: dict[str, str]) -> None:
    """The drafting schedule beside the session (`report.sweep_schedule`), and its lines."""
    from tokenreel.base.files import write_atomic
    from tokenreel.report.sweep_schedule import schedule_json, schedule_lines, schedule_path

    if not schedule["drafters"]:
        return
    target = schedule_path(path)
    with user_errors(target):
        write_atomic(target, schedule_json(schedule))
    out.print(f"schedule: {shown_path(target)}", markup=False, soft_wrap=True)
    for line in [*schedule_lines(schedule, labels), *(d["k_missing"] for d in schedule["drafters"] if d["k_missing"])]:
        out.print(line, markup=False, soft_wrap=True)


class _LevelLines:
    """One line per level, when it ends: [position/total], its outcome and its wall time (a
    level that did not go well on stderr, with its error)."""

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels  # arms by label, as the report names them
        self.position = ""
        self.said: set[int] = set()

    def __call__(self, event: Any) -> None:
        from tokenreel.recorder.sweep_recording import LevelDone, LevelStarted

        if isinstance(event, LevelStarted):
            self.position = f"[{event.position}/{event.total}] "
        elif isinstance(event, LevelDone):
            self.level(event.record, self.position)

    def level(self, record: LevelRecord, position: str = "") -> None:
        from tokenreel.analysis.figures import figure

        self.said.add(id(record))
        if record.status != "ok":
            err.print(f"{position}{self.labels[record.arm]} level {record.level} {record.status}: {record.error}",
                      markup=False, soft_wrap=True)
            return
        wall = f" in {figure(record.wall_s, 2, ' s')}" if record.wall_s is not None else ""
        name = self.labels[record.arm]
        out.print(f"{position}{name} level {record.level}: ok, {record.completed} completed, {record.failed} failed{wall}",
                  markup=False, soft_wrap=True)
