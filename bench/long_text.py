"""What a long answer costs `render`: one poster frame of a two-arm session whose answer is one
paragraph of N characters, right-to-left (Arabic prose) or left-to-right (English prose), early
in the race (4 s into the video) and late (when the fast arm has streamed 95 % of it). The
session file is written first (by a process of its own: a child's ru_maxrss starts from its
parent's size); each render then runs in a fresh process that only renders it,
printing its wall and CPU time and peak memory (ru_maxrss), the peak of loading the session alone (in a
process of its own), and the render's memory per character above a 1,000-character render of the
same script.

    python bench/long_text.py                          # 200,000 characters, both scripts
    python bench/long_text.py --chars 200000 1800000 --scripts rtl
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render import render
from tokenreel.session import Arm, Prompt, Run, Session, Settings, archive
from tokenreel.session.model import Chunks

PROSE = {
    "rtl": ("مرحبا بالعالم، كيف حالك اليوم؟", "في عام ٢٠٢٤", "إنّ السّلامَ عليكم", "لا إله"),
    "ltr": ("hello world, how are you today?", "in the year 2024", "peace be upon you", "no god"),
}
MS = 1_000_000


def _session(script: str, chars: int) -> Session:
    words = PROSE[script]
    pieces: list[str] = []
    size = 0
    while size < chars:
        piece = (" " if pieces else "") + words[len(pieces) * 3 % len(words)]
        pieces.append(piece)
        size += len(piece)
    session = Session(name="Long text", settings=Settings(max_tokens=len(pieces), ignore_eos=True, warmup=0, repeats=1),
                      prompts=[Prompt(id="p1", category="conversation", messages=[{"role": "user", "content": "Write."}], prompt="")],
                      arms=[Arm(id=a, label=a.upper(), base_url="http://127.0.0.1:9/v1", model="m") for a in ("a", "b")])
    for arm, step in (("a", MS), ("b", 2 * MS)):
        chunks = Chunks()
        for k, piece in enumerate(pieces):
            chunks.append(50 * MS + k * step, 1, content=piece)
        session.runs.append(Run(arm=arm, prompt="p1", index=0, warmup=False, usage={"completion_tokens": len(pieces)},
                                token_source="usage_delta", chunks=chunks))
    return session


def one(path: str, load_only: bool, at: str) -> None:
    """Load (or render the poster at video time `at` of) the session at path in this process;
    print 'seconds cpu_seconds peak_kib'."""
    start, cpu = time.perf_counter(), time.process_time()
    if load_only:
        archive.load(path)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            render(path, Path(tmp) / "poster.png", RenderOptions(size="1280x720", at=at), workers=1)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{time.perf_counter() - start} {time.process_time() - cpu} {usage.ru_maxrss}")


def _write(script: str, chars: int, path: Path) -> dict[str, str]:
    """Write the session; the video times of its early and late posters."""
    done = subprocess.run([sys.executable, __file__, "--write", script, str(chars), str(path)], check=True, capture_output=True, text=True)
    pieces = int(done.stdout)
    title_s = float(RenderOptions().title_s)
    return {"early": "4", "late": f"{title_s + 0.05 + 0.95 * pieces * MS / 1e9:.3f}"}


def _measure(path: Path, load_only: bool = False, at: str = "4") -> tuple[float, float, float]:
    command = [sys.executable, __file__, "--one", str(path), "--at", at, *(["--load-only"] if load_only else [])]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    seconds, cpu, kib = done.stdout.split()
    return float(seconds), float(cpu), int(kib) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chars", type=int, nargs="+", default=[200_000])
    parser.add_argument("--scripts", nargs="+", choices=sorted(PROSE), default=["rtl", "ltr"])
    parser.add_argument("--one", metavar="SESSION", help=argparse.SUPPRESS)
    parser.add_argument("--at", default="4", help=argparse.SUPPRESS)
    parser.add_argument("--load-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--write", nargs=3, metavar=("SCRIPT", "CHARS", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:
        session = _session(args.write[0], int(args.write[1]))
        archive.save(session, args.write[2])
        print(len(session.runs[0].chunks))
        return
    if args.one:
        one(args.one, args.load_only, args.at)
        return
    print(f"{'script':6} {'characters':>11} {'frame':>6} {'seconds':>8} {'CPU s':>6} {'peak MiB':>9} {'load MiB':>9} {'KiB/char':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for script in args.scripts:
            floor = 0.0
            for chars in [1_000, *args.chars]:
                path = Path(tmp) / f"{script}-{chars}.json"
                times = _write(script, chars, path)
                if chars == 1_000 and not floor:
                    floor = _measure(path)[2]
                    continue
                loaded = _measure(path, load_only=True)[2]
                for frame, at in times.items():
                    seconds, cpu, peak = _measure(path, at=at)
                    per_char = (peak - floor) * 1024 / chars
                    print(f"{script:6} {chars:>11,} {frame:>6} {seconds:>8.1f} {cpu:>6.1f} {peak:>9.0f} {loaded:>9.0f} {per_char:>9.2f}")


if __name__ == "__main__":
    main()
