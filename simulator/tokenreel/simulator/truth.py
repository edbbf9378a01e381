"""How far a recording's times lie from what the simulator really sent.

Pairs each streamed run of an arm with its simulated endpoint's log of what it sent (GET
/sim/sent, sent.py) and gives, per completed run, the error of its TTFT and decode tok/s.
Recorder and simulator stamp one CLOCK_MONOTONIC on one machine (`Run.send_monotonic_ns` +
`t_ns` is a recorded arrival), so the errors are absolute, not relative to the send.

The truth is an interval: a write's bytes arrive somewhere inside its call, [before, after].
A recorded read has the time of the last packet it consumed, which may belong to token-less
writes that followed (the finish, usage and [DONE] after the last token: see t_last in
tokenreel.analysis.metrics), so a token write's window runs from its `before` to the `after` of the
last write before the next token write. Each error is the distance outside that window (0
inside), given beside the signed error against the token write's own `after` stamp. A window
holds only if its bytes left inside it: when the server's kernel still held some unsent after
the window's last write (`SentStream.unsent`: TCP held segments back), they arrived later than
any stamp says, and the run is `sent_late`: its errors then mix that delay with the recorder's.

- TTFT: the recorded first-token arrival against the first token-carrying write. A run whose
  first token was read together with later ones (`clock.first_shared`) is late by design.
- decode: `run_metrics`'s figure against the same definition on the server's writes over the
  same tokens: from the write that completed the recorded first chunk (on the kernel clock the
  first token's whole read) to the last token write.

Pairing: by request identity, so it holds for runs in flight together (a sweep) as well as one
at a time. Each completed run of an arm is paired with the stream of its endpoint's log that
carried the run's `response_id` (the `id` of the events it read), and that stream must have
begun between the run's send and its first event: an id can repeat across servers, a request's
time cannot. A completed run's token counts must be the stream's; anything else is a ValueError
of one line.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tokenreel.analysis.metrics import decode_rate, first_token_index, last_token_index, output_tokens, run_metrics
from tokenreel.session.model import Run, Session
from tokenreel.simulator.sent import SENT_LOG_LEN, SentStream

NS_PER_MS = 1e6


@dataclass(frozen=True)
class RunTruth:
    """One completed run's errors against what was sent; decode is None when the run has none."""

    arm: str
    prompt: str
    index: int
    warmup: bool
    clock: str  # the clock that stamped the run: "kernel" or "user"
    first_shared: bool
    ttft_error_ms: float  # outside the first token write's window: + late, - early, 0 inside
    ttft_vs_after_ms: float  # recorded arrival - that write's after stamp
    window_ms: float  # the first token write's window: the truth's own uncertainty
    decode_error_pct: float | None  # recorded decode vs the nearest the windows allow
    decode_vs_after_pct: float | None  # vs the same definition on the after stamps
    sent_late: bool  # bytes of a window's writes left the server after it (module doc)

    def line(self) -> str:
        """One line for a person: which run, both errors, and why they may be off."""
        decode = f"decode error {_signed(self.decode_error_pct, 4, '%')} (vs after {_signed(self.decode_vs_after_pct, 4, '%')})"
        shared = ", first token read with later ones" if self.first_shared else ""
        late = ", the server's kernel sent some bytes after its write" if self.sent_late else ""
        return (
            f"{_name_of(self.arm, self.prompt, self.index, self.warmup)}: TTFT error {_signed(self.ttft_error_ms, 3, ' ms')}"
            f" (vs after {_signed(self.ttft_vs_after_ms, 3, ' ms')}, window {self.window_ms:.3f} ms), {decode};"
            f" {self.clock} clock{shared}{late}"
        )


def fetch_sent(root_url: str, headers: Mapping[str, str], timeout_s: float = 10.0) -> list[SentStream]:
    """GET /sim/sent of one endpoint (`headers`: its control token, `SimCluster.control_headers`)."""
    url = f"{root_url}/sim/sent"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=dict(headers)), timeout=timeout_s) as answer:
            data = json.loads(answer.read())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{url}: {exc}") from None
    requests = data.get("requests") if isinstance(data, dict) else None
    if not isinstance(requests, list):
        raise ValueError(f"{url}: no 'requests' list in the answer")
    return [SentStream.from_json(item, f"{url} requests[{i}]") for i, item in enumerate(requests)]


def session_truth(session: Session, sent: Mapping[str, Sequence[SentStream]]) -> list[RunTruth]:
    """Every completed run's errors, arm by arm; `sent` maps each arm id to its endpoint's log."""
    truths = []
    for arm in session.arms:
        if arm.id not in sent:
            raise ValueError(f"{arm.id}: no sent log given for this arm")
        truths += [run_truth(run, stream) for run, stream in pair(arm.id, session.runs, sent[arm.id])]
    return truths


def pair(arm: str, runs: Sequence[Run], streams: Sequence[SentStream]) -> list[tuple[Run, SentStream]]:
    """The arm's completed runs in send order, each with the stream its endpoint sent it (see
    the module doc)."""
    by_id = {stream.response_id: stream for stream in streams}
    pairs = []
    for run in sorted((run for run in runs if run.arm == arm and run.status == "ok"), key=_sent_at):
        if run.response_id is None:
            raise ValueError(f"{_name(run)}: no response id (recorded by an older tokenreel, or the server sent none); record it again")
        stream = by_id.get(run.response_id)
        if stream is None:
            raise ValueError(
                f"{_name(run)}: its endpoint logged no stream {run.response_id} (it keeps the last {SENT_LOG_LEN});"
                " is this the endpoint that served it?"
            )
        began, first = stream.start_ns - _sent_at(run), run.chunks.t_ns[0] if len(run.chunks) else None
        if began <= 0 or (first is not None and began >= first):
            raise ValueError(
                f"{_name(run)}: stream {stream.request_id} began {began / NS_PER_MS:+.3f} ms after the run's send, not between"
                " it and the run's first event: another endpoint's stream with the same id"
            )
        _check_counts(run, stream)
        pairs.append((run, stream))
    return pairs


def run_truth(run: Run, stream: SentStream) -> RunTruth:
    """The TTFT and decode errors of one completed run against the stream it was sent."""
    chunks, send = run.chunks, _sent_at(run)
    first, last = first_token_index(chunks), last_token_index(chunks)
    token_writes = [j for j, tokens in enumerate(stream.tokens) if tokens > 0]
    if first is None or last is None or not token_writes:
        raise ValueError(f"{_name(run)}: no token recorded, or none in stream {stream.request_id}")
    f, e = token_writes[0], token_writes[-1]
    arrival, (f_low, f_high) = send + chunks.t_ns[first], _window(stream, f)
    metrics = run_metrics(run)
    decode_error = decode_vs_after = None
    late = _sent_late(stream, f)
    if metrics.decode_tok_s is not None:
        # The write that completed the recorded first chunk: the first whose running total reaches it.
        g = int(np.searchsorted(np.cumsum(stream.tokens), metrics.first_chunk_tokens))
        if g > e:
            raise ValueError(f"{_name(run)}: its first chunk holds more tokens than stream {stream.request_id} sent")
        (g_low, g_high), (e_low, e_high) = _window(stream, g), _window(stream, e)
        late = late or _sent_late(stream, g) or _sent_late(stream, e)
        span = chunks.t_ns[last] - chunks.t_ns[first]
        nearest = span - outside(span, e_low - g_high, e_high - g_low)
        decode_error = _pct(metrics.decode_tok_s, decode_rate(metrics.decode_tokens, 0, nearest))
        decode_vs_after = _pct(metrics.decode_tok_s, decode_rate(metrics.decode_tokens, stream.after_ns[g], stream.after_ns[e]))
    return RunTruth(
        arm=run.arm,
        prompt=run.prompt,
        index=run.index,
        warmup=run.warmup,
        clock=run.clock.source if run.clock is not None else "user",
        first_shared=run.clock is not None and run.clock.first_shared,
        ttft_error_ms=outside(arrival, f_low, f_high) / NS_PER_MS,
        ttft_vs_after_ms=(arrival - stream.after_ns[f]) / NS_PER_MS,
        window_ms=(f_high - f_low) / NS_PER_MS,
        decode_error_pct=decode_error,
        decode_vs_after_pct=decode_vs_after,
        sent_late=late,
    )


def outside(value: int, low: int, high: int) -> int:
    """How far value lies outside [low, high]: negative below, positive above, else 0."""
    return value - low if value < low else value - high if value > high else 0


def _window(stream: SentStream, j: int) -> tuple[int, int]:
    """When a read that took write j's bytes can be stamped: from write j's start to the end of
    the last write before the next token write (a read's time is its last packet's)."""
    return stream.before_ns[j], stream.after_ns[_window_end(stream, j)]


def _window_end(stream: SentStream, j: int) -> int:
    h = j
    while h + 1 < len(stream.tokens) and stream.tokens[h + 1] == 0:
        h += 1
    return h


def _sent_late(stream: SentStream, j: int) -> bool:
    """Did bytes of write j's window stay in the server's kernel past it? The count after its
    last write includes every earlier byte still queued."""
    return stream.unsent[_window_end(stream, j)] > 0


def _check_counts(run: Run, stream: SentStream) -> None:
    recorded, sent = output_tokens(run), sum(stream.tokens)
    if recorded != sent:
        raise ValueError(f"{_name(run)}: recorded {recorded} tokens, but stream {stream.request_id} sent {sent}; not its stream")
    prompt = (run.usage or {}).get("prompt_tokens")
    if prompt is not None and prompt != stream.prompt_tokens:
        raise ValueError(
            f"{_name(run)}: recorded {prompt} prompt tokens, but stream {stream.request_id} had {stream.prompt_tokens}; not its stream"
        )


def _pct(recorded: float, true: float | None) -> float | None:
    return None if true is None else (recorded / true - 1) * 100


def _signed(value: float | None, digits: int, unit: str) -> str:
    return "none" if value is None else f"{value:+.{digits}f}{unit}"


def _sent_at(run: Run) -> int:
    if run.send_monotonic_ns is None:
        raise ValueError(f"{_name(run)}: no send_monotonic_ns (recorded before it was archived); record it again")
    return run.send_monotonic_ns


def _name(run: Run) -> str:
    return _name_of(run.arm, run.prompt, run.index, run.warmup)


def _name_of(arm: str, prompt: str, index: int, warmup: bool) -> str:
    return f"{arm} / {prompt} / run {index}{' (warmup)' if warmup else ''}"
