"""Recording on a busy host (issue 21): one ladder recorded quietly, then beside two CPU hogs,
every run held against what the simulator really sent.

`tokenreel record` runs in its own process (the real CLI), against the seed ladder simulated in
this one at --time-scale: 3 arms x 4 prompts (builtin:ladder4) x (1 warmup + --repeats), each
--max-tokens long. Per recording: its wall time and exit code, the measured runs that completed,
how many had their first token read with later ones (`first_shared`: TTFT late by design) and
how many were flagged client_busy; then over the measured runs (simulator/tokenreel/simulator/truth.py):

  TTFT err    how far the recorded first-token arrival lies outside the server's write of it
              ([just before, just after] the call), ms: median and worst, then the worst of the
              runs not first_shared; `vs after`: signed, against the stamp after the write
  window      that write's [before, after] width, ms (median, max): the truth's own uncertainty,
              wide when the recorder, woken by the packet, preempts the server inside its send
  decode err  `run_metrics` decode tok/s against the same definition on the server's writes,
              outside what the writes' windows allow, %: median and worst; `vs after` likewise

Targets (tests/test_busy_host.py): TTFT within 0.3 ms except first_shared runs, decode within 0.05%.

    python bench/busy_host.py [--time-scale 0.2] [--max-tokens 128] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tokenreel.session import archive
from tokenreel.session.model import Session
from tokenreel.simulator.profiles import SEED_LADDER
from tokenreel.simulator.server import SimCluster, running
from tokenreel.simulator.truth import RunTruth, fetch_sent, session_truth

PROMPTS = "builtin:ladder4"
HOGS = 2
TTFT_TARGET_MS = 0.3
DECODE_TARGET_PCT = 0.05


@contextmanager
def cpu_hogs(count: int) -> Iterator[None]:
    """`count` busy loops, each its own process, killed on the way out whatever happens."""
    hogs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            hogs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        yield
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()


def write_config(path: Path, cluster: SimCluster, max_tokens: int, repeats: int) -> Path:
    """A config like assets/tokenreel/assets/configs/simulated-ladder.toml, pointed at this process's endpoints."""
    lines = [
        "[session]", 'name = "busy-host"', f'prompts = "{PROMPTS}"', f"max_tokens = {max_tokens}",
        "ignore_eos = true", "temperature = 0", "warmup = 1", f"repeats = {repeats}", "idle_wait_s = 5",
    ]
    for profile in cluster.profiles:
        lines += [
            "[[arms]]", f'id = "{profile.id}"', f'label = "{profile.label}"',
            f'base_url = "{cluster.base_url(profile.id)}"', f'model = "{profile.model}"',
        ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@dataclass(frozen=True)
class Recording:
    wall_s: float
    exit_code: int
    stderr: str
    session: Session
    truths: list[RunTruth]


def record(cluster: SimCluster, folder: Path, name: str, args: argparse.Namespace) -> Recording:
    """Record the ladder through the CLI into folder/name.json and hold it against what was sent."""
    config = write_config(folder / f"{name}.toml", cluster, args.max_tokens, args.repeats)
    path = folder / f"{name}.json"
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "tokenreel", "record", "--config", str(config), "--out", str(path)],
        capture_output=True, text=True, timeout=600,
    )
    wall = time.perf_counter() - start
    sent = {p.id: fetch_sent(cluster.root_url(p.id), cluster.control_headers) for p in cluster.profiles}
    session = archive.load(path)
    return Recording(wall, done.returncode, done.stderr, session, session_truth(session, sent))


def worst(values: Sequence[float]) -> float:
    """The value farthest from 0, sign kept (0 for none)."""
    return max(values, key=abs, default=0.0)


HEADER = (
    f"{'load':<10} {'wall':>7} {'exit':>4} {'runs':>4} {'shared':>6} {'busy':>4}"
    f" | {'TTFT err ms':>11} {'worst':>7} {'unshared':>8} | {'vs after':>8} {'worst':>7} | {'window':>6} {'max':>6}"
    f" | {'decode err':>10} {'worst':>8} | {'vs after':>8} {'worst':>8}"
)


def row(load: str, recording: Recording) -> tuple[str, bool]:
    """The recording's line (medians and worst over its measured runs) and whether it met the targets."""
    measured = [t for t in recording.truths if not t.warmup]
    ttft = [t.ttft_error_ms for t in measured]
    unshared = [t.ttft_error_ms for t in measured if not t.first_shared]
    after = [t.ttft_vs_after_ms for t in measured]
    window = [t.window_ms for t in measured]
    decode = [t.decode_error_pct for t in measured if t.decode_error_pct is not None]
    decode_after = [t.decode_vs_after_pct for t in measured if t.decode_vs_after_pct is not None]
    busy = sum(bool(run.client_busy) for run in recording.session.runs if not run.warmup)
    met = (
        len(decode) == len(measured) > 0 and all(abs(x) <= TTFT_TARGET_MS for x in unshared)
        and all(abs(x) <= DECODE_TARGET_PCT for x in decode)
    )
    line = (
        f"{load:<10} {recording.wall_s:>5.1f} s {recording.exit_code:>4} {len(measured):>4}"
        f" {sum(t.first_shared for t in measured):>6} {busy:>4}"
        f" | {statistics.median(ttft):>+11.3f} {worst(ttft):>+7.3f} {worst(unshared):>+8.3f}"
        f" | {statistics.median(after):>+8.3f} {worst(after):>+7.3f} | {statistics.median(window):>6.3f} {max(window):>6.3f}"
        f" | {statistics.median(decode):>+9.4f}% {worst(decode):>+7.4f}%"
        f" | {statistics.median(decode_after):>+7.4f}% {worst(decode_after):>+7.4f}%   {'PASS' if met else 'FAIL'}"
    )
    return line, met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-scale", type=float, default=0.2, help="simulator speed (default 0.2: five times real speed)")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print(
        f"{len(SEED_LADDER)} arms x 4 prompts ({PROMPTS}) x (1 warmup + {args.repeats}), {args.max_tokens} tokens,"
        f" time scale {args.time_scale:g}; errors over the measured runs, medians and worst"
    )
    print(HEADER)
    verdicts = []
    with tempfile.TemporaryDirectory(prefix="tokenreel-busy-") as tmp, running(SEED_LADDER, args.time_scale) as cluster:
        for load, hogs in (("quiet", 0), (f"{HOGS} CPU hogs", HOGS)):
            with cpu_hogs(hogs):
                recording = record(cluster, Path(tmp), load.replace(" ", "-"), args)
            line, met = row(load, recording)
            print(line)
            if recording.exit_code:
                last = recording.stderr.strip().splitlines()[-1:] or ["no message"]
                print(f"  record exited {recording.exit_code}: {last[0]}")
            verdicts.append(met)
    print(
        f"targets: TTFT within {TTFT_TARGET_MS:g} ms except first_shared runs, decode within {DECODE_TARGET_PCT:g}%"
        f"   {'PASS' if all(verdicts) else 'FAIL'}"
    )


if __name__ == "__main__":
    main()
