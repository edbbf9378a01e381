"""Catalogue render throughput (issue 28): `tokenreel render-all` on 1 and 2 workers.

The archived seed session (4 prompts, 3 arms) rendered as a catalogue, by default in 16:9 and
9:16 with the dark theme at full size and the usual title and end cards: 8 videos of about 14 s
(two 8-second chunks each, so a second worker has a chunk of its own). Each worker count renders
the whole catalogue afresh (--force) in a process of its own, as a user would run it; the videos
of both runs must be the same bytes. Printed: wall time, videos per minute, frames per second,
and the speed-up of 2 workers over 1. One run on a machine shared with whatever else runs there:
compare the ratio, not the absolute numbers.

With --ray 1,4,16 the same catalogue is rendered with `render-all --ray ADDRESS` on a local Ray
head started (before the clock runs) with that many CPUs, so that many chunks run at once: the
figures of N Ray workers on this machine, their bytes checked against the local ones.

    python bench/catalogue.py [--layouts 16:9,9:16] [--themes dark] [--prompts all] [--workers 1,2] [--ray 1,2]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tokenreel.renderer import manifest

SESSION = Path(__file__).resolve().parents[1] / "sessions" / "seed-ladder-demo.json"


# A Ray head of N CPUs in a process of its own, printing its address; stopped when stdin closes.
RAY_HEAD = ("import ray, sys; ctx = ray.init(num_cpus=int(sys.argv[1]), include_dashboard=False);"
            " print(ctx.address_info['gcs_address'], flush=True); sys.stdin.read(); ray.shutdown()")


def render_all(out: Path, workers: int, args: argparse.Namespace, ray: str | None = None) -> float:
    """Seconds `tokenreel render-all` took, start-up included (joining the Ray head, with `ray`)."""
    command = [
        sys.executable, "-m", "tokenreel", "render-all", str(SESSION), "--out", str(out), "--force",
        "--layouts", args.layouts, "--themes", args.themes, "--prompts", args.prompts, "--workers", str(workers),
        *(["--ray", ray] if ray else []),
    ]
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def videos(out: Path) -> dict[str, str]:
    """Each video's path under out and its SHA-256."""
    return {
        path.relative_to(out).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(out.rglob("*.mp4"))
    }


def frames(out: Path) -> int:
    return sum(manifest.load(path).frame_count for path in out.rglob("*.mp4.render.json"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layouts", default="16:9,9:16")
    parser.add_argument("--themes", default="dark")
    parser.add_argument("--prompts", default="all")
    parser.add_argument("--workers", default="1,2", help="worker counts to compare, comma-separated")
    parser.add_argument("--ray", default="", metavar="N,N", help="Ray worker counts (CPUs of a local head) to measure too")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    rays = [int(n) for n in args.ray.split(",") if n]
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} CPUs ({platform.machine()}), load average {load:.1f}, Python {platform.python_version()}")
    print(f"catalogue: {SESSION.name}, layouts {args.layouts}, themes {args.themes}, prompts {args.prompts}")
    walls: dict[int, float] = {}
    hashes: dict[int, dict[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="tokenreel-bench-catalogue-") as tmp:
        for workers in counts:
            out = Path(tmp) / f"workers-{workers}"
            walls[workers] = render_all(out, workers, args)
            hashes[workers] = videos(out)
            total = frames(out)
            count = len(hashes[workers])
            print(
                f"  workers {workers}: {count} videos, {total} frames in {walls[workers]:6.1f} s:"
                f" {60 * count / walls[workers]:5.2f} videos/min, {total / walls[workers]:6.1f} frames/s"
            )
        for cpus in rays:
            out = Path(tmp) / f"ray-{cpus}"
            head = subprocess.Popen([sys.executable, "-c", RAY_HEAD, str(cpus)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                    env={**os.environ, "RAY_AUTH_MODE": "disabled"})
            try:
                address = head.stdout.readline().strip()
                wall = render_all(out, 1, args, address)
            finally:
                head.stdin.close()
                head.wait()
            hashes[-cpus], total, count = videos(out), frames(out), len(videos(out))
            walls[-cpus] = wall
            print(f"  ray {cpus} workers: {count} videos, {total} frames in {wall:6.1f} s:"
                  f" {60 * count / wall:5.2f} videos/min, {total / wall:6.1f} frames/s")
    first = counts[0]
    same = all(hashes[n] == hashes[first] for n in hashes)
    print(f"same bytes on every worker count: {'yes' if same else 'NO'}")
    for workers in counts[1:]:
        print(f"speed-up, {workers} workers over {first}: {walls[first] / walls[workers]:.2f}x")
    for cpus in rays[1:]:
        print(f"speed-up, {cpus} Ray workers over {rays[0]}: {walls[-rays[0]] / walls[-cpus]:.2f}x")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
