"""95 % intervals on every ladder ratio (issue 26): the method's properties, its coverage in the
simulation study, and what the reports print for real H200 sessions and for a suite too small."""

from __future__ import annotations

import csv
import io
import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_cli import REPO
from tokenreel.analysis.intervals import (
    LEVEL,
    MIN_PROMPTS,
    STOP_LEVEL,
    Interval,
    Pair,
    StoppingRule,
    first_look,
    planned_looks,
    ratio_interval,
    t_quantile,
)
from tokenreel.report import render_report
from tokenreel.report.data import build_report
from tokenreel.session import archive

H200 = REPO / "tests" / "data" / "h200-llamacpp"


def suite(n_per_category: int, categories: str = "abcd", spread: float = 0.05, seed: int = 1) -> list[Pair]:
    """Paired figures with a true speed-up of 1.5 and `spread` between prompts."""
    rng = random.Random(seed)
    pairs = []
    for category in categories:
        for _ in range(n_per_category):
            base = rng.uniform(80, 120)
            pairs.append(Pair(category, base, base * 1.5 * math.exp(rng.gauss(0, spread))))
    return pairs


def test_the_interval_holds_its_ratio_and_scales_with_it() -> None:
    pairs = suite(8)
    interval = ratio_interval(pairs)
    assert interval.low < interval.ratio < interval.high and interval.prompts == 32 and interval.note == ""
    assert interval.ratio == pytest.approx(sum(p.other for p in pairs) / sum(p.base for p in pairs), rel=1e-12)
    doubled = ratio_interval([Pair(p.category, p.base, 2 * p.other) for p in pairs])
    assert (doubled.low, doubled.high) == pytest.approx((2 * interval.low, 2 * interval.high), rel=1e-12)
    # The other way round is the reciprocal (the log scale makes it exact).
    flipped = ratio_interval([Pair(p.category, p.other, p.base) for p in pairs])
    assert (flipped.low, flipped.high) == pytest.approx((1 / interval.high, 1 / interval.low), rel=1e-9)


def test_more_prompts_and_less_spread_narrow_it() -> None:
    assert ratio_interval(suite(32)).half_width < ratio_interval(suite(8)).half_width
    assert ratio_interval(suite(8, spread=0.01)).half_width < ratio_interval(suite(8, spread=0.05)).half_width
    same = [Pair(c, 100.0, 150.0) for c in "ab" for _ in range(4)]
    assert (ratio_interval(same).low, ratio_interval(same).high) == (1.5, 1.5)


def test_a_paired_design_ignores_what_moves_both_arms() -> None:
    """Prompts of very different speed but one speed-up: the interval is narrow, because the
    residual b - R a, not either arm's own spread, is what varies."""
    rng = random.Random(3)
    pairs = []
    for category in "ab":
        for _ in range(8):
            base = rng.uniform(20, 400)
            pairs.append(Pair(category, base, base * 1.5 * (1 + rng.uniform(-0.01, 0.01))))
    assert ratio_interval(pairs).half_width < 0.01


@pytest.mark.parametrize("pairs, note", [
    (suite(1), "n = 4 prompts: no interval (it needs 6)"),
    (suite(2, "abc")[:5], "n = 5 prompts: no interval (it needs 6)"),
    (suite(3, "ab") + [Pair("c", 100.0, 150.0)], "n = 7 prompts, 1 in c: no interval (every category needs 2)"),
])
def test_too_few_prompts_say_so_and_give_no_interval(pairs: list[Pair], note: str) -> None:
    interval = ratio_interval(pairs)
    assert interval.ratio is not None and interval.low is None and interval.as_list() is None
    assert interval.note == note


def test_looks_grow_by_five_percent_and_end_at_the_budget() -> None:
    sizes = planned_looks(11, 880)
    assert sizes[0] == first_look(11) == 22 and sizes[-1] == 880 and sizes[-2] < 880
    assert all(b == max(a + 1, math.ceil(1.05 * a)) for a, b in zip(sizes, sizes[1:-1], strict=False))
    assert planned_looks(2, 6) == [MIN_PROMPTS] and planned_looks(11, 10) == [10]


def test_the_rule_stops_on_the_width_alone_at_its_level() -> None:
    rule = StoppingRule(0.25, tuple(planned_looks(4, 100)))
    assert rule.level == STOP_LEVEL > LEVEL
    # The boundary: a half-width of exactly the target stops, a hair above does not.
    assert rule.met(Interval(2.0, 1.5, 2.5, 40)) and not rule.met(Interval(2.0, 1.5, 2.5 + 1e-9, 40))
    # Where the interval lies does not matter, only its width; no interval never stops.
    assert rule.met(Interval(2.0, 1.9, 2.9, 40)) and not rule.met(Interval(2.0, None, None, 4, note="too few"))
    # The rule's interval is the 95 % one widened by the ratio of the two t quantiles.
    pairs = suite(8)
    wide, plain = ratio_interval(pairs, STOP_LEVEL), ratio_interval(pairs)
    assert wide.dof == plain.dof and wide.dof is not None
    stretch = t_quantile(1 - (1 - STOP_LEVEL) / 2, wide.dof) / t_quantile(0.975, wide.dof)
    assert math.log(wide.high / wide.ratio) == pytest.approx(stretch * math.log(plain.high / plain.ratio))


def test_the_simulation_study_covers_the_truth() -> None:
    """The fast version of bench/ci_coverage.py: 300 simulated --target-ci sessions (seeded) on a
    population of drafted speed-ups; at least 92 % of the reported intervals hold the truth."""
    result = subprocess.run([sys.executable, "bench/ci_coverage.py", "--sessions", "300", "--target", "0.03", "--json"],
                            cwd=REPO, capture_output=True, text=True, timeout=600, check=True)
    study = json.loads(result.stdout)
    assert study["coverage"] >= 0.92, study
    assert study["median_prompts"] < study["suite_prompts"] and study["met"] > 0.5, study
    print(f"coverage {study['coverage']:.3f}, median {study['median_prompts']} of {study['suite_prompts']} prompts,"
          f" fixed design {study['fixed_design_prompts']}, {study['seconds']:.1f} s")


def test_the_h200_report_gives_every_ratio_its_interval() -> None:
    session = archive.load(H200 / "session-default-cache.json")
    report = build_report(session)
    spec = report["ladder"][-1]
    assert spec["vs_first_ci95"][0] < spec["vs_first"] < spec["vs_first_ci95"][1]
    assert report["ladder"][0]["vs_first_ci95"] is None and report["ladder"][0]["vs_first_ci95_note"] == "the arm itself: no interval"
    # 3 prompts per category: a category has no interval, and says why.
    code = report["category_ladders"]["code"][-1]
    assert code["vs_first_ci95"] is None and code["vs_first_ci95_note"] == "n = 3 prompts: no interval (it needs 6)"
    suite_ratios = [s for s in report["speedups"] if s["scope"] == "suite"]
    assert {s["metric"] for s in suite_ratios} == {"decode", "e2e", "ttft"} and all(s["ci95"] for s in suite_ratios)
    decode = next(s for s in suite_ratios if s["metric"] == "decode" and s["arm"] == spec["arm"] and s["vs"] == "f16")
    assert decode["ci95"] == spec["vs_first_ci95"] and report["headline"]["ci95"] == spec["vs_first_ci95"]

    markdown = render_report(session, "md")
    low, high = spec["vs_first_ci95"]
    assert f"2.14x [{low:.2f}–{high:.2f}]" in markdown and "No interval per category for conversation: n = 3 prompts" in markdown
    assert "95 % interval over prompts" in markdown
    rows = list(csv.DictReader(io.StringIO(render_report(session, "csv"))))
    last = [r for r in rows if r["arm"] == spec["arm"]][0]
    assert float(last["arm_vs_first_ci95_low"]) == low and last["category_vs_first_ci95_low"] == ""
    assert last["category_vs_first_ci95_note"] == "n = 3 prompts: no interval (it needs 6)"


def test_a_four_prompt_suite_says_it_has_no_interval(tmp_path: Path) -> None:
    session = archive.load(REPO / "sessions" / "seed-ladder-demo.json")
    report = build_report(session)
    assert all(row["vs_first_ci95"] is None for row in report["ladder"])
    note = report["ladder"][-1]["vs_first_ci95_note"]
    assert note.startswith(f"n = {report['prompts_compared']} prompts")
    markdown = render_report(session, "md")
    assert f"No interval: {note}" in markdown and "[" not in markdown.split("\n")[6]
