"""`record --target-ci` against the simulator (issue 26, item 2): it stops by itself once every
target is met, arms stay one at a time on the same prompts, the interval holds the configured
true ratio, and the rule survives in the session for --resume and the reports."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from typer.testing import CliRunner

from tests.test_cli import run_cli, write_config
from tokenreel.cli import app
from tokenreel.report.data import build_report
from tokenreel.session import archive
from tokenreel.simulator.profiles import SEED_LADDER

CATEGORIES = ("conversation", "reasoning", "prose", "code")


def true_ratio(arm: str, base: str) -> float:
    """What the simulator is configured to give: each category's expected decode speed, averaged
    over the suite's categories (builtin:mixed has as many prompts in each)."""
    profiles = {p.id: p for p in SEED_LADDER}
    mean = {a: statistics.fmean(profiles[a].expected_tok_s(c) for c in CATEGORIES) for a in (arm, base)}
    return mean[arm] / mean[base]


def test_record_stops_by_itself_once_the_ratio_is_known(tmp_path: Path, make_sim) -> None:
    cluster = make_sim([SEED_LADDER[0], SEED_LADDER[2]], time_scale=0.25)
    # Three runs a cell: its median stands even when a starved simulator (this test's own process)
    # delivers one run's tokens in a burst; the recorder in a process of its own, as a user's, so
    # that the two do not take turns with one interpreter lock.
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=64, repeats=3, prompts="builtin:mixed")
    out = tmp_path / "s.json"
    done = run_cli("record", "--config", config, "--out", out, "--target-ci", "20%")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    session = archive.load(out)
    rule = session.stopping
    assert rule is not None and rule.stopped == "target met", output
    assert rule.looks[0] == 8 and rule.looked[-1] < len(rule.order) == 32  # stopped before the suite ran out
    assert all(w is not None and w <= 0.20 for w in rule.widths.values())
    # Every arm ran exactly the prompts drawn, the first ones of the seeded stratified order.
    drawn = set(rule.order[: rule.looked[-1]])
    for arm in ("bf16", "nvfp4-dflash2"):
        assert {run.prompt for run in session.runs if run.arm == arm} == drawn
    assert f"look {len(rule.looked)} of {len(rule.looks)}, {rule.looked[-1]} prompts" in output
    assert "stopped: target met" in output and "target ±20 % met" in output

    report = build_report(session)
    row = report["ladder"][-1]
    low, high = row["vs_first_ci95"]
    assert low <= true_ratio("nvfp4-dflash2", "bf16") <= high, (low, high)
    assert (high - low) / 2 / row["vs_first"] <= 0.20
    assert report["missing_cells"] == []  # prompts never drawn are not missing


def test_resume_goes_on_to_the_next_look_and_a_plain_arm_fills_the_drawn_prompts(tmp_path: Path, make_sim) -> None:
    """One server at a time: arm 1 until its own figure is known, then arm 2 on the same prompts,
    then one more look for arm 1 when asked again."""
    cluster = make_sim([SEED_LADDER[0], SEED_LADDER[2]], time_scale=0.25)
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=32, prompts="builtin:mixed")
    out = tmp_path / "s.json"
    runner = CliRunner()
    first = runner.invoke(app, ["record", "--config", str(config), "--out", str(out), "--arms", "bf16", "--target-ci", "50%"])
    assert first.exit_code == 0, first.output
    rule = archive.load(out).stopping
    assert rule.stopped == "target met" and list(rule.widths) == ["bf16 decode tok/s"] and rule.looked == [8]
    second = runner.invoke(app, ["record", "--config", str(config), "--out", str(out), "--arms", "nvfp4-dflash2"])
    assert second.exit_code == 0, second.output
    session = archive.load(out)
    assert {r.prompt for r in session.runs if r.arm == "nvfp4-dflash2"} == set(rule.order[:8])
    third = runner.invoke(app, ["record", "--config", str(config), "--out", str(out), "--resume", "--arms", "bf16",
                                "--target-ci", "50%"])
    assert third.exit_code == 0, third.output
    assert archive.load(out).stopping.looked == [8, 9]


def test_bad_target_options_are_one_line_each(tmp_path: Path, make_sim) -> None:
    cluster = make_sim([SEED_LADDER[0]], time_scale=0.05)
    config = write_config(tmp_path / "c.toml", cluster)
    runner = CliRunner()
    for args, words in (
        (["--target-ci", "two"], "--target-ci: expected a percentage"),
        (["--target-ci", "2%", "--max-time", "soon"], "--max-time: expected a duration"),
        (["--max-prompts", "5"], "--max-prompts, --max-time and --target-ratio shape --target-ci"),
        (["--target-ci", "5%", "--target-ratio", "x vs y"], "--target-ratio: no ratio 'x vs y' in this recording; choose among: "),
    ):
        result = runner.invoke(app, ["record", "--config", str(config), "--out", str(tmp_path / "x.json"), *args])
        assert result.exit_code == 2 and words in result.output, result.output
    quick = runner.invoke(app, ["record", "--config", str(config), "--out", str(tmp_path / "t.json"), "--target-ci", "0.01%",
                                "--max-time", "0.1s"])
    rule = archive.load(tmp_path / "t.json").stopping
    assert quick.exit_code == 3 and rule.stopped == "max time" and rule.looked == [4], quick.output  # target not met
    assert "target ±0.01 % not met (stopped: max time)" in quick.output and "--resume --target-ci` goes on" in quick.output
    plain = runner.invoke(app, ["record", "--config", str(config), "--out", str(tmp_path / "p.json")])
    assert plain.exit_code == 0, plain.output
    late = runner.invoke(app, ["record", "--config", str(config), "--out", str(tmp_path / "p.json"), "--resume",
                               "--target-ci", "2%"])
    assert late.exit_code == 2 and "recorded without it" in late.output


def test_compare_of_two_target_ci_sessions_compares_the_prompts_both_drew(tmp_path: Path, make_sim) -> None:
    """Two recordings that stopped at different looks: the prompts only one drew are a note, not
    cells missing on one side (which would fail the reproduction)."""
    cluster = make_sim([SEED_LADDER[0]], time_scale=0.05)
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=32, prompts="builtin:mixed")
    runner = CliRunner()
    # Budgets, not a met target, decide where each stops: a starved simulator can widen the first
    # look's interval past any loose target, and the two must stop at different looks.
    for name, most in (("a", "8"), ("b", "12")):
        done = runner.invoke(app, ["record", "--config", str(config), "--out", str(tmp_path / f"{name}.json"),
                                   "--target-ci", "0.01%", "--max-prompts", most])
        assert done.exit_code == 3, done.output  # the target was not met: budgets stopped them
    for name, looked in (("a", [8]), ("b", [8, 9, 10, 11, 12])):  # looks 5 % apart, whole prompts
        rule = archive.load(tmp_path / f"{name}.json").stopping
        assert rule.stopped == "max prompts" and rule.looked == looked, (name, rule)
    result = runner.invoke(app, ["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--format", "json"])
    comparison = json.loads(result.stdout)
    assert not [u for u in comparison["unmatched"] if u["kind"] == "cell"], comparison["unmatched"]
    assert len(comparison["cells"]) == 8 and any("drawn by only one session" in n for n in comparison["notes"])
    assert result.exit_code != 1, result.output
