"""Replicas (issue 28): wall-clock speed-up of one ladder recorded on 1, 2, 4 and 8 replicas.

The seed ladder's 3 arms x the 32 prompts of builtin:mixed (1 warmup + --repeats each), recorded
by `tokenreel record` in its own process (the real CLI) against N sets of simulated endpoints,
each set a `tokenreel simulate` process of its own, as each GPU's engines would be (simulators
sharing one Python process pace their streams late under the GIL: a 8-replica ladder then ran
5.8x and its replicas' figures drifted 4 %, the simulator's doing, not the recorder's). Per N:
the wall time, the speed-up over one replica, the pooled ladder's last arm vs the first with its
95 % interval, and each replica's own figure (`report["replicas"]`) against the one-replica
recording's over the same prompts (its shard), the worst difference in %: a replica's prompts
are not the suite's, so that, not the pooled figure, is what a replica must agree with. Last,
the recorder's own error: every measured run's decode tok/s against its simulator's log (the
worst, over the runs the simulator did not send late), so a replica's figure that moved is
seen to be the simulators' pacing on the shared cores or the recorder's. Goal: 8
replicas >= 7x faster than one, per-replica figures equal within the usual tolerance (2 %).

With --ray the same recordings run as `record --ray` (one recorder worker per replica on Ray;
`local` starts a Ray for each recording, its start-up inside the wall time, not the recording's span).

    python bench/replicas.py [--time-scale 1] [--max-tokens 32] [--repeats 1] [--replicas 1,2,4,8] [--ray local] [--explain]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import httpx
import orjson

from tokenreel.analysis.ladder import build_cells, build_ladder
from tokenreel.session import archive
from tokenreel.session.model import Session
from tokenreel.simulator.control import TOKEN_HEADER
from tokenreel.simulator.profiles import SEED_LADDER
from tokenreel.simulator.truth import RunTruth, fetch_sent, session_truth

PROMPTS = "builtin:mixed"
GOAL_8 = 7.0


@contextmanager
def simulators(count: int, time_scale: float) -> Iterator[list[tuple[int, str]]]:
    """`count` `tokenreel simulate` processes serving the seed ladder; yields each one's first
    port (its arms on that port + 0, 1, 2) and control token, once every endpoint answers;
    stopped on the way out."""
    ports: list[int] = []
    for _ in range(count):  # each set past the last: none is bound until its simulator starts
        ports.append(free_ports(len(SEED_LADDER), ports[-1] + len(SEED_LADDER) if ports else 20000 + os.getpid() % 20000))
    procs = [subprocess.Popen([sys.executable, "-m", "tokenreel", "simulate", "--port", str(first),
                               "--time-scale", str(time_scale)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for first in ports]
    try:
        tokens = [control_token(proc) for proc in procs]
        for first in ports:
            for offset in range(len(SEED_LADDER)):
                wait_ready(f"http://127.0.0.1:{first + offset}/v1/models")
        yield list(zip(ports, tokens, strict=False))
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait()


def control_token(proc: subprocess.Popen[str]) -> str:
    """The token `tokenreel simulate` prints for its /sim controls (the sent log among them)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if TOKEN_HEADER in line:
            return line.rsplit(":", 1)[1].strip()
    raise SystemExit("tokenreel simulate ended without printing its control token")


def free_ports(n: int, start: int) -> int:
    """The first of `n` consecutive ports free on 127.0.0.1 now, from `start` on."""
    for first in range(start, 65536 - n, n):
        try:
            with ExitStack() as stack:
                for port in range(first, first + n):
                    sock = stack.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
    raise SystemExit(f"no {n} consecutive free ports on 127.0.0.1")


def wait_ready(url: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url}: the simulator did not answer within {timeout_s:g} s")


def write_config(path: Path, ports: list[int], max_tokens: int, repeats: int) -> Path:
    """The seed ladder with one endpoint per replica (base_urls) for every arm."""
    lines = [
        "[session]", 'name = "replicas-bench"', f'prompts = "{PROMPTS}"', f"max_tokens = {max_tokens}",
        "ignore_eos = true", "temperature = 0", "warmup = 1", f"repeats = {repeats}", "idle_wait_s = 5",
    ]
    for offset, profile in enumerate(SEED_LADDER):
        urls = orjson.dumps([f"http://127.0.0.1:{first + offset}/v1" for first in ports]).decode()
        lines += ["[[arms]]", f'id = "{profile.id}"', f'label = "{profile.label}"', f"base_urls = {urls}",
                  f'model = "{profile.model}"']
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def record(replicas: int, folder: Path, args: argparse.Namespace) -> tuple[float, dict, Session, list[RunTruth]]:
    """Wall seconds of `tokenreel record` on `replicas` replicas, its json report and session,
    and every run held against what its replica's simulator sent (simulator/tokenreel/simulator/truth.py)."""
    with simulators(replicas, args.time_scale) as sims:
        config = write_config(folder / f"r{replicas}.toml", [port for port, _ in sims], args.max_tokens, args.repeats)
        out = folder / f"r{replicas}.json"
        start = time.perf_counter()
        on_ray = ["--ray", args.ray] if args.ray else []
        done = subprocess.run([sys.executable, "-m", "tokenreel", "record", "--config", str(config), "--out", str(out), *on_ray],
                              capture_output=True, text=True, timeout=1800)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"record on {replicas} replica(s) exited {done.returncode}: {done.stderr.strip()[-400:]}")
        session = archive.load(out)
        truths = []
        for replica, (first, token) in enumerate(sims):  # response ids repeat across simulators: one replica at a time
            sent = {p.id: fetch_sent(f"http://127.0.0.1:{first + i}", {TOKEN_HEADER: token}) for i, p in enumerate(SEED_LADDER)}
            truths += session_truth(replace(session, runs=[r for r in session.runs if (r.replica or 0) == replica]), sent)
    report = subprocess.run([sys.executable, "-m", "tokenreel", "report", str(out), "--format", "json"],
                            capture_output=True, check=True).stdout
    return wall, orjson.loads(report), session, truths


def recorder_error(truths: list[RunTruth]) -> str:
    """The worst decode error of the measured runs against their simulator's log, and the runs
    whose times its kernel sent late (their error is the simulator's, module docstring)."""
    measured = [t for t in truths if not t.warmup and t.decode_error_pct is not None]
    on_time = [t.decode_error_pct for t in measured if not t.sent_late]
    worst = max(on_time, key=abs, default=0.0)
    return f"decode err worst {worst:+.3f} % ({len(measured) - len(on_time)} of {len(measured)} sent late)"


def off_runs(truths: list[RunTruth], session: Session, bound_pct: float = 0.05) -> list[str]:
    """For --explain: each measured run whose decode is off its simulator's log by more than
    `bound_pct`, with the clock that stamped it and whether its client read late (client_busy)."""
    runs = {run.key: run for run in session.runs}  # a prompt is on one replica: (arm, prompt, index) is unique
    lines = []
    for truth in truths:
        if truth.warmup or truth.decode_error_pct is None or abs(truth.decode_error_pct) <= bound_pct:
            continue
        run = runs[(truth.arm, truth.prompt, truth.index)]
        delay = run.clock.delay_p99_ms if run.clock else None
        why = f" ({run.clock.reason})" if run.clock and run.clock.reason else ""
        lines.append(f"  replica {run.replica}: {truth.line()}{why}; client delay p99 {delay} ms, client_busy {run.client_busy}")
    return lines


def recording_s(session: Session) -> float:
    """From the first arm's start to the last one's end, over every replica (`Arm.recorded`): the
    wall time without the command's own start (imports, preflight)."""
    stamps = [entry for arm in session.arms for entry in arm.recorded]
    start = min(datetime.fromisoformat(entry["started_at"]) for entry in stamps)
    end = max(datetime.fromisoformat(entry["finished_at"]) for entry in stamps)
    return (end - start).total_seconds()


def shard_figure(one: Session, prompts: set[str]) -> float | None:
    """The one-replica session's last arm vs first over `prompts` alone."""
    cells = [cell for cell in build_cells(one) if cell.prompt in prompts]
    return build_ladder(one, cells)[-1].vs_first


def worst_difference(report: dict, session: Session, one: Session) -> str:
    """Each replica's figure against the one-replica recording's over its shard: the worst, in %."""
    differences = []
    for entry in report.get("replicas", []):
        prompts = {run.prompt for run in session.runs if run.replica == entry["replica"]}
        reference = shard_figure(one, prompts)
        if reference and entry["ladder"][-1]["vs_first"]:
            differences.append(100 * (entry["ladder"][-1]["vs_first"] / reference - 1))
    return f"worst {max(differences, key=abs):+.1f} %" if differences else "(one replica)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--replicas", default="1,2,4,8")
    parser.add_argument("--ray", metavar="ADDRESS|local", help="record on Ray workers (record --ray), e.g. local")
    parser.add_argument("--explain", action="store_true", help="list every run off its simulator's log by > 0.05 %%")
    args = parser.parse_args()
    counts = [int(n) for n in args.replicas.split(",")]
    where = f", on Ray ({args.ray}: one recorder worker per replica)" if args.ray else ""
    print(f"seed ladder, {PROMPTS}, {args.max_tokens} tokens, 1 warmup + {args.repeats} run(s), time scale {args.time_scale}{where}")
    print(
        f"{'replicas':>8} {'wall':>8} {'speed-up':>8} {'recording':>9} {'speed-up':>8} | {'pooled':>7} {'95 % interval':>15}"
        " | per replica (last vs first) | vs one replica on its shard | recorder vs simulator log"
    )
    base_wall = base_recording = one = None
    with tempfile.TemporaryDirectory(prefix="tokenreel-replicas-") as tmp:
        for count in counts:
            wall, report, session, truths = record(count, Path(tmp), args)
            span = recording_s(session)
            base_wall, base_recording, one = base_wall or wall * counts[0], base_recording or span * counts[0], one or session
            top = report["ladder"][-1]
            ci = top["vs_first_ci95"]
            shown = f"{ci[0]:.3f}-{ci[1]:.3f}" if ci else "none"
            per = " ".join(f"{entry['ladder'][-1]['vs_first']:.3f}" for entry in report.get("replicas", []))
            print(f"{count:>8} {wall:>6.1f} s {base_wall / wall:>7.2f}x {span:>7.1f} s {base_recording / span:>7.2f}x |"
                  f" {top['vs_first']:>6.3f}x {shown:>15} |"
                  f" {per or '-'} | {worst_difference(report, session, one)} | {recorder_error(truths)}", flush=True)
            if args.explain:
                print("\n".join(off_runs(truths, session)) or "  every measured run within 0.05 % of its simulator's log")
    print(f"goal: 8 replicas >= {GOAL_8:g}x faster than 1, each replica within 2 % of one replica on its shard")


if __name__ == "__main__":
    main()
