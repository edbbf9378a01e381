"""What one request will generate, decided before its first byte: tokens, steps, drafts.

Deciding everything up front keeps each engine shape a pure rendering of the same plan, so the
three shapes differ only where the real engines differ on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenreel.simulator.answer_text import prompt_digest, reply_for, token_id, tokenize
from tokenreel.simulator.profiles import FaultMode, Profile
from tokenreel.simulator.wire import BadRequest

TEMPLATE_TOKEN_ID = 0  # the chat template's own tokens, as far as the simulated vocabulary goes


@dataclass(frozen=True)
class Step:
    """One engine step as it reaches a shape: its number, its first token's position, its
    tokens, and whether they end the reply."""

    index: int
    start: int
    tokens: list[str]
    final: bool


@dataclass(frozen=True)
class Plan:
    """Everything one request will produce, decided before the first byte is sent."""

    steps: list[list[str]]  # tokens per engine step; steps[0] is the prefill token
    accepted: list[int]  # accepted draft tokens per decode step (spec profiles only)
    finish_reason: str
    prompt_tokens: int
    tokens: list[str] = field(default_factory=list)  # all of them, in order


class Stepper:
    """Walks a plan's tokens as the engine makes its steps, deciding each step's drafting then
    (the batch may change mid-request): a drafting step takes the plan's next draw (accepted
    drafts plus the bonus token), one without drafting a single token. A request that drafts
    at every step gets exactly `plan.steps`; one that does not needs fewer draws, never more."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.index = 0
        self.position = 0
        self.drafted = 0  # drafting steps made: the plan's draws used

    @property
    def done(self) -> bool:
        return self.position >= len(self.plan.tokens)

    def next(self, drafting: bool) -> tuple[Step, int | None]:
        """The next step and its accepted drafts (None: no draft); the prefill step never drafts."""
        accepted = None
        size = 1
        if self.index and drafting:
            accepted = self.plan.accepted[self.drafted]
            self.drafted += 1
            size = min(accepted + 1, len(self.plan.tokens) - self.position)
        end = self.position + size
        step = Step(self.index, self.position, self.plan.tokens[self.position : end], end == len(self.plan.tokens))
        self.index, self.position = self.index + 1, end
        return step, accepted


@dataclass(frozen=True)
class SpecStats:
    """Speculative-decoding totals of one request, as engines report them per response."""

    steps: int  # verify steps (drafts)
    draft_tokens: int
    accepted: int
    histogram: list[int]  # verify steps by number of accepted drafts, 0..k

    @property
    def mean_length(self) -> float:
        return 1 + self.accepted / self.steps if self.steps else 1.0

    @property
    def rate(self) -> float:
        return self.accepted / self.draft_tokens if self.draft_tokens else 0.0


def spec_stats(plan: Plan, k: int, drafted: int | None = None) -> SpecStats:
    """The drafts of the plan's first `drafted` draws (None: all, as when the engine drafted at
    every step); like vLLM's counters, a step cut by max_tokens keeps its draw."""
    draws = plan.accepted if drafted is None else plan.accepted[:drafted]
    histogram = [0] * (k + 1)
    for accepted in draws:
        histogram[accepted] += 1
    steps = len(draws)
    return SpecStats(steps, steps * k, sum(draws), histogram)


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


def prompt_token_ids(body: dict[str, Any], chat: bool) -> tuple[str, list[int]]:
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
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise BadRequest("messages must be a non-empty list of objects", "messages")
    texts = [_message_text(m.get("content")) for m in messages]
    users = [_message_text(m.get("content")) for m in messages if m.get("role") == "user"]
    ids = [TEMPLATE_TOKEN_ID] * 2
    for text in texts:
        ids += [TEMPLATE_TOKEN_ID] * 4 + [token_id(p) for p in tokenize(text)]
    return (users[-1] if users else texts[-1]), ids


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text", "") for p in content if isinstance(p, dict)]
        if not all(isinstance(text, str) for text in texts):
            raise BadRequest("a content part's text must be a string", "messages")
        return "".join(texts)
    return ""


def int_param(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BadRequest(f"{name} must be a non-negative integer, got {value!r}", name)
    return value


def make_plan(profile: Profile, body: dict[str, Any], chat: bool, fault: FaultMode | None) -> Plan:
    """Length limits, ignore_eos and early_stop applied; BadRequest names the bad field."""
    prompt, ids = prompt_token_ids(body, chat)
    prompt_tokens = len(ids)
    if chat:
        limit = int_param(body, "max_completion_tokens")
        if limit is None:
            limit = int_param(body, "max_tokens")
        if limit is None:
            limit = max(0, profile.max_model_len - prompt_tokens)
    else:
        limit = int_param(body, "max_tokens")
        if limit is None:
            limit = 16
    if limit < 1:
        raise BadRequest(f"max_tokens must be at least 1, got {limit}.", "max_tokens")
    if prompt_tokens + limit > profile.max_model_len:
        raise BadRequest(
            f"This model's maximum context length is {profile.max_model_len} tokens. "
            f"However, you requested {prompt_tokens + limit} tokens ({prompt_tokens} in the "
            f"messages, {limit} in the completion). Please reduce the length of the "
            "messages or completion.",
            "max_tokens",
        )
    reply = reply_for(prompt, profile.answers)
    natural = max(1, round(reply.natural_len * profile.length_factor))
    natural = max(natural, int_param(body, "min_tokens") or 0)
    if fault == "early_stop":
        n, finish = min(limit, max(1, limit // 3)), "stop"
    elif body.get("ignore_eos") or natural >= limit:
        n, finish = limit, "length"
    else:
        n, finish = natural, "stop"
    sizes, accepted = plan_steps(profile, reply.category, n, prompt_digest(prompt))
    tokens = reply.tokens(n, profile.diverges_at)
    steps: list[list[str]] = []
    at = 0
    for size in sizes:
        steps.append(tokens[at : at + size])
        at += size
    return Plan(steps, accepted, finish, prompt_tokens, tokens)
