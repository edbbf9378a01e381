"""Latency percentiles: p50/p90/p99 of TTFT, TPOT and inter-token latency, per arm and per cell.

Medians hide the tail a user feels (one 400 ms stall in a stream of 8 ms tokens), so the report
also gives the distribution. Populations, the same runs the ladder uses:

- a cell (arm x prompt): its usable runs (`tokenreel.analysis.ladder.usable_runs`, the command's
  `RunSelection`); TTFT only from those whose first token's time is exact (`counts_ttft`);
- an arm: every usable run of that arm on the prompts every arm has
  (`tokenreel.analysis.ladder.common_prompts`), so arms are compared over the same prompts.

Samples, definitions from `tokenreel.analysis.metrics`:

- TTFT and TPOT: one value per run (`run_metrics`), in ms.
- Inter-token latency (ITL): one value per TOKEN after the first token event, not per chunk.
  Walking the events after the first token-carrying one, an event carrying k > 0 tokens a gap g
  after the previous token-carrying event gives its first token latency g and its other k - 1
  tokens latency 0: they arrived together. A chunk of 4 tokens after 20 ms is 20, 0, 0, 0 ms
  (per chunk it would be one 20 ms sample, hiding that 3 tokens cost nothing to wait for).
  Events with no token count (role-only, a usage-only tail) are skipped.

Percentiles are numpy's default method: linear interpolation between the closest ranks
(Hyndman & Fan type 7; p of values sorted v[0..n-1] is at rank p/100 * (n - 1)). Samples are
(latency, count) pairs and never expanded: a run of one 1 M-token event is two pairs, not a
million floats, so memory and time follow events, not tokens. `Tally` finds the
value at a rank by the cumulative counts and interpolates with numpy's own arithmetic, so the
figures are the ones numpy.percentile gives on the expanded list, to the last bit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy

from tokenreel.analysis.ladder import Cell, build_cells, common_prompts, usable_runs
from tokenreel.analysis.metrics import first_token_index, run_metrics
from tokenreel.analysis.selection import DEFAULT_SELECTION, RunSelection
from tokenreel.session.model import Run, Session

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


# A latency in ms and how many samples (tokens, runs) had it.
Sample = tuple[float, int]


@dataclass(frozen=True)
class Tally:
    """Distinct latencies ascending and how many samples are at or below each: the sorted,
    expanded sample without expanding it."""

    values: numpy.ndarray
    at_or_below: numpy.ndarray  # cumulative counts, int64

    @property
    def n(self) -> int:
        return int(self.at_or_below[-1]) if len(self.at_or_below) else 0

    def at_rank(self, rank: int) -> float:
        """The value at 0-based `rank` of the expanded sorted sample."""
        return float(self.values[numpy.searchsorted(self.at_or_below, rank, side="right")])

    def percentile(self, p: float) -> float:
        """numpy.percentile(expanded, p) with its default method, step by step as numpy does it
        (rank (n-1)*q, lerp from whichever end is nearer), so both agree bit for bit."""
        n = self.n
        rank = (n - 1) * (p / 100)
        if rank >= n - 1:
            return float(self.values[-1])
        below = math.floor(rank)
        gamma = rank - below
        a, b = self.at_rank(below), self.at_rank(below + 1)
        diff = b - a
        return b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma


def tally(samples: Iterable[Sample]) -> Tally:
    """The samples sorted, equal latencies merged; pairs with no count are left out."""
    pairs = [(v, c) for v, c in samples if c > 0]
    values = numpy.fromiter((v for v, _ in pairs), dtype=float, count=len(pairs))
    counts = numpy.fromiter((c for _, c in pairs), dtype=numpy.int64, count=len(pairs))
    order = numpy.argsort(values, kind="stable")
    values, counts = values[order], counts[order]
    if not len(values):
        return Tally(values, counts)
    starts = numpy.flatnonzero(numpy.r_[True, values[1:] != values[:-1]])
    return Tally(values[starts], numpy.cumsum(numpy.add.reduceat(counts, starts)))


def once(values_ms: Iterable[float]) -> list[Sample]:
    """One sample per value (TTFT and TPOT: one per run)."""
    return [(v, 1) for v in values_ms]


def distribution(samples: Iterable[Sample]) -> Distribution:
    """n, min, p50, p90, p99 and max of the samples (module docstring: the percentile method)."""
    t = tally(samples)
    if not t.n:
        return Distribution(0, None, None, None, None, None)
    p50, p90, p99 = (t.percentile(p) for p in (50, 90, 99))
    return Distribution(t.n, float(t.values[0]), p50, p90, p99, float(t.values[-1]))


def inter_token_latencies_ms(run: Run) -> list[Sample]:
    """The run's per-token latencies (module docstring: the definition) as pairs: each
    token-carrying event after the first gives (gap, 1) and, carrying k > 1 tokens, (0.0, k - 1)."""
    chunks = run.chunks
    first = first_token_index(chunks)
    if first is None:
        return []
    latencies: list[Sample] = []
    previous = chunks.t_ns[first]
    for i in range(first + 1, len(chunks)):
        k = chunks.tokens[i]
        if k <= 0:
            continue
        latencies.append(((chunks.t_ns[i] - previous) / NS_PER_MS, 1))
        if k > 1:
            latencies.append((0.0, k - 1))
        previous = chunks.t_ns[i]
    return latencies


def _row(arm: str, prompt: str | None, runs: list[Run], selection: RunSelection) -> LatencyRow:
    figures = [run_metrics(run) for run in runs]
    return LatencyRow(
        arm=arm,
        prompt=prompt,
        runs=len(runs),
        ttft_ms=distribution(once(f.ttft_s * 1000 for f, r in zip(figures, runs, strict=False)
                                  if f.ttft_s is not None and selection.counts_ttft(r))),
        tpot_ms=distribution(once(f.tpot_ms for f in figures if f.tpot_ms is not None)),
        itl_ms=distribution(pair for run in runs for pair in inter_token_latencies_ms(run)),
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
