"""Serving configurations that the simulator imitates.

A profile holds only what a client can observe from outside (time to first token, step time,
acceptance length per prompt category, failure behaviour), so recorder code can be exercised
against realistic numbers without a GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

FaultMode = Literal[
    "refuse", "401", "404", "429", "500", "503", "error_event", "drop", "stall", "malformed", "no_done", "early_stop", "busy",
]
FAULTS: tuple[FaultMode, ...] = get_args(FaultMode)
EngineName = Literal["vllm", "sglang", "llamacpp"]  # the wire shapes the simulator serves
ENGINES: tuple[EngineName, ...] = get_args(EngineName)


def fault_mode(text: object) -> FaultMode | None:
    """`text` as one of FAULTS (exactly as spelled), None when it is not one."""
    return next((mode for mode in FAULTS if text == mode), None)


def engine_name(text: object) -> EngineName | None:
    """`text` as one of ENGINES (exactly as spelled), None when it is not one."""
    return next((name for name in ENGINES if text == name), None)


LLAMACPP_DEFAULT_SLOTS = 4  # what the simulated llama-server reports in /props and serves at once


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
    length_factor scales where every reply ends on its own (`Reply.natural_len`, rounded): 1.21
    is weights that write 21 % more tokens for the same task; it changes nothing a request with
    ignore_eos (a forced length) receives.
    diverges_at (1-based, 0: never) is the token where these weights pick another token than the
    original model's, as quantized weights may (`tokenreel report` and `render --answer-badge`
    show it); a drafter arm keeps its target's value, since speculative decoding is lossless.

    Batching: b is the number of requests the engine is running (the one timed
    included). A step is one forward pass of the target model over n tokens: n = b plain, or
    n = b * (spec_k + 1) while drafting (each request's k drafts plus its bonus position are
    verified). It costs load(n) plain single-request steps,

        load(n) = 1 + batch_slope * max(0, n - batch_flat_tokens)

    flat while memory-bound (reading the weights dominates), then linear once compute-bound.
    A plain step lasts load(b) / decode_tok_s; a drafting step

        ((verify_cost - draft_cost) * load(b * (spec_k + 1)) + draft_cost * load(b)) / decode_tok_s

    where draft_cost is the drafter's share of verify_cost (it drafts from b positions, so it
    grows like a plain pass). Verification fills the compute roof spec_k + 1 times sooner, which
    is why a drafter stops paying as b grows (`crossover`). Above drafting_off_above running
    requests the engine stops drafting (vLLM's speculative_disable_by_batch_size): a plain step
    yielding 1 token, no draft counted. Acceptance stays per category whatever b. With the
    defaults (batch_slope 0, drafting always on) the step time ignores b: requests in flight
    never slow each other, as without batching; batch_flat_tokens >= spec_k + 1 keeps one
    request memory-bound, so a request alone is timed exactly as without the model.
    """

    id: str
    label: str
    model: str
    decode_tok_s: float
    ttft_s: float
    spec_k: int = 0
    acceptance: dict[str, float] = field(default_factory=dict, hash=False)
    fault: FaultMode | None = None
    max_model_len: int = 32768
    verify_cost: float = 1.1
    engine: EngineName = "vllm"
    metrics: bool = True
    counter_offset: int = 0
    reasoning_tokens: int = 0
    request_metrics: bool = False
    diverges_at: int = 0
    batch_flat_tokens: int = 256
    batch_slope: float = 0.0
    draft_cost: float = 0.0
    drafting_off_above: int | None = None
    slots: int | None = None  # requests served at once, the rest wait (llama.cpp's -np); None: the engine's default
    drafts_for: str | None = None  # a drafter's target profile, as a config's `drafts_for` declares it
    length_factor: float = 1.0
    # Planned answers by prompt (planned_answers.py): served instead of the written text, ending
    # naturally unless the request asks ignore_eos; empty: the written text, as always.
    answers: Mapping[str, str] = field(default_factory=dict, hash=False)

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
        if self.batch_flat_tokens < self.spec_k + 1 or self.batch_slope < 0:
            raise ValueError(f"profile {self.id!r}: batch_flat_tokens must be >= spec_k + 1, batch_slope >= 0")
        if not 0 <= self.draft_cost < self.verify_cost or (self.drafting_off_above is not None and self.drafting_off_above < 1):
            raise ValueError(f"profile {self.id!r}: draft_cost must be in [0, verify_cost), drafting_off_above >= 1")
        if not 0 < self.length_factor < float("inf"):
            raise ValueError(f"profile {self.id!r}: length_factor must be a finite number greater than 0")
        if self.slots is not None and (self.slots < 1 or self.engine != "llamacpp"):
            raise ValueError(f"profile {self.id!r}: slots must be >= 1, and only a llamacpp engine has slots")

    @property
    def slot_count(self) -> int | None:
        """How many requests run at once: llama.cpp serves a fixed number of slots (4 unless
        `slots` says), queueing the rest; vLLM and SGLang schedule every request here."""
        if self.engine != "llamacpp":
            return None
        return self.slots if self.slots is not None else LLAMACPP_DEFAULT_SLOTS

    @property
    def step_s(self) -> float:
        """Seconds per engine step (one forward pass of the target model) with one request."""
        return self.step_s_at(1)

    def drafts_at(self, batch: int) -> bool:
        """Whether the engine drafts while running `batch` requests."""
        return self.spec_k > 0 and (self.drafting_off_above is None or batch <= self.drafting_off_above)

    def load(self, tokens: int) -> float:
        """A forward pass over `tokens` tokens in plain single-request steps (class docstring)."""
        return 1.0 + self.batch_slope * max(0, tokens - self.batch_flat_tokens)

    def step_s_at(self, batch: int) -> float:
        """Seconds per engine step while `batch` requests run (the class docstring's formula)."""
        if not self.drafts_at(batch):
            return self.load(batch) / self.decode_tok_s
        verify = (self.verify_cost - self.draft_cost) * self.load(batch * (self.spec_k + 1))
        return (verify + self.draft_cost * self.load(batch)) / self.decode_tok_s

    def acceptance_length(self, category: str, batch: int = 1) -> float:
        """Mean tokens per step for a category; 1.0 without speculative decoding or drafting."""
        if not self.drafts_at(batch):
            return 1.0
        return self.acceptance.get(category, min(self.acceptance.values(), default=1.0))

    def expected_tok_s(self, category: str, batch: int = 1) -> float:
        """Decode tok/s a correct recorder should measure per request, `batch` requests running."""
        return self.acceptance_length(category, batch) / self.step_s_at(batch)

    def aggregate_tok_s(self, category: str, batch: int) -> float:
        """Decode tok/s of the whole engine with `batch` requests of one category decoding."""
        return batch * self.expected_tok_s(category, batch)


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
        drafts_for="nvfp4",
    ),
)


_SWEEP_ACCEPTANCE = {"code": 2.4, "reasoning": 2.4, "prose": 2.4, "conversation": 2.4}
# `tokenreel demo`'s sweep: a base and its drafter on a batching engine, fast enough for a few
# seconds a sweep; the drafter pays at 1, 2 and 4 requests in flight and not at 8 (`crossover`: 5).
SWEEP_DEMO: tuple[Profile, ...] = (
    Profile(id="base", label="NVFP4", model=_SEED_NVFP4, decode_tok_s=200, ttft_s=0.002, batch_flat_tokens=6,
            batch_slope=0.1),
    Profile(id="drafter", label="NVFP4 + DFlash2", model=_SEED_NVFP4, decode_tok_s=200, ttft_s=0.002,
            batch_flat_tokens=6, batch_slope=0.1, spec_k=3, acceptance=_SWEEP_ACCEPTANCE, draft_cost=0.1),
)

def crossover(base: Profile, drafter: Profile, category: str, max_batch: int = 4096) -> int | None:
    """The lowest batch at which the drafter arm's decode speed-up over its base arm is <= 1;
    None when it still pays at max_batch. Per request and in aggregate it is the same batch:
    at equal concurrency both arms' aggregate is batch times their per-request rate."""
    for batch in range(1, max_batch + 1):
        if drafter.expected_tok_s(category, batch) <= base.expected_tok_s(category, batch):
            return batch
    return None


def profile_by_id(profile_id: str, profiles: Sequence[Profile] = SEED_LADDER) -> Profile:
    """Look a profile up by id; KeyError names the known ids."""
    for profile in profiles:
        if profile.id == profile_id:
            return profile
    known = ", ".join(p.id for p in profiles)
    raise KeyError(f"no profile {profile_id!r}; known: {known}")
