"""`tokenreel plan` and `record --check --target-ci` (issue 26, item 3): from a pilot, how many
prompts a target needs; the estimate is checked against a larger draw from the same population."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

from typer.testing import CliRunner

from tests import session_factory as sf
from tests.test_intervals import H200
from tokenreel.analysis.intervals import STOP_LEVEL, Pair, StoppingRule, planned_looks, ratio_interval
from tokenreel.analysis.planning import plan
from tokenreel.cli import app
from tokenreel.recorder.target import new_stopping
from tokenreel.session import archive
from tokenreel.session.model import MAX_RUNS, Arm, Prompt, Run, Session, Settings

CATEGORIES = ("code", "prose", "reasoning", "conversation")


def speed_ups(n_per_category: int, seed: int) -> list[tuple[str, float]]:
    """(category, the drafted arm's speed-up) per prompt: 2x, varying by category and prompt."""
    rng = random.Random(seed)
    centre = {"code": 2.6, "prose": 1.7, "reasoning": 2.2, "conversation": 1.8}
    return [(c, centre[c] * rng.lognormvariate(0, 0.12)) for c in CATEGORIES for _ in range(n_per_category)]


def pilot(prompts: list[tuple[str, float]]) -> Session:
    """Two arms, two runs per prompt: the plain one at 100 tok/s, the other `speed_up` times as fast."""
    session = Session(
        name="pilot", settings=Settings(max_tokens=40, warmup=1, repeats=2),
        prompts=[Prompt(id=f"p{i}", category=c, messages=[{"role": "user", "content": f"prompt {i}"}], prompt="")
                 for i, (c, _) in enumerate(prompts)],
        arms=[Arm(id=a, label=a, base_url="http://127.0.0.1:9/v1", model="m") for a in ("plain", "drafted")],
    )
    for i, (_, speed_up) in enumerate(prompts):
        for arm, step in (("plain", 10 * sf.MS), ("drafted", round(10 * sf.MS / speed_up))):
            for index in range(2):
                session.runs.append(Run(arm=arm, prompt=f"p{i}", index=index, warmup=False, token_source="usage_delta",
                                        usage={"completion_tokens": 40}, chunks=sf.stream(sf.words(40), 50 * sf.MS, step)))
    return session


def test_the_planned_prompts_give_about_the_target_width() -> None:
    target = 0.03
    (estimate,) = plan(pilot(speed_ups(6, seed=1)), target, suite_size=2000)
    assert estimate.fixed_prompts is not None and estimate.fixed_prompts < estimate.sequential_prompts <= 2000
    assert sum(estimate.per_category.values()) >= estimate.sequential_prompts
    # A fresh draw of that many prompts from the same population: its interval is about the target.
    drawn = speed_ups(estimate.fixed_prompts // len(CATEGORIES) + 1, seed=2)
    width = ratio_interval([Pair(c, 100.0, 100.0 * s) for c, s in drawn]).half_width
    assert 0.6 * target < width < 1.5 * target, (estimate, width)
    assert estimate.hours is not None and estimate.hours > 0


def test_plan_and_record_share_the_rule_and_stop_at_about_the_same_look() -> None:
    """The plan's stop is one of the looks `record --target-ci` plans for the suite, and a seeded
    session of the same population, looked at as the recorder looks, stops within a few looks of it."""
    target = 0.03
    prompts = speed_ups(60, seed=4)
    session = pilot(prompts)
    (estimate,) = plan(session, target)
    rule = new_stopping(session, target, None, None, [])
    assert rule.level == STOP_LEVEL and rule.looks == planned_looks(len(CATEGORIES), len(prompts))
    assert estimate.sequential_prompts in rule.looks and estimate.fixed_prompts < estimate.sequential_prompts
    speed_up = {f"p{i}": (c, s) for i, (c, s) in enumerate(prompts)}
    stop = next(look for look in rule.looks if StoppingRule(target, tuple(rule.looks), rule.level).met(
        ratio_interval([Pair(speed_up[p][0], 100.0, 100.0 * speed_up[p][1]) for p in rule.order[:look]], rule.level)))
    assert abs(rule.looks.index(stop) - rule.looks.index(estimate.sequential_prompts)) <= 4, (stop, estimate)


def test_a_thin_pilot_and_a_small_suite_say_what_to_do() -> None:
    (thin,) = plan(pilot(speed_ups(1, seed=3)), 0.02)
    assert thin.fixed_prompts is None and "fewer than 2 prompts in code" in thin.note
    estimates = plan(archive.load(H200 / "session-default-cache.json"), 0.02)
    spec = [e for e in estimates if e.name == "q4_0-spec vs f16"][0]
    assert spec.sequential_prompts is None and "more than the suite's 12" in spec.note
    quant = [e for e in estimates if e.name == "q4_0 vs f16"][0]
    assert quant.sequential_prompts is not None and quant.half_width < 0.02


def test_plan_prints_a_table_and_check_without_a_pilot_says_how_to_get_one(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["plan", str(H200 / "session-default-cache.json"), "--target-ci", "2%", "--suite-size", "880"])
    assert result.exit_code == 0, result.output
    assert "q4_0-spec vs f16" in result.output and "--target-ci stops at" in result.output and "880 prompts" in result.output
    bad = runner.invoke(app, ["plan", str(H200 / "session-default-cache.json"), "--target-ci", "lots"])
    assert bad.exit_code == 2 and "--target-ci: expected a percentage" in bad.output
    for size in (str(MAX_RUNS + 1), "1" + "0" * 401):  # no suite larger than a session can hold
        huge = runner.invoke(app, ["plan", str(H200 / "session-default-cache.json"), "--target-ci", "2%", "--suite-size", size])
        assert huge.exit_code == 2 and "--suite-size" in huge.output and "Traceback" not in huge.output, huge.output
    largest = runner.invoke(app, ["plan", str(H200 / "session-default-cache.json"), "--target-ci", "2%",
                                  "--suite-size", str(MAX_RUNS)])
    assert largest.exit_code == 0 and f"{MAX_RUNS} prompts" in largest.output.replace(",", ""), largest.output
    config = tmp_path / "c.toml"
    config.write_text('[session]\nname = "x"\nprompts = "builtin:mixed"\n[[arms]]\nid = "a"\n'
                      'base_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n')
    check = runner.invoke(app, ["record", "--config", str(config), "--out", str(tmp_path / "none.json"), "--check",
                                "--target-ci", "2%"])
    assert "no pilot at" in check.output and "record a few prompts per category" in check.output


def test_check_with_a_pilot_at_out_prints_the_plan_for_the_config_s_suite(tmp_path: Path) -> None:
    """`record --check --target-ci` reads the session at --out as its pilot: the same table as
    `plan` for the config's suite (builtin:mixed, 32 prompts), whatever the endpoints say."""
    pilot = tmp_path / "pilot.json"
    shutil.copyfile(H200 / "session-default-cache.json", pilot)
    config = tmp_path / "c.toml"
    config.write_text('[session]\nname = "x"\nprompts = "builtin:mixed"\n[[arms]]\nid = "a"\n'
                      'base_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n')
    runner = CliRunner()
    check = runner.invoke(app, ["record", "--config", str(config), "--out", str(pilot), "--check", "--target-ci", "2%"])
    plan = runner.invoke(app, ["plan", str(pilot), "--target-ci", "2%", "--suite-size", "32"])
    assert plan.exit_code == 0, plan.output
    table = [line for line in plan.output.splitlines() if "vs f16" in line]
    assert table and all(line in check.output for line in table), (check.output, plan.output)
    assert "no pilot" not in check.output and "32 prompts" in check.output
