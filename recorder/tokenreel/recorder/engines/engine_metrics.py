"""Read an engine's Prometheus /metrics into one snapshot, whatever the engine.

vLLM, SGLang and llama.cpp name the same quantities differently (REFERENCE.md §2); the gate,
the contention check and the acceptance length only need the handful mapped here. Counters are
summed over label sets (vLLM labels them per `engine`), and the parser's `_total` stripping is
undone by matching on the normalised sample name.

Counters keep the precision they were printed with: llama.cpp prints every value with six
significant digits (`1.23457e+07`), so past ten million tokens its readings move in steps of
100. Each snapshot keeps, per field, that step (the quantum implied by the raw text), and every
counter comparison (contention, acceptance) allows it instead of trusting a rounded figure.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Callable

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from tokenreel.recorder.client.bounded_http import MAX_METRICS_BYTES, Refused, get_bounded
from tokenreel.recorder.enums import EngineKind
from tokenreel.recorder.secrets import one_line
from tokenreel.session.model import Acceptance

# snapshot field -> metric names (without a `_total` suffix), per engine. SGLang has no spec
# counters (`sglang:spec_num_steps` is the configured step count, not a count of verify steps;
# `sglang:spec_accept_length` covers the last 40 steps only): its acceptance comes per request.
NAMES: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs", "llamacpp:requests_processing"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred"),
    "generated_tokens": ("vllm:generation_tokens", "sglang:generation_tokens", "llamacpp:tokens_predicted"),
    "drafts": ("vllm:spec_decode_num_drafts", "llamacpp:spec_decode_num_drafts"),
    "draft_tokens": ("vllm:spec_decode_num_draft_tokens", "llamacpp:spec_decode_num_draft_tokens"),
    "accepted_tokens": ("vllm:spec_decode_num_accepted_tokens", "llamacpp:spec_decode_num_accepted_tokens"),
}
# Counters labelled by draft position (`position`, from "0"), summed over the other labels.
POSITION_NAMES: dict[str, str] = {
    "vllm:spec_decode_num_accepted_tokens_per_pos": "accepted_per_pos",
    "llamacpp:spec_decode_num_accepted_tokens_per_pos": "accepted_per_pos",
    "vllm:spec_decode_num_draft_tokens_per_pos": "drafted_per_pos",
}
# Labelled samples that count only under one label value: SGLang's per-step decode counter.
LABELLED: dict[str, tuple[str, str, str]] = {"sglang:realtime_tokens": ("mode", "decode", "decode_tokens")}
DECODE_COUNTER = 'sglang:realtime_tokens_total{mode="decode"}'
_FIELD_OF = {name: field_name for field_name, names in NAMES.items() for name in names}
# name, labels (braces included, may hold quoted '}'), value text; an optional timestamp follows.
_SAMPLE_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?[ \t]+(\S+)(?:[ \t]+\S+)?[ \t]*$")
_NUMBER = re.compile(r"[+-]?(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?")


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
    decode_tokens: float | None = None  # SGLang's sglang:realtime_tokens_total{mode="decode"}, every step
    # Per draft position (0: the first drafted token): accepted tokens, and drafts that reached it.
    accepted_per_pos: dict[int, float] = field(default_factory=dict)
    drafted_per_pos: dict[int, float] = field(default_factory=dict)
    # field -> step of its printed value where coarser than one token (llama.cpp past 1e6); else absent.
    quanta: dict[str, float] = field(default_factory=dict, compare=False, hash=False)
    engine: EngineKind = field(default=EngineKind.UNKNOWN, compare=False)  # whose metric names matched
    # "name (value)" of each known sample that was not a finite number (NaN, +Inf): never counted.
    not_numbers: tuple[str, ...] = field(default=(), compare=False)

    def quantum(self, field_name: str) -> float:
        """The printed step of a field (0 when exact to the token)."""
        return self.quanta.get(field_name, 0.0)


def parse_metrics(text: str) -> EngineSnapshot:
    """Map Prometheus text to a snapshot, summing every label set of each known metric."""
    totals: dict[str, float] = {}
    positions: dict[str, dict[int, float]] = {"accepted_per_pos": {}, "drafted_per_pos": {}}
    engine = EngineKind.UNKNOWN
    not_numbers: list[str] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            per_pos = POSITION_NAMES.get(sample.name.removesuffix("_total"))
            position = sample.labels.get("position", "")
            if per_pos is not None and position.isdigit() and math.isfinite(sample.value):
                counts = positions[per_pos]
                counts[int(position)] = counts.get(int(position), 0.0) + sample.value
                continue
            field_name = _field_of(sample.name, sample.labels.get)
            if field_name is None:
                continue
            if not math.isfinite(sample.value):  # NaN or Inf never counts
                not_numbers.append(f"{sample.name} ({sample.value})")
                continue
            totals[field_name] = totals.get(field_name, 0.0) + sample.value
            engine = engine or EngineKind.named(sample.name.partition(":")[0])
    return EngineSnapshot(**totals, accepted_per_pos=positions["accepted_per_pos"],
                          drafted_per_pos=positions["drafted_per_pos"], quanta=printed_quanta(text), engine=engine,
                          not_numbers=tuple(not_numbers))


def _field_of(sample_name: str, label: Callable[[str], str | None]) -> str | None:
    """The snapshot field a sample adds to (label(key) gives a label's value), or None."""
    name = sample_name.removesuffix("_total")
    if name in LABELLED:
        key, wanted, field_name = LABELLED[name]
        return field_name if label(key) == wanted else None
    return _FIELD_OF.get(name)


def printed_quanta(text: str) -> dict[str, float]:
    """Per field, the sum over its samples of the step their printed text implies, where > 1.

    A value in exponent form was printed with limited significant digits (C's %g; llama.cpp's
    stream precision 6). As %g drops trailing zeros ("1.2e+07" is 12000000 at six digits), the
    precision is the most significant digits any value of the same exposition shows; Python's
    prometheus_client prints full digits ("1.2345678e+07"), so its values come out exact.
    """
    samples: list[tuple[str, str, str]] = []
    precision = 1
    for line in text.splitlines():
        match = _SAMPLE_LINE.match(line.strip())
        if match is None or line.lstrip().startswith("#"):
            continue
        name, labels, value = match.group(1), match.group(2) or "", match.group(3)
        samples.append((name, labels, value))
        precision = max(precision, _significant_digits(value))
    quanta: dict[str, float] = {}
    for name, labels, value in samples:
        field_name = _field_of(name, partial(_label_value, labels))
        if field_name is None:
            continue
        step = _quantum(value, precision)
        if step > 1:  # every mapped field counts whole tokens or requests: a step of 1 is exact
            quanta[field_name] = quanta.get(field_name, 0.0) + step
    return quanta


def _label_value(labels: str, key: str) -> str | None:
    match = re.search(rf'(?:^|[{{,\s]){re.escape(key)}\s*=\s*"((?:[^"\\]|\\.)*)"', labels)
    return match.group(1) if match else None


def _significant_digits(text: str) -> int:
    match = _NUMBER.fullmatch(text)
    if match is None:
        return 0
    whole, fraction, _ = match.groups()
    return min(17, len(((whole or "") + (fraction or "")).lstrip("0")))


def _quantum(text: str, precision: int) -> float:
    """The step between neighbouring values printed like `text` (0 for NaN/Inf or zero)."""
    match = _NUMBER.fullmatch(text)
    if match is None:
        return 0.0
    whole, fraction, exponent = match.groups()
    if exponent is None:
        return 10.0 ** -len(fraction) if fraction else 1.0
    value = abs(float(text))
    if value == 0:
        return 0.0
    digits = max(_significant_digits(text), precision)
    return 10.0 ** (math.floor(math.log10(value)) - digits + 1)


async def fetch_snapshot(http: aiohttp.ClientSession, url: str, timeout: float = 5.0) -> EngineSnapshot:
    """GET and parse /metrics; raises MetricsUnavailable (refused, HTTP error, unknown names)."""
    try:
        status, content = await get_bounded(http, url, f"/metrics at {url}", MAX_METRICS_BYTES, timeout)
    except Refused as exc:
        raise MetricsUnavailable(str(exc)) from None
    except (aiohttp.ClientError, TimeoutError) as exc:  # aiohttp's total timeout is a bare TimeoutError
        raise MetricsUnavailable(f"no /metrics at {url} ({type(exc).__name__})") from None
    if status != 200:
        raise MetricsUnavailable(f"no /metrics at {url} (HTTP {status})")
    try:
        snapshot = parse_metrics(content.decode("utf-8", "replace"))  # the exposition format is UTF-8
    except ValueError as exc:
        raise MetricsUnavailable(f"/metrics at {url} is not Prometheus text ({one_line(str(exc), 80)})") from None
    # A gauge that is NaN or +Inf would read as 0: idle. Neither says whether others are generating.
    gauges = [name for name in snapshot.not_numbers if _FIELD_OF.get(name.partition(" ")[0]) in ("running", "waiting")]
    if gauges:
        raise MetricsUnavailable(f"/metrics at {url}: the request gauge {one_line(gauges[0], 120)} is not a number; check the server")
    if snapshot.running is None:
        raise MetricsUnavailable(f"/metrics at {url} has no vLLM, SGLang or llama.cpp request gauges")
    return snapshot


def delta(before: EngineSnapshot, after: EngineSnapshot, field_name: str) -> float | None:
    """Counter difference; None when either side lacks it or it went back (a server restart).

    A difference smaller than the printed step (a rounded reading) counts as no change, not
    as a restart.
    """
    a: float | None = getattr(before, field_name)
    b: float | None = getattr(after, field_name)
    if a is None or b is None or b < a - tolerance(before, after, field_name):
        return None
    return max(0.0, b - a)


def tolerance(before: EngineSnapshot, after: EngineSnapshot, field_name: str) -> float:
    """How far a counter difference can be off from rounding (half a step at each end)."""
    return (before.quantum(field_name) + after.quantum(field_name)) / 2


def acceptance_between(before: EngineSnapshot, after: EngineSnapshot) -> Acceptance | None:
    """Speculative acceptance over an interval, as `vllm bench serve` computes it from counters.

    Counters printed coarser than one token give an approximate figure: it says so, and how far
    off the rounding alone could make it.
    """
    counts = {name: delta(before, after, counter) for name, counter in COUNTERS.items()}
    drafts, draft_tokens, accepted = counts["drafts"], counts["draft_tokens"], counts["accepted"]
    if accepted is None or not drafts:
        return None
    acceptance = Acceptance(
        mean_length=1.0 + accepted / drafts,
        rate=accepted / draft_tokens if draft_tokens else None,
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted=accepted,
        source="metrics",
    )
    return _mark_rounding(acceptance, {name: tolerance(before, after, c) for name, c in COUNTERS.items()})


# Acceptance count -> the snapshot counter it comes from.
COUNTERS = {"drafts": "drafts", "draft_tokens": "draft_tokens", "accepted": "accepted_tokens"}


def merge_acceptance(
    response: Acceptance | None, before: EngineSnapshot | None, after: EngineSnapshot | None
) -> Acceptance | None:
    """`_merge_counts`, with per-position counts from the counters where the response had none."""
    merged = _merge_counts(response, before, after)
    if merged is None or merged.accepted_per_position is not None or before is None or after is None:
        return merged
    accepted, drafted = positions_between(before, after)
    if accepted is None:
        return merged
    return replace(merged, accepted_per_position=accepted, drafted_per_position=drafted)


def positions_between(before: EngineSnapshot, after: EngineSnapshot) -> tuple[list[float] | None, list[float] | None]:
    """Per-position counter differences (accepted, drafts that reached each position); None for
    either where the engine has no such counter, a position is missing or one went back."""
    return _position_deltas(before.accepted_per_pos, after.accepted_per_pos), _position_deltas(
        before.drafted_per_pos, after.drafted_per_pos)


def _position_deltas(before: dict[int, float], after: dict[int, float]) -> list[float] | None:
    if not after or sorted(after) != list(range(len(after))):
        return None
    deltas = [after[i] - before.get(i, 0.0) for i in range(len(after))]
    return None if any(d < 0 for d in deltas) else deltas


def _merge_counts(
    response: Acceptance | None, before: EngineSnapshot | None, after: EngineSnapshot | None
) -> Acceptance | None:
    """The response's own figures, completed from the counters around the run where it lacks one.

    The response cannot be polluted by other traffic, so each of its counts wins; llama.cpp's
    `timings` have drafted and accepted tokens but no count of verify steps, which only its
    `spec_decode_num_drafts` counter gives: the length is then 1 + accepted / Δdrafts. Counts
    taken from rounded counters make the figure approximate (it says so).
    """
    if before is None or after is None:
        return response
    if response is None:
        return acceptance_between(before, after)
    if response.mean_length is not None and response.rate is not None:
        return response
    counts: dict[str, float | None] = {}
    taken: list[str] = []
    for name, counter in COUNTERS.items():
        own = getattr(response, name)
        counts[name] = own if own is not None else delta(before, after, counter)
        if own is None and counts[name] is not None:
            taken.append(name)
    drafts, draft_tokens, accepted = counts["drafts"], counts["draft_tokens"], counts["accepted"]
    mean_length, rate = response.mean_length, response.rate
    if mean_length is None and drafts and accepted is not None:
        mean_length = 1.0 + accepted / drafts
    if rate is None and draft_tokens and accepted is not None:
        rate = accepted / draft_tokens
    if (mean_length, rate) == (response.mean_length, response.rate):
        return response  # the counters added nothing (no spec counters, or no drafts counted)
    merged = Acceptance(mean_length, rate, drafts, draft_tokens, accepted, f"{response.source}+metrics")
    return _mark_rounding(merged, {name: tolerance(before, after, COUNTERS[name]) for name in taken})


def missing_acceptance(acceptance: Acceptance | None, before: EngineSnapshot | None, after: EngineSnapshot | None) -> str:
    """Why a run has no acceptance length (empty when it has one), for the report to say."""
    if acceptance is not None and acceptance.mean_length is not None:
        return ""
    if acceptance is not None and acceptance.note:  # rounded counters too coarse for a length
        return acceptance.note
    if before is None or after is None:
        return "no /metrics and no per-response spec stats"
    if after.drafts is None and after.accepted_tokens is None:
        if after.engine is EngineKind.SGLANG:
            return ("no spec counters on this endpoint (SGLang has none); for a speculative arm add"
                    " return_spec_tokens_details = true to extra_body")
        if acceptance is not None:
            return "the response gives no verify-step count and the endpoint has no spec_decode_num_drafts counter"
        return "not speculative (no spec counters on this endpoint)"
    if after.drafts is None:
        return "no spec_decode_num_drafts counter on this endpoint (verify steps unknown)"
    drafts = delta(before, after, "drafts")
    if drafts is None:
        return "spec counters went back during the run (a server restart?)"
    if acceptance is not None and acceptance.draft_tokens:
        return "the response drafted tokens but spec_decode_num_drafts did not move during the run (verify steps unknown)"
    return "not speculative (no drafts during the run)"


def _mark_rounding(acceptance: Acceptance, slack: dict[str, float]) -> Acceptance:
    """Flag an acceptance whose counts came from rounded counters, with the bound on its length."""
    coarse = {name: value for name, value in slack.items() if value > 0}
    if not coarse:
        return acceptance
    acceptance.approximate = True
    bound = ""
    steps = ", ".join(f"{name} ±{value:g}" for name, value in coarse.items())
    drafts, accepted = acceptance.drafts, acceptance.accepted
    if drafts and accepted is not None:
        d_err, a_err = coarse.get("drafts", 0.0), coarse.get("accepted", 0.0)
        if drafts <= d_err:  # the verify steps could be anything from 0 up: no length at all
            acceptance.mean_length = None
            acceptance.note = f"counters printed in rounded steps ({steps}) are too coarse for {drafts:g} drafts"
            return acceptance
        low = 1 + max(accepted - a_err, 0.0) / (drafts + d_err)
        high = 1 + (accepted + a_err) / (drafts - d_err)
        bound = f"; length between {low:.2f} and {high:.2f}"
    acceptance.note = f"approximate: counters printed in rounded steps ({steps}){bound}"
    return acceptance
