"""Does the recorder keep its timing exactness with many streams in flight (issue 27)?

`tokenreel sweep` runs in its own process (the real CLI, one call per level) against one plain
simulated arm (bf16 of the seed ladder) served from this process at --time-scale, at levels 1,
8, 32 and 64: N warmup requests, then max(8, 2 N) measured ones kept N in flight, each
--max-tokens long. Every measured request is held against what the simulator really sent
(simulator/tokenreel/simulator/truth.py, paired by the response id its events carried), quiet and then beside two
CPU hogs (the machine's two cores). Per level:

  runs        measured requests completed / sent
  shared      first token read together with later ones (`first_shared`: TTFT late by design)
  late        the server's kernel held bytes of a write that bounds the run's times unsent past
              that write (`RunTruth.sent_late`: TCP held segments back), so they arrived later
              than any stamp of the server says: their errors are not the recorder's alone
  TTFT err    how far the recorded first-token arrival lies outside the server's write of it
              ([just before, just after] the write call), ms: median and worst; `clean`: the
              worst of the runs neither shared nor late
  decode err  `run_metrics` decode tok/s against the same definition on the server's writes,
              outside what the writes' windows allow, %: median, p99 of |error| and worst;
              `clean`: the worst of the runs not late; `none`: requests read in too few reads
              to have a decode figure
  window      the first token write's [before, after] width, ms (median, max): the simulator's
              own lag inside its write calls, which the errors above do not count
  CPU         the recorder process's CPU time over its wall time (100% = one core)

    python bench/sweep_fidelity.py [--load quiet|hogs|both] [--time-scale 1] [--max-tokens 128]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from busy_host import HOGS, cpu_hogs, worst, write_config

from tokenreel.session import archive
from tokenreel.simulator.profiles import SEED_LADDER
from tokenreel.simulator.server import SimCluster, running
from tokenreel.simulator.truth import RunTruth, fetch_sent, pair, run_truth

PROFILE = SEED_LADDER[0]  # bf16: one token per step, a write per token
LEVELS = (1, 8, 32, 64)


def measured_requests(level: int) -> int:
    """Enough requests for a p99 at the high levels, few enough for level 1's serial time."""
    return max(8, 2 * level)


@dataclass(frozen=True)
class Level:
    level: int
    wall_s: float
    cpu_s: float  # the recorder process's user + system time
    exit_code: int
    stderr: str
    sent: int  # measured requests
    truths: list[RunTruth]  # the completed measured ones


def sweep_level(cluster: SimCluster, config: Path, out: Path, level: int) -> Level:
    """One level swept by the CLI in its own process, its measured requests held against the
    simulator's log (fetched at once: the log keeps the last 200 streams, the warmups go first)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "tokenreel", "sweep", "--config", str(config), "--concurrency", str(level),
         "--requests", str(measured_requests(level)), "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    streams = fetch_sent(cluster.root_url(PROFILE.id), cluster.control_headers)
    measured = [run for run in archive.load(out).runs if not run.warmup]
    truths = [run_truth(run, stream) for run, stream in pair(PROFILE.id, measured, streams)]
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return Level(level, wall, cpu, done.returncode, done.stderr, len(measured), truths)


HEADER = (
    f"{'load':<7} {'level':>5} {'wall':>7} {'CPU':>4} {'runs':>7} {'shared':>6} {'late':>4}"
    f" | {'TTFT err ms':>11} {'worst':>7} {'clean':>7} | {'decode err':>10} {'p99':>7} {'worst':>8} {'clean':>8} {'none':>4}"
    f" | {'window':>6} {'max':>6}"
)


def row(load: str, result: Level) -> str:
    """One level's line: medians, p99 and worst over its completed measured requests."""
    truths = result.truths
    ttft = [t.ttft_error_ms for t in truths] or [0.0]
    clean_ttft = [t.ttft_error_ms for t in truths if not (t.first_shared or t.sent_late)]
    decode = [t.decode_error_pct for t in truths if t.decode_error_pct is not None] or [0.0]
    clean_decode = [t.decode_error_pct for t in truths if t.decode_error_pct is not None and not t.sent_late]
    window = [t.window_ms for t in truths] or [0.0]
    return (
        f"{load:<7} {result.level:>5} {result.wall_s:>5.1f} s {100 * result.cpu_s / result.wall_s:>3.0f}%"
        f" {len(truths):>3}/{result.sent:<3} {sum(t.first_shared for t in truths):>6} {sum(t.sent_late for t in truths):>4}"
        f" | {statistics.median(ttft):>+11.3f} {worst(ttft):>+7.3f} {worst(clean_ttft):>+7.3f}"
        f" | {statistics.median(decode):>+9.4f}% {np.percentile(np.abs(decode), 99):>6.4f}% {worst(decode):>+7.4f}%"
        f" {worst(clean_decode):>+7.4f}% {sum(t.decode_error_pct is None for t in truths):>4}"
        f" | {statistics.median(window):>6.3f} {max(window):>6.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", choices=("quiet", "hogs", "both"), default="both")
    parser.add_argument("--time-scale", type=float, default=1.0, help="simulator speed (default 1: real time)")
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    loads = [("quiet", 0), (f"{HOGS} hogs", HOGS)]
    loads = loads if args.load == "both" else loads[args.load == "hogs":][:1]
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print(
        f"arm {PROFILE.id} ({PROFILE.decode_tok_s:g} tok/s, time scale {args.time_scale:g}), {args.max_tokens} tokens a request,"
        f" levels {', '.join(map(str, LEVELS))}; errors over each level's measured requests"
    )
    print(HEADER)
    with tempfile.TemporaryDirectory(prefix="tokenreel-sweep-") as tmp, running([PROFILE], args.time_scale) as cluster:
        config = write_config(Path(tmp) / "c.toml", cluster, args.max_tokens, repeats=1)  # a sweep reads no repeats
        for load, hogs in loads:
            with cpu_hogs(hogs):
                for level in LEVELS:
                    result = sweep_level(cluster, config, Path(tmp) / f"{hogs}-{level}.json", level)
                    print(row(load, result), flush=True)
                    if result.exit_code:
                        last = result.stderr.strip().splitlines()[-1:] or ["no message"]
                        print(f"  sweep exited {result.exit_code}: {last[0]}")


if __name__ == "__main__":
    main()
