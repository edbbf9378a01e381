"""vLLM 0.33's OpenAI stream, as a recorder sees it, field by field as a real vLLM 0.32 sends it.

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

The fields are those of a real vLLM 0.32 transcript (tests/data/vllm-cpu/, held to by
tests/test_sim_vllm_transcript.py), which its serving code explains (pydantic models dumped
with `exclude_unset`, the usage chunk also with `exclude_none`):
- chat's role chunk carries top-level `prompt_token_ids` (the prompt's ids with
  `return_token_ids`, else null) and `prompt_text` (null: there is no chat template here to
  render, so `return_prompt_text` is not modelled);
- every token chunk's choice carries `token_ids` (null unless `return_token_ids`); chat sends
  `stop_reason` on the finish chunk only, completions on every chunk, with `prompt_token_ids`
  (the prompt's ids on the first chunk with `return_token_ids`, else null);
- chat's running usage carries `completion_tokens_details`: null, or `{reasoning_tokens}` where
  the server runs a reasoning parser (a profile with reasoning_tokens); completions' has none;
- the usage chunk's usage carries `prompt_tokens_details`: `{cached_tokens, created_cache_tokens}`
  in chat, `{cached_tokens}` in completions. vLLM sends it only when started with
  `--enable-prompt-tokens-details`; the simulated vLLM always does, as the well-configured
  server it stands for (tokenreel reads the cached prompt tokens from it). Its prefix cache
  neither serves nor stores a prompt here (recorded requests ask for a fresh prefill), so both
  counts are 0;
- `metrics.speculative_decoding` has vLLM's summary fields only (`--per-request-spec-decode-metrics
  summary`); `acceptance_histogram_by_draft_length`, proposed for a later vLLM and not in 0.32,
  is not sent, so per-position acceptance is over all drafts, not over the drafts that reached
  a position.
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


def choice_tail(chat: bool, finish: str | None, token_ids: list[int] | None,
                prompt_ids: list[int] | None = None) -> dict[str, Any]:
    """A choice's fields after `logprobs`: finish_reason; stop_reason (chat: once finished only);
    completions' prompt_token_ids; token_ids (null unless the request asked `return_token_ids`)."""
    tail: dict[str, Any] = {"finish_reason": finish}
    if finish is not None or not chat:
        tail["stop_reason"] = None
    if not chat:
        tail["prompt_token_ids"] = prompt_ids
    tail["token_ids"] = token_ids
    return tail


def logprobs_of(chat: bool, tokens: list[str], offset: int, top: int) -> dict[str, Any]:
    """One entry per token: chat `content[]`, completions `tokens[]` and friends from `offset`."""
    if chat:
        return {"content": [chat_logprob_entry(t, top) for t in tokens]}
    offsets = [offset + sum(map(len, tokens[:i])) for i in range(len(tokens))]
    return {"text_offset": offsets, "token_logprobs": [logprob(t) for t in tokens],
            "tokens": list(tokens), "top_logprobs": [{t: logprob(t)} for t in tokens]}


class VllmEmitter(Emitter):
    """Chunks of vLLM's chat and completions streams."""

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

    @property
    def token_ids(self) -> bool:
        return bool(self.ctx.body.get("return_token_ids"))

    def _prompt_ids(self) -> list[int] | None:
        """The prompt's token ids where the request asked `return_token_ids`, else None."""
        return prompt_token_ids(self.ctx.body, self.ctx.chat)[1] if self.token_ids else None

    def _usage(self, final: bool = False) -> dict[str, Any]:
        """vLLM's UsageInfo so far: chat's running usage with completion_tokens_details, the
        final one with prompt_tokens_details (the module docstring says which fields when)."""
        ctx = self.ctx
        out: dict[str, Any] = usage(ctx.plan.prompt_tokens, self.completion)
        reasoning_parser = ctx.chat and ctx.profile.reasoning_tokens > 0
        details = {"reasoning_tokens": min(self.completion, ctx.profile.reasoning_tokens)} if reasoning_parser else None
        if final:
            cache = {"cached_tokens": ctx.cached_prompt}
            out["prompt_tokens_details"] = {**cache, "created_cache_tokens": 0} if ctx.chat else cache
            if details is not None:
                out["completion_tokens_details"] = details
        elif ctx.chat:
            out["completion_tokens_details"] = details
        return out

    def _event(self, choices: list[dict[str, Any]], final: bool = False, **extra: Any) -> bytes:
        out: dict[str, Any] = {**self.envelope, "choices": choices}
        if final:
            out["system_fingerprint"] = FINGERPRINT
        if self.ctx.continuous_usage:
            out["usage"] = self._usage()
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
        prompt_ids = self._prompt_ids() if self.first else None
        if self.first and ctx.chat:
            head = self._event([ROLE_CHOICE], prompt_token_ids=prompt_ids, prompt_text=None)
        first, self.first = self.first, False
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
        ids = [token_id(t) for t in tokens] if self.token_ids else None
        choice |= choice_tail(ctx.chat, ctx.plan.finish_reason if last else None, ids,
                              prompt_ids if first else None)
        return head + self._event([choice], final=last and not ctx.include_usage)

    def _logprobs(self, tokens: list[str]) -> dict[str, Any]:
        out = logprobs_of(self.ctx.chat, tokens, self.offset, self.ctx.top_logprobs)
        self.offset += sum(map(len, tokens))
        return out

    def end(self) -> bytes:
        if not self.ctx.include_usage:
            return b""
        out: dict[str, Any] = {**self.envelope, "choices": [], "usage": self._usage(final=True),
                               "system_fingerprint": FINGERPRINT}
        if self.ctx.profile.request_metrics:
            out["metrics"] = self.request_metrics()
        return sse(out)

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
        ids = [token_id(t) for t in ctx.plan.tokens] if self.token_ids else None
        choice |= choice_tail(ctx.chat, ctx.plan.finish_reason, ids, None if ctx.chat else self._prompt_ids())
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

    def choice(self, tokens: list[str], offset: int, finish: str | None) -> dict[str, Any]:
        text = "".join(tokens)
        choice: dict[str, Any] = {"index": 0, "delta": {"content": text}} if self.chat else {"index": 0, "text": text}
        choice["logprobs"] = logprobs_of(self.chat, tokens, offset, self.top_logprobs) if self.logprobs else None
        ids = [token_id(t) for t in tokens] if self.token_ids else None
        return choice | choice_tail(self.chat, finish, ids)


class VllmEngine(Engine):
    """vLLM's info endpoints: /v1/models with max_model_len and permission, /version, /tokenize."""

    name = "vllm"
    version = VERSION
    emitter = VllmEmitter

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/tokenize", self._tokenize)]

    def models(self) -> dict[str, Any]:
        created = int(time.time())
        card = {
            "id": self.model,
            "object": "model",
            "created": created,
            "owned_by": "vllm",
            "root": self.model,
            "parent": None,
            "max_model_len": self.profile.max_model_len,
            "permission": [self._permission(created)],
        }
        return {"object": "list", "data": [card]}

    def _permission(self, created: int) -> dict[str, Any]:
        """vLLM's ModelPermission: OpenAI's old per-model permission object, fixed values."""
        return {
            "id": f"modelperm-{self.profile.id}",
            "object": "model_permission",
            "created": created,
            "allow_create_engine": False,
            "allow_sampling": True,
            "allow_logprobs": True,
            "allow_search_indices": False,
            "allow_view": True,
            "allow_fine_tuning": False,
            "organization": "*",
            "group": None,
            "is_blocking": False,
        }

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
