"""The one set of metric definitions used by report, record summaries and the video.

n         = server-reported completion tokens (usage.completion_tokens; the sum of the
            per-chunk counts only when the server reported no usage)
TTFT      = first chunk after the role chunk that carries a token (or content, reasoning or
            tool calls), minus request send. A role-only chunk is not the first token; a chunk
            with empty text that carries a token is (vLLM 0.33 sends a first token that decodes
            to part of a character, or a special token whose text is skipped, that way)
decode    = (n - tokens in the first chunk) / (t_last - t_first)   [tok/s]
            On the kernel clock a read's events share the time of its last packet (a late read
            takes several), so the "first chunk" is the first token's whole read: tokens that
            arrived with it are not decode. t_last stays the last token's read even when that
            read also holds the final usage chunk or [DONE]: servers write those microseconds
            after the last token (llama.cpp: 0.1 ms), and ending at the read before instead
            drops a speculative arm's last accepted burst (0.4% off the engine's own figure on
            the real llama.cpp test, against 0.02% this way)
TPOT      = 1000 / decode                                          [ms]
end-to-end= n / (t_last - t_send)                                  [tok/s]

t_last is the arrival of the last chunk that carried tokens or text. All times are integer
nanoseconds from request send, as archived. Every input is bounded by the archive (see
core/tokenreel/session/validate.py: counts, offsets and acceptance figures), so every figure here is finite.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenreel.session.model import Chunks, Run

NS_PER_S = 1_000_000_000
# How close tokens per event must come to the engine's acceptance length for the events to be
# read as its verify steps (`events_are_steps`).
STEP_EVENTS_AGREE = 0.05


@dataclass(frozen=True)
class RunMetrics:
    output_tokens: int
    first_chunk_tokens: int
    ttft_s: float | None
    decode_tok_s: float | None
    tpot_ms: float | None
    e2e_tok_s: float | None
    decode_tokens: int = 0  # the tokens decode counts (n - first chunk)
    e2e_s: float | None = None  # request send to the last token: the time an end-to-end speed-up divides


def first_token_index(chunks: Chunks) -> int | None:
    """Index of the first chunk that carries a token or text (content, reasoning, a tool call).

    The recorder never leaves a count on a role-only chunk (it moves to the next token chunk),
    so a role chunk is never the first token.
    """
    for i in range(len(chunks)):
        if chunks.tokens[i] > 0 or chunks.has_text(i):
            return i
    return None




def last_token_index(chunks: Chunks) -> int | None:
    """Index of the last chunk that carried tokens or text (the usage-only tail is skipped)."""
    for i in range(len(chunks) - 1, -1, -1):
        if chunks.tokens[i] > 0 or chunks.has_text(i):
            return i
    return None


def output_tokens(run: Run) -> int:
    """n: the server's completion_tokens; the chunk sum only when usage is missing."""
    if run.usage and "completion_tokens" in run.usage:
        return int(run.usage["completion_tokens"])
    return sum(run.chunks.tokens)


def decode_rate(tokens_after_first: int, t_first_ns: int, t_last_ns: int) -> float | None:
    """Decode tok/s over (t_first, t_last]; None when there is no interval to divide by."""
    span = t_last_ns - t_first_ns
    if span <= 0 or tokens_after_first <= 0:
        return None
    return tokens_after_first * NS_PER_S / span


def run_metrics(run: Run) -> RunMetrics:
    chunks = run.chunks
    n = output_tokens(run)
    first = first_token_index(chunks)
    last = last_token_index(chunks)
    if first is None or last is None:
        return RunMetrics(n, 0, None, None, None, None)
    t_first, t_last = chunks.t_ns[first], chunks.t_ns[last]
    first_tokens = chunks.tokens[first]
    if run.clock is not None and run.clock.source == "kernel":
        i = first + 1
        while i <= last and chunks.t_ns[i] == t_first:  # the rest of the first token's read
            first_tokens += chunks.tokens[i]
            i += 1
    decode = decode_rate(n - first_tokens, t_first, t_last)
    e2e = n * NS_PER_S / t_last if t_last > 0 and n > 0 else None
    return RunMetrics(
        output_tokens=n,
        first_chunk_tokens=first_tokens,
        ttft_s=t_first / NS_PER_S,
        decode_tok_s=decode,
        tpot_ms=1000.0 / decode if decode else None,
        e2e_tok_s=e2e,
        decode_tokens=n - first_tokens,
        e2e_s=t_last / NS_PER_S,
    )


def tokens_per_event(chunks: Chunks, first: int, end: int) -> float | None:
    """Tokens per token-carrying event in chunks[first + 1:end]: after the first token, whose
    event carries the prefill's token, not a verify step's."""
    counts = [n for n in chunks.tokens[first + 1 : end] if n > 0]
    return sum(counts) / len(counts) if counts else None


def events_are_steps(run: Run) -> bool:
    """True when the run's events are the engine's verify steps, so tokens per event is a running
    acceptance length: over the whole run it agrees with the engine's own figure (1 + accepted /
    drafts, `Run.acceptance`) within STEP_EVENTS_AGREE. vLLM and SGLang send one event per step;
    llama.cpp sends one per token (its few multi-token events are tokens held back mid-UTF-8
    character), whose sizes say nothing about acceptance. False without the engine's figure."""
    length = run.acceptance.mean_length if run.acceptance else None
    first = first_token_index(run.chunks)
    if length is None or first is None:
        return False
    per_event = tokens_per_event(run.chunks, first, len(run.chunks))
    return per_event is not None and abs(per_event - length) <= STEP_EVENTS_AGREE * length
