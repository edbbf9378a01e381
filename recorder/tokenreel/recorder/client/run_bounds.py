"""THE RUN BOUNDS: what one streamed run may hold, checked as each event is read (not at save).

A server that never ends its stream then costs bounded memory and time: a run passing a bound
fails with one line and is kept without its chunks (`OverBound`); a running count the server
cannot have sent truthfully quarantines the run (`ImpossibleCount`).
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenreel.session.model import MAX_CHUNKS_PER_RUN

# The bounds (`RunBounds`, checked by `stream.StreamParser`):
# - tokens: max_tokens plus a margin of max(64, max_tokens / 4) (engines overshoot by a step or
#   a drafter's window, never by a quarter of the run);
# - events: 2 x that token bound + 1,024 (an event carries a token or is one of a few role,
#   finish and usage events), never more than the archive's MAX_CHUNKS_PER_RUN;
# - bytes of event data: 16 MiB + 8 KiB per token of the token bound (an event with a token and
#   its logprobs is 0.3-3 KiB);
# - a running count (usage, llama.cpp's predicted_n) that jumps by more than the token bound in
#   one event, or goes backwards, is an impossible value: the run is quarantined (`invalid`);
# - time: a count (usage, predicted_n, token_ids) t seconds after send is at most
#   TOKENS_AT_SEND + MAX_TOKENS_PER_SECOND * t (the archive's bound, `tokenreel.session.model`), and TOKENS_AT_SEND a step's worth
#   (a drafter's window, a stream_interval's batch): a count past it is quarantined too. It is a
#   bound on the whole time since send, not on the gap to the previous event, so a proxy that
#   buffers the stream, or vLLM's one usage event at the end, stays within it.
#   A request whose extra_body leaves max_tokens out is bounded as if it asked for
#   UNSTATED_MAX_TOKENS (a long context's whole output).
MIN_TOKEN_MARGIN = 64
UNSTATED_MAX_TOKENS = 1 << 17
EXTRA_EVENTS = 1024
BASE_RUN_BYTES = 16 << 20
BYTES_PER_TOKEN = 8 << 10
TOKENS_AT_SEND = 64


class StreamFailure(Exception):
    """The stream itself says the run failed (error event, malformed line); one-line message."""


class OverBound(StreamFailure):
    """The run streamed past one of its bounds (THE RUN BOUNDS); its chunks are not kept."""


class ImpossibleCount(StreamFailure):
    """A running token count the server cannot have sent truthfully; the run is quarantined."""


@dataclass(frozen=True)
class RunBounds:
    """THE RUN BOUNDS of one run, from the max_tokens its request asks for."""

    max_tokens: int
    tokens: int
    events: int
    bytes: int

    @classmethod
    def of(cls, max_tokens: int) -> RunBounds:
        tokens = max_tokens + max(MIN_TOKEN_MARGIN, max_tokens // 4)
        events = min(MAX_CHUNKS_PER_RUN, 2 * tokens + EXTRA_EVENTS)
        return cls(max_tokens, tokens, events, BASE_RUN_BYTES + BYTES_PER_TOKEN * tokens)
