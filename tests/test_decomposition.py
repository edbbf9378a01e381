"""A drafter's speed-up as acceptance x step ratio, and the share of run-to-run spread that
acceptance explains: checked against the simulator's plan on the archived demo ladder (its
acceptance draws are exact; its step times are the plan's within the recording's timing) and on
sessions built here with known spreads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import session_factory as sf
from tokenreel.analysis.decomposition import Decomposition, category_sentence, decompositions, mover, step_cost
from tokenreel.analysis.ladder import build_cells, build_ladder, category_ladders
from tokenreel.analysis.run_variance import run_variances
from tokenreel.report import build_report
from tokenreel.report.charts import _charts
from tokenreel.report.charts.style import png_bytes
from tokenreel.session.archive import load
from tokenreel.session.model import Acceptance, Session
from tokenreel.simulator.generation import make_plan, spec_stats
from tokenreel.simulator.profiles import SEED_LADDER, profile_by_id

DEMO = Path(__file__).resolve().parents[1] / "sessions" / "seed-ladder-demo.json"
DRAFTER, TARGET = "nvfp4-dflash2", "nvfp4"


@pytest.fixture(scope="module")
def demo() -> Session:
    return load(DEMO)


def _plan_length(session: Session, prompt_id: str) -> tuple[int, int]:
    """(verify steps, accepted drafts) the simulator's plan gives the drafter on one prompt."""
    prompt = next(p for p in session.prompts if p.id == prompt_id)
    body = {"messages": prompt.messages, "max_tokens": session.settings.max_tokens, "ignore_eos": session.settings.ignore_eos}
    drafter = profile_by_id(DRAFTER, SEED_LADDER)
    stats = spec_stats(make_plan(drafter, body, True, None), drafter.spec_k)
    return stats.steps, stats.accepted


def test_factors_are_the_plans_acceptance_and_step_times(demo: Session) -> None:
    cells = build_cells(demo)
    found = decompositions(demo, cells)
    drafter, target = profile_by_id(DRAFTER, SEED_LADDER), profile_by_id(TARGET, SEED_LADDER)
    plan_step_ratio = target.step_s / drafter.step_s  # 1 / verify_cost: the plan's step times
    categories = [d for d in found if d.scope == "category"]
    ladders = {c: {row.arm: row for row in rows} for c, rows in category_ladders(demo, cells).items()}
    assert {d.category for d in categories} == {p.category for p in demo.prompts}
    for d in categories:
        (prompt,) = [p.id for p in demo.prompts if p.category == d.category]
        steps, accepted = _plan_length(demo, prompt)
        assert d.acceptance_length == pytest.approx(1 + accepted / steps, rel=1e-12)  # the plan's draws, exactly
        assert d.step_ratio == pytest.approx(plan_step_ratio, rel=0.01)
        measured = ladders[d.category][DRAFTER].vs_prior
        assert d.speedup == pytest.approx(measured, rel=1e-12)
        assert d.acceptance_length * d.step_ratio == pytest.approx(measured, rel=1e-12)
        assert (1 + accepted / steps) * plan_step_ratio == pytest.approx(measured, rel=0.01)


def test_the_product_is_the_speedup_the_ladder_prints(demo: Session) -> None:
    cells = build_cells(demo)
    ladder = {row.arm: row for row in build_ladder(demo, cells)}
    (suite,) = [d for d in decompositions(demo, cells) if d.scope == "suite"]
    assert (suite.arm, suite.target) == (DRAFTER, TARGET)
    assert suite.speedup == pytest.approx(ladder[DRAFTER].vs_prior, rel=1e-12)  # its target is the prior step
    assert suite.acceptance_length == pytest.approx(ladder[DRAFTER].acceptance_length, rel=1e-12)
    assert suite.acceptance_length * suite.step_ratio == pytest.approx(suite.speedup, rel=1e-12)
    assert suite.target_step_ms == pytest.approx(1000 / ladder[TARGET].decode_tok_s, rel=1e-12)
    assert suite.speedup_ci95 is None and "no interval" in suite.speedup_ci95_note  # 4 prompts


def test_the_category_sentence_says_acceptance_moved(demo: Session) -> None:
    sentence = category_sentence(decompositions(demo, build_cells(demo)))
    assert sentence.startswith("code 5.28 tokens a step, step 1.11x the target's: 4.77x;")
    assert sentence.endswith("From prose to code: acceptance moved, the step's cost hardly.")


def _decomp(length: float, ratio: float) -> Decomposition:
    return Decomposition("d", "t", "category", "c", 2, length * ratio, None, "", length, None, "", True, ratio)


def test_mover_names_the_factor_that_moved() -> None:
    assert mover(_decomp(2.0, 0.9), _decomp(4.0, 0.88)) == "acceptance"
    assert mover(_decomp(3.0, 0.9), _decomp(3.05, 0.6)) == "step"
    assert mover(_decomp(2.0, 0.9), _decomp(3.0, 0.6)) == "both"
    assert step_cost(0.8) == pytest.approx(1.25)


def test_without_acceptance_the_decomposition_is_missing_with_the_reason() -> None:
    session = sf.ladder({"base": {"code-1": [100.0]}, "spec": {"code-1": [250.0]}})
    session.arms[1].drafts_for = "base"
    found = decompositions(session, build_cells(session))
    assert found and all(d.speedup is None and "metrics_url" in d.missing for d in found)


def _spread_session(lengths: dict[str, list[float]], speeds: dict[str, list[float]]) -> Session:
    """A base arm and a drafter over `speeds`' prompts, each drafter run with its acceptance length."""
    session = sf.ladder({"base": {p: [100.0] * len(runs) for p, runs in speeds.items()}, "spec": speeds})
    session.arms[1].drafts_for = "base"
    for run in session.runs:
        if run.arm == "spec":
            run.acceptance = Acceptance(mean_length=lengths[run.prompt][run.index], source="metrics")
    return session


# Per prompt, four runs' acceptance lengths: they move a few % run to run.
LENGTHS = {"code-1": [3.0, 3.2, 2.9, 3.1], "code-2": [4.0, 3.8, 4.2, 3.9], "prose-1": [2.0, 2.1, 1.9, 2.05]}


def test_an_acceptance_driven_spread_is_said_to_be_acceptance() -> None:
    # Speed follows acceptance at a fixed step, give or take 0.3 % the machine adds.
    wobble = [1.003, 0.998, 1.001, 0.997]
    speeds = {p: [120.0 * length * w for length, w in zip(runs, wobble, strict=True)] for p, runs in LENGTHS.items()}
    session = _spread_session(LENGTHS, speeds)
    (found,) = run_variances(session, build_cells(session), ["spec"])
    assert (found.runs, found.cells, found.dof) == (12, 3, 8)
    assert found.share is not None and found.share > 0.9 and found.says


def test_a_machine_driven_spread_is_not() -> None:
    # The same acceptance, but the speed moves 5 % run to run with no tie to it.
    wobble = [1.05, 0.95, 0.95, 1.05]
    speeds = {p: [300.0 * w for w in wobble] for p in LENGTHS}
    session = _spread_session(LENGTHS, speeds)
    (found,) = run_variances(session, build_cells(session), ["spec"])
    assert found.share is not None and found.share < 0.5 and not found.says
    assert found.note == "" and (found.runs, found.dof) == (12, 8)


def test_one_run_a_cell_has_no_share() -> None:
    session = _spread_session({p: runs[:1] for p, runs in LENGTHS.items()}, {p: [300.0] for p in LENGTHS})
    (found,) = run_variances(session, build_cells(session), ["spec"])
    assert found.share is None and "--repeats 2" in found.note


def test_the_decomposition_chart_is_the_reports_figures_and_deterministic(demo: Session) -> None:
    report = build_report(demo)
    first, again = (png_bytes(_charts(demo, report, [], "dark")["decomposition"]) for _ in range(2))
    assert first == again
    summary = _charts(demo, report, [], "dark")["decomposition"].summary
    assert summary[-1] == "code · 5.28 tokens a step, step 1.11x: 4.77x"  # drawn last: the top row
