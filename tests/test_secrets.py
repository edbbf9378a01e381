"""No part of a key is archived, printed or drawn (issue 11, item 6): secrets are scrubbed before
any cut, in run errors, fingerprints (JSON keys too), streamed text and extra_body. Real aiohttp
servers on 127.0.0.1 play the hostile endpoint that echoes the key back."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from tests.test_hostile_servers import FINISH, delta, sse, streaming
from tests.test_recorder_support import chat_prompt, fast_settings, serve, stream_one
from tokenreel.recorder.config import load_config
from tokenreel.recorder.engines.fingerprint import fingerprint
from tokenreel.recorder.runner import new_session
from tokenreel.session import archive
from tokenreel.session.model import Arm, Run

KEY = "tr-live-a7f3c9e1b2d4f6a8c0e2x9"  # no word or prefix that looks secret: only its value tells
KEY_ENV = "TR_SECRETS_TEST_KEY"


def leaks(text: str, secret: str = KEY) -> bool:
    """True when any 8 consecutive characters of the secret appear (half a key is a leak too)."""
    return any(secret[i : i + 8] in text for i in range(len(secret) - 7))


@pytest.fixture(autouse=True)
def the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def stream_with_key(body: bytes | None = None, status: int = 200, text: str = "") -> Run:
    async def error(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": text}}, status=status)

    async def main() -> Run:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", streaming(body) if body is not None else error)
        async with serve(app) as root:
            arm = Arm(id="x", label="x", base_url=f"{root}/v1", model="m", api_key_env=KEY_ENV)
            return await stream_one(arm, chat_prompt(), fast_settings(max_tokens=2))

    return asyncio.run(main())


def test_a_key_across_the_cut_of_a_malformed_line_snippet_is_scrubbed_first() -> None:
    line = b"x" * 40 + KEY.encode() + b" and more that is not SSE at all"  # the 60-byte cut splits the key
    run = stream_with_key(sse(delta("a", 1)) + line + b"\n\n")
    assert run.status == "failed" and "malformed stream line" in run.error
    assert not leaks(run.error) and "***" in run.error


def test_a_key_across_the_cut_of_an_error_event_is_scrubbed_first() -> None:
    event = {"error": {"message": "e" * 280 + KEY + " tail"}}  # the 300-character cut splits the key
    run = stream_with_key(sse(delta("a", 1), event))
    assert run.status == "failed" and "error event after 1 tokens" in run.error
    assert not leaks(run.error) and "***" in run.error


def test_a_key_across_the_cut_of_an_http_error_body_is_scrubbed_first() -> None:
    run = stream_with_key(status=500, text="b" * 180 + KEY + " tail")  # the 200-character cut splits it
    assert run.status == "failed" and "HTTP 500" in run.error
    assert not leaks(run.error) and "***" in run.error


def test_a_key_echoed_in_streamed_text_is_masked_with_the_same_length() -> None:
    half = len(KEY) // 2
    finish = {**FINISH, "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}}  # the count streamed
    body = sse(delta("your key is ", 1), delta(KEY[:half], 2), delta(KEY[half:] + "!", 3), finish, "[DONE]")
    run = stream_with_key(body)
    assert run.status == "ok", run.error
    assert run.chunks.content[:3] == ["your key is ", "*" * half, "*" * (len(KEY) - half) + "!"]
    assert not leaks(orjson.dumps(run.chunks.content).decode())


def fingerprint_of(answer: dict[str, Any]) -> dict[str, Any]:
    async def version(request: web.Request) -> web.Response:
        return web.json_response(answer)

    async def main() -> dict[str, Any]:
        app = web.Application()
        app.router.add_get("/version", version)
        async with serve(app) as root, aiohttp.ClientSession() as http:
            arm = Arm(id="x", label="x", base_url=f"{root}/v1", model="m", api_key_env=KEY_ENV)
            return await fingerprint(http, arm)

    return asyncio.run(main())


def test_a_fingerprint_never_keeps_a_key_as_a_json_key() -> None:
    fp = fingerprint_of({"version": "0.33.0", "clients": {KEY: "admin"}})
    assert fp["version"] == {"version": "0.33.0", "clients": {}}
    assert not leaks(orjson.dumps(fp).decode())


def test_a_fingerprint_never_keeps_a_key_cut_in_half() -> None:
    fp = fingerprint_of({"version": "0.33.0", "note": "n" * 1990 + KEY})  # the 2000-character cut splits it
    assert fp["version"]["version"] == "0.33.0"
    assert not leaks(orjson.dumps(fp).decode())


def test_secret_extra_body_values_are_sent_but_never_archived(tmp_path: Path) -> None:
    bodies: list[dict[str, Any]] = []
    body_key, nested_key = "sk-extra-SECRET-5b9d2e7f1a3c", "client-SECRET-0e4f6a8b2c"

    async def handler(request: web.Request) -> web.StreamResponse:
        bodies.append(await request.json())
        return await streaming(sse(delta("a", 1), delta("b", 2), FINISH, "[DONE]"))(request)

    async def main() -> tuple[Arm, Run]:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        async with serve(app) as root:
            config = tmp_path / "c.toml"
            config.write_text(
                "[session]\nprompts = \"builtin:ladder4\"\nmax_tokens = 2\n[[arms]]\nid = \"a\"\n"
                f'base_url = "{root}/v1"\nmodel = "m"\n'
                f'extra_body = {{ api_key = "{body_key}", top_k = 1, proxy = {{ client_secret = "{nested_key}" }} }}\n',
                encoding="utf-8",
            )
            arm = load_config(config).arms[0]
            return arm, await stream_one(arm, chat_prompt(), fast_settings(max_tokens=2))

    arm, run = asyncio.run(main())
    assert run.status == "ok", run.error
    assert bodies[0]["api_key"] == body_key and bodies[0]["proxy"] == {"client_secret": nested_key}  # sent as given
    assert arm.extra_body == {"api_key": "***", "top_k": 1, "proxy": {"client_secret": "***"}}
    session = new_session("s", fast_settings(), [chat_prompt()], [arm])
    session.runs.append(run)
    path = tmp_path / "s.json"
    archive.save(session, path)
    saved = path.read_text(encoding="utf-8")
    assert not leaks(saved, body_key) and not leaks(saved, nested_key) and '"top_k":1' in saved.replace(" ", "")
