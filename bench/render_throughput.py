"""How fast the renderer turns a session into mp4, against ffmpeg alone, and how much memory.

A synthetic three-arm session (about 97, 137 and 458 tok/s; 60 s of the slowest arm) rendered
at 1920x1080, 30 fps:
  (a) ffmpeg alone: the frames rendered once to a raw file as the encoder reads them (yuv420p),
      then encoded from that file with the same recipe (one stream): the floor the renderer
      cannot beat;
  (b) the full render (frames, their digests for the manifest, chunks, join) with workers=1 and workers=2;
  (c) a long render (10 minutes), once per worker count, for memory;
  (d) the same video as webm (VP9), workers=1 and workers=2 (--webm-only: just this).
--text multilingual streams an answer in every script the renderer shapes (an Arabic and a
Hebrew paragraph with numbers and Latin words in them, Hangul, Devanagari, Thai, emoji
sequences and a code block) instead of English; --mp4-only measures just (a) and (b) with one
worker, the ratio the text engine is held to.
Every measured run is a process of its own, as `tokenreel render` would be (so a render's time
includes Python's start-up, about a second); its peak memory is sampled from /proc and summed
over it and its children (workers, ffmpegs). Timings are repeated (3 by default) and the
medians printed, with the ratios they give. The figures are of one run on one machine, shared
with whatever else runs there: compare the ratios, not the absolute numbers.

    python bench/render_throughput.py [--seconds 60] [--rss-seconds 600] [--quick] [--webm-only]
                                      [--mp4-only [--against CHECKOUT]] [--text latin|multilingual]

With --mp4-only it also measures (e) the frame pipe's floor: the same yuv420p frames, read from
the raw file by a process that imports what `render` imports and streams them through the render's
own chunked encode and join, nothing drawn, hashed or converted; its CPU less (a) and less reading
the file (timed on its own) is what the render's design costs before it draws a pixel.

--against CHECKOUT (with --mp4-only) times another checkout's renders (its own .venv, say main's
in a second worktree) on the same session file, after this code's, against the one ffmpeg-alone
figure: the before and after of a change in one run.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tokenreel.renderer.encode import (
    VP9_CPU_USED,
    VP9_DEADLINE,
    VP9_THREADS,
    X264_PRESET,
    X264_THREADS,
    FramePipe,
    OutputFormat,
    fill,
    find_ffmpeg,
    run,
    steps,
)
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render import CHUNK_FRAMES, render
from tokenreel.renderer.render_plan import build_plan
from tokenreel.renderer.yuv import Yuv420Converter, frame_bytes
from tokenreel.session import archive
from tokenreel.session.model import Arm, Chunks, Prompt, Run, Session, Settings
from tokenreel.simulator.answer_text import reply_for

PROMPT = "Explain how speculative decoding speeds up generation without changing the output."
# (id, label, tok/s, tokens per streamed chunk in turn: 1 for plain decoding, more when drafts are accepted)
ARMS = (
    ("bf16", "BF16", 97.0, (1,)),
    ("nvfp4", "NVFP4", 137.0, (1,)),
    ("dflash", "NVFP4 + DFlash", 458.0, (4, 3, 5, 2, 4, 6, 3, 4)),
)
TTFT_NS = {"bf16": 180_000_000, "nvfp4": 150_000_000, "dflash": 165_000_000}
MODEL = "Qwen/Qwen3.8-27B"
SAMPLE_S = 0.1
MULTILINGUAL = (
    "الرقم 42 هو الجواب، والكلمة code تبقى كما هي داخل الجملة العربية. "
    "يقرأ القارئ السطر من اليمين إلى اليسار، والأرقام مثل 2024 و3.14 تبقى بترتيبها.\n"
    "שלום עולם: הגרסה 3.12 של Python יצאה בשנת 2023, והיא מהירה יותר.\n"
    "안녕하세요, 한국어 문장은 두 칸을 채웁니다. नमस्ते, क्षत्रिय हिन्दी में लिखा है। "
    "สวัสดีครับ ภาษาไทย 👩‍👩‍👧‍👦 🇯🇵 👍🏽 1️⃣\n"
    "```python\ndef speedup(old: float, new: float) -> float:\n    return old / new\n```\n"
)


def multilingual_tokens(total: int) -> list[str]:
    """MULTILINGUAL over and over, cut into pieces of one to four characters (a token's worth)."""
    text = MULTILINGUAL * (1 + total * 4 // len(MULTILINGUAL))
    pieces, at = [], 0
    while len(pieces) < total:
        step = 1 + len(pieces) % 4
        pieces.append(text[at : at + step])
        at += step
    return pieces


def build_session(seconds: float, text: str = "latin") -> Session:
    """Every arm streams the same answer; the slowest takes `seconds` to decode it."""
    total = round(ARMS[0][2] * seconds)
    pieces = multilingual_tokens(total) if text == "multilingual" else reply_for(PROMPT).tokens(total)
    session = Session(
        name="Render throughput bench",
        settings=Settings(max_tokens=total, ignore_eos=True, warmup=0, repeats=1),
        prompts=[Prompt(id="p1", category="conversation", messages=[{"role": "user", "content": PROMPT}], prompt="")],
        arms=[Arm(id=a, label=label, base_url="http://127.0.0.1:9/v1", model=MODEL) for a, label, _, _ in ARMS],
        simulated=True,
    )
    for arm_id, _, rate, steps_ in ARMS:
        chunks = Chunks()
        chunks.append(TTFT_NS[arm_id] // 3, 0)  # the role chunk
        done, step = 0, 0
        while done < total:
            take = min(steps_[step % len(steps_)], total - done)
            t = TTFT_NS[arm_id] + round((done + take - 1) * 1e9 / rate)
            chunks.append(t, take, content="".join(pieces[done : done + take]))
            done += take
            step += 1
        chunks.append(chunks.t_ns[-1] + round(1e9 / rate), 0)  # the usage chunk
        usage = {"prompt_tokens": 24, "completion_tokens": total}
        session.runs.append(Run(arm=arm_id, prompt="p1", index=0, warmup=False, usage=usage, chunks=chunks))
    return session


def _tree_rss(root: int) -> tuple[int, int]:
    """(summed RSS of root and all its descendants, RSS of root) in bytes."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier.extend(children)
    page = os.sysconf("SC_PAGE_SIZE")
    sizes = {}
    for pid in tree:
        try:
            sizes[pid] = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
        except OSError:
            pass
    return sum(sizes.values()), sizes.get(root, 0)


def mib(size: float) -> str:
    return f"{size / 2**20:5.0f} MiB"


def measure(argv: list[str], stdin: Path | None = None) -> tuple[float, int, int, float]:
    """Run argv; (wall seconds, peak RSS of it and its children, peak RSS of it alone, CPU
    seconds of it and the children it waited for). CPU time barely moves when other tenants
    load the machine, so it is the steadier figure to compare here."""
    total = own = 0
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(stdin or os.devnull, "rb") as source:
        start = time.perf_counter()
        process = subprocess.Popen(argv, stdin=source)
        while process.poll() is None:
            now_total, now_own = _tree_rss(process.pid)
            total, own = max(total, now_total), max(own, now_own)
            time.sleep(SAMPLE_S)
        wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if process.returncode:
        raise SystemExit(f"{argv[0]} failed with status {process.returncode}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, total, own, cpu


def timed(label: str, repeats: int, argv: list[str], stdin: Path | None = None) -> tuple[float, int, int, float]:
    """Median wall time of `repeats` runs, the memory peaks over all of them, and the median CPU time."""
    runs = [measure(argv, stdin) for _ in range(repeats)]
    median = statistics.median(wall for wall, _, _, _ in runs)
    cpu = statistics.median(r[3] for r in runs)
    total, own = max(r[1] for r in runs), max(r[2] for r in runs)
    walls = " ".join(f"{wall:.2f}" for wall, _, _, _ in runs)
    print(f"  {label:<36} median {median:7.2f} s (runs {walls}), CPU {cpu:.2f} s; peak RSS {mib(total)}, main process {mib(own)}")
    return median, total, own, cpu


def render_command(session_file: Path, out: Path, workers: int, checkout: Path | None = None) -> list[str]:
    """A measured render by this code, or by another checkout's (its own venv and bench)."""
    if checkout is None:
        return [sys.executable, __file__, "--render", str(session_file), str(out), str(workers)]
    python, bench = checkout / ".venv" / "bin" / "python", checkout / "bench" / Path(__file__).name
    return [str(python), str(bench), "--render", str(session_file), str(out), str(workers)]


def write_raw(session_file: Path, options: RenderOptions, raw: Path) -> None:
    plan = build_plan(archive.load(session_file), options)
    renderer = FrameRenderer(plan)
    converter = Yuv420Converter(plan.width, plan.height)
    with open(raw, "wb") as handle:
        for index in range(plan.frame_count):
            handle.write(converter.convert(*renderer.frame(index)).data)


def ffmpeg_alone(session_file: Path, options: RenderOptions, work: Path, repeats: int,
                 floor: bool = False) -> tuple[float, int, int, float]:
    """(a): encode the frames from a raw file with the mp4 recipe, as one stream; with floor,
    also (e), the frame pipe's floor (`pipe_floor`), on the same file."""
    plan = build_plan(archive.load(session_file), options)
    raw = work / "frames.rgb"
    start = time.perf_counter()
    write_raw(session_file, options, raw)
    took, gib = time.perf_counter() - start, raw.stat().st_size / 2**30
    print(f"  {'frames to a raw file, once':<36} {took:14.2f} s ({gib:.1f} GiB)")
    encode, _ = steps(OutputFormat.MP4, plan.width, plan.height, plan.fps)
    argv = find_ffmpeg().command(fill(encode, chunk=work / "alone.mp4"))
    try:  # the file itself is ffmpeg's stdin: no pipe, no Python
        alone = timed("(a) ffmpeg alone, from the raw file", repeats, argv, stdin=raw)
        if floor:
            read = "import sys, numpy; b = numpy.empty(1 << 22, numpy.uint8)\nwhile sys.stdin.buffer.readinto(b): pass"
            reading = timed("reading the raw file alone", repeats, [sys.executable, "-c", read], stdin=raw)[3]
            size = f"{plan.width}x{plan.height}"
            piped = timed("(e) the frame pipe, nothing drawn", repeats,
                          [sys.executable, __file__, "--pipe", str(raw), str(work / "piped.mp4"), size, str(plan.fps)])[3]
            extra = piped - reading - alone[3]
            print(f"  the pipe's own CPU, (e) less reading less (a): {extra:.2f} s,"
                  f" {extra / plan.frame_count * 1e3:.2f} ms a frame, {1 + extra / alone[3]:.2f}x (a)'s CPU before a pixel is drawn")
        return alone
    finally:
        raw.unlink()


def pipe_floor(raw: Path, out: Path, size: str, fps: int) -> None:
    """(e), in a process of its own: the raw yuv420p frames through `render`'s chunked encode
    (CHUNK_FRAMES a chunk, each its own ffmpeg fed through FramePipe) and join, as a render of
    those frames would, without drawing, hashing or converting them."""
    width, height = map(int, size.split("x"))
    encode, join = steps(OutputFormat.MP4, width, height, fps)
    ffmpeg, frame = find_ffmpeg(), np.empty(frame_bytes(width, height), dtype=np.uint8)
    frames = raw.stat().st_size // frame.size
    with tempfile.TemporaryDirectory(prefix="tokenreel-bench-pipe-") as tmp:
        names: list[str] = []
        with open(raw, "rb") as source:
            for start in range(0, frames, CHUNK_FRAMES):
                names.append(f"chunk{len(names):05d}.mp4")
                with FramePipe(ffmpeg, fill(encode, chunk=Path(tmp) / names[-1]), frame.shape) as pipe:
                    for _ in range(start, min(start + CHUNK_FRAMES, frames)):
                        source.readinto(frame.data)
                        pipe.write(frame)
        listing = Path(tmp) / "chunks.txt"
        listing.write_text("".join(f"file '{name}'\n" for name in names))
        run(ffmpeg, fill(join, list=listing, output=out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="decode time of the slowest arm (60)")
    parser.add_argument("--rss-seconds", type=float, default=600.0, help="the same for the long render (600)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="10 s, a 60 s long render, 1 repeat")
    parser.add_argument("--webm-only", action="store_true", help="only (d): the webm renders")
    parser.add_argument("--mp4-only", action="store_true", help="only (a) and (b) with workers=1")
    parser.add_argument("--text", choices=("latin", "multilingual"), default="latin", help="what the arms stream (latin)")
    parser.add_argument(
        "--against", type=Path, metavar="CHECKOUT",
        help="with --mp4-only: also time the renders of another checkout (its .venv, e.g. main's) on the same frames",
    )
    parser.add_argument("--render", nargs=3, help=argparse.SUPPRESS)  # one measured render: SESSION OUT WORKERS
    parser.add_argument("--pipe", nargs=4, help=argparse.SUPPRESS)  # (e): RAW OUT WIDTHxHEIGHT FPS
    args = parser.parse_args()
    if args.pipe:
        raw, out, size, fps = args.pipe
        pipe_floor(Path(raw), Path(out), size, int(fps))
        return
    options = RenderOptions(size="1920x1080", fps=30)
    if args.render:
        session_file, out, workers = args.render
        render(session_file, out, options, int(workers))
        return
    if args.quick:
        args.seconds, args.rss_seconds, args.repeats = 10.0, 60.0, 1
    ffmpeg = find_ffmpeg()
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "?")
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} CPUs ({cpu}), load average {load:.1f}, Python {platform.python_version()}")
    print(f"ffmpeg: {ffmpeg.version} ({ffmpeg.origin})")
    print(f"mp4: x264 {X264_PRESET}, {X264_THREADS} thread(s), chunks of {CHUNK_FRAMES} frames")
    print(f"webm: libvpx-vp9 -deadline {VP9_DEADLINE} -cpu-used {VP9_CPU_USED}, {VP9_THREADS} thread(s)")
    with tempfile.TemporaryDirectory(prefix="tokenreel-bench-") as tmp:
        work = Path(tmp)
        session_file, long_file = work / "session.json", work / "long.json"
        archive.save(build_session(args.seconds, args.text), session_file)
        archive.save(build_session(args.rss_seconds, args.text), long_file)
        plan = build_plan(archive.load(session_file), options)
        long_frames = build_plan(archive.load(long_file), options).frame_count
        video_s, long_s = plan.frame_count / plan.fps, long_frames / plan.fps
        print(f"video: {plan.frame_count} frames = {video_s:.1f} s at {options.size}, {plan.fps} fps, 3 arms, {args.text} text\n")
        if args.mp4_only:
            alone, _, _, alone_cpu = ffmpeg_alone(session_file, options, work, args.repeats, floor=True)
            codes = {"this code": None, **({f"{args.against}": args.against} if args.against else {})}
            # With two codes their runs take turns, so a change in the machine's load falls on both.
            runs: dict[str, list[tuple[float, int, int, float]]] = {name: [] for name in codes}
            for _ in range(args.repeats):
                for name, checkout in codes.items():
                    runs[name].append(measure(render_command(session_file, work / "w1.mp4", 1, checkout)))
            ratios = []
            for name, measured in runs.items():
                wall, cpu = statistics.median(r[0] for r in measured), statistics.median(r[3] for r in measured)
                walls, cpus = " ".join(f"{r[0]:.2f}" for r in measured), " ".join(f"{r[3]:.2f}" for r in measured)
                print(f"  (b) render, workers=1, {name}: median {wall:.2f} s (runs {walls}), CPU {cpu:.2f} s (runs {cpus})")
                ratios.append(
                    f"{args.text}, {name}: render / ffmpeg alone {wall / alone:5.2f} (wall), {cpu / alone_cpu:5.2f} (CPU)   "
                    f"video s / render s {video_s / wall:5.2f}"
                )
            print("\n" + "\n".join(ratios))
            return

        webm = {}
        for workers in (1, 2):
            command = render_command(session_file, work / f"w{workers}.webm", workers)
            webm[workers] = timed(f"(d) webm render, workers={workers}", args.repeats, command)[0]
            size = (work / f"w{workers}.webm").stat().st_size
            print(f"  {'':<36} {size / 2**20:.1f} MiB, {size * 8 / video_s / 1e6:.2f} Mbit/s")
        webm_ratios = [f"workers={w}: video s / render s {video_s / wall:5.2f}" for w, wall in webm.items()]
        if args.webm_only:
            print("\nwebm (target: video s / render s >= 1)\n  " + "\n  ".join(webm_ratios))
            return
        alone = ffmpeg_alone(session_file, options, work, args.repeats)[0]
        size = (work / "alone.mp4").stat().st_size
        print(f"  {'':<36} {size / 2**20:.1f} MiB, {size * 8 / video_s / 1e6:.2f} Mbit/s")
        short, long = {}, {}
        for workers in (1, 2):
            command = render_command(session_file, work / f"w{workers}.mp4", workers)
            short[workers] = timed(f"(b) render, workers={workers}", args.repeats, command)
        for workers in (1, 2):
            command = render_command(long_file, work / "long.mp4", workers)
            long[workers] = timed(f"(c) {long_s / 60:.1f} min render, workers={workers}", 1, command)

    print("\nratios (targets: render / ffmpeg alone <= 1.3; video s / render s >= 2)")
    print(f"  ffmpeg alone:  video s / encode s {video_s / alone:5.2f}   ({plan.frame_count / alone:5.1f} fps)")
    for workers, (wall, _, _, _) in short.items():
        print(
            f"  workers={workers}: video s / render s {video_s / wall:5.2f}   ({plan.frame_count / wall:5.1f} fps)"
            f"   render / ffmpeg alone {wall / alone:5.2f}"
        )
    print("webm (target: video s / render s >= 1)\n  " + "\n  ".join(webm_ratios))
    print("peak RSS of a render and its children (target: a 10-minute render under 500 MiB in total)")
    for workers in (1, 2):
        print(
            f"  workers={workers}: {video_s:4.0f} s video {mib(short[workers][1])}   {long_s:4.0f} s video"
            f" {mib(long[workers][1])}   (main process {mib(short[workers][2])} -> {mib(long[workers][2])})"
        )

if __name__ == "__main__":
    main()
