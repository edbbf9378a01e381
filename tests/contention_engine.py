"""A tiny engine for the contention and acceptance tests: real HTTP on loopback, no simulator.

It streams a chat completion one token per event (llama.cpp's shape) and serves /metrics from
counters the test controls: request-end counters (llama.cpp, SGLang's generation_tokens), a
per-step decode counter (SGLang's realtime_tokens), running/waiting gauges that can stay up
after our stream (another client in flight), values printed with six significant digits
(llama.cpp) or in full, and /metrics answering 501 (llama.cpp without --metrics).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

# Which metric names each engine prints (request-end generated counter, gauges, spec counters).
NAMES = {
    "llamacpp": {
        "running": "llamacpp:requests_processing",
        "waiting": "llamacpp:requests_deferred",
        "generated": "llamacpp:tokens_predicted_total",
        "drafts": "llamacpp:spec_decode_num_drafts_total",
        "draft_tokens": "llamacpp:spec_decode_num_draft_tokens_total",
        "accepted": "llamacpp:spec_decode_num_accepted_tokens_total",
    },
    "sglang": {
        "running": 'sglang:num_running_reqs{model_name="m"}',
        "waiting": 'sglang:num_queue_reqs{model_name="m"}',
        "generated": 'sglang:generation_tokens_total{model_name="m"}',
        "decode": 'sglang:realtime_tokens_total{model_name="m",mode="decode"}',
        "prefill": 'sglang:realtime_tokens_total{model_name="m",mode="prefill_compute"}',
    },
}


@dataclass
class FakeEngine:
    """State behind the fake endpoint; tests change it between or during runs."""

    engine: str = "llamacpp"
    six_digits: bool = True  # llama.cpp prints every value with %g (6 significant digits)
    metrics_status: int = 200  # 501: llama.cpp started without --metrics
    counters: dict[str, float] = field(default_factory=dict)
    running: float = 0.0
    waiting: float = 0.0
    linger_s: float = 0.0  # our own request still counted as running this long after [DONE]
    busy_after: bool = False  # another client's request starts during ours and is still running
    foreign_tokens: int = 0  # added to the request-end counter by another client at our request's end
    foreign_decode: int = 0  # added to the per-step decode counter during our run (SGLang)
    spec: dict[str, float] | None = None  # per request: drafts, draft_tokens, accepted
    timings: bool = False  # llama.cpp: draft_n / draft_n_accepted on the final chunk
    step_s: float = 0.002
    requests: int = 0

    def count(self, key: str, amount: float) -> None:
        self.counters[key] = self.counters.get(key, 0.0) + amount

    def metrics_text(self) -> str:
        names = NAMES[self.engine]
        values = {"running": self.running, "waiting": self.waiting, **self.counters}
        lines = []
        if self.engine == "llamacpp":
            lines.append(f"llamacpp:prompt_seconds_total {self._num(2903.6312)}")  # %g shows 6 digits here too
        for key, name in names.items():
            if key in values:
                lines.append(f"{name} {self._num(values[key])}")
        return "\n".join(lines) + "\n"

    def _num(self, value: float) -> str:
        return f"{value:g}" if self.six_digits else repr(float(value))


def make_app(state: FakeEngine) -> web.Application:
    """The fake endpoint: POST /v1/chat/completions (SSE), GET /metrics, GET /props for llama.cpp."""

    async def metrics(request: web.Request) -> web.Response:
        if state.metrics_status != 200:
            message = "This server does not support metrics endpoint. Start it with `--metrics`"
            return web.json_response({"error": {"code": state.metrics_status, "message": message}},
                                     status=state.metrics_status)
        return web.Response(text=state.metrics_text(), content_type="text/plain")

    async def props(request: web.Request) -> web.Response:
        if state.engine != "llamacpp":
            raise web.HTTPNotFound()
        return web.json_response({"total_slots": 1, "build_info": "fake"})

    async def chat(request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        n = int(body.get("max_tokens", 16))
        state.requests += 1
        state.running += 1
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)

        async def send(event: dict[str, Any]) -> None:
            await response.write(b"data: " + orjson.dumps(event) + b"\n\n")

        await send({"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]})
        if state.busy_after:
            state.running += 1  # another client's request arrives while ours streams
        for i in range(n):
            await send({"choices": [{"index": 0, "delta": {"content": f"t{i} "}, "finish_reason": None}]})
            if "decode" in NAMES[state.engine] and i:
                state.count("decode", 1)  # per step: every token after the first (prefill's)
            await asyncio.sleep(state.step_s)
        state.count("decode", state.foreign_decode)
        final: dict[str, Any] = {
            "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": n + 5},
        }
        if state.timings and state.spec:
            final["timings"] = {"predicted_n": n, "draft_n": state.spec["draft_tokens"],
                                "draft_n_accepted": state.spec["accepted"]}
        # Request-end counters: ours, the spec counters, and what another client finished meanwhile.
        state.count("generated", n + state.foreign_tokens)
        for key, amount in (state.spec or {}).items():
            if key in NAMES[state.engine]:
                state.count(key, amount)
        await send(final)
        await response.write(b"data: [DONE]\n\n")
        if state.linger_s:
            async def release() -> None:
                await asyncio.sleep(state.linger_s)
                state.running -= 1

            asyncio.get_running_loop().create_task(release())
        else:
            state.running -= 1
        return response

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/props", props)
    app.router.add_post("/v1/chat/completions", chat)
    return app


@contextmanager
def serving(state: FakeEngine) -> Iterator[str]:
    """Serve the fake engine from a thread (its own loop); yields the base URL, ".../v1"."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def start() -> None:
        runner = web.AppRunner(make_app(state), shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        holder["runner"], holder["port"] = runner, runner.addresses[0][1]

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield f"http://127.0.0.1:{holder['port']}/v1"
    finally:
        asyncio.run_coroutine_threadsafe(holder["runner"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
