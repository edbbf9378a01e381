"""vLLM 0.33's OpenAI stream, as a recorder sees it.

Chat: a role chunk sent together with the first token; then ONE chunk per engine step with all
its tokens (1..k+1 under speculative decoding), or several steps merged when the client reads
slower than the engine generates; a chunk whose token ends mid-character carries the token but
empty text (the detokenizer holds the text back for the next chunk), and so does a reasoning
model's opening special token; reasoning text in `delta.reasoning`; finish_reason on the last
token chunk; then, with include_usage, a usage chunk (`choices: []`) that carries the
per-request `metrics` (with `metrics.speculative_decoding` for a speculative profile).
`continuous_usage_stats` puts a cumulative usage on every chunk. `system_fingerprint`
(`vllm-<version>-<config hash>`) rides on the final chunk only: the usage chunk, or without
include_usage the chunk with finish_reason (vLLM's chat_completion/serving.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from tokenreel.simulator.answer_text import token_id
from tokenreel.simulator.generation import Step, prompt_token_ids, spec_stats
from tokenreel.simulator.shape import Context, Emitter, Engine, chat_logprob_entry
from tokenreel.simulator.wire import BadRequest, ends_mid_utf8, json_response, logprob, openai_error, sse, usage

VERSION = "0.33.0"
FINGERPRINT = f"vllm-{VERSION}-5eed1ad0"  # vLLM: its version and the first 8 of its config hash
ROLE_DELTA = {"role": "assistant", "content": ""}
ROLE_CHOICE = {"index": 0, "delta": ROLE_DELTA, "logprobs": None, "finish_reason": None}


class VllmEmitter(Emitter):
    """Chunks of vLLM 0.33's chat and completions streams."""

    merges_steps = True

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.completion = 0
        self.offset = 0  # completions logprobs text_offset
        self.held = ""  # text of tokens that end mid-character, waiting for the next chunk
        self.first = True
        obj = "chat.completion.chunk" if ctx.chat else "text_completion"
        self.response_id = f"{'chatcmpl' if ctx.chat else 'cmpl'}-{ctx.request_id}"
        self.envelope = {
            "id": self.response_id,
            "object": obj,
            "created": ctx.created,
            "model": ctx.model,
        }

    def _event(self, choices: list[dict[str, Any]], with_usage: bool, final: bool = False, **extra: Any) -> bytes:
        out: dict[str, Any] = {**self.envelope, "choices": choices}
        if final:
            out["system_fingerprint"] = FINGERPRINT
        if with_usage:
            out["usage"] = usage(self.ctx.plan.prompt_tokens, self.completion)
        out.update(extra)
        return sse(out)

    def _texts(self, batch: list[Step]) -> tuple[str, str, list[str]]:
        """(reasoning, content, tokens) of a batch, with held-back text released or kept."""
        ctx, every = self.ctx, self.ctx.plan.tokens
        reasoning = content = ""
        tokens: list[str] = []
        for step in batch:
            for j, piece in enumerate(step.tokens):
                position = step.start + j
                tokens.append(piece)
                if position == 0 and ctx.profile.reasoning_tokens and ctx.chat:
                    piece = ""  # the opening <think> is a special token: skipped in the text
                if ends_mid_utf8(every, position):
                    self.held += piece
                    continue
                piece, self.held = self.held + piece, ""
                if ctx.is_reasoning(position):
                    reasoning += piece
                else:
                    content += piece
        return reasoning, content, tokens

    def steps(self, batch: list[Step], last: bool) -> bytes:
        ctx = self.ctx
        head = b""
        if self.first and ctx.chat:
            head = self._event([ROLE_CHOICE], ctx.continuous_usage)
        self.first = False
        reasoning, content, tokens = self._texts(batch)
        if last and self.held:
            content, self.held = content + self.held, ""
        self.completion += len(tokens)
        choice: dict[str, Any] = {"index": 0}
        if ctx.chat:
            delta: dict[str, Any] = {}
            if reasoning:
                delta["reasoning"] = reasoning
            if content or not reasoning:
                delta["content"] = content
            choice["delta"] = delta
        else:
            choice["text"] = content
        choice["logprobs"] = self._logprobs(tokens) if ctx.wants_logprobs else None
        choice["finish_reason"] = ctx.plan.finish_reason if last else None
        if last or not ctx.chat:
            choice["stop_reason"] = None
        if ctx.body.get("return_token_ids"):
            choice["token_ids"] = [token_id(t) for t in tokens]
        return head + self._event([choice], ctx.continuous_usage, final=last and not ctx.include_usage)

    def _logprobs(self, tokens: list[str]) -> dict[str, Any]:
        """One entry per token: chat `content[]`, completions `tokens[]` and friends."""
        top = self.ctx.top_logprobs
        if self.ctx.chat:
            return {"content": [chat_logprob_entry(t, top) for t in tokens]}
        offsets = []
        for t in tokens:
            offsets.append(self.offset)
            self.offset += len(t)
        return {
            "text_offset": offsets,
            "token_logprobs": [logprob(t) for t in tokens],
            "tokens": list(tokens),
            "top_logprobs": [{t: logprob(t)} for t in tokens],
        }

    def end(self) -> bytes:
        if not self.ctx.include_usage:
            return b""
        extra = {"metrics": self.request_metrics()} if self.ctx.profile.request_metrics else {}
        return self._event([], True, final=True, **extra)

    def request_metrics(self) -> dict[str, Any]:
        """--enable-per-request-metrics (vLLM's PerRequestMetrics: its TTFT from scheduling, no
        queue here, first to last output token), with --per-request-spec-decode-metrics summary."""
        ctx = self.ctx
        prompt_ms, generation_ms = ctx.timings_ms()
        out: dict[str, Any] = {
            "time_to_first_token_ms": prompt_ms,
            "generation_time_ms": generation_ms,
            "queue_time_ms": 0.0,
        }
        if self.completion > 1:
            out["mean_itl_ms"] = generation_ms / (self.completion - 1)
        if prompt_ms + generation_ms > 0:
            out["tokens_per_second"] = self.completion / (prompt_ms + generation_ms) * 1000
        if ctx.profile.spec_k:
            stats = spec_stats(ctx.plan, ctx.profile.spec_k, ctx.drafted)
            out["speculative_decoding"] = {
                "mean_acceptance_length": stats.mean_length,
                "draft_acceptance_rate": stats.rate,
                "acceptance_histogram": stats.histogram,
                "acceptance_histogram_by_draft_length": {str(ctx.profile.spec_k): stats.histogram} if stats.steps else {},
                "num_spec_steps": stats.steps,
                "num_accepted_draft_tokens": stats.accepted,
                "num_draft_tokens": stats.draft_tokens,
                "num_spec_tokens": ctx.profile.spec_k,
            }
        return out

    def complete(self) -> dict[str, Any]:
        ctx = self.ctx
        text = "".join(ctx.plan.tokens)
        choice: dict[str, Any] = {"index": 0}
        if ctx.chat:
            choice["message"] = {"role": "assistant", "content": text, "tool_calls": []}
        else:
            choice["text"] = text
        choice["logprobs"] = self._logprobs(ctx.plan.tokens) if ctx.wants_logprobs else None
        choice["finish_reason"] = ctx.plan.finish_reason
        choice["stop_reason"] = None
        if ctx.body.get("return_token_ids"):
            choice["token_ids"] = [token_id(t) for t in ctx.plan.tokens]
        envelope = {**self.envelope, "object": "chat.completion" if ctx.chat else "text_completion"}
        return {**envelope, "choices": [choice], "usage": usage(ctx.plan.prompt_tokens, len(ctx.plan.tokens))}


@dataclass(frozen=True)
class ChoiceShape:
    """A vLLM chunk choice for some tokens, outside any request: bench/reference_server.py
    builds its vLLM-like chunks with it (one text per call, no held-back text)."""

    chat: bool
    token_ids: bool
    logprobs: bool
    top_logprobs: int

    def choice(self, tokens: list[str], offset: int, finish: str | None, complete: bool = False) -> dict[str, Any]:
        text = "".join(tokens)
        choice: dict[str, Any] = {"index": 0}
        if not self.chat:
            choice["text"] = text
        elif complete:
            choice["message"] = {"role": "assistant", "content": text, "tool_calls": []}
        else:
            choice["delta"] = {"content": text}
        logprobs: dict[str, Any] | None = None
        if self.logprobs and self.chat:
            logprobs = {"content": [chat_logprob_entry(t, self.top_logprobs) for t in tokens]}
        elif self.logprobs:
            offsets = [offset + sum(map(len, tokens[:i])) for i in range(len(tokens))]
            logprobs = {"text_offset": offsets, "token_logprobs": [logprob(t) for t in tokens],
                        "tokens": list(tokens), "top_logprobs": [{t: logprob(t)} for t in tokens]}
        choice["logprobs"] = logprobs
        choice["finish_reason"] = finish
        if finish is not None or complete or not self.chat:
            choice["stop_reason"] = None
        if self.token_ids:
            choice["token_ids"] = [token_id(t) for t in tokens]
        return choice


class VllmEngine(Engine):
    """vLLM's info endpoints: /v1/models with max_model_len, /version, /tokenize."""

    name = "vllm"
    version = VERSION
    emitter = VllmEmitter

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/tokenize", self._tokenize)]

    def models(self) -> dict[str, Any]:
        card = {
            "id": self.model,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "vllm",
            "root": self.model,
            "parent": None,
            "max_model_len": self.profile.max_model_len,
        }
        return {"object": "list", "data": [card]}

    async def _tokenize(self, request: web.Request) -> web.Response:
        """vLLM's POST /tokenize: `messages` (chat template applied) or `prompt`, counted."""
        try:
            body = await request.json(loads=orjson.loads)
            if not isinstance(body, dict):
                raise BadRequest("body must be a JSON object", None)
            _, ids = prompt_token_ids(body, chat="messages" in body)
        except (orjson.JSONDecodeError, UnicodeDecodeError):
            return openai_error(400, "invalid JSON body", "BadRequestError")
        except BadRequest as exc:
            return openai_error(400, str(exc), "BadRequestError", exc.param)
        return json_response({"count": len(ids), "max_model_len": self.profile.max_model_len, "tokens": ids})
