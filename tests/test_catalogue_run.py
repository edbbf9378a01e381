"""Several catalogue videos at once (render-all --ray's driver threads), without Ray: a chunk
runner that encodes here stands in for the cluster. The videos really are in flight together
(a barrier only they can pass together), the bytes and outcomes are those of one after another,
in job order, the progress count only goes up, to the total; a failed video is one outcome and
the rest go on; an interrupt stops the videos in flight and leaves only whole files."""

from __future__ import annotations

import os
import shutil
import signal
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from tests.test_render_signals import SESSION
from tokenreel.renderer.catalogue.jobs import Job, catalogue, layouts
from tokenreel.renderer.catalogue.run_jobs import FAILED, RENDERED, render_catalogue, videos_at_once
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render import encode_chunk

BASE = RenderOptions(title_s="0", hold_s="1")  # 276 frames: two chunks a video


def jobs_in(folder: Path) -> list[Job]:
    folder.mkdir(parents=True, exist_ok=True)
    session = folder / "seed.json"
    shutil.copyfile(SESSION, session)
    return catalogue([session], folder / "DIR", BASE, layouts(["320x180"]), ["dark", "light"], ["code-1", "prose-1"])


def local_chunks(plan, fmt, ffmpeg, spans, done, stop=None):  # a ray_chunks.run_chunks stand-in
    results = [encode_chunk(plan, fmt, ffmpeg, first, end) for first, end in spans]
    done(sum(end - first for first, end in spans))
    return results


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_videos_in_flight_fill_the_cpus_with_their_chunks(tmp_path: Path) -> None:
    jobs = jobs_in(tmp_path)
    assert all(240 < job.frames <= 480 for job in jobs)  # two chunks each
    # at least two: the next video's chunks queued while one is joined and committed
    assert len(jobs) == 4 and [videos_at_once(jobs, cpus) for cpus in (1, 2, 4, 8, 16)] == [2, 2, 2, 4, 4]  # at most the 4
    assert videos_at_once(jobs * 4, 16) == 8 and videos_at_once(jobs[:1], 16) == 1
    short = [replace(job, frames=200) for job in jobs]  # one chunk each
    assert [videos_at_once(short, cpus) for cpus in (1, 2, 3, 16)] == [2, 2, 3, 4]
    mixed = [replace(jobs[0], frames=200), replace(jobs[1], frames=430)]  # three chunks over two videos
    assert videos_at_once(mixed, 16) == 2 and videos_at_once([], 16) == 1  # never more than the videos


def test_videos_at_once_are_the_bytes_of_one_after_another(tmp_path: Path) -> None:
    jobs = jobs_in(tmp_path / "one")
    alone = render_catalogue(jobs, chunks=local_chunks)
    together = jobs_in(tmp_path / "two")
    barrier = threading.Barrier(2, timeout=60)  # broken (and the test failed) unless two videos run at once
    met = []

    def chunks(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        met.append(barrier.wait())
        return local_chunks(*args, **kwargs)

    counts: list[tuple[int, int]] = []
    outcomes = render_catalogue(together, progress=lambda d, t: counts.append((d, t)), chunks=chunks, cpus=4)  # 2 at once
    assert sorted(met) == [0, 0, 1, 1]  # the four videos met two by two
    assert [o.status for o in alone] == [o.status for o in outcomes] == [RENDERED] * 4
    assert [o.job.video.name for o in outcomes] == [job.video.name for job in together]  # job order
    assert files(tmp_path / "one" / "DIR") == files(tmp_path / "two" / "DIR")
    total = sum(job.frames + 1 for job in together)
    assert all(t == total for _, t in counts) and counts[-1][0] == total
    assert [d for d, _ in counts] == sorted(d for d, _ in counts)


def test_a_failed_video_is_one_outcome_and_the_rest_go_on(tmp_path: Path) -> None:
    jobs = jobs_in(tmp_path)
    lost = jobs[1].options

    def chunks(plan, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if plan.options == lost:
            raise RuntimeError("a Ray render worker was lost (NodeDiedError): nothing of this video was written")
        return local_chunks(plan, *args, **kwargs)

    outcomes = render_catalogue(jobs, chunks=chunks, cpus=4)
    assert [o.status for o in outcomes] == [RENDERED, FAILED, RENDERED, RENDERED]
    assert outcomes[1].reason.startswith("a Ray render worker was lost")
    assert not jobs[1].video.exists() and all(job.video.is_file() for job in (jobs[0], *jobs[2:]))


def test_an_interrupt_stops_the_videos_in_flight_and_leaves_whole_files(tmp_path: Path) -> None:
    jobs = jobs_in(tmp_path)
    calls: list[object] = []
    lock = threading.Lock()

    def chunks(plan, fmt, ffmpeg, spans, done, stop=None):  # noqa: ANN001, ANN202
        with lock:
            calls.append(plan)
            second = len(calls) == 2
        if second:  # both videos in flight: Ctrl-C reaches the main thread, waiting on them
            os.kill(os.getpid(), signal.SIGINT)
        assert stop is not None and stop.wait(60), "the interrupt did not reach the video threads"
        raise RuntimeError("the catalogue was interrupted")

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever an earlier test (ray.init) set
    try:
        with pytest.raises(KeyboardInterrupt):
            render_catalogue(jobs, chunks=chunks, cpus=4)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(calls) == 2  # the videos not yet started never start
    left = [p.relative_to(tmp_path).as_posix() for p in (tmp_path / "DIR").rglob("*")]
    assert not [p for p in left if p.endswith(".mp4") or "/." in p], left  # no video, no staging folder
