"""Latency percentiles: p50/p90/p99 of TTFT, TPOT and inter-token latency, per arm and per cell.

Medians hide the tail a user feels (one 400 ms stall in a stream of 8 ms tokens), so the report
also gives the distribution. Populations, the same runs the ladder uses:

- a cell (arm x prompt): its usable runs (`tokenreel.ladder.usable_runs`, the command's
  `RunSelection`); TTFT only from those whose first token's time is exact (`counts_ttft`);
- an arm: every usable run of that arm on the prompts every arm has
  (`tokenreel.ladder.common_prompts`), so arms are compared over the same prompts.

Samples, definitions from `tokenreel.metrics`:

- TTFT and TPOT: one value per run (`run_metrics`), in ms.
- Inter-token latency (ITL): one value per TOKEN after the first token event, not per chunk.
  Walking the events after the first token-carrying one, an event carrying k > 0 tokens a gap g
  after the previous token-carrying event gives its first token latency g and its other k - 1
  tokens latency 0: they arrived together. A chunk of 4 tokens after 20 ms is 20, 0, 0, 0 ms
  (per chunk it would be one 20 ms sample, hiding that 3 tokens cost nothing to wait for).
  Events with no token count (role-only, a usage-only tail) are skipped.

Percentiles are numpy's default method: linear interpolation between the closest ranks
(Hyndman & Fan type 7; p of values sorted v[0..n-1] is at rank p/100 * (n - 1)).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy

from tokenreel.ladder import Cell, build_cells, common_prompts, usable_runs
from tokenreel.metrics import first_token_index, run_metrics
from tokenreel.model import Run, Session
from tokenreel.selection import DEFAULT_SELECTION, RunSelection

NS_PER_MS = 1_000_000
PERCENTILE_METHOD = "linear interpolation between closest ranks (numpy's default, Hyndman-Fan type 7)"
# Why a distribution has no sample, for the report to print instead of a bare dash.
MISSING_REASONS = {
    "ttft_ms": "no run carried a token, or every run's first token was read together with later ones",
    "tpot_ms": "no run carried tokens after its first token event, so there is no decode interval",
    "itl_ms": "no token arrived after the first token event",
}


@dataclass(frozen=True)
class Distribution:
    """n samples in ms; min, percentiles and max are None when n == 0."""

    n: int
    min: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None


@dataclass(frozen=True)
class LatencyRow:
    """The distributions of one arm (prompt None: over the shared prompts) or one cell."""

    arm: str
    prompt: str | None
    runs: int  # usable runs the samples come from
    ttft_ms: Distribution
    tpot_ms: Distribution
    itl_ms: Distribution


@dataclass(frozen=True)
class Latency:
    arms: list[LatencyRow]
    cells: list[LatencyRow]
    shared_prompts: list[str]  # the prompts the arm rows cover


def distribution(values_ms: Sequence[float]) -> Distribution:
    """n, min, p50, p90, p99 and max of the values (module docstring: the percentile method)."""
    if not values_ms:
        return Distribution(0, None, None, None, None, None)
    p50, p90, p99 = (float(v) for v in numpy.percentile(numpy.asarray(values_ms, dtype=float), [50, 90, 99]))
    return Distribution(len(values_ms), float(min(values_ms)), p50, p90, p99, float(max(values_ms)))


def inter_token_latencies_ms(run: Run) -> list[float]:
    """One latency per token after the first token event (module docstring: the definition)."""
    chunks = run.chunks
    first = first_token_index(chunks)
    if first is None:
        return []
    latencies: list[float] = []
    previous = chunks.t_ns[first]
    for i in range(first + 1, len(chunks)):
        k = chunks.tokens[i]
        if k <= 0:
            continue
        latencies.append((chunks.t_ns[i] - previous) / NS_PER_MS)
        latencies.extend([0.0] * (k - 1))
        previous = chunks.t_ns[i]
    return latencies


def _row(arm: str, prompt: str | None, runs: list[Run], selection: RunSelection) -> LatencyRow:
    figures = [run_metrics(run) for run in runs]
    return LatencyRow(
        arm=arm,
        prompt=prompt,
        runs=len(runs),
        ttft_ms=distribution([f.ttft_s * 1000 for f, r in zip(figures, runs) if f.ttft_s is not None and selection.counts_ttft(r)]),
        tpot_ms=distribution([f.tpot_ms for f in figures if f.tpot_ms is not None]),
        itl_ms=distribution([ms for run in runs for ms in inter_token_latencies_ms(run)]),
    )


def build_latency(session: Session, cells: list[Cell] | None = None, selection: RunSelection = DEFAULT_SELECTION) -> Latency:
    """Per-arm rows (session order) and per-cell rows (the order of `cells`, default build_cells)."""
    cells = build_cells(session, selection) if cells is None else cells
    shared = common_prompts(session, cells)
    arm_rows = [
        _row(arm.id, None, [run for prompt in shared for run in usable_runs(session, arm.id, prompt, selection)], selection)
        for arm in session.arms
    ]
    cell_rows = [_row(c.arm, c.prompt, usable_runs(session, c.arm, c.prompt, selection), selection) for c in cells]
    return Latency(arms=arm_rows, cells=cell_rows, shared_prompts=shared)
