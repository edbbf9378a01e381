"""Streaming one request against the simulated vLLM: token counts, TTFT, forced length, faults."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from aiohttp import web

import tokenreel.recorder.client.sse_client as sse_client
from tests.test_recorder_support import (
    arm_for,
    chat_prompt,
    fast_settings,
    seed,
    sent_bodies,
    serve,
    set_state,
    stream_one,
)
from tokenreel.analysis.metrics import first_token_index, run_metrics
from tokenreel.session.model import Arm, Run, Settings
from tokenreel.simulator.answer_text import prompt_digest, reply_for
from tokenreel.simulator.profiles import FAULTS
from tokenreel.simulator.server import SimCluster, plan_steps


def arm_for_url(root: str) -> Arm:
    """An arm for a small test server that is not the simulator."""
    return Arm(id="x", label="x", base_url=f"{root}/v1", model="m")


def stream_from(handler: Any, settings: Settings | None = None, **arm_changes: Any) -> Run:
    """One request streamed from a small aiohttp server that answers chat completions with handler."""

    async def main() -> Run:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        async with serve(app) as root:
            arm = replace(arm_for_url(root), **arm_changes)
            return await stream_one(arm, CODE, settings or fast_settings())

    return asyncio.run(main())


CODE = chat_prompt("Implement a Python function that merges overlapping intervals, with type hints.")


def planned_chunk_tokens(cluster: SimCluster, profile_id: str, text: str, n: int) -> list[int]:
    """Tokens per token chunk that the simulator will send for this prompt."""
    profile = next(p for p in cluster.profiles if p.id == profile_id)
    sizes, _ = plan_steps(profile, reply_for(text).category, n, prompt_digest(text))
    return sizes


def record_one(cluster: SimCluster, profile_id: str, max_tokens: int = 200, **arm_changes: Any) -> Run:
    arm = arm_for(cluster, profile_id, **arm_changes)
    return asyncio.run(stream_one(arm, CODE, fast_settings(max_tokens=max_tokens)))


STALL_S = 0.4


def test_multi_token_chunks_are_counted_from_continuous_usage(sim: SimCluster) -> None:
    run = record_one(sim, "nvfp4-dflash2")
    assert (run.status, run.error, run.http_status, run.finish_reason) == ("ok", "", 200, "length")
    assert run.token_source == "usage_delta"
    sizes = planned_chunk_tokens(sim, "nvfp4-dflash2", CODE.messages[0]["content"], 200)
    assert max(sizes) > 1
    assert run.chunks.tokens == [0, *sizes, 0]  # role chunk, one chunk per engine step, usage tail
    assert sum(run.chunks.tokens) == run.usage["completion_tokens"] == 200
    assert run.chunks.t_ns == sorted(run.chunks.t_ns) and run.chunks.t_ns[0] > 0


@pytest.mark.parametrize(
    ("extra_body", "source"),
    [
        ({"stream_options": {"include_usage": True}, "return_token_ids": True}, "token_ids"),
        ({"stream_options": {"include_usage": True}, "logprobs": True}, "logprobs"),
    ],
)
def test_token_ids_and_logprobs_count_multi_token_chunks(
    sim: SimCluster, extra_body: dict[str, Any], source: str
) -> None:
    run = record_one(sim, "nvfp4-dflash2", extra_body=extra_body)
    assert run.status == "ok" and run.token_source == source
    sizes = planned_chunk_tokens(sim, "nvfp4-dflash2", CODE.messages[0]["content"], 200)
    assert run.chunks.tokens == [0, *sizes, 0]


def test_without_any_token_source_events_are_reconciled_with_usage(sim: SimCluster) -> None:
    run = record_one(sim, "nvfp4-dflash2", extra_body={"stream_options": {"include_usage": True}})
    assert run.status == "ok" and run.token_source == "per_event"
    assert sum(run.chunks.tokens) == run.usage["completion_tokens"] == 200
    assert run.error == ""


def test_role_chunk_is_kept_but_not_taken_as_first_token(sim: SimCluster) -> None:
    run = record_one(sim, "bf16", max_tokens=32)
    assert run.chunks.content[0] == "" and run.chunks.tokens[0] == 0
    assert first_token_index(run.chunks) == 1
    assert run_metrics(run).ttft_s == run.chunks.t_ns[1] / 1e9


def test_request_body_and_completions_api(sim: SimCluster) -> None:
    extra = {"top_p": 1.0, "chat_template_kwargs": {"enable_thinking": False}}
    record_one(sim, "bf16", max_tokens=16, extra_body=extra)
    body = sent_bodies(sim, "bf16")[-1]
    assert body["model"] == "Qwen/Qwen3.8-27B" and body["messages"] == CODE.messages
    assert (body["max_tokens"], body["temperature"], body["ignore_eos"], body["stream"]) == (16, 0.0, True, True)
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert body["top_p"] == 1.0 and body["chat_template_kwargs"] == {"enable_thinking": False}

    run = record_one(sim, "bf16", max_tokens=16, api="completions")
    body = sent_bodies(sim, "bf16")[-1]
    assert "messages" not in body and body["prompt"] == CODE.messages[0]["content"]
    assert run.status == "ok" and first_token_index(run.chunks) == 0  # completions: no role chunk
    assert sum(run.chunks.tokens) == 16


def test_forced_length_is_checked_against_usage(make_sim: Any) -> None:
    cluster = make_sim([seed("bf16")])
    assert record_one(cluster, "bf16", max_tokens=96).error == ""
    set_state(cluster, "bf16", fault={"mode": "early_stop", "count": 1})
    run = record_one(cluster, "bf16", max_tokens=96)
    assert run.status == "ok" and run.usage["completion_tokens"] == 32
    assert run.error.startswith("forced length not met: 32 of 96 tokens (finish_reason stop); not like-for-like")


# fault -> (substring of the one-line error, HTTP status, chunks kept)
EXPECTED = {
    "refuse": ("cannot connect to", None, False),
    "401": ("HTTP 401 from", 401, False),
    "404": ("HTTP 404 from", 404, False),
    "429": ("HTTP 429 from", 429, False),
    "500": ("HTTP 500 from", 500, False),
    "503": ("HTTP 503 from", 503, False),
    "error_event": ("the server sent an error event after 3 tokens: Simulated engine failure", 200, True),
    "drop": ("connection dropped after 3 tokens", 200, True),
    "stall": (f"stream stalled: no data for {STALL_S} s after 3 tokens", 200, True),
    "malformed": ("malformed JSON in stream", 200, True),
    "no_done": ("stream ended without [DONE] after 96 tokens", 200, True),
}


@pytest.mark.parametrize("fault", sorted(EXPECTED))
def test_each_fault_is_a_failed_run_with_one_clear_line(
    make_sim: Any, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    monkeypatch.setattr(sse_client, "RETRY_AFTER_CAP_S", 0.01)  # the simulator asks for 1 s
    profile = seed("bf16", fault="refuse") if fault == "refuse" else seed("bf16")
    cluster = make_sim([profile])
    if fault != "refuse":
        set_state(cluster, "bf16", fault={"mode": fault, "count": 10})
    timeouts = {"between_chunks": STALL_S} if fault == "stall" else {}
    run = record_one(cluster, "bf16", max_tokens=96, timeouts=timeouts)
    text, status, kept = EXPECTED[fault]
    assert run.status == "failed"
    assert text in run.error and "\n" not in run.error and "Traceback" not in run.error
    assert "; " in run.error  # what happened; what to do
    assert run.http_status == status
    assert (len(run.chunks) > 0) == kept
    if kept:
        assert sum(run.chunks.tokens) >= 3 and any(run.chunks.content)


def test_fault_list_is_covered() -> None:
    assert set(FAULTS) - set(EXPECTED) == {"early_stop", "busy"}  # tested with the forced length and the gate


def test_a_single_429_is_retried(make_sim: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sse_client, "RETRY_AFTER_CAP_S", 0.01)
    cluster = make_sim([seed("bf16")])
    set_state(cluster, "bf16", fault={"mode": "429", "count": 2})
    run = record_one(cluster, "bf16", max_tokens=16)
    assert (run.status, run.http_status, sum(run.chunks.tokens)) == ("ok", 200, 16)
    assert len(sent_bodies(cluster, "bf16")) == 3


def test_retry_after_is_bounded() -> None:
    assert sse_client._retry_after_s("5", 0) == 5.0
    assert sse_client._retry_after_s("86400", 0) == sse_client.RETRY_AFTER_CAP_S
    assert sse_client._retry_after_s("", 2) == 4.0
    assert sse_client._retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT", 0) == 0.0


SENTINEL = "sk-tokenreel-SENTINEL-4f1c9"


def test_api_key_is_sent_but_never_in_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TR_TEST_KEY", SENTINEL)
    seen: list[str] = []

    async def echo_401(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.json_response({"error": {"message": f"bad key {request.headers.get('Authorization')}"}}, status=401)

    run = stream_from(echo_401, api_key_env="TR_TEST_KEY")
    assert seen == [f"Bearer {SENTINEL}"]
    assert run.status == "failed" and SENTINEL not in run.error and "Bearer ***" in run.error
    assert "set TR_TEST_KEY to a valid key" in run.error


def test_missing_api_key_variable_fails_the_run_by_name(sim: SimCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TR_UNSET_KEY", raising=False)
    run = record_one(sim, "bf16", api_key_env="TR_UNSET_KEY")
    assert run.status == "failed"
    assert run.error.startswith("environment variable TR_UNSET_KEY (api_key_env of arm 'bf16') is not set")


def test_first_token_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    async def silent(request: web.Request) -> web.Response:
        await asyncio.sleep(10)
        return web.Response()

    run = stream_from(silent, fast_settings(timeouts={"first_token": 0.2}))
    assert run.status == "failed" and run.error.startswith("no first token within 0.2 s;")


@pytest.mark.parametrize("after_done", ["hang", "drop"])
def test_a_run_is_complete_at_done_even_if_the_body_never_ends(
    monkeypatch: pytest.MonkeyPatch, after_done: str
) -> None:
    monkeypatch.setattr(sse_client, "DRAIN_S", 0.1)
    event = b'data: {"choices": [{"delta": {"content": "hi"}}], "usage": {"completion_tokens": 1}}\n\n'

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(event + b"data: [DONE]\n\n")
        if after_done == "drop" and request.transport is not None:
            request.transport.abort()
        else:
            await asyncio.sleep(10)
        return response

    run = stream_from(handler, fast_settings(max_tokens=1))
    assert (run.status, run.error, run.chunks.content) == ("ok", "", ["hi"])


def test_events_completed_by_one_read_share_its_stamp() -> None:
    two = b'data: {"choices": [{"delta": {"content": "a"}}]}\n\ndata: {"choices": [{"delta": {"content": "b"}}]}\n\n'

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(two)  # one write, one read: no made-up gap between a and b
        await asyncio.sleep(0.05)
        await response.write(b'data: {"choices": [{"delta": {"content": "c"}}]}\n\ndata: [DONE]\n\n')
        return response

    run = stream_from(handler, fast_settings(max_tokens=3))
    assert run.status == "ok" and run.chunks.content == ["a", "b", "c"]
    t = run.chunks.t_ns
    assert t[0] == t[1] and t[2] - t[1] >= 40_000_000


@pytest.mark.parametrize("drops", [1, 2])
def test_a_connection_dropped_before_any_response_is_sent_once_more(drops: int) -> None:
    """A server that hangs up before answering (llama-server closing a kept-alive connection it had
    just dropped as idle, seen between runs on a busy CI box): the request never ran, so it is sent
    once more on a new connection; a second hang-up fails the run in one line."""
    event = b'data: {"choices": [{"delta": {"content": "hi"}}], "usage": {"completion_tokens": 1}}\n\n'
    calls: list[int] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        calls.append(1)
        if len(calls) <= drops and request.transport is not None:
            request.transport.abort()
            return web.Response()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(event + b"data: [DONE]\n\n")
        return response

    run = stream_from(handler, fast_settings(max_tokens=1))
    assert len(calls) == 2
    if drops == 1:
        assert (run.status, run.error, run.chunks.content) == ("ok", "", ["hi"])
    else:
        assert run.status == "failed" and run.error == (
            "connection dropped before any response (Server disconnected), twice; check the server log")
