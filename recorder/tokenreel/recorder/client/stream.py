"""Turn the bytes of an OpenAI-compatible SSE stream into archived chunks (no I/O here).

The network side (`recorder.sse_client`) stamps every read and hands the bytes to
`StreamParser.feed`; every event completed by that read gets that read's arrival time. Token
counts per event are decided once the stream is over, from the best source the server gave
(see `TOKEN_SOURCES` in the archive): chunks are never assumed to hold one token each, because
speculative decoding, reasoning parsers and slow readers all put several tokens in one event.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_left
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Callable, Protocol

import orjson

from tokenreel.recorder.config import known_secrets, scrub_secrets
from tokenreel.session.model import MAX_CHUNKS_PER_RUN, MAX_COUNT, MAX_RESPONSE_ID, MAX_TOKENS_PER_SECOND, Acceptance, Chunks, EngineFigures

# SSE fields other than data carry nothing for us; anything else means the body is not SSE.
_OTHER_FIELDS = (b"event", b"id", b"retry")
NOT_SSE_HINT = "the endpoint does not stream like an OpenAI server, check base_url and api"
# Where engines put per-response speculative-decoding stats; most events carry none of them.
_SPEC_KEYS = frozenset(("metrics", "sglext", "timings"))
_PLAIN_DELTA = frozenset(("role", "content"))  # a delta with other keys may hold reasoning or tool calls
# The longest SSE line read (one event): a body without newlines would otherwise grow the buffer
# without end. vLLM's biggest events (a final chunk with per-request spec metrics, logprobs of a
# multi-token step) are a few KiB.
MAX_SSE_LINE_BYTES = 4 << 20
# THE RUN BOUNDS (issue 25): what one run may stream, checked as each event is read (not at
# save), so a server that never ends its stream costs bounded memory and time. A run passing one
# fails with one line and is kept without its chunks (`RunBounds`, `sse_client`):
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
_SURROGATE = re.compile("[\ud800-\udfff]")


# Given every event's text, the tokens each one carries (a local tokenizer); see `tokenizer_counts`.
CountText = Callable[[list[str]], list[int]]


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


@dataclass
class Outcome:
    """What the whole stream said once it ended."""

    token_source: str
    usage: dict[str, int] | None
    finish_reason: str | None
    acceptance: Acceptance | None
    note: str = ""  # what the run should say although it is ok (invalid text replaced)
    response_id: str | None = None  # the first event's `id` (Run.response_id)
    engine: EngineFigures | None = None  # what the engine said of the request (Run.engine)


class StreamParser:
    """Accumulates events into `chunks`; `tokens` stays 0 until `finish` picks the source."""

    def __init__(self, chunks: Chunks, bounds: RunBounds) -> None:
        self.chunks, self.bounds = chunks, bounds
        self.done = False
        self.live_tokens = 0  # best running guess, for progress display only
        self.first_text_seen = False
        self._pending = b""
        self._event_type = b""  # the SSE `event:` field of the event being read ("error" fails the run)
        self._invalid_text = 0  # events whose text was invalid UTF-8 or held lone surrogates
        self._non_finite = 0  # events holding NaN, Infinity or a number too large for a double
        self._usage_cum: list[int | None] = []
        self._token_ids: list[int | None] = []
        self._logprobs: list[int | None] = []
        self._timings_cum: list[int | None] = []  # llama.cpp timings.predicted_n (timings_per_token)
        self._running: dict[str, int] = {}  # the last value of each running count, to check the next
        self._role_only: list[bool] = []
        self._usage: dict[str, Any] | None = None
        self._finish_reason: str | None = None
        self._spec: tuple[str, dict[str, Any]] | None = None
        self._timings: dict[str, Any] | None = None  # llama.cpp's last `timings` (the final one is whole)
        self._response_id: str | None = None
        # Body offset just past each event's last byte, to find the read that delivered it
        # (`recorder.kernel_clock.apply`); `_fed` counts the body bytes fed so far.
        self.event_ends: list[int] = []
        self._fed = 0
        self._line_end = 0

    def feed(self, t_ns: int, data: bytes) -> None:
        """Split one read into lines and handle every complete one; all get arrival t_ns."""
        end = self._fed - len(self._pending)
        self._fed += len(data)
        if self._fed > self.bounds.bytes:
            raise OverBound(self._over(
                f"{self._fed} bytes of event data, over its bound of {self.bounds.bytes} (16 MiB + 8 KiB a token)"
            ))
        if self._pending:
            data = self._pending + data
        lines = data.split(b"\n")
        self._pending = lines.pop()
        if len(self._pending) > MAX_SSE_LINE_BYTES:
            raise StreamFailure(self._too_long())
        for line in lines:
            if len(line) > MAX_SSE_LINE_BYTES:
                raise StreamFailure(self._too_long())
            end += len(line) + 1
            self._line_end = end
            self._line(t_ns, line)
            if self.done:
                return

    def _too_long(self) -> str:
        return (
            f"one SSE line longer than {MAX_SSE_LINE_BYTES >> 20} MiB after {len(self.chunks)} events, not read"
            f" further; {NOT_SSE_HINT}"
        )

    def _over(self, what: str) -> str:
        b = self.bounds
        return (
            f"the stream passed its bound after {len(self.chunks)} events and {self.live_tokens} tokens: {what}"
            f" (max_tokens {b.max_tokens}); the run is kept without its chunks, check the server"
        )

    def end_of_body(self, t_ns: int) -> None:
        """The body ended: a last line without a newline still counts."""
        if self._pending.strip():
            line, self._pending = self._pending, b""
            self._line_end = self._fed
            self._line(t_ns, line)

    def _line(self, t_ns: int, line: bytes) -> None:
        line = line.rstrip(b"\r")
        if not line:  # blank line: the event ends; an `event: error` without data still fails
            if self._event_type == b"error":
                raise StreamFailure(self._error_event("(no message)"))
            self._event_type = b""
            return
        if line[0] == 58:  # ":" comment
            return
        if not line.startswith(b"data:"):
            name, _, value = line.partition(b":")
            if name == b"event":
                self._event_type = value.strip()
                return
            if name in _OTHER_FIELDS:
                return
            raise StreamFailure(f"malformed stream line after {self._where(line)}")
        payload = line[5:].strip()
        if self._event_type == b"error":  # SSE `event: error`: whatever its data says, the run failed
            raise StreamFailure(self._error_event(_error_payload_text(payload)))
        if payload == b"[DONE]":
            self.done = True
            return
        try:
            event = orjson.loads(payload)
        except orjson.JSONDecodeError:
            event = self._replaced(payload)
        if not isinstance(event, dict):
            raise StreamFailure(f"malformed stream event after {self._where(payload)}")
        if event.get("error"):
            raise StreamFailure(self._error_event(_error_text(event["error"])))
        self._event(t_ns, event)

    def _error_event(self, message: str) -> str:
        return f"the server sent an error event after {self.live_tokens} tokens: {message}; check the server log"

    def _replaced(self, payload: bytes) -> Any:
        """JSON orjson refuses but a server may send: text that is not valid Unicode (invalid
        UTF-8, a lone or split surrogate pair), decoded with U+FFFD in place of the bad text, and
        NaN, Infinity or a number past a double (1e400), read as not a number, which no figure
        takes. Each is counted for the run's note, rather than failing the run as "not an OpenAI
        server". Anything else still fails as malformed JSON."""
        non_finite = False

        def not_a_number(text: str) -> float:
            nonlocal non_finite
            value = float(text)
            non_finite = non_finite or not math.isfinite(value)
            return value

        text = payload.decode("utf-8", "replace")
        try:
            event = json.loads(text, parse_float=not_a_number, parse_constant=not_a_number)
        except ValueError:
            raise StreamFailure(f"malformed JSON in stream after {self._where(payload)}") from None
        self._non_finite += non_finite
        self._invalid_text += text.encode("utf-8") != payload or _has_surrogates(event)
        return _replace_surrogates(event)

    def _where(self, data: bytes) -> str:
        """'N events: <the bad bytes>; hint' for malformed-stream errors (scrubbed, then cut)."""
        return f"{len(self.chunks)} events: {one_line(data.decode('utf-8', 'replace'), 60)!r}; {NOT_SSE_HINT}"

    def _event(self, t_ns: int, event: dict[str, Any]) -> None:
        """Once per event, the hot path: common keys read once, rare ones only when present."""
        content = reasoning = tool = ""
        ids_n = logprobs_n = None
        role_only = False
        choices = event.get("choices")
        choice = choices[0] if choices and type(choices) is list and type(choices[0]) is dict else None
        if choice is not None:
            delta = choice.get("delta")
            if type(delta) is dict:
                content = _text(delta.get("content"))
                if not delta.keys() <= _PLAIN_DELTA:
                    reasoning = _text(delta.get("reasoning")) or _text(delta.get("reasoning_content"))
                    tool = _tool_text(delta.get("tool_calls"))
                role_only = "role" in delta and not (content or reasoning or tool)
            else:
                content = _text(choice.get("text"))
            if choice.get("finish_reason"):
                self._finish_reason = str(choice["finish_reason"])
            ids = choice.get("token_ids")
            ids_n = len(ids) if type(ids) is list else None
            logprobs = choice.get("logprobs")
            logprobs_n = None if logprobs is None else _logprobs_len(logprobs)
            if not _SPEC_KEYS.isdisjoint(choice):
                self._note_spec(choice)
        usage = event.get("usage")
        cum = None
        if type(usage) is dict:
            self._usage = usage
            value = usage.get("completion_tokens")
            cum = value if type(value) is int else None  # not a bool either
        predicted = None
        if not _SPEC_KEYS.isdisjoint(event):
            self._note_spec(event)
            timings = event.get("timings")
            if type(timings) is dict:
                self._timings = timings
                if type(timings.get("predicted_n")) is int:
                    predicted = timings["predicted_n"]
        if self._response_id is None:
            self._note_id(event.get("id"))
        self._check(t_ns, cum, predicted, ids_n)
        self.chunks.append(t_ns, 0, content, reasoning, tool)
        self.event_ends.append(self._line_end)
        self._usage_cum.append(cum)
        self._token_ids.append(ids_n)
        self._logprobs.append(logprobs_n)
        self._timings_cum.append(predicted)
        self._role_only.append(role_only)
        has_text = content or reasoning or tool
        if has_text or (not role_only and ((cum or 0) > 0 or (predicted or 0) > 0)):
            self.first_text_seen = True
        if cum is not None:
            self.live_tokens = max(self.live_tokens, cum)
        elif predicted is not None:
            self.live_tokens = max(self.live_tokens, predicted)
        elif ids_n is not None:
            self.live_tokens += ids_n
        elif has_text:
            self.live_tokens += 1
        if self.live_tokens > self.bounds.tokens:
            raise OverBound(self._over(f"{self.live_tokens} tokens, over max_tokens + its margin ({self.bounds.tokens})"))

    def _check(self, t_ns: int, cum: int | None, predicted: int | None, ids_n: int | None) -> None:
        """THE RUN BOUNDS on one event before it is kept: the event count, and each count it carries."""
        if len(self.chunks) >= self.bounds.events:
            raise OverBound(self._over(f"more than {self.bounds.events} events"))
        for name, value in (("usage.completion_tokens", cum), ("timings.predicted_n", predicted)):
            if value is not None:
                self._check_running(name, value)
                self._check_time(name, value, t_ns)
        if ids_n is not None and cum is None and predicted is None:
            self._check_time("token_ids", self.live_tokens + ids_n, t_ns)

    def _check_running(self, name: str, value: int) -> None:
        """A running count never goes back, and no one event carries more than a whole run may."""
        last = self._running.get(name, 0)
        at = f"at event {len(self.chunks)}"
        if value < last:
            raise ImpossibleCount(f"{name} went backwards, from {last} to {value} tokens {at}")
        if value - last > self.bounds.tokens:
            raise ImpossibleCount(
                f"{name} jumped by {value - last} tokens in one event (from {last} to {value}) {at}, more than"
                f" the whole run may stream ({self.bounds.tokens} for max_tokens {self.bounds.max_tokens})"
            )
        self._running[name] = value

    def _check_time(self, name: str, tokens: int, t_ns: int) -> None:
        """No count runs ahead of what the time since send allows (THE RUN BOUNDS' time bound)."""
        allowed = TOKENS_AT_SEND + MAX_TOKENS_PER_SECOND * max(t_ns, 0) // 1_000_000_000
        if tokens > allowed:
            raise ImpossibleCount(
                f"{name} reached {tokens} tokens {max(t_ns, 0) / 1e6:.3g} ms after send at event {len(self.chunks)},"
                f" more than the time allows ({allowed}: {TOKENS_AT_SEND} + {MAX_TOKENS_PER_SECOND:,} tok/s)"
            )

    def _note_spec(self, holder: dict[str, Any]) -> None:
        """Remember the last per-response speculative-decoding stats (they ride on the final chunk)."""
        metrics = holder.get("metrics")
        if isinstance(metrics, dict) and isinstance(metrics.get("speculative_decoding"), dict):
            self._spec = ("metrics.speculative_decoding", metrics["speculative_decoding"])
        sglext = holder.get("sglext")
        if isinstance(sglext, dict) and isinstance(sglext.get("spec_tokens_details"), dict):
            self._spec = ("sglext.spec_tokens_details", sglext["spec_tokens_details"])
        timings = holder.get("timings")
        if isinstance(timings, dict) and "draft_n" in timings:
            self._spec = ("timings", timings)

    def _note_id(self, value: Any) -> None:
        """The response's id, from the first event with one; a longer one than the archive takes is not kept."""
        if type(value) is str and len(value) <= MAX_RESPONSE_ID:
            self._response_id = value

    def finish(self, count_text: CountText | None = None) -> Outcome:
        """Fill the tokens column from the best source and say which one it was.

        count_text (a local tokenizer) is used only when the stream itself gave no count per event.
        """
        usage = _clean_usage(self._usage)
        source = self._fill_tokens(usage, count_text)
        # Counted first (a local tokenizer sees the real text), then masked for the archive.
        for column in (self.chunks.content, self.chunks.reasoning, self.chunks.tool):
            mask_secrets(column)
        notes = []
        if self._invalid_text:
            notes.append(
                f"{self._invalid_text} event(s) held invalid text (invalid UTF-8 or a lone surrogate), archived"
                " with U+FFFD in its place; check the server's detokenizer"
            )
        if self._non_finite:
            notes.append(
                f"{self._non_finite} event(s) held a number JSON does not allow (NaN, Infinity or one past a double,"
                " such as 1e400), read as not a number and left out of every figure; check the server"
            )
        engine, dropped = engine_figures(self._timings, self._usage)
        if dropped:
            notes.append(f"the engine reported an impossible {dropped}; dropped from its figures")
        return Outcome(
            source, usage, self._finish_reason, response_acceptance(self._spec), "; ".join(notes), self._response_id,
            engine,
        )

    def _fill_tokens(self, usage: dict[str, int] | None, count_text: CountText | None) -> str:
        chunks = self.chunks
        text_events = [i for i in range(len(chunks)) if chunks.has_text(i)]
        source = self._counted_source(text_events)
        total = usage.get("completion_tokens") if usage is not None else None
        if source == "per_event" and count_text is not None and text_events:
            texts = [c + r + t for c, r, t in zip(chunks.content, chunks.reasoning, chunks.tool, strict=False)]
            chunks.tokens[:] = count_text(texts)
            source = "tokenizer"
            if total is not None:  # the server's total wins (template and special tokens have no text)
                _reconcile(chunks.tokens, text_events, total)
        elif source == "per_event":
            for i in text_events:
                chunks.tokens[i] = 1
            if total is not None and text_events:
                _reconcile(chunks.tokens, text_events, total)
        self._move_role_counts()
        return source

    def _move_role_counts(self) -> None:
        """A role-only event is not a token (vLLM #3759): a count on it moves to the next event that
        carries text or tokens. Events with empty text that carry tokens keep them (vLLM 0.33 sends
        a first token that decodes to a partial character that way): they are real tokens."""
        tokens, role_only, chunks = self.chunks.tokens, self._role_only, self.chunks
        for i, count in enumerate(tokens):
            if count and role_only[i]:
                later = (j for j in range(i + 1, len(tokens)) if not role_only[j] and (tokens[j] or chunks.has_text(j)))
                j = next(later, None)
                if j is not None:
                    tokens[j] += count
                    tokens[i] = 0

    def _counted_source(self, text_events: list[int]) -> str:
        """Fill tokens from the first source present on every text event; its name, or per_event.

        Running counts (usage under continuous_usage_stats, llama.cpp's timings.predicted_n under
        timings_per_token) come first: they also count a token whose text the server held back
        (a character split across tokens) on the event that finally carried it.
        """
        tokens = self.chunks.tokens
        for source, running in (("usage_delta", self._usage_cum), ("timings", self._timings_cum)):
            if text_events and all(running[i] is not None for i in text_events):
                previous = 0
                for i, cum in enumerate(running):
                    if cum is not None:
                        tokens[i] = max(0, cum - previous)
                        previous = max(previous, cum)
                return source
        for source, counts in (("token_ids", self._token_ids), ("logprobs", self._logprobs)):
            if text_events and all(counts[i] is not None for i in text_events):
                for i, count in enumerate(counts):
                    tokens[i] = count or 0
                return source
        return "per_event"


class _Tokenizer(Protocol):
    def encode(self, sequence: str, add_special_tokens: bool = ...) -> Any: ...


def tokenizer_counts(tokenizer: _Tokenizer, texts: list[str]) -> list[int]:
    """Tokens per event by a local (Hugging Face `tokenizers`) tokenizer.

    The whole reply is tokenized once (tokenizing each event alone would split tokens at event
    borders) and each token is counted on the event where its text ends, so a token whose text the
    server held back (a character split across tokens) counts on the event that carried it.
    """
    counts = [0] * len(texts)
    joined = "".join(texts)
    if not joined:
        return counts
    ends = list(accumulate(len(text) for text in texts))
    for _, end in tokenizer.encode(joined, add_special_tokens=False).offsets:
        counts[min(bisect_left(ends, max(end, 1)), len(texts) - 1)] += 1
    return counts


def _reconcile(tokens: list[int], text_events: list[int], total: int) -> None:
    """Make the column sum to the server's count: the difference goes on the last token events."""
    difference = total - sum(tokens)
    if difference >= 0:
        tokens[text_events[-1]] += difference
        return
    for i in reversed(text_events):
        take = min(tokens[i], -difference)
        tokens[i] -= take
        difference += take
        if difference == 0:
            return


def response_acceptance(spec: tuple[str, dict[str, Any]] | None) -> Acceptance | None:
    """Acceptance for this request alone, from vLLM, SGLang or llama.cpp per-response stats."""
    if spec is None:
        return None
    source, d = spec
    if source == "timings":  # llama.cpp: drafted and accepted tokens, no count of verify steps
        draft_tokens, accepted = _num(d.get("draft_n")), _num(d.get("draft_n_accepted"))
        drafts, mean_length, rate = None, None, None
    elif source == "sglext.spec_tokens_details":
        drafts, draft_tokens = _num(d.get("spec_verify_ct")), _num(d.get("spec_num_proposed_drafts"))
        accepted = _num(d.get("spec_num_correct_drafts"))
        mean_length, rate = _num(d.get("spec_accept_length")), _num(d.get("spec_accept_rate"))
    else:
        drafts = _num(d.get("num_spec_steps", d.get("num_drafts")))
        draft_tokens = _num(d.get("num_draft_tokens"))
        accepted = _num(d.get("num_accepted_draft_tokens", d.get("num_accepted_tokens")))
        mean_length, rate = _num(d.get("mean_acceptance_length")), _num(d.get("draft_acceptance_rate"))
    if drafts and accepted is not None:
        mean_length = 1.0 + accepted / drafts
    if draft_tokens and accepted is not None:
        rate = accepted / draft_tokens
    if mean_length is None and rate is None:
        return None
    return Acceptance(mean_length, rate, drafts, draft_tokens, accepted, source)


def engine_figures(timings: dict[str, Any] | None, usage: dict[str, Any] | None) -> tuple[EngineFigures, str]:
    """The engine's own figures of one request (`EngineFigures`), and what was dropped as impossible.

    llama.cpp's final `timings`: decode = (predicted_n - 1) / predicted_ms, tokenreel's definition
    (the first token comes from the prompt's batch; see EngineFigures), prompt = prompt_n (the
    tokens prefilled) + cache_n (those taken from its cache). vLLM and SGLang: `usage.prompt_tokens`
    and `usage.prompt_tokens_details.cached_tokens` (no per-request decode figure in their stream).
    """
    dropped: list[str] = []
    if timings is not None:
        predicted_n, predicted_ms = _num(timings.get("predicted_n")), _num(timings.get("predicted_ms"))
        processed, cached = _count(timings.get("prompt_n")), _count(timings.get("cache_n"))
        decode = None
        if predicted_n is not None and predicted_n > 1 and predicted_ms:
            decode = (predicted_n - 1) * 1000.0 / predicted_ms
            if decode > MAX_TOKENS_PER_SECOND:
                dropped.append(f"decode of {decode:g} tok/s (predicted_n {predicted_n:g} in {predicted_ms:g} ms)")
                decode = None
        prompt = processed + cached if processed is not None and cached is not None else None
        return EngineFigures(decode, prompt, cached, "llama.cpp timings"), ", ".join(dropped)
    if usage is None:
        return EngineFigures(), ""
    prompt = _count(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    if cached is not None and prompt is not None and cached > prompt:
        dropped.append(f"cached_tokens {cached} of a {prompt}-token prompt")
        cached = None
    if prompt is None and cached is None:
        return EngineFigures(), ", ".join(dropped)
    source = "usage.prompt_tokens_details" if cached is not None else "usage"
    return EngineFigures(None, prompt, cached, source), ", ".join(dropped)


def _count(value: Any) -> int | None:
    """A token count the archive takes (an integer from 0 to MAX_COUNT), or None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        return None
    return value


def _num(value: Any) -> float | None:
    """A finite non-negative number, or None (the archive accepts nothing else)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _clean_usage(usage: dict[str, Any] | None) -> dict[str, int] | None:
    """Keep the integer counts; nested details and nulls are dropped (the archive stores ints)."""
    if usage is None:
        return None
    return {k: v for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _tool_text(calls: Any) -> str:
    """Function names and argument fragments of streamed tool calls, concatenated."""
    if not isinstance(calls, list):
        return ""
    parts = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            parts.append(_text(function.get("name")) + _text(function.get("arguments")))
    return "".join(parts)


def _logprobs_len(logprobs: Any) -> int | None:
    """One logprob entry per token: chat `content[]`, completions `tokens[]`."""
    if not isinstance(logprobs, dict):
        return None
    for key in ("content", "tokens"):
        if isinstance(logprobs.get(key), list):
            return len(logprobs[key])
    return None


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        error = error.get("message") or error.get("type") or error
    return one_line(str(error)).rstrip(". ")


def _error_payload_text(payload: bytes) -> str:
    """The message of an `event: error` data line: JSON `error`/`message`, else the text."""
    try:
        data = json.loads(payload.decode("utf-8", "replace"))
    except ValueError:
        return one_line(payload.decode("utf-8", "replace")) or "(no message)"
    if isinstance(data, dict):
        data = data.get("error") or data.get("message") or data
    return _error_text(data) or "(no message)"


def _has_surrogates(value: Any) -> bool:
    """True when a decoded JSON value holds a lone surrogate (UTF-8 cannot encode one)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _replace_surrogates(value: Any) -> Any:
    """Every string in a decoded JSON value with lone surrogates replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    return value


def mask_secrets(texts: list[str]) -> int:
    """Mask every known secret in streamed text, in place, even one split across events.

    Each character of a secret becomes "*", so every event keeps its length (its characters are
    drawn at the same moments and positions in the video); returns how many were masked.
    """
    secrets = known_secrets()
    if not secrets or not texts:
        return 0
    joined = "".join(texts)
    spans = [(m, m + len(secret)) for secret in secrets for m in _find_all(joined, secret)]
    if not spans:
        return 0
    chars = list(joined)
    for start, end in spans:
        chars[start:end] = "*" * (end - start)
    masked, at = "".join(chars), 0
    for i, text in enumerate(texts):
        texts[i], at = masked[at : at + len(text)], at + len(text)
    return len(spans)


def _find_all(text: str, part: str) -> list[int]:
    found, at = [], text.find(part)
    while at >= 0:
        found.append(at)
        at = text.find(part, at + 1)
    return found


def one_line(text: str, limit: int = 300) -> str:
    """Scrub secrets, collapse whitespace, then cut long server messages: run errors are one line.

    The one place server text is cut; scrubbing comes first so that no part of a key survives.
    """
    text = " ".join(scrub_secrets(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
