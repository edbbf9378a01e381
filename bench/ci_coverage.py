"""Do `record --target-ci`'s intervals cover the truth, and how many prompts does the stop use?

A simulation study of tokenreel.analysis.intervals (issue 26). Each simulated session draws a suite from a
known population of prompts, records it in the seeded stratified order `record --target-ci`
uses (`stratified_order`), looks at the planned look sizes, and stops at the first look whose interval (at the
rule's level, `STOP_LEVEL`) is within the target, or at the end of the suite. Over many sessions:

  coverage   how often the reported interval holds the population's true ratio (94 % to 97 % asked:
             less is a broken promise, more is prompts recorded for nothing)
  prompts    median prompts the stop used, against the whole suite and against a fixed-size
             design of the same width (the n a single 95 % look would need, from the population;
             1.25x at most asked)
  met        how often the target was met before the suite ran out
  hours      wall time of the recording at the modelled speeds: the median stop against the
             whole suite (arms one at a time, warmup + repeats, max_tokens forced)

The population is speculative decoding's: arm A is plain decoding, arm B adds a drafter whose
acceptance rate varies by category (Beta-distributed per prompt, with 5 % of prompts where the
drafter barely helps), so per-prompt speed-ups are skewed and heavy in the low tail; the speed-up
of a step follows Leviathan et al. (2023), E[tokens per step] = (1 - a^(k+1)) / (1 - a). Each run
adds run-to-run noise (2 % plain, 6 % drafted, as the H200 llama.cpp sessions showed), a cell is
the median of its runs.

    python bench/ci_coverage.py [--sessions 1000] [--target 0.02] [--categories 11] [--per-category 80]
    python bench/ci_coverage.py --sessions 300 --json     # what tests/test_intervals.py runs
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass

import numpy as np

from tokenreel.analysis.intervals import Pair, StoppingRule, planned_looks, ratio_interval, stratified_order

DRAFT_WINDOW = 4
DRAFT_COST = 0.08  # one drafter step, as a share of a target-model step
MAX_TOKENS, WARMUP, REPEATS, TTFT_S = 512, 1, 3, 0.08
NOISE = (0.02, 0.06)  # run-to-run spread (lognormal sigma) of the plain and the drafted arm
FAILING_SHARE = 0.05  # prompts where the drafter is mostly rejected


@dataclass(frozen=True)
class Population:
    """Per category: plain decode speed and the Beta(acceptance) of the drafter."""

    speeds: np.ndarray  # tok/s of the plain arm, per category
    accept_a: np.ndarray
    accept_b: np.ndarray

    @classmethod
    def make(cls, categories: int, rng: np.random.Generator) -> Population:
        means = rng.uniform(0.45, 0.85, categories)  # code and maths accept more than roleplay
        concentration = rng.uniform(20, 40, categories)
        return cls(rng.uniform(90, 160, categories), means * concentration, (1 - means) * concentration)

    def draw(self, category: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """True plain and drafted tok/s of n prompts of one category."""
        plain = self.speeds[category] * rng.lognormal(0, 0.15, n)  # prompts differ in length and difficulty
        accept = rng.beta(self.accept_a[category], self.accept_b[category], n)
        failing = rng.random(n) < FAILING_SHARE
        accept[failing] = rng.uniform(0.02, 0.15, failing.sum())
        per_step = (1 - accept ** (DRAFT_WINDOW + 1)) / (1 - accept)
        return plain, plain * per_step / (1 + DRAFT_WINDOW * DRAFT_COST)

    def truth(self, rng: np.random.Generator, per_category: int = 400_000) -> float:
        """The population's ratio of means, by a large draw (categories weighted equally, as a
        suite with as many prompts in each gives them)."""
        plain_sum = drafted_sum = 0.0
        for category in range(len(self.speeds)):
            plain, drafted = self.draw(category, per_category, rng)
            plain_sum, drafted_sum = plain_sum + plain.mean(), drafted_sum + drafted.mean()
        return drafted_sum / plain_sum


def cell(true_speed: np.ndarray, noise: float, rng: np.random.Generator) -> np.ndarray:
    """The median of REPEATS noisy runs per prompt."""
    runs = true_speed[:, None] * rng.lognormal(0, noise, (len(true_speed), REPEATS))
    return np.median(runs, axis=1)


def prompt_hours(plain: np.ndarray, drafted: np.ndarray) -> float:
    """Hours to record these prompts on both arms, one at a time, warmup included."""
    seconds = (WARMUP + REPEATS) * (2 * TTFT_S * len(plain) + MAX_TOKENS * (1 / plain + 1 / drafted).sum())
    return float(seconds) / 3600


def one_session(population: Population, truth: float, categories: int, per_category: int, target: float,
                rng: np.random.Generator) -> dict[str, float]:
    suite = [population.draw(c, per_category, rng) for c in range(categories)]
    observed = [(cell(plain, NOISE[0], rng), cell(drafted, NOISE[1], rng)) for plain, drafted in suite]
    seed = int(rng.integers(1 << 31))
    ids = stratified_order([(f"{c}:{i}", str(c)) for c in range(categories) for i in range(per_category)], seed)
    order = [(int(c), int(i)) for c, i in (prompt_id.split(":") for prompt_id in ids)]
    rule = StoppingRule(target, tuple(planned_looks(categories, len(order))))
    for size in rule.looks:
        pairs = [Pair(str(c), float(observed[c][0][i]), float(observed[c][1][i])) for c, i in order[:size]]
        interval = ratio_interval(pairs, rule.level)
        if rule.met(interval):
            break
    used = order[:size]
    hours = prompt_hours(np.array([suite[c][0][i] for c, i in used]), np.array([suite[c][1][i] for c, i in used]))
    full = sum(prompt_hours(plain, drafted) for plain, drafted in suite)
    return {"covered": float(interval.low <= truth <= interval.high), "prompts": size, "met": float(rule.met(interval)),
            "hours": hours, "full_hours": full, "looks": len(rule.looks), "level": rule.level}


def fixed_design_prompts(population: Population, truth: float, categories: int, target: float,
                         rng: np.random.Generator) -> int:
    """The prompts one 95 % look needs for a half-width of `target`: from the population's
    within-category spread of b - R a (the interval's own variance), n = (z sd / (target R mean a))^2."""
    residual_var = plain_mean = 0.0
    for c in range(categories):
        plain, drafted = population.draw(c, 200_000, rng)
        plain, drafted = cell(plain, NOISE[0], rng), cell(drafted, NOISE[1], rng)
        residual_var += (drafted - truth * plain).var() / categories
        plain_mean += plain.mean() / categories
    return math.ceil((1.96 * math.sqrt(residual_var) / (target * truth * plain_mean)) ** 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--target", type=float, default=0.02, help="relative half-width, 0.02 for +-2 %%")
    parser.add_argument("--categories", type=int, default=11, help="SPEED-Bench's qualitative split has 11")
    parser.add_argument("--per-category", type=int, default=80, help="SPEED-Bench's has 80")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = parser.parse_args()
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    population = Population.make(args.categories, rng)
    truth = population.truth(rng)
    fixed = fixed_design_prompts(population, truth, args.categories, args.target, rng)
    results = [one_session(population, truth, args.categories, args.per_category, args.target, rng)
               for _ in range(args.sessions)]
    suite = args.categories * args.per_category
    summary = {
        "sessions": args.sessions, "target": args.target, "level": results[0]["level"], "true_ratio": truth,
        "coverage": statistics.fmean(r["covered"] for r in results),
        "met": statistics.fmean(r["met"] for r in results),
        "looks": results[0]["looks"],
        "median_prompts": statistics.median(r["prompts"] for r in results),
        "suite_prompts": suite, "fixed_design_prompts": fixed,
        "median_hours": statistics.median(r["hours"] for r in results),
        "suite_hours": statistics.median(r["full_hours"] for r in results),
        "seconds": time.perf_counter() - started,
    }
    if args.json:
        json.dump(summary, sys.stdout)
        print()
        return
    s = summary
    print(f"{s['sessions']} simulated sessions, {args.categories} categories x {args.per_category} prompts,"
          f" true ratio {s['true_ratio']:.4f}, target +-{100 * s['target']:g} %, {s['looks']} planned looks"
          f" at {100 * s['level']:g} %")
    print(f"coverage   {100 * s['coverage']:.1f} % of the reported intervals hold the true ratio")
    print(f"met        {100 * s['met']:.1f} % stopped on target before the suite ran out")
    print(f"prompts    median {s['median_prompts']:g} used, of {suite} in the suite;"
          f" a fixed-size design of the same width needs {fixed} ({s['median_prompts'] / fixed:.2f}x)")
    print(f"hours      median {s['median_hours']:.1f} h recorded, against {s['suite_hours']:.1f} h for the whole suite"
          f" ({100 * (1 - s['median_hours'] / s['suite_hours']):.0f} % saved)")
    print(f"run time   {s['seconds']:.1f} s")


if __name__ == "__main__":
    main()
