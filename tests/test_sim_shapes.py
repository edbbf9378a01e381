"""The three engine shapes of the simulator (vLLM 0.33, SGLang 0.5, llama.cpp) over real HTTP.

Each test pins one observable fact of an engine that a recorder depends on; the facts come
from the engines' sources (see the shape modules' docstrings).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tokenreel.simulator.answer_text import reply_for
from tokenreel.simulator.generation import spec_stats
from tokenreel.simulator.profiles import SEED_LADDER, Profile
from tokenreel.simulator.server import SimCluster

BF16, _, DFLASH = SEED_LADDER
ENGINES = ("vllm", "sglang", "llamacpp")
# Its prose reply has " café" as token 39: token 38 ends mid-character on a byte-level vocabulary.
BREAD = "Write an essay on bread"
HELD = 38
FULL_USAGE = {"stream_options": {"include_usage": True, "continuous_usage_stats": True}}
HTTP = httpx.Client(timeout=10.0)


@pytest.fixture(scope="module", autouse=True)
def _close_http() -> Iterator[None]:
    yield
    HTTP.close()


def shaped(profile: Profile, engine: str, **changes: Any) -> Profile:
    return replace(profile, engine=engine, **changes)


def events(cluster: SimCluster, pid: str, prompt: str = BREAD, chat: bool = True, **body: Any) -> list[Any]:
    """Every SSE data payload of a streamed request (parsed JSON; "[DONE]" kept as a string)."""
    profile = next(p for p in cluster.profiles if p.id == pid)
    request: dict[str, Any] = {"model": profile.model, "stream": True, **body}
    if chat:
        request["messages"] = [{"role": "user", "content": prompt}]
    else:
        request["prompt"] = prompt
    path = "/chat/completions" if chat else "/completions"
    with HTTP.stream("POST", cluster.base_url(pid) + path, json=request) as r:
        assert r.status_code == 200, r.read()
        out: list[Any] = []
        for line in r.iter_lines():
            if line:
                assert line.startswith("data: "), line
                payload = line[6:]
                out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def samples(cluster: SimCluster, pid: str) -> dict[str, float]:
    """/metrics samples summed over labels (a `mode` label is kept in the name)."""
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(HTTP.get(cluster.metrics_url(pid)).text):
        for s in family.samples:
            name = s.name + (f"[{s.labels['mode']}]" if "mode" in s.labels else "")
            totals[name] = totals.get(name, 0.0) + s.value
    return totals


def delta_of(event: dict[str, Any]) -> dict[str, Any]:
    return event["choices"][0]["delta"] if event.get("choices") else {}


# --- vLLM 0.33 -----------------------------------------------------------------------------


def test_vllm_empty_text_chunk_carries_the_token_whose_text_is_held_back(make_sim: Any) -> None:
    cluster = make_sim([shaped(BF16, "vllm")])
    got = events(cluster, "bf16", max_tokens=45, ignore_eos=True, return_token_ids=True, **FULL_USAGE)
    role, chunks, final = got[0], got[1:-2], got[-2]
    assert delta_of(role) == {"role": "assistant", "content": ""} and got[-1] == "[DONE]"
    # vLLM stamps its fingerprint (version and config hash) on the final chunk only
    assert [e for e in got[:-1] if "system_fingerprint" in e] == [final] and final["system_fingerprint"].startswith("vllm-")
    assert len(chunks) == 45 and all(len(c["choices"][0]["token_ids"]) == 1 for c in chunks)
    tokens = reply_for(BREAD).tokens(45)
    assert delta_of(chunks[HELD]) == {"content": ""}  # the token is counted, its text waits
    assert chunks[HELD]["usage"]["completion_tokens"] - chunks[HELD - 1]["usage"]["completion_tokens"] == 1
    assert tokens[HELD + 1] == " café" and delta_of(chunks[HELD + 1])["content"] == tokens[HELD] + " café"
    assert "".join(delta_of(c)["content"] for c in chunks) == "".join(tokens)
    assert final["choices"] == [] and final["usage"]["completion_tokens"] == 45 and "metrics" not in final


def test_vllm_reasoning_model_opens_with_an_empty_chunk_then_delta_reasoning(make_sim: Any) -> None:
    cluster = make_sim([shaped(BF16, "vllm", reasoning_tokens=6)])
    got = events(cluster, "bf16", max_tokens=12, ignore_eos=True, **FULL_USAGE)
    chunks = got[1:-2]
    tokens = reply_for(BREAD).tokens(12)
    assert delta_of(chunks[0]) == {"content": ""} and chunks[0]["usage"]["completion_tokens"] == 1
    assert [delta_of(c) for c in chunks[1:6]] == [{"reasoning": t} for t in tokens[1:6]]
    assert [delta_of(c) for c in chunks[6:]] == [{"content": t} for t in tokens[6:]]


def test_vllm_usage_chunk_carries_per_request_metrics_when_enabled(make_sim: Any) -> None:
    cluster = make_sim([shaped(DFLASH, "vllm", request_metrics=True), shaped(BF16, "vllm", request_metrics=True)])
    before = samples(cluster, "nvfp4-dflash2")
    got = events(cluster, "nvfp4-dflash2", prompt="Implement a Python function", max_tokens=300, ignore_eos=True,
                 stream_options={"include_usage": True})
    after = samples(cluster, "nvfp4-dflash2")
    spec = got[-2]["metrics"]["speculative_decoding"]
    drafts = after["vllm:spec_decode_num_drafts_total"] - before["vllm:spec_decode_num_drafts_total"]
    accepted = after["vllm:spec_decode_num_accepted_tokens_total"] - before["vllm:spec_decode_num_accepted_tokens_total"]
    assert spec["num_spec_steps"] == drafts and spec["num_accepted_draft_tokens"] == accepted
    assert spec["mean_acceptance_length"] == pytest.approx(1 + accepted / drafts)
    assert spec["num_draft_tokens"] == DFLASH.spec_k * drafts and sum(spec["acceptance_histogram"]) == drafts
    plain = events(cluster, "bf16", max_tokens=5, stream_options={"include_usage": True})[-2]
    # vLLM's PerRequestMetrics: these fields, no token counts (usage has them)
    assert set(plain["metrics"]) == {"time_to_first_token_ms", "generation_time_ms", "queue_time_ms", "mean_itl_ms",
                                     "tokens_per_second"}
    assert plain["metrics"]["mean_itl_ms"] == pytest.approx(plain["metrics"]["generation_time_ms"] / 4)


def test_vllm_merges_steps_for_a_reader_that_lags(make_sim: Any) -> None:
    cluster = make_sim([shaped(BF16, "vllm")])
    body = json.dumps({"model": BF16.model, "prompt": "x", "max_tokens": 3000, "ignore_eos": True, "stream": True,
                       **FULL_USAGE}).encode()
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        sock.connect(("127.0.0.1", cluster.port("bf16")))
        head = f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" \
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        sock.sendall(head.encode() + body)
        time.sleep(1.0)  # 3000 steps of 0.2 ms are made meanwhile; nobody reads
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    counts = [json.loads(line[6:])["usage"]["completion_tokens"] for line in data.split(b"\n") if line.startswith(b"data: {")]
    steps = [b - a for a, b in zip([0] + counts, counts, strict=False)]
    assert counts[-1] == 3000 and max(steps) > 1  # several engine steps in one chunk
    assert len(counts) < 3000


# --- SGLang --------------------------------------------------------------------------------


def test_sglang_finish_sglext_and_usage_chunks(make_sim: Any) -> None:
    cluster = make_sim([shaped(DFLASH, "sglang")])
    got = events(cluster, "nvfp4-dflash2", max_tokens=60, ignore_eos=True, return_spec_tokens_details=True,
                 stream_options={"include_usage": True})
    role, finish, sglext, final, done = got[0], got[-4], got[-3], got[-2], got[-1]
    assert delta_of(role) == {"role": "assistant", "content": "", "reasoning_content": None, "tool_calls": None}
    tokens = got[1:-4]
    assert all(t["usage"] is None and t["choices"][0]["matched_stop"] is None for t in tokens)
    assert "".join(delta_of(t)["content"] for t in tokens) == "".join(reply_for(BREAD).tokens(60))
    assert finish["choices"][0]["finish_reason"] == "length" and set(delta_of(finish).values()) == {None}
    details = sglext["sglext"]["spec_tokens_details"]
    assert sglext["choices"] == [] and details["spec_verify_ct"] == len(tokens) - 1
    assert details["spec_accept_length"] == pytest.approx(1 + details["spec_num_correct_drafts"] / details["spec_verify_ct"])
    assert final["choices"] == [] and final["usage"]["completion_tokens"] == 60 and done == "[DONE]"
    unasked = events(cluster, "nvfp4-dflash2", max_tokens=20, stream_options={"include_usage": True})
    assert not any("sglext" in e for e in unasked[:-1])


def test_sglang_counts_generation_at_request_end_and_decode_every_step(make_sim: Any) -> None:
    slow = shaped(replace(BF16, decode_tok_s=50), "sglang", counter_offset=1000)
    cluster = make_sim([slow], time_scale=1.0)
    start = samples(cluster, "bf16")
    assert start["sglang:generation_tokens_total"] == 1000
    body = {"model": BF16.model, "prompt": "x", "max_tokens": 30, "ignore_eos": True, "stream": True}
    with HTTP.stream("POST", cluster.base_url("bf16") + "/completions", json=body) as r:
        lines = r.iter_lines()
        for _ in range(10):
            next(lines)
        middle = samples(cluster, "bf16")
        assert middle["sglang:num_running_reqs"] == 1
        assert middle["sglang:generation_tokens_total"] == 1000  # nothing until the request ends
        assert middle["sglang:realtime_tokens_total[decode]"] >= 1000 + 5
        list(lines)
    end = samples(cluster, "bf16")
    assert end["sglang:generation_tokens_total"] == 1030 and end["sglang:num_running_reqs"] == 0


def test_sglang_server_info_has_the_launch_command_with_its_api_key(make_sim: Any) -> None:
    cluster = make_sim([shaped(DFLASH, "sglang")])
    info = HTTP.get(cluster.root_url("nvfp4-dflash2") + "/server_info").json()
    assert "--api-key " in info["launch_command"] and info["speculative_num_draft_tokens"] == DFLASH.spec_k + 1
    models = HTTP.get(cluster.base_url("nvfp4-dflash2") + "/models").json()
    assert models["data"][0]["owned_by"] == "sglang" and models["data"][0]["max_model_len"] == DFLASH.max_model_len


# --- llama.cpp -----------------------------------------------------------------------------


def test_llamacpp_one_event_per_token_and_held_back_utf8(make_sim: Any) -> None:
    cluster = make_sim([shaped(DFLASH, "llamacpp")])
    got = events(cluster, "nvfp4-dflash2", max_tokens=45, ignore_eos=True, logprobs=True, **FULL_USAGE)
    role, body, finish, final = got[0], got[1:-3], got[-3], got[-2]
    assert delta_of(role) == {"role": "assistant", "content": None}
    assert all("usage" not in e for e in got[:-2])  # continuous_usage_stats is ignored
    tokens = reply_for(BREAD).tokens(45)
    assert len(body) == 44  # one event per token, speculative or not, minus the held one
    texts = [delta_of(e)["content"] for e in body]
    assert texts[HELD] == tokens[HELD] + tokens[HELD + 1] and "".join(texts) == "".join(tokens)
    entries = [e["choices"][0]["logprobs"]["content"] for e in body]
    assert all(len(x) == 1 for x in entries) and entries[HELD][0]["token"] == tokens[HELD + 1]
    assert finish["choices"][0] == {"finish_reason": "length", "index": 0, "delta": {}}
    timings = final["timings"]
    assert final["choices"] == [] and final["usage"]["completion_tokens"] == 45 and got[-1] == "[DONE]"
    assert timings["predicted_n"] == 45 and timings["predicted_ms"] > 0 and timings["predicted_per_second"] > 0
    plan_drafts = timings["draft_n"] // DFLASH.spec_k
    assert timings["draft_n"] == DFLASH.spec_k * plan_drafts and 0 <= timings["draft_n_accepted"] <= timings["draft_n"]
    assert all(e["system_fingerprint"] == got[0]["system_fingerprint"] for e in got[:-1])


def test_llamacpp_counters_at_request_end_with_six_significant_digits(make_sim: Any) -> None:
    cluster = make_sim([shaped(DFLASH, "llamacpp", counter_offset=12_345_678)])
    text = HTTP.get(cluster.metrics_url("nvfp4-dflash2")).text
    assert "llamacpp:tokens_predicted_total 1.23457e+07\n" in text
    assert "llamacpp:spec_decode_num_drafts_total 4.11523e+06\n" in text  # offset // 3, rounded alike
    assert "llamacpp:requests_processing 0\n" in text and "{" not in text  # no labels
    got = events(cluster, "nvfp4-dflash2", max_tokens=64, ignore_eos=True, stream_options={"include_usage": True})
    after = HTTP.get(cluster.metrics_url("nvfp4-dflash2")).text
    assert "llamacpp:tokens_predicted_total 1.23457e+07\n" in after  # +64 is lost in the rounding
    assert got[-2]["usage"]["completion_tokens"] == 64


def test_llamacpp_counters_move_only_when_the_request_ends(make_sim: Any) -> None:
    slow = shaped(replace(BF16, decode_tok_s=50), "llamacpp")
    cluster = make_sim([slow], time_scale=1.0)
    body = {"model": "anything: llama.cpp serves its one model", "prompt": "x", "max_tokens": 20,
            "ignore_eos": True, "stream": True}
    with HTTP.stream("POST", cluster.base_url("bf16") + "/completions", json=body) as r:
        lines = r.iter_lines()
        for _ in range(10):
            next(lines)
        middle = samples(cluster, "bf16")
        assert middle["llamacpp:requests_processing"] == 1 and middle["llamacpp:tokens_predicted_total"] == 0
        list(lines)
    assert samples(cluster, "bf16")["llamacpp:tokens_predicted_total"] == 20


def test_llamacpp_info_endpoints(make_sim: Any) -> None:
    cluster = make_sim([shaped(BF16, "llamacpp")])
    card = HTTP.get(cluster.base_url("bf16") + "/models").json()["data"][0]
    assert card["owned_by"] == "llamacpp" and card["meta"]["n_ctx"] == BF16.max_model_len
    props = HTTP.get(cluster.root_url("bf16") + "/props").json()
    assert props["default_generation_settings"]["n_ctx"] == BF16.max_model_len and props["endpoint_metrics"] is True
    assert HTTP.get(cluster.root_url("bf16") + "/health").json() == {"status": "ok"}


# --- every shape ---------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_metrics_off(make_sim: Any, engine: str) -> None:
    cluster = make_sim([shaped(BF16, engine, metrics=False)])
    r = HTTP.get(cluster.metrics_url("bf16"))
    if engine == "llamacpp":
        assert r.status_code == 501 and r.json()["error"]["type"] == "not_supported_error"
    else:
        assert r.status_code == 404
    assert HTTP.get(cluster.base_url("bf16") + "/models").status_code == 200


@pytest.mark.parametrize("engine", ENGINES)
def test_faults_on_every_shape(make_sim: Any, engine: str) -> None:
    cluster = make_sim([shaped(BF16, engine)])

    def arm(mode: str) -> None:
        r = HTTP.post(cluster.root_url("bf16") + "/sim/state", json={"fault": {"mode": mode}}, headers=cluster.control_headers)
        assert r.status_code == 200

    arm("error_event")
    got = events(cluster, "bf16", max_tokens=50)
    assert got[-1] == "[DONE]" and "error" in got[-2] and got[-2]["error"]["code"] == 500
    texts = [e for e in got[:-2] if e.get("choices") and (delta_of(e).get("content") or "")]
    assert len(texts) == 3  # three token steps, then the error
    arm("drop")
    with pytest.raises(httpx.RemoteProtocolError):
        events(cluster, "bf16", max_tokens=50)
    arm("malformed")
    with pytest.raises(json.JSONDecodeError):
        events(cluster, "bf16", max_tokens=10)
    arm("no_done")
    assert events(cluster, "bf16", max_tokens=10)[-1] != "[DONE]"
    arm("early_stop")
    got = events(cluster, "bf16", max_tokens=30, ignore_eos=True, stream_options={"include_usage": True})
    usage = next(e["usage"] for e in reversed(got) if isinstance(e, dict) and e.get("usage"))
    assert usage["completion_tokens"] == 10
    arm("stall")
    body = {"model": BF16.model, "prompt": "hi", "max_tokens": 50, "stream": True}
    with pytest.raises(httpx.ReadTimeout):
        with HTTP.stream("POST", cluster.base_url("bf16") + "/completions", json=body,
                         timeout=httpx.Timeout(5.0, read=0.3)) as r:
            list(r.iter_lines())
    arm("500")
    r = HTTP.post(cluster.base_url("bf16") + "/chat/completions",
                  json={"model": BF16.model, "messages": [{"role": "user", "content": "hi"}], "stream": True})
    assert r.status_code == 500 and "error" in r.json()
    r = HTTP.post(cluster.root_url("bf16") + "/sim/state", json={"busy": {"running": 2, "waiting": 1}},
                  headers=cluster.control_headers)
    gauges = samples(cluster, "bf16")
    running = {"vllm": "vllm:num_requests_running", "sglang": "sglang:num_running_reqs",
               "llamacpp": "llamacpp:requests_processing"}[engine]
    assert gauges[running] == 2


@pytest.mark.parametrize("engine", ENGINES)
def test_counter_offset_on_every_shape(make_sim: Any, engine: str) -> None:
    cluster = make_sim([shaped(DFLASH, engine, counter_offset=12_345_678)])
    generated = {"vllm": "vllm:generation_tokens_total", "sglang": "sglang:generation_tokens_total",
                 "llamacpp": "llamacpp:tokens_predicted_total"}[engine]
    value = samples(cluster, "nvfp4-dflash2")[generated]
    assert value == (12_346_000 - 300 if engine == "llamacpp" else 12_345_678)  # 1.23457e+07


def test_spec_stats_follow_the_plan() -> None:
    from tokenreel.simulator.generation import make_plan

    plan = make_plan(DFLASH, {"messages": [{"role": "user", "content": BREAD}], "max_tokens": 200,
                              "ignore_eos": True}, True, None)
    stats = spec_stats(plan, DFLASH.spec_k)
    assert stats.steps == len(plan.steps) - 1 and stats.accepted == sum(plan.accepted)
    assert sum(stats.histogram) == stats.steps


def test_simulate_command_serves_the_engine_it_is_told(tmp_path: Any) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    bad = subprocess.run([sys.executable, "-m", "tokenreel", "simulate", "--engine", "tgi"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "tokenreel: --engine 'tgi': expected one of vllm, sglang, llamacpp"
    ]
    server = subprocess.Popen([sys.executable, "-m", "tokenreel", "simulate", "--engine", "llamacpp",
                               "--profiles", "bf16", "--port", str(port), "--time-scale", "0.01"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                props = HTTP.get(f"http://127.0.0.1:{port}/props")
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline and server.poll() is None, "simulate did not start"
                time.sleep(0.1)
        assert props.json()["build_info"].startswith("b")
        assert HTTP.get(f"http://127.0.0.1:{port}/v1/models").json()["data"][0]["owned_by"] == "llamacpp"
    finally:
        server.terminate()
        server.wait(timeout=10)
