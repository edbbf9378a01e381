"""Render a catalogue's jobs one after another, with one progress count over all of them.

Each output goes through `render.render`, as `tokenreel render` does, so a catalogue video is
byte for byte the render of the same options, its manifest verifies like any other, and each
file appears complete or not at all: an interrupted catalogue leaves only whole videos, which
the next run keeps (`catalogue.is_current`). A video that fails is said and the rest go on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenreel.renderer.catalogue import POSTER, VIDEO, Job, is_current
from tokenreel.renderer.encode import find_ffmpeg
from tokenreel.renderer.manifest import current_versions
from tokenreel.renderer.render import ChunkRunner, Progress, render

RENDERED, KEPT, FAILED = "rendered", "kept", "failed"


@dataclass(frozen=True)
class Outcome:
    job: Job
    status: str  # RENDERED, KEPT or FAILED
    reason: str = ""  # FAILED: why, in one line
    warnings: tuple[str, ...] = ()  # what render warned of (a simulated session, another ffmpeg)


def _frames(job: Job, outputs: Sequence[Path]) -> int:
    """Frames the outputs take to render: the video's, and one for the poster."""
    return sum(job.frames if output.suffix == VIDEO else 1 for output in outputs)


def render_catalogue(jobs: Sequence[Job], workers: int = 1, progress: Progress | None = None, force: bool = False,
                     chunks: ChunkRunner | None = None) -> list[Outcome]:
    """One outcome per job, in order. Outputs already current are kept unless `force`. With
    `chunks` (render-all --ray) each video's chunks run there instead of on `workers`.
    progress(done, total) counts frames over every output still to render."""
    versions = {VIDEO: current_versions(find_ffmpeg()), POSTER: current_versions(None)}
    todo = [
        () if job.problem else tuple(o for o in job.outputs if force or not is_current(job, o, versions[o.suffix]))
        for job in jobs
    ]
    total = sum(_frames(job, outputs) for job, outputs in zip(jobs, todo))
    done = 0
    outcomes = []
    for job, outputs in zip(jobs, todo):
        if job.problem:
            outcomes.append(Outcome(job, FAILED, job.problem))
            continue
        if not outputs:
            outcomes.append(Outcome(job, KEPT))
            continue
        start = done
        warnings: dict[str, None] = {}
        try:
            for output in outputs:
                base = done
                tick = None if progress is None else (lambda d, _t, base=base: progress(base + d, total))
                warnings.update(dict.fromkeys(render(job.session, output, job.options, workers, tick, chunks=chunks).warnings))
                done = base + _frames(job, (output,))
        except (ValueError, OSError, RuntimeError) as exc:  # the session changed, ffmpeg failed, a worker died
            outcomes.append(Outcome(job, FAILED, " ".join(str(exc).split())))
            done = start + _frames(job, outputs)
            if progress is not None:
                progress(done, total)
            continue
        outcomes.append(Outcome(job, RENDERED, warnings=tuple(warnings)))
    return outcomes
