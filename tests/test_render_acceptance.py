"""The video's live acceptance comes from the engine's counts, never from event sizes it cannot read.

Each session is recorded through the real recorder against a simulated endpoint on loopback:
llama.cpp streams one event per token (a step's accepted drafts leave as a burst of events), vLLM
one event per verify step. The live figure must agree with the engine's (`Run.acceptance`, the one
the column ends on) on both.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.test_engine_shapes import BREAD, shaped
from tests.test_recorder_support import arm_for, fast_settings
from tokenreel.analysis.metrics import events_are_steps, output_tokens
from tokenreel.recorder.runner import new_session, record
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render_plan import build_plan
from tokenreel.session.model import Session
from tokenreel.simulator.profiles import SEED_LADDER

BF16, _, DFLASH = SEED_LADDER
SMALL = "640x360"


def recorded(make_sim: Any, tmp_path: Path, engine: str) -> Session:
    cluster = make_sim([shaped(BF16, engine), shaped(DFLASH, engine)])
    arms = [arm_for(cluster, profile.id) for profile in (BF16, DFLASH)]
    session = new_session("acceptance", fast_settings(max_tokens=160), [BREAD], arms)
    asyncio.run(record(session, tmp_path / "s.json"))
    assert all(run.status == "ok" for run in session.runs), [run.error for run in session.runs]
    return session


def live_figures(session: Session) -> list[tuple[int, str]]:
    """(accepted drafts so far, the spec column's live acceptance) at every chunk of the race;
    drafts so far are the run's accepted count interpolated by the tokens shown."""
    renderer = FrameRenderer(build_plan(session, RenderOptions(size=SMALL, title_s="0", hold_s="0.5")))
    column = renderer.columns[1]
    run = next(r for r in session.runs if r.arm == DFLASH.id)
    assert run.acceptance is not None and run.acceptance.accepted
    total = output_tokens(run)
    out = []
    for visible in range(column.track.last_index + 1):  # before the column finishes
        accepted = int(run.acceptance.accepted * column.timeline.tokens(visible) / total)
        out.append((accepted, column.live_accept(visible)))
    return out


def test_live_acceptance_on_a_per_token_stream_is_the_counters_figure(make_sim: Any, tmp_path: Path) -> None:
    """llama.cpp: tokens per event read as acceptance said "accept 1.0" all race long beside an
    engine figure of 3 or more; once 10 drafts are accepted the live figure is within 5 % of it."""
    session = recorded(make_sim, tmp_path, "llamacpp")
    run = next(r for r in session.runs if r.arm == DFLASH.id)
    assert run.acceptance is not None and run.acceptance.mean_length is not None
    length = run.acceptance.mean_length
    assert length > 1.5, length  # a drafter that accepts: one event per token would read ~1
    assert not events_are_steps(run)
    shown = [text for accepted, text in live_figures(session) if accepted >= 10]
    assert shown, "the run never reached 10 accepted drafts"
    for text in shown:
        assert text.startswith("accept "), text
        assert abs(float(text.removeprefix("accept ").lstrip("≈")) - length) <= 0.05 * length, (text, length)


def test_step_events_keep_the_running_figure_and_end_on_the_counters(make_sim: Any, tmp_path: Path) -> None:
    """vLLM sends one event per verify step: tokens per event is the running acceptance, and over
    the whole run it is the counters' figure, so the live line ends where the column does."""
    session = recorded(make_sim, tmp_path, "vllm")
    run = next(r for r in session.runs if r.arm == DFLASH.id)
    assert run.acceptance is not None and run.acceptance.mean_length is not None
    assert events_are_steps(run)
    figures = [text for _, text in live_figures(session) if text]
    assert len(set(figures)) > 1, figures  # it moves during the race
    last = float(figures[-1].removeprefix("accept "))
    assert abs(last - run.acceptance.mean_length) <= 0.05 * run.acceptance.mean_length + 0.05, (figures[-1], run.acceptance)


def test_the_footer_says_when_acceptance_is_the_whole_runs(make_sim: Any, tmp_path: Path) -> None:
    """The whole-run figure during the race is said in the footer, in every wording; a step
    stream's running figure needs no such note."""
    for engine, whole_run in (("llamacpp", True), ("vllm", False)):
        session = recorded(make_sim, tmp_path / engine, engine)
        renderer = FrameRenderer(build_plan(session, RenderOptions(size=SMALL, title_s="0", hold_s="0.5")))
        said = ["Accept: tokens made per step, as the engine counted them over the answer." in text
                or text.endswith("Accept: tokens per step, whole answer.") for text in renderer.footer_wordings()]
        assert said == [whole_run] * len(said), (engine, renderer.footer_wordings())
