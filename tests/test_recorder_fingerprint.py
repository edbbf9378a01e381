"""Fingerprints keep what each engine says about itself and drop anything secret-looking."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tokenreel.recorder.fingerprint import fingerprint
from tests.test_recorder_support import serve
from tokenreel.archive import Arm

KEY = "sk-fingerprint-SENTINEL"


def test_fingerprint_keeps_answers_and_drops_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TR_FP_KEY", KEY)
    seen_auth: list[str | None] = []

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"version": "0.33.0"})

    async def models(request: web.Request) -> web.Response:
        seen_auth.append(request.headers.get("Authorization"))
        cards = [{"id": "other", "max_model_len": 4096}, {"id": "m", "max_model_len": 32768}]
        return web.json_response({"object": "list", "data": cards})

    async def server_info(request: web.Request) -> web.Response:
        info: dict[str, Any] = {
            "tp_size": 2,
            "api_key": "x",
            "hf_token": "hf_abc",
            "tokenizer_path": "Qwen/Qwen3.8-27B",
            "served": {"admin_api_key": "y", "note": KEY, "auth_header": "z"},
            "launch": ["--port", "8000", "sk-live-abc"],
        }
        return web.json_response(info)

    async def props(request: web.Request) -> web.Response:
        return web.Response(text="not json")

    async def main() -> dict[str, Any]:
        app = web.Application()
        app.router.add_get("/version", version)
        app.router.add_get("/v1/models", models)
        app.router.add_get("/server_info", server_info)
        app.router.add_get("/props", props)
        async with serve(app) as root:
            arm = Arm(id="a", label="a", base_url=f"{root}/v1", model="m", api_key_env="TR_FP_KEY")
            async with aiohttp.ClientSession() as http:
                return await fingerprint(http, arm)

    fp = asyncio.run(main())
    assert seen_auth == [f"Bearer {KEY}"]
    assert fp["version"] == {"version": "0.33.0"}
    assert fp["max_model_len"] == 32768  # the arm's own model, not the first card
    assert fp["server_info"] == {
        "tp_size": 2, "tokenizer_path": "Qwen/Qwen3.8-27B", "served": {}, "launch": ["--port", "8000"]
    }
    assert "props" not in fp and KEY not in repr(fp)


def test_unreachable_endpoints_give_an_empty_fingerprint() -> None:
    async def main() -> dict[str, Any]:
        async with aiohttp.ClientSession() as http:
            arm = Arm(id="a", label="a", base_url="http://127.0.0.1:9/v1", model="m")
            return await fingerprint(http, arm, timeout=1)

    assert asyncio.run(main()) == {}
