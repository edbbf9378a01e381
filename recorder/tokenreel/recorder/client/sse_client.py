"""Send one streaming request to an arm and record every event with its arrival time.

Reads raw body bytes (`readany`) and stamps each read with `perf_counter_ns()` before any
parsing, so every event completed by one read shares that read's stamp. httpx-sse was measured
and not used: it stamps events as it yields them, so four events that arrived in one read got
stamps ~20 us apart (a made-up inter-token gap), and it silently skips the non-SSE lines a
recorder must report as malformed.

aiohttp, not httpx: httpx decodes chunked bodies in pure Python (h11) and yields one HTTP chunk
at a time, so each event was stamped only after the previous one was parsed, and at 50,000 tok/s
the recorder fell behind (decode tok/s -21%, the server's writes blocked); with aiohttp's C parser
and `readany` the fidelity bench keeps up at 50,000 tok/s (decode error <= 0.1%, no blocked
writes) and its 10,000 tok/s latency p99 drops from ~2 ms to ~0.1 ms.

Each read also gets the kernel's receive time where the platform gives it (Linux, TLS too:
`recorder.kernel_clock`); after the stream those replace the user-space stamps as the
events' times, which a busy client cannot skew, and the run's Clock says which clock it used.

Every failure becomes a `failed` Run with a one-line error saying what happened and what to do,
with the chunks received so far kept; the API key is read from the environment per request and
scrubbed from every message. What the request sends is `request_body`'s; every other answer
the recorder reads is bounded by `bounded_http`.
"""

from __future__ import annotations

import asyncio
import math
import os
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from time import perf_counter_ns
from typing import Any, Callable

import aiohttp
import orjson

from tokenreel.analysis.metrics import output_tokens
from tokenreel.recorder.client import kernel_clock
from tokenreel.recorder.client.bounded_http import MAX_ERROR_BODY_BYTES, MAX_REDIRECTS, Refused, read_bounded, redirect_target
from tokenreel.recorder.client.request_body import (
    Timeouts,
    added_fields,
    api_key,
    auth_headers,
    completions_url,
    forced_length_note,
    learning,
    request_body,
    requested_max_tokens,
    resolve_timeouts,
    token_counter,
)
from tokenreel.recorder.client.run_bounds import UNSTATED_MAX_TOKENS, ImpossibleCount, OverBound, RunBounds, StreamFailure
from tokenreel.recorder.client.stream import StreamParser
from tokenreel.recorder.client.token_counts import CountText
from tokenreel.recorder.secrets import one_line, scrub_secrets
from tokenreel.session.model import CLIENT_BUSY_P99_MS, Arm, Chunks, Prompt, Run, Settings
from tokenreel.session.quarantine import mark_invalid

MAX_429_RETRIES = 3
RETRY_AFTER_CAP_S = 60.0
PROGRESS_EVERY_NS = 100_000_000  # at most 10 progress callbacks per second per run
FAILED_FINISH_REASONS = ("abort", "error")
DRAIN_S = 1.0  # after [DONE], how long to wait for the body's end (reusing the connection)
# The stall deadline is pushed at most this often instead of on every read (a timer reschedule
# per read cost ~2.4 us); a stall is reported up to this much after timeouts.between_chunks.
DEADLINE_STEP_NS = 100_000_000
# aiohttp pauses the socket once twice this much is unread: 2 MiB absorbs a ~0.1 s hiccup of
# the loop at 50,000 tok/s without the server's writes blocking (vLLM would merge steps).
READ_BUFSIZE = 1 << 20

ProgressFn = Callable[[int, int], None]  # (tokens so far, ns since request send)


async def stream_run(
    http: aiohttp.ClientSession,
    arm: Arm,
    prompt: Prompt,
    settings: Settings,
    run: Run,
    progress: ProgressFn | None = None,
) -> None:
    """Fill `run` (status, error, chunks, usage, ...) from one streamed request; never raises.

    Filling the caller's Run in place keeps the chunks received before any failure.
    """
    if arm.api_key_env and not api_key(arm):
        run.status = "failed"
        run.error = (
            f"environment variable {arm.api_key_env} (api_key_env of arm {arm.id!r}) is not set;"
            " export it and record again"
        )
        return
    learned, added = learning(arm), added_fields(arm, settings)
    timeouts, counter = resolve_timeouts(settings, arm), token_counter(arm)
    body = request_body(arm, prompt, settings, added)
    try:
        try:
            request = _Request(http, arm, body, timeouts, run, progress, counter, settings.client_busy_p99_ms)
            await request.send()
        except _Failed:
            if not added or run.http_status not in (400, 422):
                raise
            # Perhaps the endpoint refuses a field the recorder added: once more without them, and
            # if that works, they are never added again for this arm.
            body = request_body(arm, prompt, settings)
            request = _Request(http, arm, body, timeouts, run, progress, counter, settings.client_busy_p99_ms)
            await request.send()
            learned.rejects_added.update(added)
    except _Failed as failure:
        run.status, run.error = "failed", _scrub(str(failure), arm)
        return
    except _Impossible as impossible:
        run.chunks, run.usage = Chunks(), None
        mark_invalid(run, _scrub(str(impossible), arm), "chunks, usage")
        return
    if run.tokens_estimated:
        learned.needs_per_token = True
    notes = (forced_length_note(run, body), request.note)
    run.status, run.error = "ok", "; ".join(note for note in notes if note)


class _Failed(Exception):
    """Internal: the run failed; the message is the run's one-line error."""


class _Impossible(Exception):
    """Internal: a running count the server cannot have sent truthfully; the run is quarantined."""


class _Redirect(Exception):
    """Internal: the endpoint redirects within the same server; the message is the target URL."""


class _Stale(Exception):
    """Internal: the server closed the connection before any response: a kept-alive connection it
    had just dropped as idle (seen with llama-server between runs on a busy machine). The request
    never ran, so it is sent once more, on a new connection."""


class _Request:
    """One run's request, with its 429 retries, deadlines and stream parsing."""

    def __init__(
        self,
        http: aiohttp.ClientSession,
        arm: Arm,
        body: dict[str, Any],
        timeouts: Timeouts,
        run: Run,
        progress: ProgressFn | None,
        count_text: CountText | None = None,
        busy_p99_ms: float = CLIENT_BUSY_P99_MS,
    ) -> None:
        self.http, self.arm, self.body, self.t, self.run, self.progress = http, arm, body, timeouts, run, progress
        self.count_text, self.busy_p99_ms = count_text, busy_p99_ms
        self.url = completions_url(arm)
        self.payload = orjson.dumps(body)
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",  # the body is read raw: decompressing would buffer the stream
            **auth_headers(arm),
        }
        # connect bounds pool wait + TCP/TLS; reads are bounded by our own deadlines in _attempt.
        self.http_timeout = aiohttp.ClientTimeout(total=None, connect=timeouts.connect, sock_read=None)
        self.phase = "first_token"
        self.redirects = 0
        self.stale_retried = False
        self.note = ""  # the stream's note for an ok run (invalid text replaced)

    async def send(self) -> None:
        attempt = 0
        while True:
            try:
                retry_after = await self._attempt()
            except _Stale:
                if self.stale_retried:
                    raise _Failed("connection dropped before any response (Server disconnected), twice;"
                                  " check the server log") from None
                self.stale_retried = True
                continue
            except _Redirect as redirect:  # within the same server: followed at once, not a retry
                self.redirects += 1
                if self.redirects > MAX_REDIRECTS:
                    raise _Failed(f"more than {MAX_REDIRECTS} redirects from {completions_url(self.arm)}; fix base_url") from None
                self.url = str(redirect)
                continue
            if retry_after is None:
                return
            if attempt == MAX_429_RETRIES:
                raise _Failed(
                    f"HTTP 429 from {self.url} after {MAX_429_RETRIES} retries: the endpoint is rate-limited;"
                    " wait until it is free and run again"
                )  # a recording adds how to go on (`record --resume`); a sweep has no resume
            await asyncio.sleep(_retry_after_s(retry_after, attempt))
            attempt += 1

    async def _attempt(self) -> str | None:
        """One request; on HTTP 429 returns the Retry-After header ("" when absent) to retry."""
        run = self.run
        run.chunks = Chunks()
        run.http_status = run.finish_reason = run.usage = run.acceptance = None
        parser = StreamParser(run.chunks, RunBounds.of(requested_max_tokens(self.body) or UNSTATED_MAX_TOKENS))
        loop = asyncio.get_running_loop()
        run.started_at = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        offset = kernel_clock.realtime_offset_ns()
        stamped: kernel_clock.StampedSocket | str = "no response was read"
        # Nothing is sent until it is awaited.
        request = self.http.post(
            self.url, data=self.payload, headers=self.headers, timeout=self.http_timeout,
            auto_decompress=False, read_bufsize=READ_BUFSIZE, allow_redirects=False,
        )
        t0 = run.send_monotonic_ns = perf_counter_ns()
        start = loop.time()
        total_at = start + self.t.total
        self.phase = "first_token" if self.t.first_token < self.t.total else "total"
        try:
            async with asyncio.timeout_at(min(start + self.t.first_token, total_at)) as scope:
                async with request as response:
                    stamped = kernel_clock.attach(response, t0)
                    run.http_status = response.status
                    target = redirect_target(response)
                    if target is not None:
                        raise _Redirect(target)
                    if response.status != 200:
                        return await self._http_error(response)
                    await self._read(response.content, parser, scope, t0, total_at)
        except ImpossibleCount as impossible:
            raise _Impossible(str(impossible)) from None
        except OverBound as over:
            run.chunks = Chunks()  # up to the bound of what never should have been sent: not archived
            raise _Failed(str(over)) from None
        except (StreamFailure, Refused) as failure:
            raise _Failed(str(failure)) from None
        except aiohttp.ConnectionTimeoutError:  # a TimeoutError too: must come first
            raise _Failed(
                f"no connection to {self.url} within {self.t.connect:g} s;"
                " check host and port or raise timeouts.connect"
            ) from None
        except TimeoutError:
            if not parser.done:  # after [DONE] only the drain timed out: the run is complete
                raise _Failed(self._timeout_message(parser)) from None
        except aiohttp.ClientConnectorError as exc:
            raise _Failed(
                f"cannot connect to {self.url} ({_connect_reason(exc)}); start the server or fix base_url"
            ) from None
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientOSError) as exc:
            if isinstance(exc, aiohttp.ServerDisconnectedError) and not run.http_status:
                raise _Stale from None
            if not parser.done:  # a hang-up after [DONE] loses nothing
                where = f"after {parser.live_tokens} tokens" if run.http_status else "before any response"
                raise _Failed(f"connection dropped {where} ({_reason(exc)}); check the server log") from None
        except aiohttp.ClientError as exc:
            raise _Failed(f"request to {self.url} failed: {type(exc).__name__} ({_reason(exc)})") from None
        finally:
            self._finish(parser, stamped, t0, offset)
        if not parser.done:
            raise _Failed(
                f"stream ended without [DONE] after {parser.live_tokens} tokens;"
                " the output may be truncated, check the server log"
            )
        if run.finish_reason in FAILED_FINISH_REASONS:
            raise _Failed(
                f"the server ended the run with finish_reason {run.finish_reason!r}"
                f" after {output_tokens(run)} tokens; check the server log"
            )
        return None

    async def _read(
        self, content: aiohttp.StreamReader, parser: StreamParser, scope: asyncio.Timeout, t0: int, total_at: float
    ) -> None:
        """The hot loop: stamp each read first, parse, then move the stall deadline if it is due."""
        loop = asyncio.get_running_loop()
        readany, progress, chunks = content.readany, self.progress, parser.chunks
        last_progress = move_at = 0
        while data := await readany():
            t = perf_counter_ns() - t0
            if parser.done:
                continue  # drain to the end of the body so the connection is reused
            events = len(chunks)
            parser.feed(t, data)
            if parser.done:
                scope.reschedule(loop.time() + DRAIN_S)
            # Only a read that completed an event moves the stall deadline: SSE comments (":"
            # keep-alives) or a line that never ends do not keep a stalled stream alive.
            elif t >= move_at and parser.first_text_seen and len(chunks) > events:
                # The deadline gets one step of slack, so until the next move it stays at least
                # between_chunks after every read.
                move_at = t + DEADLINE_STEP_NS
                between_at = loop.time() + self.t.between_chunks + DEADLINE_STEP_NS / 1e9
                self.phase = "between_chunks" if between_at < total_at else "total"
                scope.reschedule(min(between_at, total_at))
            if progress is not None and t - last_progress >= PROGRESS_EVERY_NS:
                last_progress = t
                progress(parser.live_tokens, t)
        parser.end_of_body(perf_counter_ns() - t0)

    def _finish(self, parser: StreamParser, stamped: kernel_clock.StampedSocket | str, t0: int, offset: int) -> None:
        outcome = parser.finish(self.count_text)
        run = self.run
        run.token_source, run.usage, run.finish_reason, run.acceptance, run.response_id, run.engine, run.served_model = (
            outcome.token_source, outcome.usage, outcome.finish_reason, outcome.acceptance, outcome.response_id,
            outcome.engine, outcome.served_model,
        )
        if outcome.system_fingerprint:  # vLLM's config hash rides only on the stream: the arm's fingerprint keeps it
            self.arm.fingerprint["system_fingerprint"] = outcome.system_fingerprint
        self.note = outcome.note
        reads = stamped if isinstance(stamped, str) else kernel_clock.release(stamped)
        offsets = (offset, kernel_clock.realtime_offset_ns())
        run.clock, run.client_busy = kernel_clock.apply(run.chunks, parser.event_ends, reads, t0, offsets, self.busy_p99_ms)

    async def _http_error(self, response: aiohttp.ClientResponse) -> str:
        """Raise the failure for a non-200 answer; for 429 return its Retry-After header."""
        status = response.status
        try:
            message = _server_message(await read_bounded(response, MAX_ERROR_BODY_BYTES, "the error body"))
        except Refused as refused:
            message = str(refused)
        if status == 429:
            return response.headers.get("retry-after", "")
        if status in (401, 403):
            hint = (
                f"set {self.arm.api_key_env} to a valid key" if self.arm.api_key_env
                else "the endpoint wants an API key: set api_key_env in the arm"
            )
        elif status == 404:
            hint = f"check base_url and that the server serves model {self.arm.model!r}"
        elif status in (400, 422):
            hint = "check extra_body, max_tokens and the model's max_model_len"
        elif status >= 500:
            hint = "check the server log"
        else:
            hint = "check the endpoint"
        raise _Failed(f"HTTP {status} from {self.url}: {message}; {hint}")

    def _timeout_message(self, parser: StreamParser) -> str:
        n = parser.live_tokens
        if self.phase == "first_token":
            return f"no first token within {self.t.first_token:g} s; check the server or raise timeouts.first_token"
        if self.phase == "between_chunks":
            return (
                f"stream stalled: no data for {self.t.between_chunks:g} s after {n} tokens;"
                " check the server or raise timeouts.between_chunks"
            )
        return f"run exceeded timeouts.total ({self.t.total:g} s) after {n} tokens; raise it for long outputs"


def _retry_after_s(header: str, attempt: int) -> float:
    """Retry-After in seconds (number or HTTP date), else 1, 2, 4 s; never more than the cap."""
    seconds = float(2**attempt)
    if header:
        try:
            seconds = float(header)
            if not math.isfinite(seconds):  # "nan" would retry at once, "inf" never: a bad value
                seconds = float(2**attempt)
        except ValueError:
            try:
                seconds = (parsedate_to_datetime(header) - datetime.now(timezone.utc)).total_seconds()
            except (TypeError, ValueError):
                pass
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_S)


def _server_message(content: bytes) -> str:
    """The human part of an error body: OpenAI `error.message`, FastAPI `detail`, or the text."""
    try:
        data = orjson.loads(content)
    except orjson.JSONDecodeError:
        data = content.decode("utf-8", "replace")
    error = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(error, dict):
        error = error.get("message") or error.get("detail") or error
    return one_line(str(error), 200).rstrip(". ") or "(empty body)"


def _reason(exc: Exception) -> str:
    return one_line(str(exc), 120) or type(exc).__name__


def _connect_reason(exc: aiohttp.ClientConnectorError) -> str:
    """'Connection refused' rather than aiohttp's 'Cannot connect to host ... [Connect call failed ...]'."""
    error = exc.os_error
    return os.strerror(error.errno) if error.errno and error.errno > 0 else _reason(error)


def _scrub(text: str, arm: Arm) -> str:
    """Never let the key reach the archive, even if a server echoes it back (messages were
    already scrubbed before they were cut; this catches what was not cut)."""
    api_key(arm)  # remembered, should it not be yet
    return scrub_secrets(text)
