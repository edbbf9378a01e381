"""Fingerprints keep what each engine says about itself and drop anything secret-looking."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.test_recorder_support import serve
from tokenreel.recorder.engines.fingerprint import fingerprint, scrubbed_argv
from tokenreel.session.model import Arm

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


def _fingerprint_of(app: web.Application, **arm_changes: Any) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with serve(app) as root:
            arm = Arm(id="a", label="a", base_url=f"{root}/v1", model="qwen", **arm_changes)
            async with aiohttp.ClientSession() as http:
                return await fingerprint(http, arm)

    return asyncio.run(main())


def test_llamacpp_context_special_tokens_and_draft_settings_are_kept() -> None:
    """The Q4_0 arm and the Q4_0 + draft arm must differ; meta.n_ctx is the context length;
    bos_token/eos_token are vocabulary, not secrets."""
    from tests.test_token_counting import llamacpp_app

    plain, draft = _fingerprint_of(llamacpp_app([])), _fingerprint_of(llamacpp_app([], draft=True))
    assert plain["max_model_len"] == 4096
    assert plain["props"]["bos_token"] == "<|endoftext|>" and plain["props"]["eos_token"] == "<|im_end|>"
    assert plain["summary"]["engine"] == "llamacpp" and plain["summary"]["speculative"] == "off"
    assert draft["summary"]["speculative"] == "draft model, n_max 16, n_min 0, p_min 0.75"
    assert plain["summary"]["quantization"] == "gguf ftype Q4_0" and plain["summary"]["version"] == "b7100-abc"


def test_sglang_launch_command_keeps_everything_but_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    launch = "python3 -m sglang.launch_server --model-path qwen --api-key sglang-LAUNCH-secret --port 30000"

    async def server_info(request: web.Request) -> web.Response:
        return web.json_response({
            "model_path": "qwen", "launch_command": launch, "context_length": 8192, "quantization": "fp8",
            "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_num_draft_tokens": 4,
            "argv": ["--hf-token", "hf-LAUNCH-secret", "--port", "30000"], "internal_states": [{}], "version": "0.5.23",
        })

    app = web.Application()
    app.router.add_get("/server_info", server_info)
    fp = _fingerprint_of(app)
    assert "LAUNCH-secret" not in repr(fp)
    assert fp["server_info"]["launch_command"] == launch.replace("sglang-LAUNCH-secret", "***")
    assert fp["server_info"]["argv"] == ["--hf-token", "***", "--port", "30000"]
    assert fp["max_model_len"] == 8192
    assert fp["summary"] == {
        "engine": "sglang", "version": "0.5.23", "max_model_len": "8192", "quantization": "fp8",
        "speculative": "EAGLE3, steps 3, draft tokens 4",
    }


def test_a_launch_commands_environment_is_kept_unless_secret() -> None:
    """HF_HUB_OFFLINE=1 is what ran and stays; a secret name's value (HF_TOKEN=...) and a value
    that looks like a key are masked."""
    argv = ["env", "HF_HUB_OFFLINE=1", "VLLM_CPU_KVCACHE_SPACE=2", "HF_TOKEN=plain-secret-42",
            "OTHER=hf_abcdefghijklmnopqrstuvwxyz0123", "vllm", "serve", "tiny", "--api-key", "sk-launch-secret"]
    kept = scrubbed_argv(argv)
    assert kept[:5] == ["env", "HF_HUB_OFFLINE=1", "VLLM_CPU_KVCACHE_SPACE=2", "HF_TOKEN=***", "OTHER=***"]
    assert "hf_abcdefghijklmnopqrstuvwxyz0123" not in repr(kept) and "sk-launch-secret" not in repr(kept)
    assert kept[-5:] == ["vllm", "serve", "tiny", "--api-key", "***"]
