"""Render a session into a video file, a GIF or a poster PNG, plus its manifest.

Video is cut into chunks of CHUNK_FRAMES frames. Each chunk is rendered in frame order and
piped to its own ffmpeg, which encodes it as an independent stream (so it starts with a key
frame); the chunks are then joined without re-encoding. Chunk boundaries never depend on the
number of workers or CPUs, and each chunk's bytes depend only on its frames, so one worker
doing the chunks one after the other writes the same file as several workers in parallel.

Frames stream from the renderer through the pipe and are never kept, so memory does not grow
with the length of the video; only their digests are kept, for the manifest (frame_digest.py:
the SHA-256 of each tile's, so only the tiles the renderer redrew are hashed again). Video
frames go to ffmpeg as yuv420p, converted here only where the renderer redrew and the bytes
moved (yuv.py); a frame the renderer reports unchanged keeps the digest of the one before.
"""

from __future__ import annotations

import ctypes
import hashlib
import multiprocessing
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass
from multiprocessing.process import BaseProcess
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path

from PIL import Image

from tokenreel.base.files import commit
from tokenreel.base.safe_text import shown_path
from tokenreel.renderer import manifest as manifests
from tokenreel.renderer.encode import (
    PNG_SAVE,
    YUV420P,
    Ffmpeg,
    FramePipe,
    OutputFormat,
    fill,
    find_ffmpeg,
    frame_format,
    frame_shape,
    output_format,
    run,
    steps,
)
from tokenreel.renderer.frame_digest import FrameDigest, frame_digest
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render_plan import RenderPlan, build_plan
from tokenreel.renderer.yuv import Yuv420Converter
from tokenreel.session import archive
from tokenreel.session.model import ArchiveError, Session

# 8 s at 30 fps. Each chunk starts with a key frame, and x264 puts one every 250 frames anyway,
# so chunks cost almost no size; encoder start-up is small next to 240 frames; and a one-minute
# video still splits evenly over two workers. A constant: the bytes depend on it.
CHUNK_FRAMES = 240
POLL_S = 0.2  # how often progress is read from the workers
WATCHDOG_S = 0.5  # how often a worker checks that its parent is still alive

# Staging folders are named .<output>.tokenreel-<pid>-<random>: the pid is the render's, so a
# folder left by a killed render (SIGKILL leaves no chance to clean up) is recognised and removed
# by the next render into the same folder, while a live render's folder is left alone.
STAGING_TAG = "tokenreel"
_STAGING = re.compile(r"\..+\." + STAGING_TAG + r"-(\d+)-[A-Za-z0-9_]+")

Progress = Callable[[int, int], None]  # (frames done, frames to render)
# Runs a video's chunks elsewhere (render-all --ray: renderer/tokenreel/renderer/ray_chunks.py): given the plan, the
# format, this machine's ffmpeg, the chunks' [start, stop) frames and a frames-done callback,
# it returns each chunk's encoded bytes and frame hashes, in chunk order (`encode_chunk`'s).
ChunkRunner = Callable[["RenderPlan", OutputFormat, "Ffmpeg", list[tuple[int, int]], Callable[[int], None]], list[tuple[bytes, list[str]]]]


@dataclass(frozen=True)
class RenderResult:
    output: Path
    manifest: Path
    format: OutputFormat
    frame_count: int
    output_sha256: str
    frame_sha256: tuple[str, ...]
    warnings: tuple[str, ...]
    ffmpeg_exe: str | None  # the binary's full path (kept out of the manifest); None for png
    ffmpeg_version: str | None


class WorkerDied(RuntimeError):
    """A render worker process ended without finishing its frames (killed, out of memory): the
    pool's own BrokenProcessPool names neither the worker nor the frames."""


@dataclass(frozen=True)
class _Job:
    """Frames [start, stop) piped as pix_fmt to one ffmpeg run with these arguments."""

    start: int
    stop: int
    args: list[str]
    pix_fmt: str


class _Counter:
    """Frames done so far, reported to the caller's callback whenever the count moves."""

    def __init__(self, callback: Progress | None, total: int) -> None:
        self.callback = callback
        self.total = total
        self.done = 0

    def set(self, done: int) -> None:
        if done != self.done:
            self.done = done
            if self.callback is not None:
                self.callback(done, self.total)

    def advance(self) -> None:
        self.set(self.done + 1)


def file_sha256(path: str | os.PathLike[str]) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def regular_file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a regular file; OSError for anything else (a FIFO would never end, a symlink
    or a directory is not the file a manifest names). Symlinks are not followed."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(f"{shown_path(path)}: not a regular file")
        return hashlib.file_digest(handle, "sha256").hexdigest()


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def staging_prefix(name: str) -> str:
    return f".{name}.{STAGING_TAG}-{os.getpid()}-"


def clean_stale(folder: Path, pattern: re.Pattern[str] = _STAGING) -> list[Path]:
    """Remove the staging folders in `folder` whose render process is gone; the ones removed."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if not match or not entry.is_dir(follow_symlinks=False) or process_alive(int(match.group(1))):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed


def poster_index(plan: RenderPlan) -> int:
    """options.at if given, else the first frame of the end card, else the last frame."""
    if plan.poster_index is not None:
        return plan.poster_index
    return min(plan.clock.title_frames + plan.clock.replay_frames, plan.frame_count - 1)


def _encode_span(
    renderer: FrameRenderer, plan: RenderPlan, ffmpeg: Ffmpeg, job: _Job, tick: Callable[[], None]
) -> list[str]:
    """Render the job's frames in order into its ffmpeg; their digests (of the RGB frames)."""
    converter = Yuv420Converter(plan.width, plan.height) if job.pix_fmt == YUV420P else None
    digests = FrameDigest(plan.width, plan.height)
    hashes: list[str] = []
    with FramePipe(ffmpeg, job.args, frame_shape(job.pix_fmt, plan.width, plan.height)) as pipe:
        for index in range(job.start, job.stop):
            pixels, changed = renderer.frame(index)
            if changed == () and hashes:  # the same pixels as the frame before, in this job
                hashes.append(hashes[-1])
            else:  # converted only where the bytes moved
                digest, changed = digests.update(pixels, changed)
                hashes.append(digest)
            pipe.write(pixels if converter is None else converter.convert(pixels, changed, renderer.shifts))
            tick()
    return hashes


# Worker processes: one FrameRenderer each, built once from the pickled plan.
_worker: tuple[FrameRenderer, RenderPlan, Ffmpeg, Synchronized[int]] | None = None


def _die_with_parent(parent: int) -> None:
    """A worker never outlives the render that started it: the kernel kills it when its parent
    dies (Linux PR_SET_PDEATHSIG), and a watchdog thread checks the parent's pid as well
    (other systems, or a parent that died before the prctl). Ctrl-C is the parent's to handle:
    it stops the workers itself, so they print nothing."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            threading.Event().wait(WATCHDOG_S)
        os._exit(1)

    threading.Thread(target=watch, name="tokenreel-parent-watchdog", daemon=True).start()


def _start_worker(plan: RenderPlan, ffmpeg: Ffmpeg, counter: Synchronized[int], parent: int) -> None:
    global _worker
    _die_with_parent(parent)
    _worker = (FrameRenderer(plan), plan, ffmpeg, counter)


def _worker_job(job: _Job) -> list[str]:
    assert _worker is not None
    renderer, plan, ffmpeg, counter = _worker

    def tick() -> None:
        with counter.get_lock():
            counter.value += 1

    return _encode_span(renderer, plan, ffmpeg, job, tick)


def _run_jobs(plan: RenderPlan, ffmpeg: Ffmpeg, jobs: list[_Job], workers: int, progress: _Counter) -> list[str]:
    """Frame hashes of all jobs in job order; in this process when one worker is asked for."""
    if workers == 1 or len(jobs) == 1:
        renderer = FrameRenderer(plan)
        return [h for job in jobs for h in _encode_span(renderer, plan, ffmpeg, job, progress.advance)]
    # spawn, not fork: the caller may run threads (a progress display), which fork does not copy.
    context = multiprocessing.get_context("spawn")
    counter = context.Value("q", 0)
    pool = ProcessPoolExecutor(
        min(workers, len(jobs)), mp_context=context, initializer=_start_worker,
        initargs=(plan, ffmpeg, counter, os.getpid()),
    )
    futures: list[Future[list[str]]] = []
    processes: list[BaseProcess] = []
    try:
        futures = [pool.submit(_worker_job, job) for job in jobs]
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=POLL_S, return_when=FIRST_EXCEPTION)
            progress.set(counter.value)
            for future in done:
                future.result()  # re-raises a worker's error now, not after the other chunks
        return [h for future in futures for h in future.result()]
    except BrokenProcessPool:
        raise WorkerDied(_death_line(processes, jobs, futures)) from None
    except BaseException:  # an error, Ctrl-C, SIGTERM: stop the workers now, not after their chunks
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.kill()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _reaped(processes: list[BaseProcess]) -> list[BaseProcess]:
    """The workers that have ended, once the broken pool has ended them all (it terminates the
    others). Up to a second: its thread may be reaping one right now, when its exit code reads
    as unknown here. The one that died first is the one not ended by the pool's SIGTERM."""
    deadline = time.monotonic() + 1
    while any(p.exitcode is None for p in processes) and time.monotonic() < deadline:
        time.sleep(0.02)
    dead = [p for p in processes if p.exitcode is not None]
    return [p for p in dead if p.exitcode != -signal.SIGTERM] or dead


def _ended(process: BaseProcess) -> str:
    """How an ended worker ended: "pid 123 killed by signal 9" or "pid 123 exited 1"."""
    code = process.exitcode
    return f"pid {process.pid} " + (f"killed by signal {-code}" if code is not None and code < 0 else f"exited {code}")


def _death_line(processes: list[BaseProcess], jobs: list[_Job], futures: list[Future[list[str]]]) -> str:
    """Which worker died and how, and which frames it left unrendered, in one line."""
    dead = _reaped(processes)
    how = ", ".join(_ended(p) for p in dead) or "a worker"
    lost = [job for job, f in zip(jobs, futures, strict=False) if not f.done() or f.cancelled() or f.exception() is not None]
    frames = f"frames {min(j.start for j in lost)}-{max(j.stop for j in lost) - 1}" if lost else "its frames"
    return f"a render worker died ({how}) before {frames} were rendered; nothing was written: render again"


def encode_chunk(plan: RenderPlan, fmt: OutputFormat, ffmpeg: Ffmpeg, start: int, stop: int) -> tuple[bytes, list[str]]:
    """One chunk's encoded bytes and frame hashes, made in a temporary folder: what a remote
    worker returns (the same bytes a local worker writes, as they depend only on the frames)."""
    encode, _ = steps(fmt, plan.width, plan.height, plan.fps)
    with tempfile.TemporaryDirectory(prefix=f".{STAGING_TAG}-chunk-") as tmp:
        chunk = Path(tmp) / f"chunk.{fmt}"
        job = _Job(start, stop, fill(encode, chunk=chunk), frame_format(fmt))
        hashes = _encode_span(FrameRenderer(plan), plan, ffmpeg, job, lambda: None)
        return chunk.read_bytes(), hashes


def _encode_chunked(
    plan: RenderPlan,
    fmt: OutputFormat,
    ffmpeg: Ffmpeg,
    work: Path,
    staged: Path,
    workers: int,
    chunk_frames: int,
    progress: _Counter,
    chunks: ChunkRunner | None = None,
) -> list[str]:
    encode, join = steps(fmt, plan.width, plan.height, plan.fps)
    names: list[str] = []
    jobs = []
    for start in range(0, plan.frame_count, chunk_frames):
        names.append(f"chunk{len(names):05d}.{fmt}")
        stop = min(start + chunk_frames, plan.frame_count)
        jobs.append(_Job(start, stop, fill(encode, chunk=work / names[-1]), frame_format(fmt)))
    if chunks is None:
        hashes = _run_jobs(plan, ffmpeg, jobs, workers, progress)
    else:
        hashes = []
        done = chunks(plan, fmt, ffmpeg, [(j.start, j.stop) for j in jobs], progress.set)
        for name, (data, chunk_hashes) in zip(names, done, strict=False):
            (work / name).write_bytes(data)
            hashes += chunk_hashes
    listing = work / "chunks.txt"  # the concat demuxer reads names relative to this file
    listing.write_text("".join(f"file '{name}'\n" for name in names))
    run(ffmpeg, fill(join, list=listing, output=staged))
    return hashes


def _encode_gif(plan: RenderPlan, ffmpeg: Ffmpeg, work: Path, staged: Path, progress: _Counter) -> list[str]:
    """Two passes over every frame in this process (see encode.steps); the second pass also
    checks that each frame came out the same as in the first."""
    make_palette, encode = steps(OutputFormat.GIF, plan.width, plan.height, plan.fps)
    palette = work / "palette.png"
    renderer = FrameRenderer(plan)
    passes = [fill(make_palette, palette=palette), fill(encode, palette=palette, output=staged)]
    jobs = [_Job(0, plan.frame_count, args, frame_format(OutputFormat.GIF)) for args in passes]
    first, second = [_encode_span(renderer, plan, ffmpeg, job, progress.advance) for job in jobs]
    for index, (a, b) in enumerate(zip(first, second, strict=False)):
        if a != b:
            raise RuntimeError(
                f"frame {index} rendered differently on the second GIF pass: frames must depend only on their index"
            )
    return first


def _write_png(plan: RenderPlan, index: int, staged: Path, progress: _Counter) -> list[str]:
    frame = FrameRenderer(plan).render(index)
    Image.fromarray(frame).save(staged, **PNG_SAVE)
    progress.advance()
    return [frame_digest(frame)]


def load_session(path: str | os.PathLike[str]) -> tuple[Session, str]:
    """The session and the SHA-256 of the very bytes it was parsed from (read once: a file
    replaced meanwhile cannot put another file's hash in the manifest)."""
    try:
        payload = archive.read_input(path, "session")
    except OSError as exc:
        raise ArchiveError(path, "", str(exc)) from None
    return archive.loads(payload, str(path)), hashlib.sha256(payload).hexdigest()


def render(
    session_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    options: RenderOptions,
    workers: int = 1,
    progress: Progress | None = None,
    chunk_frames: int = CHUNK_FRAMES,
    chunks: ChunkRunner | None = None,
) -> RenderResult:
    """Render `options` of the session at session_path to out_path (.mp4 .webm .gif .png) and
    write out_path + '.render.json'. Each file appears complete or not at all (staged in a
    hidden folder next to out_path, then renamed).

    progress(done, total) is called as frames are rendered; total is the frame count, twice
    it for a GIF (two passes), 1 for a PNG. A GIF is rendered by this process alone.
    """
    out = Path(out_path)
    fmt = output_format(out)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers: expected a whole number >= 1, got {workers!r}")
    if isinstance(chunk_frames, bool) or not isinstance(chunk_frames, int) or chunk_frames < 1:
        raise ValueError(f"chunk_frames: expected a whole number >= 1, got {chunk_frames!r}")
    session, session_sha256 = load_session(session_path)
    plan = build_plan(session, options)
    del session  # the plan holds what the frames need
    ffmpeg = None if fmt == OutputFormat.PNG else find_ffmpeg()
    warnings = [*plan.warnings, *([ffmpeg.warning] if ffmpeg and ffmpeg.warning else [])]
    poster = poster_index(plan) if fmt == OutputFormat.PNG else None
    total = {OutputFormat.PNG: 1, OutputFormat.GIF: 2 * plan.frame_count}.get(fmt, plan.frame_count)
    counter = _Counter(progress, total)
    manifest_path = manifests.path_for(out)
    for target in (out, manifest_path):
        if target.is_symlink() or (target.exists() and not target.is_file()):
            raise ValueError(f"{shown_path(target)}: exists and is not a regular file; remove it or choose another output")
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(out.parent)
    with tempfile.TemporaryDirectory(prefix=staging_prefix(out.name), dir=out.parent) as tmp:
        work = Path(tmp)
        staged = work / out.name
        if poster is not None:
            hashes = _write_png(plan, poster, staged, counter)
        elif fmt == OutputFormat.GIF:
            assert ffmpeg is not None
            hashes = _encode_gif(plan, ffmpeg, work, staged, counter)
        else:
            assert ffmpeg is not None
            hashes = _encode_chunked(plan, fmt, ffmpeg, work, staged, workers, chunk_frames, counter, chunks)
        record = manifests.Manifest(
            session=manifests.relative_path(session_path, out.parent),
            session_sha256=session_sha256,
            output=out.name,
            output_sha256=file_sha256(staged),
            options=manifests.portable_options(options, out.parent),
            chunk_frames=chunk_frames,
            frame_count=plan.frame_count,
            fps=plan.fps,
            size=f"{plan.width}x{plan.height}",
            versions=manifests.current_versions(ffmpeg),
            encoder_args=tuple(tuple(step) for step in steps(fmt, plan.width, plan.height, plan.fps)),
            frame_sha256=tuple(hashes),
            poster_frame=poster,
            claims=tuple(asdict(claim) for claim in plan.claims),
            reconstructed=tuple(asdict(placed) for placed in plan.reconstructed),
        )
        staged_manifest = work / manifest_path.name
        staged_manifest.write_bytes(manifests.dumps(record))
        commit(staged, out)  # fsynced, then renamed: each name holds all of its file or none
        commit(staged_manifest, manifest_path)
    return RenderResult(
        output=out,
        manifest=manifest_path,
        format=fmt,
        frame_count=plan.frame_count,
        output_sha256=record.output_sha256,
        frame_sha256=record.frame_sha256,
        warnings=tuple(warnings),
        ffmpeg_exe=ffmpeg.exe if ffmpeg else None,
        ffmpeg_version=ffmpeg.version if ffmpeg else None,
    )
