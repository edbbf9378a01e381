"""Peer requests to a session arm: chunk times rebuilt only from what the peer kept.

A peer that kept each chunk's arrival (vllm bench's `itls`, AIPerf's `inter_chunk_latency`)
gives the chunks exactly, relative to the request's start; one that kept only per-request
figures gives two events: the first token at its TTFT and the rest at its last response, so
decode is the peer's own (tokens after the first over first to last) and nothing in between is
made up. Tokens per chunk are exact only where the chunk count equals the completion tokens.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from tokenreel.base.version import __version__
from tokenreel.recorder.client.token_counts import reconcile
from tokenreel.session.fields import FieldReader
from tokenreel.session.model import (
    MAX_OFFSET_NS,
    MAX_TOKENS_PER_EVENT,
    ArchiveError,
    Arm,
    Chunks,
    Imported,
    Prompt,
    Run,
    Session,
    Settings,
)

NS_PER_S = 1_000_000_000
CATEGORY = "imported"  # the prompts' category: the peer's file holds no prompt text
MAX_ERROR = 300  # characters of a peer's error message kept (vllm bench keeps whole tracebacks)


@dataclass
class PeerRequest:
    """One request as the peer kept it; times in seconds from the request's start."""

    prompt: str  # the prompt id: the request's place in the peer's order
    error: str = ""  # "" when it succeeded
    ttft_s: float = 0.0
    gaps_s: list[float] | None = None  # chunk to chunk after the first; None: not kept
    end_s: float | None = None  # the last response, where gaps_s is None
    output_tokens: int = 0
    prompt_tokens: int | None = None
    text: str = ""
    warmup: bool = False
    started_at: str = ""
    send_monotonic_ns: int | None = None


@dataclass
class PeerRun:
    """A whole peer result: its requests and what it said of itself."""

    tool: str
    file: str
    model: str
    requests: list[PeerRequest]
    version: str = ""
    summary: dict[str, str] = field(default_factory=dict)  # shown in the fingerprint table
    lacks: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    fingerprint: dict[str, Any] = field(default_factory=dict)  # raw run-level figures, kept beside the summary
    acceptance_note: str = ""  # why no run has an acceptance of its own, where the peer says why


def request_prompt(number: int) -> str:
    """The prompt id of a peer's request `number` (from 0): peers that ran the same data set
    with the same seed sent the same prompts in the same order, so arms pair by it."""
    return f"request-{number + 1:05d}"


def check_seconds(r: FieldReader, value: object, where: str) -> float:
    """A finite, non-negative duration in seconds, at most a week."""
    seconds = r.nonneg_num(value, where)
    if seconds * NS_PER_S > MAX_OFFSET_NS:
        raise r.fail(where, f"{seconds} s is more than a week")
    return seconds


def chunks_of(request: PeerRequest, where: str, r: FieldReader) -> tuple[Chunks, str]:
    """The run's chunks and their token source (`TOKEN_SOURCES`); the reply's text, which no
    peer keeps per chunk, on the last chunk."""
    gaps = request.gaps_s
    if gaps is None:
        end = request.end_s if request.end_s is not None else request.ttft_s
        if end < request.ttft_s:
            raise r.fail(where, f"the last response ({end} s) comes before the first token ({request.ttft_s} s)")
        gaps = [end - request.ttft_s] if request.output_tokens > 1 else []
    offsets = [request.ttft_s]
    for gap in gaps:
        offsets.append(offsets[-1] + gap)
    if offsets[-1] * NS_PER_S > MAX_OFFSET_NS:
        raise r.fail(where, "the request's chunks end more than a week after it started")
    chunks = Chunks()
    for offset in offsets:
        chunks.append(round(offset * NS_PER_S), 1)
    total = request.output_tokens
    if total > len(chunks) * MAX_TOKENS_PER_EVENT:
        raise r.fail(where, f"{total} output tokens in {len(chunks)} chunks: more than a chunk can carry")
    source = "chunk_count" if total == len(chunks) else "per_event"
    if source == "per_event":
        reconcile(chunks.tokens, list(range(len(chunks))), total)
    carrying = [i for i, n in enumerate(chunks.tokens) if n]
    if request.text:
        chunks.content[carrying[-1] if carrying else len(chunks) - 1] = request.text
    return chunks, source


def runs_of(peer: PeerRun, arm_id: str, r: FieldReader) -> list[Run]:
    runs: list[Run] = []
    seen: dict[str, int] = {}
    for n, request in enumerate(peer.requests):
        index = seen.get(request.prompt, 0)
        seen[request.prompt] = index + 1
        run = Run(arm=arm_id, prompt=request.prompt, index=index, warmup=request.warmup,
                  started_at=request.started_at, send_monotonic_ns=request.send_monotonic_ns)
        if request.error:
            run.status = "failed"
            run.error = " ".join(request.error.split())[:MAX_ERROR]
        else:
            run.chunks, run.token_source = chunks_of(request, f"request {n}", r)
            run.acceptance_note = peer.acceptance_note
            run.usage = {"completion_tokens": request.output_tokens}
            if request.prompt_tokens is not None:
                run.usage["prompt_tokens"] = request.prompt_tokens
        runs.append(run)
    return runs


def new_session(name: str) -> Session:
    """An empty session for imported arms: the settings are tokenreel's defaults, one measured run
    a request, none warm-up (the arms' `imported.lacks` says the peer kept no settings)."""
    return Session(name=name, settings=Settings(prompts="imported", warmup=0, repeats=1, prompt_cache="engine"),
                   prompts=[], arms=[], tool_version=__version__,
                   created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))


def add_arm(session: Session, peer: PeerRun, arm_id: str, label: str, path: str) -> Session:
    """`session` with the peer's run added as arm `arm_id`; an ArchiveError naming the file when the
    id is taken or a field of the file is unusable."""
    r = FieldReader(path)
    if any(arm.id == arm_id for arm in session.arms):
        raise ArchiveError(path, "", f"arm {arm_id!r} is already in the session: pass another --arm")
    runs = runs_of(peer, arm_id, r)
    if not runs:
        raise ArchiveError(path, "", "holds no requests")
    summary = {"imported from": f"{peer.tool} {peer.version}".strip() + f" ({os.path.basename(path)})", **peer.summary}
    if peer.lacks:
        summary["lacks"] = "; ".join(peer.lacks.values())
    arm = Arm(id=arm_id, label=label, base_url="", model=peer.model, fingerprint={"summary": summary, **peer.fingerprint},
              imported=Imported(tool=peer.tool, file=peer.file, version=peer.version, lacks=peer.lacks, notes=peer.notes))
    known = {prompt.id for prompt in session.prompts}
    new_prompts = [Prompt(id=p, category=CATEGORY, messages=[], prompt="")
                   for p in dict.fromkeys(run.prompt for run in runs) if p not in known]
    completion = [run.usage["completion_tokens"] for run in runs if run.usage]
    settings = replace(session.settings, max_tokens=max([session.settings.max_tokens if session.arms else 0, *completion]))
    return replace(session, settings=settings, prompts=session.prompts + new_prompts,
                   arms=[*session.arms, arm], runs=session.runs + runs)


def finite_list(r: FieldReader, value: object, where: str) -> list[float]:
    """A list of durations in seconds (vllm bench's `itls` entry)."""
    return [check_seconds(r, item, f"{where}[{i}]") for i, item in enumerate(r.list_(value, where))]
