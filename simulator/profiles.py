"""Serving configurations that the simulator imitates.

A profile holds only what a client can observe from outside (time to first token, step time,
acceptance length per prompt category, failure behaviour), so recorder code can be exercised
against realistic numbers without a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

FAULTS: tuple[str, ...] = (
    "refuse",
    "401",
    "404",
    "429",
    "500",
    "error_event",
    "drop",
    "stall",
    "malformed",
    "no_done",
    "early_stop",
    "busy",
)
ENGINES: tuple[str, ...] = ("vllm", "sglang", "llamacpp")


@dataclass(frozen=True)
class Profile:
    """One arm of a ladder as seen through the OpenAI-compatible API.

    decode_tok_s is the plain (non-speculative) decode rate of the target model; with
    speculative decoding every step costs verify_cost times a plain step and yields
    acceptance[category] tokens on average (bonus token included).

    engine picks the wire shape (chunks, /metrics names, info endpoints) of vLLM 0.33, SGLang
    0.5 or llama.cpp's server; metrics False serves no /metrics (vLLM/SGLang 404, llama.cpp 501,
    like a server started without --enable-metrics / --metrics); counter_offset starts the
    token counters as on a long-lived server; reasoning_tokens makes the first tokens of every
    reply reasoning; request_metrics is vLLM's opt-in --enable-per-request-metrics (with
    --per-request-spec-decode-metrics summary: spec-decode stats in the usage chunk).
    diverges_at (1-based, 0: never) is the token where these weights pick another token than the
    original model's, as quantized weights may (`tokenreel report` and `render --answer-badge`
    show it); a drafter arm keeps its target's value, since speculative decoding is lossless.
    """

    id: str
    label: str
    model: str
    decode_tok_s: float
    ttft_s: float
    spec_k: int = 0
    acceptance: dict[str, float] = field(default_factory=dict, hash=False)
    fault: str | None = None
    max_model_len: int = 32768
    verify_cost: float = 1.1
    engine: str = "vllm"
    metrics: bool = True
    counter_offset: int = 0
    reasoning_tokens: int = 0
    request_metrics: bool = False
    diverges_at: int = 0

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"unknown engine {self.engine!r}; known: {', '.join(ENGINES)}")
        if self.counter_offset < 0 or self.reasoning_tokens < 0 or self.diverges_at < 0:
            raise ValueError(f"profile {self.id!r}: counter_offset, reasoning_tokens and diverges_at must be >= 0")
        if self.fault is not None and self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r}; known: {', '.join(FAULTS)}")
        if self.spec_k < 0 or self.decode_tok_s <= 0 or self.ttft_s < 0:
            raise ValueError(f"profile {self.id!r}: bad timing or spec_k")
        for category, length in self.acceptance.items():
            if not 1.0 <= length <= self.spec_k + 1:
                raise ValueError(f"profile {self.id!r}: acceptance[{category!r}] out of range")

    @property
    def step_s(self) -> float:
        """Seconds per engine step (one forward pass of the target model)."""
        cost = self.verify_cost if self.spec_k else 1.0
        return cost / self.decode_tok_s

    def acceptance_length(self, category: str) -> float:
        """Mean tokens per step for a category; 1.0 without speculative decoding."""
        if not self.spec_k:
            return 1.0
        return self.acceptance.get(category, min(self.acceptance.values(), default=1.0))

    def expected_tok_s(self, category: str) -> float:
        """Decode tok/s a correct recorder should measure for this category."""
        return self.acceptance_length(category) / self.step_s


_SEED_MODEL = "Qwen/Qwen3.8-27B"
_SEED_NVFP4 = "ThakiCloud/Qwen3.8-27B-NVFP4-FP8ATTN"
NVFP4_DIVERGES_AT = 143  # the NVFP4 weights' answers part from bf16's here (the demo forces 720 tokens)

SEED_LADDER: tuple[Profile, ...] = (
    Profile(id="bf16", label="Original · bf16", model=_SEED_MODEL, decode_tok_s=97.1, ttft_s=0.74),
    Profile(
        id="nvfp4", label="Quantized · NVFP4", model=_SEED_NVFP4, decode_tok_s=136.7, ttft_s=0.56,
        diverges_at=NVFP4_DIVERGES_AT,
    ),
    Profile(
        id="nvfp4-dflash2",
        label="NVFP4 + DFlash2",
        model=_SEED_NVFP4,
        decode_tok_s=136.7,
        ttft_s=0.62,
        spec_k=7,
        acceptance={"code": 5.4, "reasoning": 4.0, "prose": 2.3, "conversation": 2.5},
        diverges_at=NVFP4_DIVERGES_AT,  # the drafter's target is the NVFP4 model: lossless, the same answer
    ),
)


def profile_by_id(profile_id: str, profiles: Sequence[Profile] = SEED_LADDER) -> Profile:
    """Look a profile up by id; KeyError names the known ids."""
    for profile in profiles:
        if profile.id == profile_id:
            return profile
    known = ", ".join(p.id for p in profiles)
    raise KeyError(f"no profile {profile_id!r}; known: {known}")
