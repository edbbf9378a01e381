"""Servers that misbehave on purpose (issue 11, items 3 and 10): bodies without end, text that is
not valid Unicode, error events, bad Retry-After values, redirects to another server, comments
that keep a stalled stream alive. Each is a real aiohttp server on 127.0.0.1, no mocks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from tests.test_recorder_support import chat_prompt, fast_settings, serve, stream_one
from tokenreel.recorder.engines.engine_metrics import MetricsUnavailable, fetch_snapshot
from tokenreel.recorder.engines.fingerprint import fingerprint
from tokenreel.session.model import Arm, Run

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MiB = 1 << 20
HUGE = 64 * MiB  # what each endless body sends at most (then it holds the connection open)
PROMPT = chat_prompt("Say something.")


def sse(*events: dict[str, Any] | str) -> bytes:
    return b"".join(b"data: " + (e.encode() if isinstance(e, str) else orjson.dumps(e)) + b"\n\n" for e in events)


def delta(content: str, n: int | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}
    if n is not None:
        event["usage"] = {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": 3 + n}
    return event


FINISH = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
          "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}


class Endless:
    """A handler that answers `status` with a body of `HUGE` bytes in 1 MiB writes, counting
    what it managed to write before the client went away, then holds the connection open."""

    def __init__(self, status: int = 200, piece: bytes = b"x") -> None:
        self.status, self.piece, self.written = status, piece, 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=self.status)
        await response.prepare(request)
        block = (self.piece * (MiB // len(self.piece) + 1))[:MiB]
        try:
            while self.written < HUGE:
                await response.write(block)
                self.written += len(block)
            await asyncio.sleep(30)
        except (ConnectionError, asyncio.CancelledError):
            pass
        return response


async def stream_via(routes: dict[str, Handler], arm_changes: dict[str, Any] | None = None, **settings: Any) -> Run:
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_route("*", path, handler)
    async with serve(app) as root:
        arm = replace(Arm(id="x", label="x", base_url=f"{root}/v1", model="m"), **(arm_changes or {}))
        return await stream_one(arm, PROMPT, fast_settings(**settings))


def redirect_to(location: str) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(status=307, headers={"Location": location})

    return handler


def json_answer(data: Any) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(data)

    return handler


def streaming(body: bytes, pause_s: float = 0.0) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(body)
        if pause_s:
            await asyncio.sleep(pause_s)
        return response

    return handler


# --- item 3: every read from the network has a bound ---------------------------------------


def test_an_endless_http_error_body_is_read_only_up_to_its_bound() -> None:
    endless = Endless(status=500)
    started = time.monotonic()
    run = asyncio.run(stream_via({"/v1/chat/completions": endless.handle}))
    assert run.status == "failed" and run.http_status == 500
    assert "HTTP 500" in run.error and "error body is over the 64 KiB read limit" in run.error
    assert time.monotonic() - started < 3
    assert endless.written < HUGE // 2


def test_an_endless_metrics_body_is_refused_at_its_bound() -> None:
    endless = Endless(piece=b"# HELP x y\n")

    async def main() -> str:
        app = web.Application()
        app.router.add_get("/metrics", endless.handle)
        async with serve(app) as root, aiohttp.ClientSession() as http:
            with pytest.raises(MetricsUnavailable) as caught:
                await fetch_snapshot(http, f"{root}/metrics", timeout=4)
            return str(caught.value)

    message = asyncio.run(main())
    assert "over the 8 MiB read limit" in message and "\n" not in message
    assert endless.written < HUGE // 2


def test_an_endless_fingerprint_answer_is_refused_at_its_bound() -> None:
    endless = Endless(piece=b'{"a": 1}   ')

    async def main() -> dict[str, Any]:
        app = web.Application()
        app.router.add_get("/props", endless.handle)
        app.router.add_get("/version", json_answer({"version": "0.33.0"}))
        async with serve(app) as root, aiohttp.ClientSession() as http:
            return await fingerprint(http, Arm(id="x", label="x", base_url=f"{root}/v1", model="m"), timeout=4)

    fp = asyncio.run(main())
    assert fp["version"] == {"version": "0.33.0"}
    assert "props" not in fp and "over the 256 KiB read limit" in fp["unread"]["props"]
    assert endless.written < HUGE // 2


def test_an_sse_line_without_end_is_refused_at_its_bound() -> None:
    endless = Endless(piece=b"data: " + b"y" * 1000)
    run = asyncio.run(stream_via({"/v1/chat/completions": endless.handle}))
    assert run.status == "failed" and "one SSE line longer than 4 MiB" in run.error
    assert endless.written < HUGE // 2


# --- item 10: protocol edges -----------------------------------------------------------------


def test_invalid_text_is_replaced_and_noted_not_a_failed_run() -> None:
    body = (
        sse(delta("a", 1))
        + b'data: {"choices": [{"index": 0, "delta": {"content": "lone \\ud800"}}], "usage": {"completion_tokens": 2}}\n\n'
        + b'data: {"choices": [{"index": 0, "delta": {"content": "\\ud83d"}}], "usage": {"completion_tokens": 3}}\n\n'
        + b'data: {"choices": [{"index": 0, "delta": {"content": "\\ude00"}}], "usage": {"completion_tokens": 4}}\n\n'
        + b'data: {"choices": [{"index": 0, "delta": {"content": "bad \xff byte"}}], "usage": {"completion_tokens": 5}}\n\n'
        + sse(FINISH | {"usage": {"completion_tokens": 5}}, "[DONE]")
    )
    run = asyncio.run(stream_via({"/v1/chat/completions": streaming(body)}, max_tokens=5))
    assert run.status == "ok", run.error
    assert run.chunks.content[1:5] == ["lone \ufffd", "\ufffd", "\ufffd", "bad \ufffd byte"]
    assert "4 event(s) held invalid text" in run.error and "U+FFFD" in run.error
    assert sum(run.chunks.tokens) == 5


def test_an_sse_error_event_fails_the_run() -> None:
    body = sse(delta("a", 1)) + b'event: error\ndata: {"message": "engine died"}\n\n' + sse(delta("b", 2), FINISH, "[DONE]")
    run = asyncio.run(stream_via({"/v1/chat/completions": streaming(body)}, max_tokens=2))
    assert run.status == "failed"
    assert "the server sent an error event after 1 tokens: engine died" in run.error


def test_a_non_finite_retry_after_is_a_bad_value_not_an_immediate_retry() -> None:
    arrivals: list[float] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        arrivals.append(time.monotonic())
        if len(arrivals) == 1:
            return web.Response(status=429, headers={"Retry-After": "nan"}, text="slow down")
        return await streaming(sse(delta("a", 1), delta("b", 2), FINISH, "[DONE]"))(request)

    run = asyncio.run(stream_via({"/v1/chat/completions": handler}, max_tokens=2))
    assert run.status == "ok" and len(arrivals) == 2
    # The first back-off step (1 s): not at once, nor whenever a NaN timer happens to fire.
    assert 0.9 <= arrivals[1] - arrivals[0] < 3


def test_a_redirect_to_another_port_is_refused_one_within_the_server_is_followed() -> None:
    other_hits: list[str] = []

    async def other(request: web.Request) -> web.StreamResponse:
        other_hits.append(request.path)
        return await streaming(sse(delta("a", 1), delta("b", 2), FINISH, "[DONE]"))(request)

    async def main() -> tuple[Run, Run, str]:
        other_app = web.Application()
        other_app.router.add_route("*", "/{tail:.*}", other)
        async with serve(other_app) as other_root:
            away = await stream_via(
                {"/v1/chat/completions": redirect_to(f"{other_root}/v1/chat/completions")}, max_tokens=2
            )
            metrics_app = web.Application()
            metrics_app.router.add_get("/metrics", redirect_to(f"{other_root}/metrics"))
            async with serve(metrics_app) as root, aiohttp.ClientSession() as http:
                with pytest.raises(MetricsUnavailable) as caught:
                    await fetch_snapshot(http, f"{root}/metrics")
            same = await stream_via(
                {
                    "/v1/chat/completions": redirect_to("/v2/chat/completions"),
                    "/v2/chat/completions": streaming(sse(delta("a", 1), delta("b", 2), FINISH, "[DONE]")),
                },
                max_tokens=2,
            )
        return away, same, str(caught.value)

    away, same, metrics_error = asyncio.run(main())
    assert other_hits == []  # the other server was never measured
    assert away.status == "failed" and away.http_status == 307
    assert "redirects to another server (http://127.0.0.1:" in away.error and "fix base_url" in away.error
    assert "redirects to another server" in metrics_error
    assert same.status == "ok" and "".join(same.chunks.content) == "ab"


def test_sse_comments_do_not_keep_a_stalled_stream_alive() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(sse(delta("a", 1)))
        try:
            for _ in range(100):  # 10 s of keep-alive comments, no event
                await asyncio.sleep(0.1)
                await response.write(b": keep-alive\n\n")
        except ConnectionError:
            pass
        return response

    timeouts = {"connect": 5.0, "first_token": 5.0, "between_chunks": 0.5, "total": 8.0}
    started = time.monotonic()
    run = asyncio.run(stream_via({"/v1/chat/completions": handler}, timeouts=timeouts))
    assert run.status == "failed" and "stream stalled: no data for 0.5 s after 1 tokens" in run.error
    assert time.monotonic() - started < 3
