"""What one run's request sends: its URL, headers, timeouts and JSON body, and the fields the
recorder adds to it per engine.

Token counting without running usage. vLLM and SGLang honour `continuous_usage_stats`, so
every event carries the cumulative count. llama.cpp ignores it; the recorder asks it (known from
the arm's fingerprint) for `timings_per_token`, whose `timings.predicted_n` is the same running
count and, unlike llama.cpp's streamed logprobs (one entry per event: a token whose text was
held back mid-character has none), includes held-back tokens. Any other arm whose run came
back without a per-event count (normally the discarded warmup: `token_source` "per_event") gets
`logprobs` asked for on its later runs, unless the arm names a local `tokenizer`, which costs the
server nothing (logprobs can slow it; never asked of llama.cpp, where they miss held-back
tokens). A fresh prefill (`prompt_cache = "fresh"`) on vLLM is a per-request `cache_salt` no other
request shares (vLLM keys its prefix cache by it; a repeated prompt otherwise reuses up to all of
its KV blocks). Fields the recorder adds itself (these, and SGLang's `return_spec_tokens_details`) are
dropped for good, and the run retried at once, if the endpoint answers them with HTTP 400 or
422; `extra_body` overrides them all.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from typing import Any

from tokenreel.analysis.engine_figures import engine_name
from tokenreel.analysis.metrics import output_tokens
from tokenreel.recorder.client.token_counts import CountText, tokenizer_counts
from tokenreel.recorder.config import load_tokenizer, request_extra_body
from tokenreel.recorder.config_schema import DEFAULT_TIMEOUTS
from tokenreel.recorder.enums import Api, EngineKind, PromptCache
from tokenreel.recorder.secrets import remember_secret
from tokenreel.recorder.suites import chat_messages, completion_text
from tokenreel.session.model import Arm, Prompt, Run, Settings


@dataclass(frozen=True)
class Timeouts:
    """Seconds; see DEFAULT_TIMEOUTS for what each bounds."""

    connect: float
    first_token: float
    between_chunks: float
    total: float


def resolve_timeouts(settings: Settings, arm: Arm) -> Timeouts:
    """Defaults, then the session's [session.timeouts], then the arm's [arms.timeouts]."""
    merged = {**DEFAULT_TIMEOUTS, **settings.timeouts, **arm.timeouts}
    return Timeouts(**{key: merged[key] for key in DEFAULT_TIMEOUTS})


@dataclass
class ArmLearning:
    """What the recorder learned about an endpoint from its earlier runs in this process."""

    needs_per_token: bool = False  # a run came back without any per-event count
    rejects_added: set[str] = field(default_factory=set)  # added fields it answered 400/422 to


def learning(arm: Arm) -> ArmLearning:
    """Kept on the Arm object itself (not a dataclass field, so never archived): it lasts as long
    as the recording that holds the arm, and a new recording learns afresh."""
    learned = arm.__dict__.get("_learned")
    if learned is None:
        learned = arm.__dict__["_learned"] = ArmLearning()
    return learned


def engine_of_arm(arm: Arm) -> EngineKind:
    """The engine its fingerprint's summary names (UNKNOWN when it names none)."""
    return EngineKind.named(engine_name(arm.fingerprint))


def added_fields(arm: Arm, settings: Settings) -> dict[str, Any]:
    """Request fields the recorder adds for this arm (see the module docstring for why)."""
    learned, engine = learning(arm), engine_of_arm(arm)
    fields: dict[str, Any] = {}
    if engine is EngineKind.LLAMACPP:
        fields["timings_per_token"] = True
    if engine is EngineKind.VLLM and settings.prompt_cache == PromptCache.FRESH:
        fields["cache_salt"] = f"tokenreel-{uuid.uuid4().hex}"  # unique: it is sent, never archived
    if engine is EngineKind.SGLANG:
        fields["return_spec_tokens_details"] = True
    # Not from llama.cpp: its streamed logprobs miss held-back tokens, and computing them sorts the
    # whole vocabulary per token (a slower server); timings_per_token is its exact, free count.
    if learned.needs_per_token and not arm.tokenizer and engine is not EngineKind.LLAMACPP:
        fields["logprobs"] = True if arm.api == Api.CHAT else 1
    return {key: value for key, value in fields.items() if key not in learned.rejects_added}


def request_body(
    arm: Arm, prompt: Prompt, settings: Settings, added: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The JSON body; the arm's extra_body is merged last so it can override anything.

    `settings.prompt_cache` "fresh" asks a llama.cpp arm (as its fingerprint says) for a whole
    prefill every run (`cache_prompt: false`): its default reuses the slot's or the host-RAM
    cache's KV state of a repeated prompt, and TTFT then times a cache restore, not a prefill.
    vLLM gets a `cache_salt` instead (`added_fields`); SGLang takes no such per-request field (its
    prefix cache is a server flag): its cached prompt tokens are recorded and flagged (`Run.engine`)."""
    body: dict[str, Any] = {"model": arm.model}
    if arm.api == Api.CHAT:
        body["messages"] = chat_messages(prompt)
    else:
        body["prompt"] = completion_text(prompt)
    body.update(
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
        ignore_eos=settings.ignore_eos,
        stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},
    )
    if settings.prompt_cache == PromptCache.FRESH and engine_of_arm(arm) is EngineKind.LLAMACPP:
        body["cache_prompt"] = False
    body.update(added or {})
    body.update(request_extra_body(arm))  # the config's values, where the archived copy is scrubbed
    return body


def token_counter(arm: Arm) -> CountText | None:
    """Counting with the arm's local tokenizer; None without one (or if it no longer loads)."""
    if not arm.tokenizer:
        return None
    try:
        tokenizer = load_tokenizer(arm.tokenizer)
    except (OSError, ValueError):
        return None  # checked when the config was loaded; the run is then marked estimated
    return lambda texts: tokenizer_counts(tokenizer, texts)


def api_key(arm: Arm) -> str | None:
    """The key from the environment variable the arm names; None when there is none to send.

    Every key read is remembered as a secret, so that it is scrubbed from all that is archived,
    printed or drawn (`secrets.scrub_secrets`)."""
    key = (os.environ.get(arm.api_key_env) or None) if arm.api_key_env else None
    remember_secret(key)
    return key


def auth_headers(arm: Arm) -> dict[str, str]:
    key = api_key(arm)
    return {"Authorization": f"Bearer {key}"} if key else {}


def completions_url(arm: Arm) -> str:
    return f"{arm.base_url}/chat/completions" if arm.api == Api.CHAT else f"{arm.base_url}/completions"


def requested_max_tokens(body: dict[str, Any]) -> int | None:
    """The output length the request asks for (extra_body may rename, change or remove it)."""
    expected = body.get("max_completion_tokens") or body.get("max_tokens")
    return expected if type(expected) is int and expected > 0 else None


def forced_length_note(run: Run, body: dict[str, Any]) -> str:
    """A run that missed its forced length stays ok (its timing is real) but is flagged not like-for-like."""
    expected = requested_max_tokens(body)
    n = output_tokens(run)
    if body.get("ignore_eos") is not True or expected is None or n == expected:
        return ""
    return (
        f"forced length not met: {n} of {expected} tokens (finish_reason {run.finish_reason}); not like-for-like"
        " with full-length runs, check ignore_eos support and max_model_len"
    )
