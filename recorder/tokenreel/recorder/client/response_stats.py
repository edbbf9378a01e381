"""What the engine said of one request, beside its tokens: speculative-decoding acceptance and
its own figures (`Acceptance`, `EngineFigures`), each value checked before the archive takes it."""

from __future__ import annotations

import math
from typing import Any

from tokenreel.session.model import MAX_COUNT, MAX_DRAFT_POSITIONS, MAX_ENGINE_MS, MAX_TOKENS_PER_SECOND, Acceptance, EngineFigures


def response_acceptance(spec: tuple[str, dict[str, Any]] | None) -> Acceptance | None:
    """Acceptance for this request alone, from vLLM, SGLang or llama.cpp per-response stats."""
    if spec is None:
        return None
    source, d = spec
    if source == "timings":  # llama.cpp: drafted and accepted tokens, no count of verify steps
        draft_tokens, accepted = _num(d.get("draft_n")), _num(d.get("draft_n_accepted"))
        drafts, mean_length, rate = None, None, None
    elif source == "sglext.spec_tokens_details":
        drafts, draft_tokens = _num(d.get("spec_verify_ct")), _num(d.get("spec_num_proposed_drafts"))
        accepted = _num(d.get("spec_num_correct_drafts"))
        mean_length, rate = _num(d.get("spec_accept_length")), _num(d.get("spec_accept_rate"))
    else:
        drafts = _num(d.get("num_spec_steps", d.get("num_drafts")))
        draft_tokens = _num(d.get("num_draft_tokens"))
        accepted = _num(d.get("num_accepted_draft_tokens", d.get("num_accepted_tokens")))
        mean_length, rate = _num(d.get("mean_acceptance_length")), _num(d.get("draft_acceptance_rate"))
    if drafts and accepted is not None:
        mean_length = 1.0 + accepted / drafts
    if draft_tokens and accepted is not None:
        rate = accepted / draft_tokens
    if mean_length is None and rate is None:
        return None
    acceptance = Acceptance(mean_length, rate, drafts, draft_tokens, accepted, source)
    if source == "metrics.speculative_decoding":
        acceptance.accepted_per_position, acceptance.drafted_per_position = histogram_positions(d)
    elif source == "sglext.spec_tokens_details":
        acceptance.accepted_per_position = accepted_by_position(_counts(d.get("spec_correct_drafts_histogram")))
    return acceptance


def accepted_by_position(histogram: list[int] | None) -> list[float] | None:
    """A histogram of verify steps by the number of draft tokens each accepted (`histogram[j]`:
    the steps that accepted exactly j) as accepted tokens per position: position i (from 0) was
    accepted in the steps with j > i. None for no histogram, or one without a position."""
    if histogram is None or len(histogram) < 2:
        return None
    return [float(sum(histogram[i + 1:])) for i in range(len(histogram) - 1)]


def histogram_positions(d: dict[str, Any]) -> tuple[list[float] | None, list[float] | None]:
    """vLLM's per-request histograms as per-position counts: `acceptance_histogram` as accepted
    tokens per position (`accepted_by_position`); `acceptance_histogram_by_draft_length[k]` (or,
    detailed, `per_step_drafted`) gives the steps whose draft reached position i (k > i). None
    where a field is absent or malformed."""
    histogram = _counts(d.get("acceptance_histogram"))
    accepted = accepted_by_position(histogram)
    if histogram is None or accepted is None:
        return None, None
    width = len(accepted)
    lengths: list[float] = [0.0] * (width + 1)  # verify steps by the number of tokens they drafted
    by_length = d.get("acceptance_histogram_by_draft_length")
    per_step = _counts(d.get("per_step_drafted"), MAX_COUNT)
    if isinstance(by_length, dict) and by_length:
        for key, row in by_length.items():
            counts = _counts(row)
            if not (isinstance(key, str) and key.isdigit() and int(key) <= width and counts is not None):
                return accepted, None
            lengths[int(key)] += sum(counts)
    elif per_step is not None and all(n <= width for n in per_step):
        for n in per_step:
            lengths[n] += 1
    else:
        return accepted, None
    return accepted, [float(sum(lengths[i + 1:])) for i in range(width)]


def _counts(value: Any, longest: int = MAX_DRAFT_POSITIONS + 1) -> list[int] | None:
    """A list of at most `longest` count integers (0 to MAX_COUNT), or None."""
    if not isinstance(value, list) or len(value) > longest:
        return None
    counts = [_count(v) for v in value]
    return None if any(c is None for c in counts) else [c for c in counts if c is not None]


def engine_figures(
    timings: dict[str, Any] | None, usage: dict[str, Any] | None, metrics: dict[str, Any] | None = None
) -> tuple[EngineFigures, str]:
    """The engine's own figures of one request (`EngineFigures`), and what was dropped as impossible.

    llama.cpp's final `timings`: decode = (predicted_n - 1) / predicted_ms, tokenreel's definition
    (the first token comes from the prompt's batch; see EngineFigures), prompt = prompt_n (the
    tokens prefilled) + cache_n (those taken from its cache). vLLM and SGLang: `usage.prompt_tokens`
    and `usage.prompt_tokens_details.cached_tokens`; vLLM started with --enable-per-request-metrics
    adds `metrics` to the usage chunk: decode = (completion_tokens - 1) / generation_time_ms (its
    first output token to its last), and its TTFT and queue time.
    """
    dropped: list[str] = []
    if timings is not None:
        predicted_n, predicted_ms = _num(timings.get("predicted_n")), _num(timings.get("predicted_ms"))
        processed, cached = _count(timings.get("prompt_n")), _count(timings.get("cache_n"))
        decode = _decode(predicted_n, predicted_ms, "predicted_n", dropped)
        prompt = processed + cached if processed is not None and cached is not None else None
        return EngineFigures(decode, prompt, cached, "llama.cpp timings"), ", ".join(dropped)
    if usage is None:
        return EngineFigures(), ""
    prompt = _count(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    if cached is not None and prompt is not None and cached > prompt:
        dropped.append(f"cached_tokens {cached} of a {prompt}-token prompt")
        cached = None
    if metrics is not None and metrics.get("generation_time_ms") is not None:
        generation_ms = _num(metrics.get("generation_time_ms"))
        decode = _decode(_num(usage.get("completion_tokens")), generation_ms, "completion_tokens", dropped)
        figures = EngineFigures(decode, prompt, cached, "vllm metrics", _ms(metrics.get("time_to_first_token_ms")),
                                _ms(metrics.get("queue_time_ms")), generation_ms)
        return figures, ", ".join(dropped)
    if prompt is None and cached is None:
        return EngineFigures(), ", ".join(dropped)
    source = "usage.prompt_tokens_details" if cached is not None else "usage"
    return EngineFigures(None, prompt, cached, source), ", ".join(dropped)


def _decode(tokens: float | None, ms: float | None, name: str, dropped: list[str]) -> float | None:
    """(tokens - 1) per second over `ms` (the first token to the last); None, and said in
    `dropped`, when beyond MAX_TOKENS_PER_SECOND."""
    if tokens is None or tokens <= 1 or not ms:
        return None
    decode = (tokens - 1) * 1000.0 / ms
    if decode > MAX_TOKENS_PER_SECOND:
        dropped.append(f"decode of {decode:g} tok/s ({name} {tokens:g} in {ms:g} ms)")
        return None
    return decode


def _ms(value: Any) -> float | None:
    """A duration in ms the archive takes (finite, 0 to a week), or None."""
    ms = _num(value)
    return ms if ms is not None and ms <= MAX_ENGINE_MS else None


def _count(value: Any) -> int | None:
    """A token count the archive takes (an integer from 0 to MAX_COUNT), or None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        return None
    return value


def _num(value: Any) -> float | None:
    """A finite non-negative number, or None (the archive accepts nothing else)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def clean_usage(usage: dict[str, Any] | None) -> dict[str, int] | None:
    """Keep the integer counts; nested details and nulls are dropped (the archive stores ints)."""
    if usage is None:
        return None
    return {k: v for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}
