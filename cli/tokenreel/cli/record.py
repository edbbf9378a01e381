"""`tokenreel record`: the preflight, then each arm alone into the session file (the recording
itself, resuming and Ctrl-C handling live in `tokenreel.recorder`)."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tokenreel.base.safe_text import shown_path
from tokenreel.cli.app import EXIT_BAD_INPUT, app, err, out, split_ids, user_errors
from tokenreel.cli.terminal import Command
from tokenreel.cli.values import duration, percent
from tokenreel.session.model import Session

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from tokenreel.recorder.events import EventFn
    from tokenreel.recorder.runner import RecordResult
    from tokenreel.recorder.stop_signals import RecordSignals
    from tokenreel.recorder.target import TargetPlan
    from tokenreel.session.model import Arm, Prompt, Settings


def record_into(
    session: Session, path: Path, arm_ids: list[str] | None, fail_fast: bool, metrics_warned: set[str] | None = None,
    signals: RecordSignals | None = None, plan: TargetPlan | None = None, on_ray: RayRecording | None = None,
    config: Path | None = None,
) -> int:
    """Record with the live display, print the ladder and the outcome; returns the exit code.
    With `on_ray` (record --ray), each replica's part runs on a Ray worker next to its engines;
    `config` is named in the command that records the arms not recorded yet."""
    # Lazy: the recorder loads only when a recording starts, not for `--help`.
    from rich.text import Text

    from tokenreel.cli.grade import grade_and_save
    from tokenreel.cli.progress import RecordDisplay
    from tokenreel.recorder.client import event_loop
    from tokenreel.recorder.grading.session_grades import runs_to_grade
    from tokenreel.recorder.outcome import outcome
    from tokenreel.recorder.runner import record as record_session
    from tokenreel.report.terminal_tables import summary_tables

    # Arms whose missing /metrics the preflight already named are not warned about twice.
    unsaved = f"the last run was not saved; {shown_path(path)} keeps every run saved before it (then --resume)"
    with on_ray.cluster() if on_ray else nullcontext(), user_errors(path, unsaved), RecordDisplay(err, metrics_warned) as display:
        recording = (on_ray.record(session, path, arm_ids, display, fail_fast) if on_ray
                     else record_session(session, path, arm_ids, display, fail_fast, plan))
        result = event_loop.run(signals.run(recording) if signals else recording)
    for part in summary_tables(session, "CONFIG" if config is None else shown_path(config), shown_path(path)):
        out.print(part, soft_wrap=isinstance(part, Text))  # a line with a command stays whole, to copy
    out.print(
        f"session: {shown_path(path)}  ({result.ok} runs recorded, {result.already_ok} already done, "
        f"{result.failed} failed, {result.skipped} skipped" + (f", {result.invalid} invalid)" if result.invalid else ")")
    )
    if result.interrupted:
        if signals is not None:
            return signals.exit_code(130, interrupted=True)
        err.print("interrupted: every completed run is saved; continue with `tokenreel record --resume`")
        return 130
    done = outcome(session, result, arm_ids, targeted=plan is not None)
    for line in done.lines:
        err.print(line, markup=False, soft_wrap=True)
    if runs_to_grade(session, ungraded_only=True):  # after the recording: grading must not disturb its timings
        grade_and_save(session, path, ungraded_only=True)
    return done.exit_code


def record_signals(doing: str, kept: str) -> RecordSignals:
    """Ctrl-C and SIGTERM handling for a recording, saying its one line on stderr."""
    from tokenreel.recorder.stop_signals import RecordSignals

    return RecordSignals(doing, kept, lambda line: err.print(line, markup=False, soft_wrap=True))


@app.command(cls=Command, short_help="Record each arm's token timings into a session file.")
def record(
    config: Annotated[
        Path, typer.Option("--config", "-c", metavar="FILE", help="TOML config: [session] and [[arms]] (or builtin:NAME).")
    ],
    out_path: Annotated[
        Path | None, typer.Option("--out", "-o", metavar="FILE", help="Session file (default: sessions/<name>.json).")
    ] = None,
    arms: Annotated[
        str | None, typer.Option(metavar="IDS", help="Record only these arm ids (comma-separated) into the session.")
    ] = None,
    repeats: Annotated[int | None, typer.Option(min=1, help="Measured runs per prompt (config: repeats).")] = None,
    warmup: Annotated[int | None, typer.Option(min=0, help="Discarded warmup runs per prompt (config: warmup).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue an interrupted session: redo only what is not ok yet.")] = False,
    fail_fast: Annotated[bool, typer.Option(help="Stop at the first failed run.")] = False,
    force: Annotated[bool, typer.Option(help="Start over even if the session file exists.")] = False,
    force_config: Annotated[
        bool,
        typer.Option(
            "--force-config",
            help="With --resume or --arms: record even though the config changed an arm's endpoint, model, api or"
            " extra_body, a prompt's text or the sampling settings (the archive's prompts and settings are kept).",
        ),
    ] = False,
    check: Annotated[
        bool, typer.Option("--check", help="Only run the preflight: check every arm's endpoint, record nothing.")
    ] = False,
    preflight: Annotated[
        bool,
        typer.Option(help="Check the arms before the first run (--no-preflight: an endpoint that hides /v1/models)."),
    ] = True,
    target_ci: Annotated[
        str | None,
        typer.Option(
            "--target-ci", metavar="PCT",
            help="Record until every ladder ratio's 95 % interval is within +-PCT (e.g. 2%), drawing prompts in a seeded"
            " stratified order; with --arms, until each chosen arm's own decode speed is.",
        ),
    ] = None,
    max_prompts: Annotated[
        int | None, typer.Option(min=1, help="With --target-ci: draw at most this many prompts (default: the whole suite).")
    ] = None,
    max_time: Annotated[
        str | None,
        typer.Option(metavar="DURATION",
                     help="With --target-ci: stop after the arm recording when this much time has passed (90m, 2h, 3600s)."),
    ] = None,
    target_ratio: Annotated[
        list[str] | None,
        typer.Option(metavar="NAME",
                     help="With --target-ci: aim only at this ratio, e.g. 'nvfp4 vs bf16' (repeatable; default: every one)."),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option("--ray", metavar="ADDRESS|local", help=RECORD_RAY_HELP),
    ] = None,
    suite: Annotated[
        str | None,
        typer.Option("--suite", metavar="SPEC",
                     help="The prompts, over [session] prompts: builtin:NAME, a JSONL file, random:N, humaneval, arith:N."),
    ] = None,
) -> None:
    """Record each arm alone, one request at a time, into a self-contained session file.

    Before the first run a preflight checks every arm that has runs to do (key variable set,
    endpoint reachable, model served, context long enough, /metrics present) and lists every
    problem at once, exiting 2 before anything is recorded; --check does only that.

    Arms run in config order; before every run the endpoint must be idle. A warmup run is
    discarded, then --repeats measured runs per prompt. The session is saved after every run,
    so an interrupted recording loses nothing: rerun with --resume. With one GPU, record arm by
    arm with --arms (swap the served model in between); the session keeps when each arm ran.

    A graded suite (--suite humaneval, arith:N, or a prompt file with a `tests` or `answer`
    column) is graded once the recording ends, never between runs: each counted run gets a
    grade and the session is saved again (`tokenreel grade` redoes it).

    Examples:

    \b
      tokenreel record --config ladder.toml --check
      tokenreel record --config ladder.toml
      tokenreel record --config ladder.toml --arms nvfp4 --out sessions/ladder.json
      tokenreel record --config ladder.toml --resume
      tokenreel record --config ladder.toml --suite arith:50
      tokenreel record --config ladder.toml --target-ci 2% --max-time 6h
      tokenreel record --config replicas.toml --ray 10.0.0.1:6379

    With --target-ci the prompts are drawn in a seeded stratified order and recorded in looks of
    growing size (each look on every arm in turn); after each look the ladder's intervals are
    taken at the stopping rule's level (valid however often it looked), and recording stops once
    all are within the target, or when --max-prompts, --max-time or the suite runs out. The
    session keeps the rule: --resume continues it, and every report shows its intervals.

    With --ray each replica (base_urls) is recorded by a Ray worker on the node that serves it
    ([session] ray_resources, or the node at the endpoint's address), streaming every finished
    run back to this process, which alone writes the session; a worker that dies loses only the
    run in flight, and --resume --ray records the rest.
    """
    # First: Ctrl-C from here on (loading the config, the preflight, the runs) exits 130, one line.
    signals = record_signals("starting to record", "nothing was recorded")
    try:
        stop = StopOptions(target_ci, max_prompts, max_time, target_ratio or [])
        code = _record(signals, config, out_path, arms, repeats, warmup, resume, fail_fast, force, force_config,
                       check, preflight, stop, ray, suite)
    except KeyboardInterrupt:
        code = signals.exit_code(130, interrupted=True)
    finally:
        signals.restore()
    raise typer.Exit(signals.exit_code(code))


def _record(
    signals: RecordSignals, config: Path, out_path: Path | None, arms: str | None, repeats: int | None,
    warmup: int | None, resume: bool, fail_fast: bool, force: bool, force_config: bool, check: bool, preflight: bool,
    stop: StopOptions, ray: str | None = None, suite: str | None = None,
) -> int:
    """The `record` command under its signal handler; returns the exit code."""
    from tokenreel.analysis.arm_view import select_arms_of
    from tokenreel.base.files import output_target
    from tokenreel.recorder.config import load_config
    from tokenreel.recorder.session_file import open_session, remove_stale_temps
    from tokenreel.recorder.todo import runs_todo, select_arms
    from tokenreel.session.archive import SessionLock

    with user_errors():
        cfg = load_config(config, suite)
    signals.check()
    if repeats is not None:
        cfg.settings.repeats = repeats
    if warmup is not None:
        cfg.settings.warmup = warmup
    path = out_path or Path("sessions") / f"{cfg.name}.json"
    arm_ids = split_ids(arms)
    if check:
        with user_errors():
            selected = select_arms_of(cfg.arms, arm_ids)
        code = preflight_arms(selected, cfg.prompts, cfg.settings, verbose=True, signals=signals)
        if stop.target_ci is not None:
            with user_errors():
                stop.estimate(path, len(cfg.prompts))
        return code
    with user_errors():
        output_target(path)  # a device or FIFO is refused, --force or not; a symlink is written through
        lock = SessionLock(path).acquire()  # one writer per session (archive.SessionLock), on the link's target
    signals.doing = f"recording {shown_path(path)}"
    signals.outcome = "every completed run is saved; continue with `tokenreel record --resume`"
    try:
        signals.check()
        removed = remove_stale_temps(lock.path)
        if removed:
            err.print(f"removed {len(removed)} temporary file(s) a killed record left next to {shown_path(path)}: {', '.join(removed)}",
                      markup=False, soft_wrap=True)
        with user_errors():  # read under the lock: merge with what is on disk now
            session = open_session(cfg, path, resume, arm_ids, force, force_config)
            selected = select_arms(session, arm_ids)
            plan = stop.plan(session, arm_ids)
            on_ray = None if ray is None else RayRecording(ray, cfg.ray_resources).checked(session, selected)
        signals.check()
        metrics_warned: set[str] = set()
        if preflight:
            code = preflight_arms(
                [arm for arm in selected if runs_todo(session, arm)], session.prompts, session.settings,
                warned=metrics_warned, signals=signals,
            )
            if code:
                return code
        return record_into(session, path, arm_ids, fail_fast, metrics_warned, signals, plan, on_ray, config)
    finally:
        lock.release()


RECORD_RAY_HELP = ("Record each replica on a Ray worker next to its engines (pip install 'tokenreel[ray]'): ADDRESS as"
                   " `ray start --head` printed it (HOST:PORT, or auto); `local`: a local Ray for this command.")


@dataclass(frozen=True)
class RayRecording:
    """`record --ray`: the cluster to join and the config's placement (recorder.ray_placement)."""

    address: str
    resources: list[str] = field(default_factory=list)

    def checked(self, session: Session, arms: list[Arm]) -> RayRecording:
        """Itself, once what Ray cannot record is refused in one line (ValueError)."""
        from tokenreel.cli.ray_cluster import require_ray
        from tokenreel.recorder.config import launch_of

        require_ray()

        if session.stopping is not None:
            raise ValueError("--ray: this session draws its prompts look by look (--target-ci), on one endpoint per arm;"
                             " record it without --ray")
        for arm in arms:
            if launch_of(arm) is not None:
                raise ValueError(f"--ray: arm {arm.id!r} has launch: record starts that engine on this machine; start"
                                 " the engines on their nodes and give their base_urls")
            if "_extra_body_sent" in arm.__dict__:
                raise ValueError(f"--ray: arm {arm.id!r}'s extra_body holds a secret-looking value, which would travel"
                                 " through Ray; send the key by api_key_env, set on every node")
        return self

    def cluster(self) -> AbstractContextManager[None]:
        from tokenreel.cli.ray_cluster import ray_cluster

        return ray_cluster(self.address)

    def record(self, session: Session, path: Path, arm_ids: list[str] | None, display: EventFn,
               fail_fast: bool) -> Coroutine[None, None, RecordResult]:
        from tokenreel.recorder.cluster.ray_recording import record_on_ray

        return record_on_ray(session, path, arm_ids, display, fail_fast, self.resources)


@dataclass(frozen=True)
class StopOptions:
    """--target-ci, --max-prompts and --max-time as given."""

    target_ci: str | None
    max_prompts: int | None
    max_time: str | None
    targets: list[str]

    def plan(self, session: Session, arm_ids: list[str] | None) -> TargetPlan | None:
        """The stopping rule to record under: a new one for a session without runs, the archived
        one (with a new target) to continue; None without --target-ci. ValueError names the option."""
        from tokenreel.recorder.target import TargetPlan, check_targets, new_stopping

        if self.target_ci is None:
            if self.max_prompts is not None or self.max_time is not None or self.targets:
                raise ValueError("--max-prompts, --max-time and --target-ratio shape --target-ci: give --target-ci too")
            return None
        target, max_time_s = percent(self.target_ci), None if self.max_time is None else duration(self.max_time)
        if any(arm.replicas > 1 for arm in session.arms):
            raise ValueError("--target-ci draws prompts look by look on one endpoint per arm; with replicas (base_urls)"
                             " record the whole suite (without --target-ci), or give each arm one base_url")
        check_targets(session, arm_ids, self.targets)
        if session.stopping is None:
            if session.runs:
                raise ValueError("--target-ci: this session was recorded without it, so its prompts were not drawn in order;"
                                 " record into a new --out")
            session.stopping = new_stopping(session, target, self.max_prompts, max_time_s, self.targets)
        else:
            rule = session.stopping
            if self.max_prompts is not None and self.max_prompts != rule.looks[-1]:
                raise ValueError(f"--max-prompts: the looks were planned when the session began (up to {rule.looks[-1]}"
                                 " prompts); record into a new --out to plan others")
            rule.target, rule.max_time_s, rule.targets = target, max_time_s, self.targets
            if rule.stopped == "target met" or rule.stopped == "max time":  # asked again: go on to the next look
                rule.stopped = ""
        return TargetPlan(session, arm_ids)


    def estimate(self, path: Path, suite_size: int) -> None:
        """`record --check --target-ci`: the plan from the session at --out as a pilot, or how to get one."""
        from tokenreel.cli.plan import print_plan
        from tokenreel.session.archive import load

        target = percent(self.target_ci or "")
        pilot = load(path) if path.exists() else None
        if pilot is None or not pilot.runs:
            out.print(f"no pilot at {shown_path(path)} to estimate ±{100 * target:g} % from: record a few prompts per category"
                      " first (record --target-ci with --max-prompts), then check again", markup=False, soft_wrap=True)
            return
        print_plan(pilot, target, suite_size)


def preflight_arms(
    arms: list[Arm], prompts: list[Prompt], settings: Settings, verbose: bool = False, warned: set[str] | None = None,
    signals: RecordSignals | None = None,
) -> int:
    """Check the arms, print every problem (and warning) once; 2 when any problem stops recording.
    Under `signals`, Ctrl-C cancels the checks at their next await, as it does the runs (raised
    anywhere else, it could land in a connection's clean-up and print a traceback)."""
    import asyncio  # lazy like the recorder it drives: `--help` stays fast

    from tokenreel.recorder.engines.preflight import preflight

    checks_of = preflight(arms, prompts, settings)
    try:
        checks = asyncio.run(signals.run(checks_of) if signals else checks_of)
    except asyncio.CancelledError:  # cancelled by Ctrl-C: the command's handler says it, exit 130
        raise KeyboardInterrupt from None
    for result in checks:
        for warning in result.warnings:
            err.print(f"warning: {result.arm}: {warning}", markup=False, soft_wrap=True)
            if warned is not None and "/metrics" in warning:  # said once: recording will not repeat it
                warned.add(result.arm)
        if verbose and not result.problems:
            out.print(f"ok: {result.arm}: {'; '.join(result.notes) or 'reachable'}", markup=False, soft_wrap=True)
    problems = [(result.arm, problem) for result in checks for problem in result.problems]
    if problems:
        err.print(f"tokenreel: preflight found {len(problems)} problem(s); nothing was recorded:", soft_wrap=True)
        for arm_id, problem in problems:
            err.print(f"  {arm_id}: {problem}", markup=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    if verbose:
        out.print(f"preflight: {len(checks)} arm(s) ready to record")
    return 0
