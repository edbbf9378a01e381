"""One simulated engine endpoint: routes, timing, faults; the wire shape comes from its engine.

Timing: TTFT, then one step after another, each scheduled at an absolute target on the loop's
monotonic clock; `time_scale` multiplies those delays. A step lasts `Profile.step_s_at(b)`, b
the requests running as it begins (the profile's batching model; each request keeps its own
schedule, so b requests share the engine as its batch would), and drafts only while the
profile drafts at b. The engine (a producer task) runs on that schedule whatever the client
does; the writer sends what is ready. A shape that merges (vLLM) sends every step made
meanwhile as one chunk while earlier bytes still wait to be sent (the reader lags and the
kernel's buffers are full), so a slow reader sees merged steps, as with vLLM; a reader that
keeps up sees one chunk per step.

Counters move when the engine says (see counters.py); `running` counts requests from arrival
until their last token is generated, like the engines' schedulers, not until the HTTP response
is closed.

Every write of a streamed body goes through the request's `SentStream` (sent.py): stamped on
both sides and counted, for GET /sim/sent, without changing a byte or a moment of the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from time import perf_counter_ns
from typing import Any

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler

from tokenreel.simulator.control import SimState, control_refusal
from tokenreel.simulator.counters import Tally, make_counters, metrics_off
from tokenreel.simulator.generation import Step, Stepper, make_plan
from tokenreel.simulator.profiles import EngineName, FaultMode, Profile
from tokenreel.simulator.sent import SENT_LOG_LEN, SentStream
from tokenreel.simulator.shape import Context, Emitter, Engine
from tokenreel.simulator.shape_llamacpp import LlamacppEngine
from tokenreel.simulator.shape_sglang import SglangEngine
from tokenreel.simulator.shape_vllm import VllmEngine
from tokenreel.simulator.wire import DONE, SSE_HEADERS, BadRequest, hang_up, json_response, sleep_until

STALL_S = 3600.0  # unscaled: long enough for any client read timeout to fire first
FAULT_AFTER_CHUNKS = 3  # token steps sent before a mid-stream fault strikes
BUSY_PROFILE_GAUGES = (1, 2)  # extra (running, waiting) that a "busy" profile always shows
MISNAMED_MODEL = "simulated/other-model"  # what a profile with fault "404" serves instead
MID_STREAM_FAULTS: frozenset[FaultMode] = frozenset({"error_event", "drop", "stall", "malformed"})
SHUTDOWN_TIMEOUT_S = 0.25
REQUEST_LOG_LEN = 100
SEND_BUFFER_BYTES = 64 * 1024
class _OneLine(logging.Filter):
    """Whatever aiohttp logs about a request it could not handle (an unparsable request line, a
    bad Content-Length) is one line, never a traceback: the client sent it, not a bug here."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            problem = " ".join(str(record.exc_info[1]).split())
            record.msg, record.args = f"{record.getMessage()}: {type(record.exc_info[1]).__name__}: {problem}", None
            record.exc_info = record.exc_text = None
        return True


HTTP_LOG = logging.getLogger("tokenreel.simulator.http")
HTTP_LOG.addFilter(_OneLine())
STREAM_STARTED = web.RequestKey("tokenreel_stream_started", bool)  # response headers already sent
ENGINES: dict[EngineName, type[Engine]] = {"vllm": VllmEngine, "sglang": SglangEngine, "llamacpp": LlamacppEngine}


class SimServer:
    """One simulated engine serving one profile."""

    def __init__(self, profile: Profile, time_scale: float = 1.0) -> None:
        if time_scale < 0:
            raise ValueError("time_scale must be >= 0")
        self.profile = profile
        self.time_scale = time_scale
        self.served_model = MISNAMED_MODEL if profile.fault == "404" else profile.model
        self.engine = ENGINES[profile.engine](profile, self.served_model, time_scale)
        self.counters = make_counters(profile, self.served_model)
        self.state = SimState()
        self.running = 0  # requests the engine is working on (prefill or decode)
        self.waiting = 0  # requests queued for a free slot (llama.cpp's requests_deferred)
        slots = profile.slot_count
        self._slots = asyncio.Semaphore(slots) if slots is not None else None
        self.requests: deque[dict[str, Any]] = deque(maxlen=REQUEST_LOG_LEN)
        self.sent: deque[SentStream] = deque(maxlen=SENT_LOG_LEN)
        self._sequence = 0
        self._runner: web.AppRunner | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        app.add_routes(
            [
                web.post("/v1/chat/completions", self._chat),
                web.post("/v1/completions", self._completions),
                web.get("/v1/models", self._models),
                web.get("/version", self._version),
                web.get("/health", self._health),
                web.get("/metrics", self._metrics),
                web.get("/sim/state", self._get_state),
                web.post("/sim/state", self._post_state),
                web.get("/sim/requests", self._requests),
                web.get("/sim/sent", self._sent),
                *self.engine.routes(),
            ]
        )
        return app

    async def start(self, sock: socket.socket) -> None:
        """Serve on an already bound socket (so the caller knows the port before serving)."""
        self._runner = web.AppRunner(
            self.app(),
            handler_cancellation=True,  # a client hang-up aborts the request, as in the engines
            shutdown_timeout=SHUTDOWN_TIMEOUT_S,
            access_log=None,
            logger=HTTP_LOG,
        )
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """/sim needs the token (control.py); a malformed request is a 400 with one line, never
        a 500 with a traceback: whatever a handler could not make sense of before it started
        answering is the request's fault, named in the error's message."""
        if request.path.startswith("/sim/"):
            refused = control_refusal(request.method, request.headers)
            if refused is not None:
                return self.engine.error(refused[0], refused[1], "BadRequestError")
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except (BadRequest, orjson.JSONDecodeError, UnicodeDecodeError, ValueError, TypeError, KeyError,
                IndexError, AttributeError, OverflowError) as exc:
            if request.get(STREAM_STARTED):  # headers are gone: nothing but closing is left
                raise
            message = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            return self.engine.error(400, f"malformed request: {message}", "BadRequestError", getattr(exc, "param", None))

    # --- plain endpoints -------------------------------------------------------------------

    async def _models(self, request: web.Request) -> web.Response:
        if self.profile.fault == "401":
            return self.engine.unauthorized()
        return json_response(self.engine.models())

    async def _version(self, request: web.Request) -> web.Response:
        return json_response(self.engine.version_info())

    async def _health(self, request: web.Request) -> web.Response:
        if self.profile.engine == "llamacpp":
            return json_response({"status": "ok"})
        return web.Response(status=200)

    async def _metrics(self, request: web.Request) -> web.Response:
        if not self.profile.metrics:
            return metrics_off(self.profile)
        now = asyncio.get_running_loop().time()
        running, waiting = BUSY_PROFILE_GAUGES if self.profile.fault == "busy" else (0, 0)
        busy_running, busy_waiting = self.state.busy_gauges(now)
        self._flush_contention(now)
        return self.counters.render(self.running + running + busy_running, self.waiting + waiting + busy_waiting)

    def _flush_contention(self, now: float) -> None:
        """Credit the tokens 'someone else' generated since the last scrape."""
        whole = self.state.background_tokens(now)
        if whole:
            self.counters.background(whole)

    # --- test controls ---------------------------------------------------------------------

    async def _get_state(self, request: web.Request) -> web.Response:
        return json_response(self.state.describe(asyncio.get_running_loop().time()))

    async def _post_state(self, request: web.Request) -> web.Response:
        now = asyncio.get_running_loop().time()
        try:
            body = await request.json(loads=orjson.loads)
            if not isinstance(body, dict):
                raise BadRequest("body must be a JSON object")
            self.state.apply(body, now, self._flush_contention)
        except (BadRequest, orjson.JSONDecodeError, UnicodeDecodeError) as exc:
            return self.engine.error(400, " ".join(str(exc).split()), "BadRequestError", getattr(exc, "param", None))
        return json_response(self.state.describe(now))

    async def _requests(self, request: web.Request) -> web.Response:
        return json_response({"requests": list(self.requests)})

    async def _sent(self, request: web.Request) -> web.Response:
        return json_response({"requests": [stream.to_json() for stream in self.sent]})

    # --- generation ------------------------------------------------------------------------

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    def _gateway_fault(self, fault: FaultMode | None) -> web.Response | None:
        """Failures before the engine sees the request: API key, rate limit, overload, crash."""
        if fault == "401":
            return self.engine.unauthorized()
        if fault == "429":
            return self.engine.error(429, "Too many requests, retry later.", "RateLimitError", None, {"Retry-After": "1"})
        if fault == "503":  # an overloaded gateway or engine turning requests away
            return self.engine.error(503, "Service unavailable: too many requests in flight.", "ServiceUnavailableError")
        if fault == "500":
            return self.engine.error(500, "Simulated internal server error.", "InternalServerError")
        return None

    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        start = asyncio.get_running_loop().time()
        try:
            body = await request.json(loads=orjson.loads)
        except (orjson.JSONDecodeError, UnicodeDecodeError) as exc:
            return self.engine.error(400, f"invalid JSON body: {exc}", "BadRequestError")
        if not isinstance(body, dict):
            return self.engine.error(400, "body must be a JSON object", "BadRequestError")
        self.requests.append(body)
        fault = self.state.take_fault() or self.profile.fault
        if refused := self._gateway_fault(fault):
            return refused
        if body.get("stream_options") and not body.get("stream") and self.profile.engine == "vllm":
            message = "Stream options can only be defined when `stream=True`."
            return self.engine.error(400, message, "BadRequestError", "stream_options")
        model = body.get("model")
        if fault == "404" or (self.engine.checks_model and model is not None and model != self.served_model):
            return self.engine.error(404, f"The model `{model}` does not exist.", "NotFoundError", "model")
        try:
            plan = make_plan(self.profile, body, chat, fault)
        except BadRequest as exc:
            return self.engine.error(400, str(exc), "BadRequestError", exc.param)
        self._sequence += 1
        request_id = f"sim-{self.profile.id}-{self._sequence:08d}"  # the profile's id: unique across a cluster
        ctx = Context(self.profile, self.served_model, body, chat, plan, request_id, t_start=start,
                      cached_prompt=self.engine.prompt_cache(body, plan.prompt_tokens))
        emitter = self.engine.emitter(ctx)
        if body.get("stream"):
            return await self._stream(request, ctx, emitter, fault)
        return await self._respond(request, ctx, emitter, fault)

    async def _engine(self, ctx: Context, fault: FaultMode | None, tally: Tally) -> AsyncIterator[Step]:
        """Yield each step at its scheduled time, counting it in /metrics; finish the tally.

        Each decode step's length and drafting follow the batch when it begins (the requests
        running then, this one included: `Profile.step_s_at`); its end is an absolute target
        on the loop clock, so a late wake-up is not carried into the next step."""
        async with self._slot(ctx.t_start) as begun:
            async with contextlib.aclosing(self._steps(ctx, fault, tally, begun)) as steps:
                async for step in steps:
                    yield step

    @contextlib.asynccontextmanager
    async def _slot(self, arrived: float) -> AsyncIterator[float]:
        """When the request starts: at once, or where the engine has a fixed number of slots
        (llama.cpp) and all are busy, once one ends (it waits, counted as waiting, and its TTFT
        includes the wait, as on the engine)."""
        if self._slots is None:
            yield arrived
            return
        queued = self._slots.locked()
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        try:
            yield asyncio.get_running_loop().time() if queued else arrived
        finally:
            self._slots.release()

    async def _steps(self, ctx: Context, fault: FaultMode | None, tally: Tally, begun: float) -> AsyncGenerator[Step, None]:
        """The request's steps once it runs (`begun`: arrival, or when its slot came free)."""
        plan, start, profile, scale = ctx.plan, ctx.t_start, self.profile, self.time_scale
        target = begun + scale * profile.ttft_s
        counters, k = self.counters, profile.spec_k
        strike = min(FAULT_AFTER_CHUNKS, len(plan.steps) - 1)  # the planned steps: never more than made
        stepper = Stepper(plan)
        self.running += 1
        tally.prompt_tokens = plan.prompt_tokens
        try:
            while not stepper.done:
                drafting = False
                if stepper.index:
                    batch = self.running
                    drafting = profile.drafts_at(batch)
                    target += scale * profile.step_s_at(batch)
                await sleep_until(target)
                if fault == "stall" and stepper.index == strike:
                    await asyncio.sleep(STALL_S)
                step, accepted = stepper.next(drafting)
                ctx.drafted = stepper.drafted
                loop_now = asyncio.get_running_loop().time()
                if step.index == 0:
                    counters.prefill(plan.prompt_tokens)
                    tally.prompt_s = loop_now - start
                else:
                    tally.drafts += accepted is not None
                    tally.draft_tokens += k if accepted is not None else 0
                    tally.accepted += accepted or 0
                    tally.predict_s = loop_now - start - tally.prompt_s
                counters.step(len(step.tokens), k, accepted or 0, accepted is not None)
                tally.generated += len(step.tokens)
                yield step
        finally:
            self.running -= 1
            counters.finish(tally)

    async def _stream(self, request: web.Request, ctx: Context, emitter: Emitter, fault: FaultMode | None) -> web.StreamResponse:
        sock = request.transport.get_extra_info("socket") if request.transport is not None else None
        sent = SentStream(ctx.request_id, emitter.response_id, ctx.plan.prompt_tokens, perf_counter_ns(), sock=sock)
        self.sent.append(sent)
        if emitter.merges_steps:
            _small_send_buffer(request)
        response = web.StreamResponse(headers=SSE_HEADERS)
        request[STREAM_STARTED] = True
        await response.prepare(request)  # headers leave at once, like the engines: they are not TTFT
        strike = min(FAULT_AFTER_CHUNKS, len(ctx.plan.steps) - 1) if fault in MID_STREAM_FAULTS else None
        ready: list[Step] = []
        wake = asyncio.Event()
        loop = asyncio.get_running_loop()

        async def produce() -> None:
            async for step in self._engine(ctx, fault, Tally()):
                ready.append(step)
                wake.set()
            wake.set()

        producer = asyncio.create_task(produce())
        try:
            finished = False
            while not finished:
                if not ready:
                    if producer.done():
                        producer.result()  # re-raise what stopped the engine
                        break
                    wake.clear()
                    await wake.wait()
                    continue
                batch = ready[:] if emitter.merges_steps and _lagging(request) else ready[:1]
                if strike is not None and batch[0].index <= strike <= batch[-1].index:
                    before = [s for s in batch if s.index < strike]
                    if before:
                        await self._write(sent, response, emitter, ctx, before, False, loop)
                    del ready[: len(before)]
                    if fault == "error_event":
                        await sent.write(response, emitter.error_event() + DONE)
                        return response
                    if fault == "drop":
                        hang_up(request)
                        return response
                    if fault == "malformed":
                        await sent.write(response, b'data: {"choices": [\n\n')
                    strike = None
                    continue
                del ready[: len(batch)]
                finished = batch[-1].final
                await self._write(sent, response, emitter, ctx, batch, finished, loop)
            ctx.t_last = ctx.t_last or loop.time()
            await sent.write(response, emitter.end())
            if fault != "no_done":
                await sent.write(response, DONE)
            await sent.write_eof(response)
            return response
        finally:
            if not producer.done():
                producer.cancel()
                await asyncio.gather(producer, return_exceptions=True)

    @staticmethod
    async def _write(sent: SentStream, response: web.StreamResponse, emitter: Emitter, ctx: Context,
                     batch: list[Step], last: bool, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        if ctx.t_first is None:
            ctx.t_first = now
        if last:
            ctx.t_last = now
        await sent.write(response, emitter.steps(batch, last), sum(len(step.tokens) for step in batch))

    async def _respond(self, request: web.Request, ctx: Context, emitter: Emitter, fault: FaultMode | None) -> web.StreamResponse:
        """A plain JSON completion after the whole generation time (stream: false)."""
        if fault == "drop":
            hang_up(request)
            return web.Response()
        if fault == "stall":
            await asyncio.sleep(STALL_S)
        loop = asyncio.get_running_loop()
        async for _ in self._engine(ctx, None, Tally()):
            now = loop.time()
            ctx.t_first = ctx.t_first if ctx.t_first is not None else now
            ctx.t_last = now
        if fault == "error_event":
            return self.engine.error(500, "Simulated engine failure.", "InternalServerError")
        if fault == "malformed":
            return web.Response(body=b'{"choices": [', content_type="application/json")
        return json_response(emitter.complete())


def _lagging(request: web.Request) -> bool:
    """The client reads slower than we write: bytes wait in our buffer (the kernel's is full)."""
    transport = request.transport
    return transport is not None and transport.get_write_buffer_size() > 0


def _small_send_buffer(request: web.Request) -> None:
    """Cap the kernel's send buffer (loopback autotunes it to megabytes), so a lagging reader
    backs writes up into our buffer after ~SEND_BUFFER_BYTES, as over a real network."""
    sock = request.transport.get_extra_info("socket") if request.transport is not None else None
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
