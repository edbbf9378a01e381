"""SGLang 0.5's OpenAI stream and info endpoints, as a recorder sees them.

Chat: a role chunk with the first token, one chunk per decode step (pydantic dumps: every
delta field present, nulls included; `usage: null` unless continuous_usage_stats), then a
separate finish chunk (empty delta, finish_reason, matched_stop), then — only when the request
says `return_spec_tokens_details: true` on a speculative server — an sglext chunk
(`choices: []`, `sglext.spec_tokens_details`), then the usage chunk (include_usage), [DONE].
Reasoning text in `delta.reasoning_content`. `/server_info` dumps the server arguments and the
command line it was launched with (which, as launched here, carries an --api-key argument).
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from tokenreel.simulator.generation import Step, spec_stats
from tokenreel.simulator.shape import Context, Emitter, Engine, chat_logprob_entry
from tokenreel.simulator.wire import json_response, sse, usage

VERSION = "0.5.23"
LAUNCH_API_KEY = "sk-sim-launch-0123456789abcdef"  # a secret a fingerprint must never keep


def _delta(role: str | None = None, content: str | None = None, reasoning: str | None = None) -> dict[str, Any]:
    return {"role": role, "content": content, "reasoning_content": reasoning, "tool_calls": None}


class SglangEmitter(Emitter):
    """Chunks of SGLang's chat and completions streams."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.completion = 0
        self.first = True
        self.envelope = {
            "id": self.response_id,
            "object": "chat.completion.chunk" if ctx.chat else "text_completion",
            "created": ctx.created,
            "model": ctx.model,
        }

    def _event(self, choices: list[dict[str, Any]], with_usage: bool = False, **extra: Any) -> bytes:
        out: dict[str, Any] = {**self.envelope, "choices": choices}
        out["usage"] = usage(self.ctx.plan.prompt_tokens, self.completion) if with_usage else None
        out.update(extra)
        return sse(out)

    def _choice(self, delta: dict[str, Any] | None, text: str = "", logprobs: Any = None,
                finish: str | None = None) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0}
        if self.ctx.chat:
            choice["delta"] = delta
        else:
            choice["text"] = text
        choice.update(logprobs=logprobs, finish_reason=finish, matched_stop=None)
        return choice

    def steps(self, batch: list[Step], last: bool) -> bytes:
        ctx = self.ctx
        head = b""
        if self.first and ctx.chat:
            head = self._event([self._choice(_delta("assistant", ""))], ctx.continuous_usage)
        self.first = False
        reasoning = content = ""
        tokens: list[str] = []
        for step in batch:
            for j, piece in enumerate(step.tokens):
                tokens.append(piece)
                if ctx.is_reasoning(step.start + j):
                    reasoning += piece
                else:
                    content += piece
        self.completion += len(tokens)
        logprobs = None
        if ctx.wants_logprobs:
            logprobs = {"content": [chat_logprob_entry(t, ctx.top_logprobs) for t in tokens]}
        delta = _delta(content=content or None, reasoning=reasoning or None)
        return head + self._event([self._choice(delta, content, logprobs)], ctx.continuous_usage)

    def end(self) -> bytes:
        ctx = self.ctx
        out = self._event([self._choice(_delta(), "", None, ctx.plan.finish_reason)])
        if ctx.body.get("return_spec_tokens_details") is True and ctx.profile.spec_k:
            stats = spec_stats(ctx.plan, ctx.profile.spec_k, ctx.drafted)
            details = {
                "spec_accept_rate": stats.rate,
                "spec_accept_length": stats.mean_length,
                "spec_num_correct_drafts": stats.accepted,
                "spec_num_proposed_drafts": stats.draft_tokens,
                "spec_verify_ct": stats.steps,
                "spec_correct_drafts_histogram": _grown(stats.histogram),
            }
            sglext = {"routed_experts": None, "cached_tokens_details": None, "spec_tokens_details": details}
            out += self._event([], sglext=sglext)
        if ctx.include_usage:
            out += self._event([], True)
        return out

    def error_event(self) -> bytes:
        error = {"object": "error", "message": "Simulated engine failure mid-stream.",
                 "type": "InternalServerError", "param": None, "code": 500}
        return sse({"error": error})

    def complete(self) -> dict[str, Any]:
        ctx = self.ctx
        text = "".join(ctx.plan.tokens)
        choice: dict[str, Any] = {"index": 0}
        if ctx.chat:
            choice["message"] = {"role": "assistant", "content": text, "reasoning_content": None, "tool_calls": None}
        else:
            choice["text"] = text
        choice.update(logprobs=None, finish_reason=ctx.plan.finish_reason, matched_stop=None)
        obj = "chat.completion" if ctx.chat else "text_completion"
        return {**self.envelope, "object": obj, "choices": [choice],
                "usage": usage(ctx.plan.prompt_tokens, len(ctx.plan.tokens))}


class SglangEngine(Engine):
    """SGLang's info endpoints: /v1/models, /server_info (server args and launch command)."""

    name = "sglang"
    version = VERSION
    emitter = SglangEmitter

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/server_info", self._server_info), web.get("/get_server_info", self._server_info)]

    def models(self) -> dict[str, Any]:
        card = {
            "id": self.model,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "sglang",
            "root": self.model,
            "max_model_len": self.profile.max_model_len,
        }
        return {"object": "list", "data": [card]}

    def launch_command(self) -> str:
        parts = ["python3 -m sglang.launch_server", f"--model-path {self.model}", "--port 30000",
                 f"--context-length {self.profile.max_model_len}", f"--api-key {LAUNCH_API_KEY}"]
        if self.profile.metrics:
            parts.append("--enable-metrics")
        if self.profile.spec_k:
            parts += ["--speculative-algorithm EAGLE3", f"--speculative-num-draft-tokens {self.profile.spec_k + 1}"]
        return " ".join(parts)

    async def _server_info(self, request: web.Request) -> web.Response:
        profile = self.profile
        spec = profile.spec_k > 0
        accept = profile.acceptance_length(next(iter(profile.acceptance), "")) if spec else None
        return json_response({
            "model_path": self.model,
            "served_model_name": self.model,
            "context_length": profile.max_model_len,
            "enable_metrics": profile.metrics,
            "api_key": LAUNCH_API_KEY,
            "speculative_algorithm": "EAGLE3" if spec else None,
            "speculative_num_steps": profile.spec_k if spec else None,
            "speculative_num_draft_tokens": profile.spec_k + 1 if spec else None,
            "launch_command": self.launch_command(),
            "internal_states": [{"avg_spec_accept_length": accept, "last_gen_throughput": profile.decode_tok_s}],
            "version": VERSION,
        })


def _grown(histogram: list[int]) -> list[int]:
    """The histogram as SGLang keeps it: a list grown to the most drafts one step accepted (its
    `Req.update_spec_correct_drafts_histogram`), not one entry per draft position."""
    end = len(histogram)
    while end and not histogram[end - 1]:
        end -= 1
    return histogram[:end]
