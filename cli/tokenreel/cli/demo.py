"""`tokenreel demo`: record the seed ladder on simulated endpoints, report it, render it; and a
small concurrency sweep (a base and its drafter on a batching engine) with its report and charts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tokenreel.base.files import write_atomic
from tokenreel.base.safe_text import shown_path
from tokenreel.cli.app import app, default_workers, fail, load_session, out, user_errors
from tokenreel.cli.record import record_into, record_signals
from tokenreel.cli.render import render_to
from tokenreel.cli.terminal import Command

if TYPE_CHECKING:
    from tokenreel.recorder.stop_signals import RecordSignals
    from tokenreel.session.model import Arm, Session
    from tokenreel.simulator.profiles import Profile
    from tokenreel.simulator.server import SimCluster

SWEEP_LEVELS = [1, 2, 4, 8]  # the demo drafter's crossover (5) lies within them
SWEEP_REQUESTS = 8  # measured requests per level: the sweep takes about 8 s at --time-scale 1
SWEEP_MAX_TOKENS = 48


@app.command(cls=Command, short_help="Record and render the seed ladder on simulated endpoints (no GPU).")
def demo(
    max_tokens: Annotated[
        int, typer.Option(min=16, help="Forced output length per run (720: the bf16 arm races about 8 s).")
    ] = 720,
    repeats: Annotated[
        int, typer.Option(min=1, help="Measured runs per prompt, after one warmup (2 keeps the demo near 3 min).")
    ] = 2,
    time_scale: Annotated[
        float, typer.Option(min=0.001, help="Simulator speed: 1 is real speed; 0.1 records ten times faster.")
    ] = 1.0,
    video: Annotated[bool, typer.Option(help="Also render DIR/demo.mp4.")] = True,
    workers: Annotated[int | None, typer.Option(min=1, help="Render worker processes.")] = None,
    out_dir: Annotated[
        Path, typer.Option("--out", "-o", metavar="DIR", help="A new folder for demo.json, demo.html, demo.mp4 and the sweep's files.")
    ] = Path("tokenreel-demo"),
    force: Annotated[bool, typer.Option(help="Reuse --out even if it holds files (they are overwritten).")] = False,
) -> None:
    """Record the seed ladder (bf16 → NVFP4 → NVFP4 + DFlash2) on simulated endpoints, then render it.

    Starts vLLM-like simulated endpoints on loopback, records one prompt of each category
    (conversation, reasoning, prose, code) into DIR/demo.json, prints the ladder, writes the HTML
    report (charts and an in-browser replay) to DIR/demo.html and renders the prompt whose speed-up is
    nearest the suite's side by side into DIR/demo.mp4, with the same-answer badges (DIR is --out, a new folder). No GPU needed.

    Then a concurrency sweep (`tokenreel sweep`) of NVFP4 and NVFP4 + DFlash2 on a simulated
    batching engine at 1, 2, 4 and 8 requests in flight into DIR/sweep.json (a few seconds),
    its report with the crossover to DIR/sweep.html and its charts to DIR/sweep-speedup.png,
    DIR/sweep-throughput.png (and .svg).

    Examples:

    \b
      tokenreel demo
      tokenreel demo --time-scale 0.1 --repeats 1 --no-video --out /tmp/demo
    """
    from tokenreel.recorder.runner import new_session
    from tokenreel.recorder.suites import load_prompts
    from tokenreel.renderer.options import RenderOptions
    from tokenreel.session.model import Settings
    from tokenreel.simulator.profiles import SEED_LADDER
    from tokenreel.simulator.server import running

    if out_dir.exists() and not out_dir.is_dir():
        fail(f"--out {shown_path(out_dir)} is a file; give a folder for demo.json and demo.mp4")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not force:
        fail(f"--out {shown_path(out_dir)} already holds files; pass --force to overwrite them or choose another --out")
    settings = Settings(prompts="builtin:ladder4", max_tokens=max_tokens, warmup=1, repeats=repeats)
    prompts = load_prompts(settings.prompts, Path.cwd())
    with user_errors():
        out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "demo.json"
    signals = record_signals(f"recording {shown_path(path)}", f"every completed run is saved in {shown_path(path)}")

    def record() -> int:
        with running(SEED_LADDER, time_scale) as cluster:
            arms = _arms(cluster, SEED_LADDER)
            session = new_session("Qwen3.8-27B seed ladder", settings, prompts, arms)
            out.print(f"recording {len(arms)} arms x {len(prompts)} prompts x {1 + repeats} runs on simulated endpoints")
            return record_into(session, path, None, False, None, signals)

    code = _under(signals, record)
    if code:
        raise typer.Exit(code)
    from tokenreel.report import render_report

    html = out_dir / "demo.html"
    with user_errors(html):
        write_atomic(html, render_report(load_session(path), "html").encode("utf-8"))
    out.print(f"report: {shown_path(html)}  (open it in a browser: charts, percentiles, same answers, a replay)", markup=False)
    code = demo_sweep(out_dir, time_scale)
    if code:
        raise typer.Exit(code)
    if not video:
        raise typer.Exit(0)
    from tokenreel.renderer.render_plan import default_prompt

    session = load_session(path)
    with user_errors():
        prompt, why = default_prompt(session, RenderOptions())  # the race tells the suite's story
    out.print(why, markup=False)
    arms, note = race_arms(session, prompt)
    if note:
        out.print(note, markup=False)
    options = RenderOptions(prompt=prompt, answer_badge=True, arms=arms)
    render_to(path, out_dir / "demo.mp4", options, workers or default_workers(), True)


def race_arms(session: Session, prompt_id: str) -> tuple[tuple[str, ...], str | None]:
    """The arms the demo's video races (() for all), and a note when one is left out: render
    never leaves an arm out unasked, so the demo asks for the arms with a usable run, and says so."""
    from tokenreel.analysis.ladder import median_run
    from tokenreel.analysis.selection import RunSelection

    usable = tuple(a.id for a in session.arms if median_run(session, a.id, prompt_id, RunSelection()) is not None)
    if len(usable) == len(session.arms):
        return (), None
    missing = ", ".join(a.id for a in session.arms if a.id not in usable)
    return usable, f"note: the video races {', '.join(usable)} only: {missing} has no usable run of {prompt_id} (the report says why)"


def _under(signals: RecordSignals, record: Callable[[], int]) -> int:
    """`record()`'s exit code under the recording's signal handling: Ctrl-C is 130 and the
    completed runs stay saved; the handlers are restored either way."""
    try:
        code = record()
    except KeyboardInterrupt:
        code = signals.exit_code(130, interrupted=True)
    finally:
        signals.restore()
    return signals.exit_code(code)


def _arms(cluster: SimCluster, profiles: tuple[Profile, ...]) -> list[Arm]:
    from tokenreel.session.model import Arm

    return [Arm(id=p.id, label=p.label, base_url=cluster.base_url(p.id), model=p.model) for p in profiles]


def demo_sweep(out_dir: Path, time_scale: float) -> int:
    """The demo's sweep into DIR/sweep.json, then its report and charts; returns the exit code."""
    from tokenreel.cli.sweep import sweep_into
    from tokenreel.recorder.runner import new_session
    from tokenreel.recorder.suites import load_prompts
    from tokenreel.recorder.sweep_recording import new_sweep
    from tokenreel.report.charts import write_charts
    from tokenreel.report.sweep_html import sweep_html
    from tokenreel.session.model import Settings
    from tokenreel.simulator.profiles import SWEEP_DEMO
    from tokenreel.simulator.server import running

    settings = Settings(prompts="builtin:ladder4", max_tokens=SWEEP_MAX_TOKENS, warmup=0, repeats=1)
    path = out_dir / "sweep.json"
    signals = record_signals(f"sweeping into {shown_path(path)}", f"every completed level is saved in {shown_path(path)}")
    prompts = load_prompts(settings.prompts, Path.cwd())
    session = new_sweep(new_session("NVFP4 + DFlash2 under load (simulated)", settings, prompts, []))

    def sweep() -> int:
        with running(SWEEP_DEMO, time_scale) as cluster:
            session.arms = _arms(cluster, SWEEP_DEMO)
            out.print(f"sweeping {len(SWEEP_DEMO)} arms at concurrency {', '.join(map(str, SWEEP_LEVELS))} on a simulated batching engine")
            return sweep_into(session, path, SWEEP_LEVELS, SWEEP_REQUESTS, None, signals)

    code = _under(signals, sweep)
    if code:
        return code
    html = out_dir / "sweep.html"
    with user_errors(html):
        write_atomic(html, sweep_html(load_session(path, sweep_ok=True)).encode("utf-8"))
        charts = write_charts(session, out_dir, ["png", "svg"], force=True)
    names = ", ".join(shown_path(c.name) for c in charts)
    out.print(f"sweep report: {shown_path(html)}  (the crossover, ratios per level, charts: {names})", markup=False)
    return 0
