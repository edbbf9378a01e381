"""Simulated vLLM OpenAI-compatible endpoints on loopback.

`tokenreel demo` runs without a GPU and every test talks to real sockets, so the simulator
reproduces what a recorder observes from vLLM 0.11: SSE framing, the chat role chunk, one
chunk per engine step (1..k+1 tokens with speculative decoding), cumulative usage, the
/metrics counters, and the ways real endpoints fail.

Timing: TTFT, then one step every `Profile.step_s`, each write scheduled at an absolute target
on the loop's monotonic clock; `time_scale` multiplies those delays. Everything set through
`POST /sim/state` (durations, rates) is in unscaled wall-clock seconds, and so is the stall.

Faults (Profile.fault, or armed for the next N requests through /sim/state):
    refuse       connection refused (per profile only: the port never listens)
    401 404 429 500   HTTP errors before generation (429 carries Retry-After: 1; a "404"
                 profile serves another model name)
    error_event  HTTP 200, 3 token chunks, an {"error": ...} event, then [DONE]
    drop         the connection closes after 3 token chunks
    stall        nothing more after 3 token chunks for an hour (a client read timeout fires)
    malformed    one broken `data: {"choices": [` line after 3 token chunks, then carry on
    no_done      the stream ends without [DONE]
    early_stop   finish_reason "stop" after max_tokens // 3 tokens, ignore_eos or not
    busy         running/waiting gauges never drop to zero (per profile only)

Test controls (not part of vLLM):
    POST /sim/state  {"busy": {"running": 2, "waiting": 1, "seconds": 1.5},
                      "contention": {"tok_s": 300.0, "seconds": 2.0},
                      "fault": {"mode": "500", "count": 1}}
        Every key is optional; "seconds" omitted or null means until changed; running,
        waiting, tok_s or count set to 0 clears that part. Answers the resulting state.
    GET /sim/state   the current state, same shape.
    GET /sim/requests  {"requests": [...]}: the last 100 generation request bodies, oldest first.
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from tokenreel.simulator.profiles import FAULTS, Profile
from tokenreel.simulator.text import prompt_digest, reply_for, token_id, tokenize

log = logging.getLogger(__name__)

VLLM_VERSION = "0.11.0"
STALL_S = 3600.0  # unscaled: long enough for any client read timeout to fire first
FAULT_AFTER_CHUNKS = 3  # token chunks sent before a mid-stream fault strikes
BUSY_PROFILE_GAUGES = (1, 2)  # extra (running, waiting) that a "busy" profile always shows
MISNAMED_MODEL = "simulated/other-model"  # what a profile with fault "404" serves instead
ARMABLE_FAULTS = tuple(f for f in FAULTS if f not in ("refuse", "busy"))
MID_STREAM_FAULTS = frozenset({"error_event", "drop", "stall", "malformed"})
ROLE_CHOICE = {
    "index": 0,
    "delta": {"role": "assistant", "content": ""},
    "logprobs": None,
    "finish_reason": None,
}
SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
TEMPLATE_TOKEN_ID = 0  # the chat template's own tokens, as far as the simulated vocabulary goes
UNAUTHORIZED = {"error": "Unauthorized"}  # what vLLM's --api-key middleware answers
SHUTDOWN_TIMEOUT_S = 0.25
REQUEST_LOG_LEN = 100


class BadRequest(Exception):
    """A request vLLM would reject with 400."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def _json(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(obj), status=status, headers=headers, content_type="application/json"
    )


def _error(
    status: int,
    message: str,
    err_type: str,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    """vLLM 0.11's ErrorResponse shape."""
    body = {"error": {"message": message, "type": err_type, "param": param, "code": status}}
    return _json(body, status, headers)


def _sse(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


async def _sleep_until(target: float) -> None:
    """Sleep to an absolute loop time so lateness in one step is not carried into the next."""
    delay = target - asyncio.get_running_loop().time()
    if delay > 0:
        await asyncio.sleep(delay)


def _logprob(piece: str) -> float:
    """A deterministic, plausible log-probability for a piece."""
    return -(token_id(piece) % 1000) / 4000


@dataclass(frozen=True)
class Plan:
    """Everything one request will produce, decided before the first byte is sent."""

    steps: list[list[str]]  # tokens per engine step; steps[0] is the prefill token
    accepted: list[int]  # accepted draft tokens per decode step (spec profiles only)
    finish_reason: str
    prompt_tokens: int


def plan_steps(profile: Profile, category: str, n: int, seed: int) -> tuple[list[int], list[int]]:
    """Split n tokens into engine steps: (tokens per step, accepted drafts per decode step).

    The first token comes from prefill alone. With speculative decoding each decode step
    accepts Binomial(k, (AL - 1) / k) drafts plus the bonus token, so the mean tokens per step
    is the category's acceptance length; the counters keep the full draw, like vLLM, even when
    max_tokens truncates the last step.
    """
    rest = n - 1
    if not profile.spec_k or rest == 0:
        return [1] + [1] * rest, []
    k = profile.spec_k
    p = (profile.acceptance_length(category) - 1) / k
    draws = np.random.default_rng(seed).binomial(k, p, size=rest)
    reached = np.cumsum(draws + 1)
    used = int(np.searchsorted(reached, rest)) + 1
    sizes = (draws[:used] + 1).tolist()
    sizes[-1] -= int(reached[used - 1]) - rest
    return [1] + sizes, draws[:used].tolist()


def _prompt_token_ids(body: dict[str, Any], chat: bool) -> tuple[str, list[int]]:
    """The prompt text a reply is chosen by, and the prompt's token ids as the engine counts
    them (chat: a few template tokens around each message). BadRequest when malformed."""
    if not chat:
        raw = body.get("prompt")
        if isinstance(raw, list) and raw and isinstance(raw[0], str):
            raw = raw[0]
        if not isinstance(raw, str):
            raise BadRequest("prompt must be a string", "prompt")
        return raw, [token_id(p) for p in tokenize(raw)] or [TEMPLATE_TOKEN_ID]
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list", "messages")
    texts = [_message_text(m.get("content")) for m in messages if isinstance(m, dict)]
    users = [_message_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    ids = [TEMPLATE_TOKEN_ID] * 2
    for text in texts:
        ids += [TEMPLATE_TOKEN_ID] * 4 + [token_id(p) for p in tokenize(text)]
    return (users[-1] if users else texts[-1]), ids


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _int_param(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BadRequest(f"{name} must be a non-negative integer, got {value!r}", name)
    return value


class EngineMetrics:
    """The /metrics series of one engine, in a registry of its own (never the global one)."""

    def __init__(self, model: str, spec: bool) -> None:
        self.registry = CollectorRegistry()
        labels = ("model_name", "engine")
        values = (model, "0")

        def gauge(name: str, doc: str) -> Any:
            return Gauge(name, doc, labels, registry=self.registry).labels(*values)

        def counter(name: str, doc: str) -> Any:
            return Counter(name, doc, labels, registry=self.registry).labels(*values)

        self.running = gauge("vllm:num_requests_running", "Requests in model execution.")
        self.waiting = gauge("vllm:num_requests_waiting", "Requests waiting to be processed.")
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter(
            "vllm:generation_tokens", "Number of generation tokens processed."
        )
        self.spec = spec
        if spec:
            self.drafts = counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.")
            self.draft_tokens = counter(
                "vllm:spec_decode_num_draft_tokens", "Number of draft tokens."
            )
            self.accepted = counter(
                "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens."
            )


@dataclass
class SimState:
    """Test-controlled state; times are loop-clock seconds, never scaled."""

    busy_running: int = 0
    busy_waiting: int = 0
    busy_until: float = math.inf
    contention_tok_s: float = 0.0
    contention_until: float = math.inf
    contention_mark: float = 0.0
    contention_carry: float = 0.0
    fault: str | None = None
    fault_count: int = 0

    def describe(self, now: float) -> dict[str, Any]:
        def left(until: float) -> float | None:
            return None if until == math.inf else max(0.0, until - now)

        return {
            "busy": {
                "running": self.busy_running,
                "waiting": self.busy_waiting,
                "seconds": left(self.busy_until),
            },
            "contention": {
                "tok_s": self.contention_tok_s,
                "seconds": left(self.contention_until),
            },
            "fault": {"mode": self.fault, "count": self.fault_count},
        }


def _seconds(spec: dict[str, Any], now: float) -> float:
    seconds = spec.get("seconds")
    if seconds is None:
        return math.inf
    if not isinstance(seconds, (int, float)) or seconds < 0:
        raise BadRequest("seconds must be a non-negative number or null", "seconds")
    return now + float(seconds)


def _count(spec: dict[str, Any], key: str, default: float = 0) -> float:
    value = spec.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise BadRequest(f"{key} must be a non-negative number", key)
    return value


class SimServer:
    """One simulated engine serving one profile."""

    def __init__(self, profile: Profile, time_scale: float = 1.0) -> None:
        if time_scale < 0:
            raise ValueError("time_scale must be >= 0")
        self.profile = profile
        self.time_scale = time_scale
        self.served_model = MISNAMED_MODEL if profile.fault == "404" else profile.model
        self.metrics = EngineMetrics(self.served_model, spec=profile.spec_k > 0)
        self.state = SimState()
        self.in_flight = 0
        self.requests: deque[dict[str, Any]] = deque(maxlen=REQUEST_LOG_LEN)
        self._sequence = 0
        self._runner: web.AppRunner | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application()
        app.add_routes(
            [
                web.post("/v1/chat/completions", self._chat),
                web.post("/v1/completions", self._completions),
                web.get("/v1/models", self._models),
                web.post("/tokenize", self._tokenize),
                web.get("/version", self._version),
                web.get("/health", self._health),
                web.get("/metrics", self._metrics),
                web.get("/sim/state", self._get_state),
                web.post("/sim/state", self._post_state),
                web.get("/sim/requests", self._requests),
            ]
        )
        return app

    async def start(self, sock: socket.socket) -> None:
        """Serve on an already bound socket (so the caller knows the port before serving)."""
        self._runner = web.AppRunner(
            self.app(),
            handler_cancellation=True,  # a client hang-up aborts the request, as in vLLM
            shutdown_timeout=SHUTDOWN_TIMEOUT_S,
            access_log=None,
        )
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # --- plain endpoints -------------------------------------------------------------------

    async def _models(self, request: web.Request) -> web.Response:
        if self.profile.fault == "401":
            return _json(UNAUTHORIZED, 401)
        card = {
            "id": self.served_model,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "vllm",
            "root": self.served_model,
            "parent": None,
            "max_model_len": self.profile.max_model_len,
        }
        return _json({"object": "list", "data": [card]})

    async def _version(self, request: web.Request) -> web.Response:
        return _json(
            {
                "version": VLLM_VERSION,
                "simulated": True,
                "time_scale": self.time_scale,
                "profile": self.profile.id,
            }
        )

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _metrics(self, request: web.Request) -> web.Response:
        now = asyncio.get_running_loop().time()
        state = self.state
        busy = now < state.busy_until
        running, waiting = BUSY_PROFILE_GAUGES if self.profile.fault == "busy" else (0, 0)
        self.metrics.running.set(self.in_flight + running + (state.busy_running if busy else 0))
        self.metrics.waiting.set(waiting + (state.busy_waiting if busy else 0))
        self._flush_contention(now)
        return web.Response(
            body=generate_latest(self.metrics.registry),
            headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4},
        )

    def _flush_contention(self, now: float) -> None:
        """Credit the tokens 'someone else' generated since the last scrape."""
        state = self.state
        end = min(now, state.contention_until)
        if end > state.contention_mark and state.contention_tok_s > 0:
            state.contention_carry += state.contention_tok_s * (end - state.contention_mark)
            whole = int(state.contention_carry)
            state.contention_carry -= whole
            self.metrics.generation_tokens.inc(whole)
        state.contention_mark = max(state.contention_mark, end)

    # --- test controls ---------------------------------------------------------------------

    async def _get_state(self, request: web.Request) -> web.Response:
        return _json(self.state.describe(asyncio.get_running_loop().time()))

    async def _post_state(self, request: web.Request) -> web.Response:
        now = asyncio.get_running_loop().time()
        try:
            body = await request.json(loads=orjson.loads)
            if not isinstance(body, dict):
                raise BadRequest("body must be a JSON object")
            self._apply_state(body, now)
        except (BadRequest, orjson.JSONDecodeError) as exc:
            return _error(400, str(exc), "BadRequestError", getattr(exc, "param", None))
        return _json(self.state.describe(now))

    def _apply_state(self, body: dict[str, Any], now: float) -> None:
        state = self.state
        for key in ("busy", "contention", "fault"):
            if not isinstance(body.get(key, {}), (dict, type(None))):
                raise BadRequest(f"{key} must be an object", key)
        if (busy := body.get("busy")) is not None:
            state.busy_running = int(_count(busy, "running"))
            state.busy_waiting = int(_count(busy, "waiting"))
            state.busy_until = _seconds(busy, now)
        if (contention := body.get("contention")) is not None:
            self._flush_contention(now)
            state.contention_tok_s = float(_count(contention, "tok_s"))
            state.contention_until = _seconds(contention, now)
            state.contention_mark = now
        if (fault := body.get("fault")) is not None:
            mode = fault.get("mode")
            if mode is not None and mode not in ARMABLE_FAULTS:
                raise BadRequest(
                    f"fault mode must be one of {', '.join(ARMABLE_FAULTS)} ('refuse' and "
                    "'busy' are per-profile; use the 'busy' key for busy gauges)",
                    "mode",
                )
            state.fault_count = int(_count(fault, "count", 1)) if mode else 0
            state.fault = mode if state.fault_count else None

    async def _requests(self, request: web.Request) -> web.Response:
        return _json({"requests": list(self.requests)})

    # --- generation ------------------------------------------------------------------------

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    def _take_fault(self) -> str | None:
        """The armed fault, if any, wins over the profile's, and is used up."""
        state = self.state
        if state.fault_count > 0:
            fault = state.fault
            state.fault_count -= 1
            if not state.fault_count:
                state.fault = None
            return fault
        return self.profile.fault

    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        start = asyncio.get_running_loop().time()
        self.in_flight += 1
        try:
            try:
                body = await request.json(loads=orjson.loads)
            except (orjson.JSONDecodeError, UnicodeDecodeError) as exc:
                return _error(400, f"invalid JSON body: {exc}", "BadRequestError")
            if not isinstance(body, dict):
                return _error(400, "body must be a JSON object", "BadRequestError")
            self.requests.append(body)
            fault = self._take_fault()
            if refused := _gateway_fault(fault):
                return refused
            if body.get("stream_options") and not body.get("stream"):
                message = "Stream options can only be defined when `stream=True`."
                return _error(400, message, "BadRequestError", "stream_options")
            model = body.get("model")
            if fault == "404" or (model is not None and model != self.served_model):
                message = f"The model `{model}` does not exist."
                return _error(404, message, "NotFoundError", "model")
            try:
                plan = self._plan(body, chat, fault)
            except BadRequest as exc:
                return _error(400, str(exc), "BadRequestError", exc.param)
            if body.get("stream"):
                return await self._stream(request, body, chat, plan, fault, start)
            return await self._respond(request, body, chat, plan, fault, start)
        finally:
            self.in_flight -= 1

    async def _tokenize(self, request: web.Request) -> web.Response:
        """vLLM's POST /tokenize: `messages` (chat template applied) or `prompt`, counted."""
        try:
            body = await request.json(loads=orjson.loads)
            if not isinstance(body, dict):
                raise BadRequest("body must be a JSON object", None)
            _, ids = _prompt_token_ids(body, chat="messages" in body)
        except (orjson.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "invalid JSON body", "BadRequestError")
        except BadRequest as exc:
            return _error(400, str(exc), "BadRequestError", exc.param)
        return _json({"count": len(ids), "max_model_len": self.profile.max_model_len, "tokens": ids})

    def _plan(self, body: dict[str, Any], chat: bool, fault: str | None) -> Plan:
        prompt, ids = _prompt_token_ids(body, chat)
        prompt_tokens = len(ids)
        if chat:
            limit = _int_param(body, "max_completion_tokens")
            if limit is None:
                limit = _int_param(body, "max_tokens")
            if limit is None:
                limit = max(0, self.profile.max_model_len - prompt_tokens)
        else:
            limit = _int_param(body, "max_tokens")
            if limit is None:
                limit = 16
        if limit < 1:
            raise BadRequest(f"max_tokens must be at least 1, got {limit}.", "max_tokens")
        if prompt_tokens + limit > self.profile.max_model_len:
            raise BadRequest(
                f"This model's maximum context length is {self.profile.max_model_len} tokens. "
                f"However, you requested {prompt_tokens + limit} tokens ({prompt_tokens} in the "
                f"messages, {limit} in the completion). Please reduce the length of the "
                "messages or completion.",
                "max_tokens",
            )
        reply = reply_for(prompt)
        natural = max(reply.natural_len, _int_param(body, "min_tokens") or 0)
        if fault == "early_stop":
            n, finish = min(limit, max(1, limit // 3)), "stop"
        elif body.get("ignore_eos") or natural >= limit:
            n, finish = limit, "length"
        else:
            n, finish = natural, "stop"
        sizes, accepted = plan_steps(self.profile, reply.category, n, prompt_digest(prompt))
        tokens = reply.tokens(n)
        steps: list[list[str]] = []
        at = 0
        for size in sizes:
            steps.append(tokens[at : at + size])
            at += size
        return Plan(steps, accepted, finish, prompt_tokens)

    async def _engine(self, plan: Plan, start: float) -> AsyncIterator[tuple[int, list[str]]]:
        """Yield (step index, tokens) at each step's scheduled time, counting in /metrics."""
        scale = self.time_scale
        first = start + scale * self.profile.ttft_s
        step_s = scale * self.profile.step_s
        metrics = self.metrics
        for i, tokens in enumerate(plan.steps):
            await _sleep_until(first + i * step_s)
            if i == 0:
                metrics.prompt_tokens.inc(plan.prompt_tokens)
            elif metrics.spec:
                metrics.drafts.inc()
                metrics.draft_tokens.inc(self.profile.spec_k)
                metrics.accepted.inc(plan.accepted[i - 1])
            metrics.generation_tokens.inc(len(tokens))
            yield i, tokens

    def _envelope(self, chat: bool, stream: bool) -> dict[str, Any]:
        self._sequence += 1
        if chat:
            kind, obj = "chatcmpl", "chat.completion.chunk" if stream else "chat.completion"
        else:
            kind, obj = "cmpl", "text_completion"
        return {
            "id": f"{kind}-sim{self._sequence:08d}",
            "object": obj,
            "created": int(time.time()),
            "model": self.served_model,
        }

    async def _stream(
        self,
        request: web.Request,
        body: dict[str, Any],
        chat: bool,
        plan: Plan,
        fault: str | None,
        start: float,
    ) -> web.StreamResponse:
        options = body.get("stream_options") or {}
        include_usage = bool(options.get("include_usage"))
        continuous = include_usage and bool(options.get("continuous_usage_stats"))
        shape = _Shape.of(body, chat)
        envelope = self._envelope(chat, stream=True)

        def event(choices: list[dict[str, Any]], completion: int, with_usage: bool) -> bytes:
            out: dict[str, Any] = {**envelope, "choices": choices}
            if with_usage:
                out["usage"] = _usage(plan.prompt_tokens, completion)
            return _sse(out)

        response = web.StreamResponse(headers=SSE_HEADERS)
        await response.prepare(request)  # headers leave at once, like vLLM: they are not TTFT
        last = len(plan.steps) - 1
        strike = min(FAULT_AFTER_CHUNKS, last)
        completion = 0
        offset = 0
        async for i, tokens in self._engine(plan, start):
            if i == strike and fault in MID_STREAM_FAULTS:
                if fault == "error_event":
                    error = {
                        "message": "Simulated engine failure mid-stream.",
                        "type": "InternalServerError",
                        "param": None,
                        "code": 500,
                    }
                    await response.write(_sse({"error": error}) + b"data: [DONE]\n\n")
                    return response
                if fault == "drop":
                    _hang_up(request)
                    return response
                if fault == "stall":
                    await asyncio.sleep(STALL_S)
                if fault == "malformed":
                    await response.write(b'data: {"choices": [\n\n')
            head = event([ROLE_CHOICE], 0, continuous) if i == 0 and chat else b""
            completion += len(tokens)
            choice = shape.choice(tokens, offset, plan.finish_reason if i == last else None)
            offset += sum(len(t) for t in tokens)
            await response.write(head + event([choice], completion, continuous))
        if include_usage:
            await response.write(event([], completion, True))
        if fault != "no_done":
            await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _respond(
        self,
        request: web.Request,
        body: dict[str, Any],
        chat: bool,
        plan: Plan,
        fault: str | None,
        start: float,
    ) -> web.StreamResponse:
        """A plain JSON completion after the whole generation time (stream: false)."""
        if fault == "drop":
            _hang_up(request)
            return web.Response()
        if fault == "stall":
            await asyncio.sleep(STALL_S)
        tokens: list[str] = []
        async for _, step in self._engine(plan, start):
            tokens.extend(step)
        if fault == "error_event":
            return _error(500, "Simulated engine failure.", "InternalServerError")
        if fault == "malformed":
            return web.Response(body=b'{"choices": [', content_type="application/json")
        choice = _Shape.of(body, chat).choice(tokens, 0, plan.finish_reason, complete=True)
        return _json(
            {
                **self._envelope(chat, stream=False),
                "choices": [choice],
                "usage": _usage(plan.prompt_tokens, len(tokens)),
            }
        )


def _gateway_fault(fault: str | None) -> web.Response | None:
    """Failures before the engine sees the request: API key, rate limit, crash."""
    if fault == "401":
        return _json(UNAUTHORIZED, 401)
    if fault == "429":
        headers = {"Retry-After": "1"}
        return _error(429, "Too many requests, retry later.", "RateLimitError", None, headers)
    if fault == "500":
        return _error(500, "Simulated internal server error.", "InternalServerError")
    return None


def _hang_up(request: web.Request) -> None:
    """Close the connection without finishing the response, like a crashed server."""
    if request.transport is not None:
        request.transport.abort()


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }


@dataclass(frozen=True)
class _Shape:
    """How the client asked each choice to look: chat or completions, ids, logprobs."""

    chat: bool
    token_ids: bool
    logprobs: bool
    top_logprobs: int

    @classmethod
    def of(cls, body: dict[str, Any], chat: bool) -> _Shape:
        requested = body.get("logprobs")
        if chat:
            top = body.get("top_logprobs") or 0
            wanted = requested is True
        else:
            top = requested if isinstance(requested, int) and not isinstance(requested, bool) else 0
            wanted = requested is not None and requested is not False
        return cls(chat, bool(body.get("return_token_ids")), wanted, int(top))

    def choice(
        self, tokens: list[str], offset: int, finish: str | None, complete: bool = False
    ) -> dict[str, Any]:
        """One choice for a chunk (or, complete=True, for a whole non-streamed answer)."""
        text = "".join(tokens)
        choice: dict[str, Any] = {"index": 0}
        if not self.chat:
            choice["text"] = text
        elif complete:
            choice["message"] = {"role": "assistant", "content": text, "tool_calls": []}
        else:
            choice["delta"] = {"content": text}
        choice["logprobs"] = self._logprobs(tokens, offset) if self.logprobs else None
        choice["finish_reason"] = finish
        if finish is not None or complete or not self.chat:
            choice["stop_reason"] = None
        if self.token_ids:
            choice["token_ids"] = [token_id(t) for t in tokens]
        return choice

    def _logprobs(self, tokens: list[str], offset: int) -> dict[str, Any]:
        """One entry per token: chat `content[]`, completions `tokens[]` and friends."""
        if self.chat:
            entries = []
            for t in tokens:
                entry = {"token": t, "logprob": _logprob(t), "bytes": list(t.encode())}
                top = [dict(entry)] if self.top_logprobs else []
                entries.append({**entry, "top_logprobs": top})
            return {"content": entries}
        offsets = []
        for t in tokens:
            offsets.append(offset)
            offset += len(t)
        return {
            "text_offset": offsets,
            "token_logprobs": [_logprob(t) for t in tokens],
            "tokens": list(tokens),
            "top_logprobs": [{t: _logprob(t)} for t in tokens],
        }


# --- running servers ---------------------------------------------------------------------


def _bound_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port; not listening yet, so connections to it are refused."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    if port:  # a fixed port may be restarted while old connections sit in TIME_WAIT
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


class SimCluster:
    """One simulated engine per profile, served from a background thread's event loop.

    A profile whose fault is "refuse" gets a port that is bound but never listens, so
    connecting to it is refused for as long as the cluster lives (no other process can take
    the port meanwhile).
    """

    def __init__(
        self, profiles: Sequence[Profile], time_scale: float = 1.0, host: str = "127.0.0.1"
    ) -> None:
        ids = [p.id for p in profiles]
        if len(set(ids)) != len(ids):
            raise ValueError(f"profile ids must be unique: {ids}")
        self.host = host
        self.time_scale = time_scale
        self.profiles = tuple(profiles)
        self.servers = {
            p.id: SimServer(p, time_scale) for p in profiles if p.fault != "refuse"
        }
        self._sockets = {p.id: _bound_socket(host, 0) for p in profiles}
        self._ports = {pid: s.getsockname()[1] for pid, s in self._sockets.items()}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sim", daemon=True)

    def start(self) -> SimCluster:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(self._start_all(), self._loop)
        try:
            started.result(timeout=10)
        except BaseException:
            self.close()
            raise
        return self

    async def _start_all(self) -> None:
        for pid, server in self.servers.items():
            await server.start(self._sockets[pid])

    def close(self) -> None:
        """Stop every server, then the loop and its thread; close the refusing sockets."""
        if self._thread.is_alive():
            stopping = asyncio.run_coroutine_threadsafe(
                _stop_all(self.servers.values()), self._loop
            )
            stopping.result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        if not self._loop.is_running() and not self._loop.is_closed():
            self._loop.close()
        for sock in self._sockets.values():
            sock.close()

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def port(self, profile_id: str) -> int:
        return self._ports[profile_id]

    def root_url(self, profile_id: str) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port(profile_id)}"

    def base_url(self, profile_id: str) -> str:
        """The OpenAI base URL (ends in /v1)."""
        return self.root_url(profile_id) + "/v1"

    def metrics_url(self, profile_id: str) -> str:
        return self.root_url(profile_id) + "/metrics"


async def _stop_all(servers: Iterable[SimServer]) -> None:
    await asyncio.gather(*(server.stop() for server in servers))


@contextmanager
def running(
    profiles: Sequence[Profile], time_scale: float = 1.0, host: str = "127.0.0.1"
) -> Iterator[SimCluster]:
    """Serve profiles on ephemeral loopback ports for the duration of a with-block."""
    with SimCluster(profiles, time_scale, host) as cluster:
        yield cluster


async def serve_forever(
    profiles: Sequence[Profile],
    host: str = "127.0.0.1",
    base_port: int = 8100,
    time_scale: float = 1.0,
) -> None:
    """Serve profile i on base_port + i until cancelled (for `tokenreel simulate`).

    A "refuse" profile leaves its port closed. Listen on loopback unless told otherwise.
    """
    servers: list[SimServer] = []
    try:
        for i, profile in enumerate(profiles):
            port = base_port + i
            if profile.fault == "refuse":
                log.info("%s: port %d left closed (fault refuse)", profile.id, port)
                continue
            server = SimServer(profile, time_scale)
            await server.start(_bound_socket(host, port))
            servers.append(server)
            log.info("%s: http://%s:%d/v1 serves %s", profile.id, host, port, profile.model)
        await asyncio.Event().wait()
    finally:
        await _stop_all(servers)
