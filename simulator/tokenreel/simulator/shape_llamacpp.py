"""llama.cpp server's OpenAI stream and info endpoints, as a recorder sees them.

Chat: the first token comes after a role event (`{"role": "assistant", "content": null}`);
then ONE event per token, even under speculative decoding (a step's accepted tokens leave as a
burst, in one write); a token that ends mid-character sends no event, its text rides on the
next token's event (whose logprobs hold only that next token: the held one's entry is never
streamed); then a finish event (empty delta), a usage event (`choices: []`, include_usage) and
`timings` on the last event (on every token's event with `timings_per_token`; `predicted_n`, `predicted_ms`, ..., `draft_n` and
`draft_n_accepted` when it drafted; `predicted_per_second` is (predicted_n - 1) / predicted_ms, the
first token being the prompt batch's, as the pinned build computes it; `cache_n`: the prompt
tokens its prompt cache served, all but the last of a prompt it saw before unless the request
says `cache_prompt: false`); `continuous_usage_stats` is ignored. Every event carries
`system_fingerprint` (the build). /v1/models has `meta.n_ctx`; /props the server's settings.
"""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

from tokenreel.simulator.answer_text import VOCAB_SIZE
from tokenreel.simulator.generation import Step, spec_stats
from tokenreel.simulator.profiles import Profile
from tokenreel.simulator.shape import Context, Emitter, Engine, chat_logprob_entry
from tokenreel.simulator.wire import ends_mid_utf8, json_response, sse, usage

BUILD = "b7100-sim"


class LlamacppEmitter(Emitter):
    """Events of llama.cpp's /v1/chat/completions and /v1/completions streams."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.completion = 0
        self.held = ""
        self.response_id = f"{'chatcmpl' if ctx.chat else 'cmpl'}-{ctx.request_id}"
        self.envelope = {
            "created": ctx.created,
            "id": self.response_id,
            "model": ctx.model,
            "system_fingerprint": BUILD,
            "object": "chat.completion.chunk" if ctx.chat else "text_completion",
        }

    def _event(self, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {"choices": choices, **self.envelope, **extra}

    def _token_choice(self, text: str, position: int, piece: str) -> dict[str, Any]:
        ctx = self.ctx
        if ctx.chat:
            key = "reasoning_content" if ctx.is_reasoning(position) else "content"
            choice: dict[str, Any] = {"finish_reason": None, "index": 0, "delta": {key: text}}
        else:
            choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": None}
        if ctx.wants_logprobs:
            choice["logprobs"] = {"content": [chat_logprob_entry(piece, ctx.top_logprobs, with_id=True)]}
        return choice

    def steps(self, batch: list[Step], last: bool) -> bytes:
        ctx, every = self.ctx, self.ctx.plan.tokens
        events: list[dict[str, Any]] = []
        for step in batch:
            for j, piece in enumerate(step.tokens):
                position = step.start + j
                self.completion += 1
                if position == 0 and ctx.chat:
                    role = {"finish_reason": None, "index": 0, "delta": {"role": "assistant", "content": None}}
                    events.append(self._event([role]))
                if ends_mid_utf8(every, position):
                    self.held += piece
                    continue
                text, self.held = self.held + piece, ""
                event = self._event([self._token_choice(text, position, piece)])
                if ctx.body.get("timings_per_token"):  # on every token's event, counting held ones
                    event["timings"] = self.timings()
                events.append(event)
        return b"".join(sse(e) for e in events)

    def timings(self) -> dict[str, Any]:
        ctx = self.ctx
        prompt_ms, predicted_ms = ctx.timings_ms()
        cached = ctx.cached_prompt
        n_prompt = ctx.plan.prompt_tokens - cached  # the tokens prefilled
        steps = max(self.completion - 1, 0)
        out: dict[str, Any] = {
            "cache_n": cached,
            "prompt_n": n_prompt,
            "prompt_ms": prompt_ms,
            "prompt_per_token_ms": prompt_ms / n_prompt if n_prompt else 0.0,
            "prompt_per_second": 1000 * n_prompt / prompt_ms if prompt_ms else 0.0,
            "predicted_n": self.completion,
            "predicted_ms": predicted_ms,
            "predicted_per_token_ms": predicted_ms / steps if steps else 0.0,
            "predicted_per_second": 1000 * steps / predicted_ms if predicted_ms else 0.0,
        }
        if ctx.profile.spec_k:
            stats = spec_stats(ctx.plan, ctx.profile.spec_k, ctx.drafted)
            if stats.draft_tokens > 0:
                out["draft_n"] = stats.draft_tokens
                out["draft_n_accepted"] = stats.accepted
        return out

    def end(self) -> bytes:
        ctx = self.ctx
        if ctx.chat:
            finish = {"finish_reason": ctx.plan.finish_reason, "index": 0, "delta": {}}
        else:
            finish = {"text": "", "index": 0, "logprobs": None, "finish_reason": ctx.plan.finish_reason}
        events = [self._event([finish])]
        if ctx.include_usage:
            events.append(self._event([], usage=usage(ctx.plan.prompt_tokens, self.completion)))
        events[-1]["timings"] = self.timings()
        return b"".join(sse(e) for e in events)

    def error_event(self) -> bytes:
        return sse({"error": {"code": 500, "message": "Simulated engine failure mid-stream.", "type": "server_error"}})

    def complete(self) -> dict[str, Any]:
        ctx = self.ctx
        self.completion = len(ctx.plan.tokens)
        text = "".join(ctx.plan.tokens)
        if ctx.chat:
            choice: dict[str, Any] = {"finish_reason": ctx.plan.finish_reason, "index": 0,
                                      "message": {"role": "assistant", "content": text}}
        else:
            choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": ctx.plan.finish_reason}
        obj = "chat.completion" if ctx.chat else "text_completion"
        return {**self.envelope, "object": obj, "choices": [choice],
                "usage": usage(ctx.plan.prompt_tokens, self.completion), "timings": self.timings()}


class LlamacppEngine(Engine):
    """llama.cpp's info endpoints: /v1/models (meta.n_ctx), /props, /health; its error bodies."""

    name = "llamacpp"
    version = BUILD
    emitter = LlamacppEmitter
    checks_model = False

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/props", self._props)]

    def __init__(self, profile: Profile, model: str, time_scale: float) -> None:
        super().__init__(profile, model, time_scale)
        self._prompts_seen: set[str] = set()

    def prompt_cache(self, body: dict[str, Any], prompt_tokens: int) -> int:
        """llama.cpp reuses a repeated prompt's KV state (all but its last token, which it must
        evaluate) unless the request says `cache_prompt: false`."""
        key = json.dumps([body.get("messages"), body.get("prompt")], sort_keys=True, default=str)
        seen = key in self._prompts_seen
        self._prompts_seen.add(key)
        return max(prompt_tokens - 1, 0) if seen and body.get("cache_prompt", True) is not False else 0

    @property
    def model_path(self) -> str:
        return f"/models/{self.model.rsplit('/', 1)[-1]}-Q4_K_M.gguf"

    def models(self) -> dict[str, Any]:
        meta = {
            "vocab_type": 2,
            "n_vocab": VOCAB_SIZE,
            "n_ctx_train": 262144,
            "n_ctx": self.profile.max_model_len,
            "n_embd": 5120,
            "n_params": 27_000_000_000,
            "size": 16_500_000_000,
        }
        card = {"id": self.model, "object": "model", "created": int(time.time()), "owned_by": "llamacpp", "meta": meta}
        return {"models": [{"name": self.model, "model": self.model, "type": "model"}], "object": "list", "data": [card]}

    async def _props(self, request: web.Request) -> web.Response:
        profile = self.profile
        return json_response({
            "default_generation_settings": {"n_ctx": profile.max_model_len, "params": {"n_predict": -1}},
            "total_slots": profile.slot_count,
            "model_alias": self.model,
            "model_path": self.model_path,
            "build_info": BUILD,
            "endpoint_slots": True,
            "endpoint_props": False,
            "endpoint_metrics": profile.metrics,
            "speculative": {"n_max": profile.spec_k} if profile.spec_k else None,
        })

    def unauthorized(self) -> web.Response:
        return json_response({"error": {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}}, 401)

    def error(self, status: int, message: str, kind: str, param: str | None = None,
              headers: dict[str, str] | None = None) -> web.Response:
        kinds = {400: "invalid_request_error", 404: "not_found_error", 429: "unavailable_error"}
        body = {"error": {"code": status, "message": message, "type": kinds.get(status, "server_error")}}
        return json_response(body, status, headers)
