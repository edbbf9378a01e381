"""The /metrics of each simulated engine: names, labels, when counters move, how they print.

The three engines disagree on exactly what a recorder's idle gate and contention check depend
on, so each is reproduced as its source does it:
  vLLM      `vllm:*`, labels {model_name, engine}; tokens counted every engine step.
  SGLang    `sglang:*`; `generation_tokens_total` added when a request finishes,
            `realtime_tokens_total{mode="decode"}` every decode step.
  llama.cpp `llamacpp:*`, no labels; every counter added when a request finishes, printed by
            C++ `stringstream << double` (6 significant digits: 12345678 -> 1.23457e+07).
Each registry is private to its server (never prometheus_client's global one).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from tokenreel.simulator.profiles import EngineName, Profile
from tokenreel.simulator.wire import format_g6, json_response

LLAMACPP_METRICS_OFF = {
    "error": {
        "code": 501,
        "message": "This server does not support metrics endpoint. Start it with `--metrics`",
        "type": "not_supported_error",
    }
}


@dataclass
class Tally:
    """What one request did, for counters that move only when it ends."""

    prompt_tokens: int = 0
    generated: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    prompt_s: float = 0.0
    predict_s: float = 0.0


def _spec_offsets(offset: int, k: int) -> tuple[int, int, int]:
    """(drafts, draft tokens, accepted) a long-lived speculative server has already counted."""
    drafts = offset // 3
    return drafts, drafts * k, max(0, offset - drafts)


class SimCounters(ABC):
    """Counters and gauges of one engine; the server calls these as a request progresses."""

    def __init__(self, profile: Profile, model: str) -> None:
        self.profile = profile
        self.model = model
        self.spec = profile.spec_k > 0

    # Hooks with nothing to do by default: each engine overrides those its counters move at.
    def prefill(self, prompt_tokens: int) -> None:  # noqa: B027
        """The prompt was processed (the first token is out)."""

    def step(self, tokens: int, draft_tokens: int, accepted: int, verified: bool) -> None:  # noqa: B027
        """One engine step produced `tokens`; `verified` when it verified a draft."""

    def finish(self, tally: Tally) -> None:  # noqa: B027
        """A request ended (completed, failed or aborted)."""

    @abstractmethod
    def background(self, tokens: int) -> None:
        """Tokens someone else generated (the test control's contention)."""

    @abstractmethod
    def render(self, running: int, waiting: int) -> web.Response:
        """GET /metrics with the gauges at these values."""


class _Prometheus(SimCounters):
    """vLLM and SGLang use prometheus_client; only their names and update points differ."""

    labels: tuple[str, ...] = ()
    values: tuple[str, ...] = ()
    running: Gauge  # the gauges every engine's /metrics shows, set as it is rendered
    waiting: Gauge

    def __init__(self, profile: Profile, model: str) -> None:
        super().__init__(profile, model)
        self.registry = CollectorRegistry()

    def gauge(self, name: str, doc: str) -> Gauge:
        return Gauge(name, doc, self.labels, registry=self.registry).labels(*self.values)

    def counter(self, name: str, doc: str, start: float = 0) -> Counter:
        child = Counter(name, doc, self.labels, registry=self.registry).labels(*self.values)
        if start:
            child.inc(start)
        return child

    def render(self, running: int, waiting: int) -> web.Response:
        self.running.set(running)
        self.waiting.set(waiting)
        return web.Response(
            body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4}
        )


class VllmCounters(_Prometheus):
    """vLLM: every counter moves at each engine step, labelled per engine core."""

    labels = ("model_name", "engine")

    def __init__(self, profile: Profile, model: str) -> None:
        self.values = (model, "0")
        super().__init__(profile, model)
        offset = profile.counter_offset
        self.running = self.gauge("vllm:num_requests_running", "Requests in model execution.")
        self.waiting = self.gauge("vllm:num_requests_waiting", "Requests waiting to be processed.")
        self.prompt_tokens = self.counter("vllm:prompt_tokens", "Number of prefill tokens processed.", offset)
        self.generation_tokens = self.counter(
            "vllm:generation_tokens", "Number of generation tokens processed.", offset
        )
        if self.spec:
            drafts, draft_tokens, accepted = _spec_offsets(offset, profile.spec_k)
            self.drafts = self.counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", drafts)
            self.draft_tokens = self.counter(
                "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", draft_tokens
            )
            self.accepted = self.counter(
                "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", accepted
            )
            # vLLM's SpecDecodingProm: one child per draft position 0..k-1 under a `position` label.
            per_pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.",
                              (*self.labels, "position"), registry=self.registry)
            self.accepted_per_pos = [per_pos.labels(*self.values, str(i)) for i in range(profile.spec_k)]
            for i, child in enumerate(self.accepted_per_pos):  # the offset's accepted tokens, earliest positions first
                start = min(drafts, max(0, accepted - i * drafts))
                if start:
                    child.inc(start)

    def prefill(self, prompt_tokens: int) -> None:
        self.prompt_tokens.inc(prompt_tokens)

    def step(self, tokens: int, draft_tokens: int, accepted: int, verified: bool) -> None:
        if verified and self.spec:
            self.drafts.inc()
            self.draft_tokens.inc(draft_tokens)
            self.accepted.inc(accepted)
            for child in self.accepted_per_pos[:accepted]:
                child.inc()
        self.generation_tokens.inc(tokens)

    def background(self, tokens: int) -> None:
        self.generation_tokens.inc(tokens)


class SglangCounters(_Prometheus):
    """SGLang: request totals when a request finishes, the realtime decode counter every step."""

    labels = ("model_name", "engine_type", "tp_rank", "pp_rank")

    def __init__(self, profile: Profile, model: str) -> None:
        self.values = (model, "unified", "0", "0")
        super().__init__(profile, model)
        offset = profile.counter_offset
        self.running = self.gauge("sglang:num_running_reqs", "The number of running requests.")
        self.waiting = self.gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.")
        self.prompt_tokens = self.counter("sglang:prompt_tokens", "Number of prefill tokens processed.", offset)
        self.generation_tokens = self.counter(
            "sglang:generation_tokens", "Number of generation tokens processed.", offset
        )
        realtime = Counter(
            "sglang:realtime_tokens",
            "Tokens processed, updated every scheduler step.",
            (*self.labels, "mode"),
            registry=self.registry,
        )
        self.realtime_prefill = realtime.labels(*self.values, "prefill_compute")
        self.realtime_decode = realtime.labels(*self.values, "decode")
        if offset:
            self.realtime_prefill.inc(offset)
            self.realtime_decode.inc(offset)
        self.num_requests = self.counter("sglang:num_requests", "The number of processed requests.")
        if self.spec:
            self.accept_length = self.gauge("sglang:spec_accept_length", "The average acceptance length.")
            self.accept_rate = self.gauge("sglang:spec_accept_rate", "The average acceptance rate.")

    def prefill(self, prompt_tokens: int) -> None:
        self.realtime_prefill.inc(prompt_tokens)

    def step(self, tokens: int, draft_tokens: int, accepted: int, verified: bool) -> None:
        self.realtime_decode.inc(tokens)

    def finish(self, tally: Tally) -> None:
        self.prompt_tokens.inc(tally.prompt_tokens)
        self.generation_tokens.inc(tally.generated)
        self.num_requests.inc()
        if self.spec and tally.drafts:
            self.accept_length.set(1 + tally.accepted / tally.drafts)
            self.accept_rate.set(tally.accepted / tally.draft_tokens if tally.draft_tokens else 0.0)

    def background(self, tokens: int) -> None:
        self.realtime_decode.inc(tokens)
        self.generation_tokens.inc(tokens)


@dataclass
class _Item:
    name: str
    help: str
    value: float = 0.0


class LlamacppCounters(SimCounters):
    """llama.cpp: plain doubles added at request end, printed with 6 significant digits."""

    def __init__(self, profile: Profile, model: str) -> None:
        super().__init__(profile, model)
        offset = float(profile.counter_offset)
        drafts, draft_tokens, accepted = _spec_offsets(profile.counter_offset, profile.spec_k) if self.spec else (0, 0, 0)
        self.counters = {
            item.name: item
            for item in (
                _Item("prompt_tokens_total", "Number of prompt tokens processed.", offset),
                _Item("prompt_seconds_total", "Prompt process time", offset / 2000),
                _Item("tokens_predicted_total", "Number of generation tokens processed.", offset),
                _Item("tokens_predicted_seconds_total", "Predict process time", offset / 100),
                _Item("n_decode_total", "Total number of llama_decode() calls", offset - accepted),
                _Item("n_tokens_max", "Largest observed sequence length (prompt + generation)."),
                _Item("spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", draft_tokens),
                _Item(
                    "spec_decode_num_accepted_tokens_total",
                    "Speculative: Total draft tokens accepted by the target model",
                    accepted,
                ),
                _Item(
                    "spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps", drafts
                ),
            )
        }
        self.last = Tally()

    def _add(self, name: str, value: float) -> None:
        self.counters[name].value += value

    def finish(self, tally: Tally) -> None:
        self._add("prompt_tokens_total", tally.prompt_tokens)
        self._add("prompt_seconds_total", tally.prompt_s)
        self._add("tokens_predicted_total", tally.generated)
        self._add("tokens_predicted_seconds_total", tally.predict_s)
        self._add("n_decode_total", tally.generated - tally.accepted)
        self._add("spec_decode_num_draft_tokens_total", tally.draft_tokens)
        self._add("spec_decode_num_accepted_tokens_total", tally.accepted)
        self._add("spec_decode_num_drafts_total", tally.drafts)
        n_tokens = self.counters["n_tokens_max"]
        n_tokens.value = max(n_tokens.value, tally.prompt_tokens + tally.generated)
        self.last = tally

    def background(self, tokens: int) -> None:
        self._add("tokens_predicted_total", tokens)
        self._add("n_decode_total", tokens)

    def render(self, running: int, waiting: int) -> web.Response:
        last = self.last
        gauges = (
            _Item("prompt_tokens_seconds", "Average prompt throughput in tokens/s.",
                  last.prompt_tokens / last.prompt_s if last.prompt_s else 0.0),
            _Item("predicted_tokens_seconds", "Average generation throughput in tokens/s.",
                  last.generated / last.predict_s if last.predict_s else 0.0),
            _Item("requests_processing", "Number of requests processing.", running),
            _Item("requests_deferred", "Number of requests deferred.", waiting),
            _Item("n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", 1.0),
        )
        lines: list[str] = []
        for kind, items in (("counter", self.counters.values()), ("gauge", gauges)):
            for item in items:
                lines += [
                    f"# HELP llamacpp:{item.name} {item.help}",
                    f"# TYPE llamacpp:{item.name} {kind}",
                    f"llamacpp:{item.name} {format_g6(item.value)}",
                ]
        return web.Response(
            text="\n".join(lines) + "\n", headers={"Content-Type": "text/plain; version=0.0.4"}
        )


def make_counters(profile: Profile, model: str) -> SimCounters:
    """The counters of the profile's engine."""
    kinds: dict[EngineName, Callable[[Profile, str], SimCounters]] = {
        "vllm": VllmCounters, "sglang": SglangCounters, "llamacpp": LlamacppCounters,
    }
    return kinds[profile.engine](profile, model)


def metrics_off(profile: Profile) -> web.Response:
    """What /metrics answers on a server started without metrics."""
    if profile.engine == "llamacpp":
        return json_response(LLAMACPP_METRICS_OFF, 501)
    return web.Response(status=404, text="404: Not Found")
