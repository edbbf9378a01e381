"""Turn the bytes of an OpenAI-compatible SSE stream into archived chunks (no I/O here).

The network side (`recorder.sse_client`) stamps every read and hands the bytes to
`StreamParser.feed`; every event completed by that read gets that read's arrival time. Each
event is checked against THE RUN BOUNDS as it is read (`run_bounds`); its token count is decided
once the stream is over (`token_counts`), and the engine's per-request figures read from its
last stats (`response_stats`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

import orjson

from tokenreel.recorder.client.response_stats import clean_usage, engine_figures, response_acceptance
from tokenreel.recorder.client.run_bounds import TOKENS_AT_SEND, ImpossibleCount, OverBound, RunBounds, StreamFailure
from tokenreel.recorder.client.token_counts import CountColumns, CountText
from tokenreel.recorder.secrets import mask_secrets, one_line
from tokenreel.session.model import MAX_RESPONSE_ID, MAX_TOKENS_PER_SECOND, Acceptance, Chunks, EngineFigures

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
_SURROGATE = re.compile("[\ud800-\udfff]")


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
    system_fingerprint: str | None = None  # the last event's `system_fingerprint` (vLLM: on the final chunk only)
    served_model: str | None = None  # the first event's `model` (Run.served_model)


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
        self.counts = CountColumns()
        self._running: dict[str, int] = {}  # the last value of each running count, to check the next
        self._usage: dict[str, Any] | None = None
        self._finish_reason: str | None = None
        self._spec: tuple[str, dict[str, Any]] | None = None
        self._timings: dict[str, Any] | None = None  # llama.cpp's last `timings` (the final one is whole)
        self._metrics: dict[str, Any] | None = None  # vLLM's per-request `metrics` (on the usage chunk)
        self._response_id: str | None = None
        self._system_fingerprint: str | None = None
        self._served_model: str | None = None
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
            metrics = event.get("metrics")
            if type(metrics) is dict:
                self._metrics = metrics
            timings = event.get("timings")
            if type(timings) is dict:
                self._timings = timings
                if type(timings.get("predicted_n")) is int:
                    predicted = timings["predicted_n"]
        if self._response_id is None:
            self._note_id(event.get("id"))
        if self._served_model is None and type(event.get("model")) is str and len(event["model"]) <= MAX_RESPONSE_ID:
            self._served_model = event["model"]
        fingerprint = event.get("system_fingerprint")
        if type(fingerprint) is str and len(fingerprint) <= MAX_RESPONSE_ID:
            self._system_fingerprint = fingerprint
        self._check(t_ns, cum, predicted, ids_n)
        self.chunks.append(t_ns, 0, content, reasoning, tool)
        self.event_ends.append(self._line_end)
        counts = self.counts
        counts.usage_cum.append(cum)
        counts.token_ids.append(ids_n)
        counts.logprobs.append(logprobs_n)
        counts.timings_cum.append(predicted)
        counts.role_only.append(role_only)
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
        """Fill the tokens column (`CountColumns.fill`, a local tokenizer only where the stream gave
        no count per event) and say what the whole stream said."""
        usage = clean_usage(self._usage)
        source = self.counts.fill(self.chunks, usage, count_text)
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
        engine, dropped = engine_figures(self._timings, self._usage, self._metrics)
        if dropped:
            notes.append(f"the engine reported an impossible {dropped}; dropped from its figures")
        return Outcome(
            source, usage, self._finish_reason, response_acceptance(self._spec), "; ".join(notes), self._response_id,
            engine, self._system_fingerprint, self._served_model,
        )

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


