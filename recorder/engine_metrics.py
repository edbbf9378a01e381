"""Read an engine's Prometheus /metrics into one snapshot, whatever the engine.

vLLM, SGLang and llama.cpp name the same quantities differently (REFERENCE.md §2); the gate,
the contention check and the acceptance length only need the handful mapped here. Counters are
summed over label sets (vLLM labels them per `engine`), and the parser's `_total` stripping is
undone by matching on the normalised sample name.
"""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from tokenreel.archive import Acceptance

# snapshot field -> metric names (without a `_total` suffix), per engine.
NAMES: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs", "llamacpp:requests_processing"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred"),
    "generated_tokens": ("vllm:generation_tokens", "sglang:generation_tokens", "llamacpp:tokens_predicted"),
    "drafts": ("vllm:spec_decode_num_drafts", "llamacpp:spec_decode_num_drafts"),
    "draft_tokens": ("vllm:spec_decode_num_draft_tokens", "llamacpp:spec_decode_num_draft_tokens"),
    "accepted_tokens": ("vllm:spec_decode_num_accepted_tokens", "llamacpp:spec_decode_num_accepted_tokens"),
}
_FIELD_OF = {name: field for field, names in NAMES.items() for name in names}
MAX_METRICS_BYTES = 8 * 1024 * 1024


class MetricsUnavailable(Exception):
    """No usable /metrics at the URL; the message says why in one line."""


@dataclass(frozen=True)
class EngineSnapshot:
    """The engine counters and gauges the recorder uses; None where the engine has no such metric."""

    running: float | None = None
    waiting: float | None = None
    generated_tokens: float | None = None
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None


def parse_metrics(text: str) -> EngineSnapshot:
    """Map Prometheus text to a snapshot, summing every label set of each known metric."""
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name.removesuffix("_total")
            field = _FIELD_OF.get(name)
            if field is not None and sample.value == sample.value:  # NaN never counts
                totals[field] = totals.get(field, 0.0) + sample.value
    return EngineSnapshot(**totals)


async def fetch_snapshot(http: aiohttp.ClientSession, url: str, timeout: float = 5.0) -> EngineSnapshot:
    """GET and parse /metrics; raises MetricsUnavailable (refused, HTTP error, unknown names)."""
    try:
        async with http.get(url, timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            status, content = response.status, await response.read()
    except (aiohttp.ClientError, TimeoutError) as exc:  # aiohttp's total timeout is a bare TimeoutError
        raise MetricsUnavailable(f"no /metrics at {url} ({type(exc).__name__})") from None
    if status != 200:
        raise MetricsUnavailable(f"no /metrics at {url} (HTTP {status})")
    if len(content) > MAX_METRICS_BYTES:
        raise MetricsUnavailable(f"/metrics at {url} is larger than {MAX_METRICS_BYTES} bytes")
    try:
        snapshot = parse_metrics(content.decode("utf-8", "replace"))  # the exposition format is UTF-8
    except ValueError as exc:
        raise MetricsUnavailable(f"/metrics at {url} is not Prometheus text ({str(exc)[:80]})") from None
    if snapshot.running is None:
        raise MetricsUnavailable(f"/metrics at {url} has no vLLM, SGLang or llama.cpp request gauges")
    return snapshot


def delta(before: EngineSnapshot, after: EngineSnapshot, field: str) -> float | None:
    """Counter difference; None when either side lacks it or it went back (a server restart)."""
    a, b = getattr(before, field), getattr(after, field)
    if a is None or b is None or b < a:
        return None
    return b - a


def acceptance_between(before: EngineSnapshot, after: EngineSnapshot) -> Acceptance | None:
    """Speculative acceptance over an interval, as `vllm bench serve` computes it from counters."""
    drafts = delta(before, after, "drafts")
    draft_tokens = delta(before, after, "draft_tokens")
    accepted = delta(before, after, "accepted_tokens")
    if accepted is None or not drafts:
        return None
    rate = accepted / draft_tokens if draft_tokens else None
    return Acceptance(
        mean_length=1.0 + accepted / drafts,
        rate=rate,
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted=accepted,
        source="metrics",
    )

