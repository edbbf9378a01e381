"""`tokenreel demo`: record the seed ladder on simulated endpoints, report it, render it; and a
small concurrency sweep (a base and its drafter on a batching engine) with its report and charts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
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


@dataclass(frozen=True)
class DemoSize:
    """How much the demo records at real speed (tokens per run, warmup and measured runs per
    prompt) and, when shorter than the renderer's, how long its video shows the title and end
    cards (seconds, as RenderOptions' title_s and hold_s take them)."""

    max_tokens: int
    warmup: int
    repeats: int
    cards: tuple[str, str] | None = None


QUICK = DemoSize(max_tokens=128, warmup=0, repeats=1, cards=("1", "2.5"))  # 12 runs: the ladder in about 20 s
FULL = DemoSize(max_tokens=720, warmup=1, repeats=2)  # 36 runs: the bf16 arm races about 8 s


@app.command(cls=Command, short_help="Record and render the seed ladder on simulated endpoints (no GPU).")
def demo(
    full: Annotated[
        bool, typer.Option("--full", help=f"The seed-sized ladder: {FULL.max_tokens} tokens, {FULL.warmup} warmup and"
                           f" {FULL.repeats} measured runs per prompt (about 4 min, where the default takes under 1).")
    ] = False,
    max_tokens: Annotated[
        int | None, typer.Option(min=16, help=f"Forced output length per run (default {QUICK.max_tokens}; --full {FULL.max_tokens}).")
    ] = None,
    repeats: Annotated[
        int | None, typer.Option(min=1, help=f"Measured runs per prompt (default {QUICK.repeats}; --full {FULL.repeats}).")
    ] = None,
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

    Starts vLLM-like simulated endpoints on loopback and records one prompt of each category
    (conversation, reasoning, prose, code) at real speed into DIR/demo.json: by default a short
    ladder (128 tokens, one measured run per prompt, under a minute), with --full the seed-sized
    one (720 tokens, a warmup and two measured runs). Prints the ladder, writes the HTML report
    (charts and an in-browser replay) to DIR/demo.html and renders the prompt whose speed-up is
    nearest the suite's side by side into DIR/demo.mp4, with the same-answer badges (DIR is --out, a new folder). No GPU needed.

    Then a concurrency sweep (`tokenreel sweep`) of NVFP4 and NVFP4 + DFlash2 on a simulated
    batching engine at 1, 2, 4 and 8 requests in flight into DIR/sweep.json (a few seconds),
    its report with the crossover to DIR/sweep.html and its charts to DIR/sweep-speedup.png,
    DIR/sweep-throughput.png (and .svg). It ends with the three files to open.

    Examples:

    \b
      tokenreel demo
      tokenreel demo --full --out /tmp/demo-full
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
    size = FULL if full else QUICK
    settings = Settings(prompts="builtin:ladder4", max_tokens=max_tokens or size.max_tokens, warmup=size.warmup,
                        repeats=repeats or size.repeats, host_wait_s=0.0)
    prompts = load_prompts(settings.prompts, Path.cwd())
    with user_errors():
        out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "demo.json"
    signals = record_signals(f"recording {shown_path(path)}", f"every completed run is saved in {shown_path(path)}")

    def record() -> int:
        with running(SEED_LADDER, time_scale) as cluster:
            arms = _arms(cluster, SEED_LADDER)
            session = new_session("Qwen3.8-27B seed ladder", settings, prompts, arms)
            runs = settings.warmup + settings.repeats
            out.print(f"recording {len(arms)} arms x {len(prompts)} prompts x {runs} run(s) of {settings.max_tokens} tokens"
                      " on simulated endpoints, at real speed")
            return record_into(session, path, None, False, None, signals)

    code = _under(signals, record)
    if code:
        raise typer.Exit(code)
    from tokenreel.report import render_report

    html = out_dir / "demo.html"
    with user_errors(html):
        write_atomic(html, render_report(load_session(path), "html").encode("utf-8"))
    code = demo_sweep(out_dir, time_scale)
    if code:
        raise typer.Exit(code)
    opened = [("report", html, "charts, percentiles, same answers, a replay"),
              ("sweep", out_dir / "sweep.html", "the crossover and ratios per level; its charts are beside it, sweep-*.png")]
    if video:
        from tokenreel.renderer.render_plan import default_prompt

        session = load_session(path)
        with user_errors():
            prompt, why = default_prompt(session, RenderOptions())  # the race tells the suite's story
        if why:
            out.print(why, markup=False)
        arms, note = race_arms(session, prompt)
        if note:
            out.print(note, markup=False)
        options = RenderOptions(prompt=prompt, answer_badge=True, arms=arms)
        if size.cards:
            options = replace(options, title_s=size.cards[0], hold_s=size.cards[1])
        render_to(path, out_dir / "demo.mp4", options, workers or default_workers(), True, quiet=True)
        opened.insert(0, ("video", out_dir / "demo.mp4", f"the {prompt} race, side by side"))
    out.print("open:", markup=False)
    for name, file, what in opened:
        out.print(f"  {name:<7}{shown_path(file)}  ({what})", markup=False, soft_wrap=True)


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

    return [Arm(id=p.id, label=p.label, base_url=cluster.base_url(p.id), model=p.model, drafts_for=p.drafts_for) for p in profiles]


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
        write_charts(session, out_dir, ["png", "svg"], force=True)
    return 0
