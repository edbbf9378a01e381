"""What an engine shape is: the bytes a request's plan turns into, and the engine's info pages.

The server decides *when* (TTFT, steps, faults, lagging readers); a shape decides *what* goes
on the wire. One module per engine (shape_vllm, shape_sglang, shape_llamacpp) subclasses
`Engine` (per server: info endpoints, error bodies) and `Emitter` (per request: the stream).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tokenreel.simulator.answer_text import token_id
from tokenreel.simulator.generation import Plan, Step
from tokenreel.simulator.profiles import Profile
from tokenreel.simulator.wire import json_response, logprob, openai_error, sse

ERROR_MESSAGE = "Simulated engine failure mid-stream."


@dataclass
class Context:
    """One request as a shape sees it; the server fills the times as the stream goes."""

    profile: Profile
    model: str
    body: dict[str, Any]
    chat: bool
    plan: Plan
    request_id: str
    created: int = field(default_factory=lambda: int(time.time()))
    t_start: float = 0.0  # loop time the request arrived
    t_first: float | None = None  # loop time the first token was written
    t_last: float | None = None  # loop time the last token was written
    drafted: int | None = None  # drafting steps the engine made (None: not run, the whole plan)
    cached_prompt: int = 0  # prompt tokens the engine's prompt cache served (`Engine.prompt_cache`)

    @property
    def include_usage(self) -> bool:
        options = self.body.get("stream_options") or {}
        return bool(isinstance(options, dict) and options.get("include_usage"))

    @property
    def continuous_usage(self) -> bool:
        options = self.body.get("stream_options") or {}
        return self.include_usage and bool(options.get("continuous_usage_stats"))

    @property
    def wants_logprobs(self) -> bool:
        requested = self.body.get("logprobs")
        if self.chat:
            return requested is True
        return requested is not None and requested is not False

    @property
    def top_logprobs(self) -> int:
        if self.chat:
            return int(self.body.get("top_logprobs") or 0)
        requested = self.body.get("logprobs")
        return requested if isinstance(requested, int) and not isinstance(requested, bool) else 0

    def is_reasoning(self, position: int) -> bool:
        """The profile's first reasoning_tokens tokens of a chat reply are reasoning."""
        return self.chat and position < self.profile.reasoning_tokens

    def timings_ms(self) -> tuple[float, float]:
        """(prompt ms, predicted ms) as measured on this request's clock."""
        first = self.t_first if self.t_first is not None else self.t_start
        last = self.t_last if self.t_last is not None else first
        return (first - self.t_start) * 1000, (last - first) * 1000


def chat_logprob_entry(piece: str, top: int, with_id: bool = False) -> dict[str, Any]:
    """One OpenAI chat logprobs entry for a token (llama.cpp puts the token id first)."""
    entry: dict[str, Any] = {"token": piece, "logprob": logprob(piece), "bytes": list(piece.encode())}
    if with_id:
        entry = {"id": token_id(piece), **entry}
    return {**entry, "top_logprobs": [dict(entry)] if top else []}


class Emitter:
    """The stream of one request; subclasses render steps in their engine's shape."""

    merges_steps = False  # vLLM: steps made while a write is blocked go out as one chunk

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.response_id = ctx.request_id  # the `id` its events carry (SGLang's; the others prefix it)

    def steps(self, batch: list[Step], last: bool) -> bytes:
        """The event bytes for one step (or several merged ones); `last` holds the final token."""
        raise NotImplementedError

    def end(self) -> bytes:
        """Everything after the last token event and before [DONE] (finish, usage, stats)."""
        return b""

    def error_event(self) -> bytes:
        """The engine's mid-stream error event (HTTP stays 200)."""
        error = {"message": ERROR_MESSAGE, "type": "InternalServerError", "param": None, "code": 500}
        return sse({"error": error})

    def complete(self) -> dict[str, Any]:
        """The whole answer as one JSON body (stream: false)."""
        raise NotImplementedError


class Engine:
    """Per-server behaviour of an engine: routes beyond the common ones, error bodies."""

    name = "engine"
    version = "0"
    emitter: type[Emitter] = Emitter
    checks_model = True  # llama.cpp serves its one model whatever the request names

    def __init__(self, profile: Profile, model: str, time_scale: float) -> None:
        self.profile = profile
        self.model = model
        self.time_scale = time_scale

    def routes(self) -> list[web.RouteDef]:
        return []

    def prompt_cache(self, body: dict[str, Any], prompt_tokens: int) -> int:
        """Prompt tokens of this request served from the engine's prompt cache (none by default)."""
        return 0

    def models(self) -> dict[str, Any]:
        raise NotImplementedError

    def version_info(self) -> dict[str, Any]:
        """GET /version; `simulated` marks the session as recorded against a stand-in."""
        return {
            "version": self.version,
            "simulated": True,
            "time_scale": self.time_scale,
            "profile": self.profile.id,
            "engine": self.profile.engine,
        }

    def unauthorized(self) -> web.Response:
        return json_response({"error": "Unauthorized"}, 401)

    def error(self, status: int, message: str, kind: str, param: str | None = None,
              headers: dict[str, str] | None = None) -> web.Response:
        return openai_error(status, message, kind, param, headers)
