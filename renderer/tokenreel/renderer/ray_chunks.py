"""A video's chunks as Ray tasks (`render-all --ray`): the fan-out of `render`'s local workers.

The chunk boundaries are render's own (CHUNK_FRAMES, never the cluster's size) and a chunk's
bytes depend only on its frames, so a video joined from chunks made on any nodes is byte for
byte a local one-worker render. Each task returns its chunk's bytes to the driver, which joins
and commits the file as `render` always does: a node that dies leaves nothing half-written.
The one thing a node could change is the encoder: each task says its ffmpeg and its tokenreel,
and a chunk made by another version is refused in one line. Imported only under `--ray`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import ray
from ray.exceptions import GetTimeoutError, RayError, RayTaskError

import tokenreel.base.version
from tokenreel.renderer.encode import Ffmpeg, OutputFormat, find_ffmpeg
from tokenreel.renderer.render import encode_chunk
from tokenreel.renderer.render_plan import RenderPlan

POLL_S = 0.5  # how often a video's driver thread looks whether the catalogue was interrupted


@ray.remote(num_cpus=1, max_retries=0)
def _chunk(plan: RenderPlan, fmt: OutputFormat, start: int, stop: int) -> tuple[bytes, list[str], str, str, str]:
    """On a worker: the chunk's bytes and hashes, and what made them (ffmpeg, tokenreel, node)."""
    ffmpeg = find_ffmpeg()
    data, hashes = encode_chunk(plan, fmt, ffmpeg, start, stop)
    node: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]  # ray leaves it unannotated
    return data, hashes, ffmpeg.version, tokenreel.base.version.__version__, node


def cluster_cpus() -> int:
    """The connected cluster's CPUs: how many chunks can run at once (catalogue_run fills them)."""
    return int(ray.cluster_resources().get("CPU", 1))  # type: ignore[no-untyped-call]  # ray leaves it unannotated


def run_chunks(plan: RenderPlan, fmt: OutputFormat, ffmpeg: Ffmpeg, spans: list[tuple[int, int]],
               done: Callable[[int], None], stop: threading.Event | None = None) -> list[tuple[bytes, list[str]]]:
    """`render.ChunkRunner` on the connected Ray cluster: every chunk at once, Ray placing them;
    frames done counted as chunks come back. RuntimeError (one line) for a worker or node that
    died, or a chunk made by another ffmpeg or tokenreel than this machine's; also once `stop`
    is set (a Ctrl-C seen by the main thread while this video renders on another thread)."""
    shared = ray.put(plan)  # once per video, not once per chunk
    refs = [_chunk.remote(shared, fmt, first, end) for first, end in spans]
    frames = dict(zip(refs, (end - first for first, end in spans), strict=False))
    results = {}
    pending = list(refs)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=None if stop is None else POLL_S)
            if stop is not None and stop.is_set():
                raise RuntimeError("the catalogue was interrupted")
            for ref in ready:
                results[ref] = _checked(ray.get(ref), ffmpeg)
            if ready:
                done(sum(frames[ref] for ref in results))
    except RayTaskError as exc:
        raise RuntimeError(f"a Ray render task failed: {' '.join(str(exc.cause).split())}") from None
    except (RayError, GetTimeoutError) as exc:  # a worker or its node died, an object was lost
        raise RuntimeError(f"a Ray render worker was lost ({type(exc).__name__}): nothing of this video was written;"
                           " run render-all again to render it") from None
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
    return [results[ref] for ref in refs]


def _checked(result: tuple[bytes, list[str], str, str, str], ffmpeg: Ffmpeg) -> tuple[bytes, list[str]]:
    data, hashes, version, tool, node = result
    if version != ffmpeg.version or tool != tokenreel.base.version.__version__:
        raise RuntimeError(
            f"the Ray node {node} runs {version} with tokenreel {tool}, this machine {ffmpeg.version} with tokenreel"
            f" {tokenreel.base.version.__version__}: its chunks would not be byte-identical; install the same tokenreel[ray] on every node"
        )
    return data, hashes
