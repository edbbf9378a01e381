"""Render a catalogue's jobs, with one progress count over all of them.

Each output goes through `render.render`, as `tokenreel render` does, so a catalogue video is
byte for byte the render of the same options, its manifest verifies like any other, and each
file appears complete or not at all: an interrupted catalogue leaves only whole videos, which
the next run keeps (`catalogue.is_current`). A video that fails is said and the rest go on.

Locally the videos go one after another (each already fans out over `workers`). On Ray a video
of two chunks would keep two workers busy, so several videos are rendered at once on driver
threads, as many as fill the cluster's CPUs with their chunks; a video's bytes depend only on its
own frames, and outcomes are collected in job order, so nothing written depends on the threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Protocol, cast

from tokenreel.renderer.catalogue.jobs import POSTER, VIDEO, Job, is_current
from tokenreel.renderer.encode import Ffmpeg, OutputFormat, find_ffmpeg
from tokenreel.renderer.manifest import current_versions
from tokenreel.renderer.render import CHUNK_FRAMES, ChunkRunner, Progress, render
from tokenreel.renderer.render_plan import RenderPlan

RENDERED, KEPT, FAILED = "rendered", "kept", "failed"
POLL_S = 0.5  # how often the main thread looks up from the videos in flight (Ctrl-C lands between)


@dataclass(frozen=True)
class Outcome:
    job: Job
    status: str  # RENDERED, KEPT or FAILED
    reason: str = ""  # FAILED: why, in one line
    warnings: tuple[str, ...] = ()  # what render warned of (a simulated session, another ffmpeg)


class StoppableChunks(Protocol):
    """A `render.ChunkRunner` that gives up (RuntimeError) once `stop` is set: how a Ctrl-C on
    the main thread reaches the videos other threads are waiting on (`ray_chunks.run_chunks`)."""

    def __call__(self, plan: RenderPlan, fmt: OutputFormat, ffmpeg: Ffmpeg, spans: list[tuple[int, int]],
                 done: Callable[[int], None], stop: threading.Event | None = None) -> list[tuple[bytes, list[str]]]: ...


class _Tally:
    """Frames done over the whole catalogue, each job's share set from whichever thread renders
    it; the sum is reported under a lock, so the count never goes back or skips."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self._progress, self._total, self._done = progress, total, 0
        self._shares: dict[int, int] = {}
        self._lock = threading.Lock()

    def set(self, index: int, frames: int) -> None:
        if self._progress is None:
            return
        with self._lock:
            self._done += frames - self._shares.get(index, 0)
            self._shares[index] = frames
            self._progress(self._done, self._total)


def _frames(job: Job, outputs: Sequence[Path]) -> int:
    """Frames the outputs take to render: the video's, and one for the poster."""
    return sum(job.frames if output.suffix == VIDEO else 1 for output in outputs)


def videos_at_once(jobs: Sequence[Job], cpus: int) -> int:
    """How many videos keep `cpus` chunk workers busy: the CPUs over a video's mean chunk count
    (a 14-second video has 2 chunks: 8 at once on 16 CPUs), and at least two where there are two,
    so the next video's chunks are queued while the driver plans, joins and commits one; never
    more than there are videos."""
    chunks = [-(-job.frames // CHUNK_FRAMES) for job in jobs if job.frames]
    if not chunks:
        return 1
    return min(len(chunks), max(2, cpus * len(chunks) // sum(chunks)))


def _render_job(index: int, job: Job, outputs: Sequence[Path], workers: int, tally: _Tally,
                chunks: ChunkRunner | None, stop: threading.Event | None = None) -> Outcome:
    """One job's outputs rendered in turn; its share of the tally set as frames come."""
    if job.problem:
        return Outcome(job, FAILED, job.problem)
    if not outputs:
        return Outcome(job, KEPT)
    warnings: dict[str, None] = {}
    base = 0
    try:
        for output in outputs:
            if stop is not None and stop.is_set():
                raise RuntimeError("stopped")  # interrupted between the video and its poster
            tick = lambda d, _t, base=base: tally.set(index, base + d)  # noqa: E731
            warnings.update(dict.fromkeys(render(job.session, output, job.options, workers, tick, chunks=chunks).warnings))
            base += _frames(job, (output,))
    except (ValueError, OSError, RuntimeError) as exc:  # the session changed, ffmpeg failed, a worker died
        tally.set(index, _frames(job, outputs))
        return Outcome(job, FAILED, " ".join(str(exc).split()))
    return Outcome(job, RENDERED, warnings=tuple(warnings))


def render_catalogue(jobs: Sequence[Job], workers: int = 1, progress: Progress | None = None, force: bool = False,
                     chunks: ChunkRunner | StoppableChunks | None = None, cpus: int | None = None) -> list[Outcome]:
    """One outcome per job, in order. Outputs already current are kept unless `force`. With
    `chunks` (render-all --ray) each video's chunks run there instead of on `workers`, and with
    `cpus` (the cluster's; `chunks` must then be a StoppableChunks) several videos at once.
    progress(done, total) counts frames over every output still to render."""
    versions = {VIDEO: current_versions(find_ffmpeg()), POSTER: current_versions(None)}
    todo = [
        () if job.problem else tuple(o for o in job.outputs if force or not is_current(job, o, versions[o.suffix]))
        for job in jobs
    ]
    tally = _Tally(progress, sum(_frames(job, outputs) for job, outputs in zip(jobs, todo, strict=False)))
    width = videos_at_once([j for j, o in zip(jobs, todo, strict=False) if o], cpus) if chunks is not None and cpus else 1
    if width == 1:
        return [_render_job(i, job, outputs, workers, tally, chunks) for i, (job, outputs) in enumerate(zip(jobs, todo, strict=False))]
    stop = threading.Event()
    runner = partial(cast(StoppableChunks, chunks), stop=stop)  # several at once only with cpus, so a StoppableChunks
    pool = ThreadPoolExecutor(width, thread_name_prefix="tokenreel-video")
    try:
        futures: list[Future[Outcome]] = [
            pool.submit(_render_job, i, job, outputs, workers, tally, runner, stop)
            for i, (job, outputs) in enumerate(zip(jobs, todo, strict=False))
        ]
        pending = set(futures)
        while pending:  # with a timeout, so that a Ctrl-C is raised here at once
            _, pending = wait(pending, timeout=POLL_S, return_when=FIRST_EXCEPTION)
        return [future.result() for future in futures]
    except BaseException:  # Ctrl-C, SIGTERM: the videos in flight give up, their staging is removed
        stop.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
