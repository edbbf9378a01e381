"""The simulated vLLM endpoints (the default shape), exercised over real HTTP."""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from tokenreel.simulator.answer_text import CATEGORIES, classify, reply_for, tokenize
from tokenreel.simulator.profiles import SEED_LADDER, Profile, profile_by_id
from tokenreel.simulator.server import SimCluster, plan_steps

BF16, NVFP4, DFLASH = SEED_LADDER
CODE_PROMPT = "Implement a Python function that rate-limits API calls."
CHAT_PROMPT = "Hi! Any tips for a weekend in Lisbon?"


@dataclass
class Stream:
    status: int
    headers: httpx.Headers
    events: list[Any] = field(default_factory=list)  # parsed JSON, or the raw text if not JSON
    times: list[float] = field(default_factory=list)  # seconds from send to each event
    done: bool = False

    @property
    def token_chunks(self) -> list[dict[str, Any]]:
        return [e for e in self.events if isinstance(e, dict) and _text(e)]

    @property
    def usage(self) -> dict[str, int]:
        last = self.events[-1]
        assert last["choices"] == []
        return last["usage"]


def _text(event: dict[str, Any]) -> str:
    if not event.get("choices"):
        return ""
    choice = event["choices"][0]
    return choice.get("delta", {}).get("content") or choice.get("text") or ""


HTTP = httpx.Client(timeout=10.0)  # reused: a new client costs ms, which would skew TTFT


@pytest.fixture(scope="module", autouse=True)
def _close_http() -> Iterator[None]:
    yield
    HTTP.close()


def stream(url: str, body: dict[str, Any]) -> Stream:
    """POST with stream: true and collect every SSE event with its arrival time."""
    start = time.perf_counter()
    with HTTP.stream("POST", url, json={"stream": True, **body}) as r:
        out = Stream(r.status_code, r.headers)
        if r.status_code != 200:
            out.events.append(orjson.loads(r.read()))
            return out
        for line in r.iter_lines():
            if not line:
                continue
            assert line.startswith("data: "), line
            payload = line[len("data: ") :]
            if payload == "[DONE]":
                out.done = True
                continue
            assert not out.done, "event after [DONE]"
            try:
                out.events.append(orjson.loads(payload))
            except orjson.JSONDecodeError:
                out.events.append(payload)
            out.times.append(time.perf_counter() - start)
    return out


def chat(cluster: SimCluster, pid: str, prompt: str, **body: Any) -> Stream:
    profile = profile_by_id(pid, cluster.profiles)
    request = {"model": profile.model, "messages": [{"role": "user", "content": prompt}], **body}
    return stream(cluster.base_url(pid) + "/chat/completions", request)


USAGE = {"stream_options": {"include_usage": True, "continuous_usage_stats": True}}


def metrics(cluster: SimCluster, pid: str) -> dict[str, float]:
    """Every sample summed over labels, keyed by sample name."""
    text = HTTP.get(cluster.metrics_url(pid)).text
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


def assert_goes_idle(cluster: SimCluster, pid: str, within_s: float = 1.0) -> None:
    deadline = time.monotonic() + within_s
    while metrics(cluster, pid)["vllm:num_requests_running"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert metrics(cluster, pid)["vllm:num_requests_running"] == 0


def arm(cluster: SimCluster, pid: str, **state: Any) -> dict[str, Any]:
    r = HTTP.post(cluster.root_url(pid) + "/sim/state", json=state, headers=cluster.control_headers)
    assert r.status_code == 200, r.text
    return r.json()


# --- text and plans --------------------------------------------------------------------


def test_classify_routes_prompts_to_categories() -> None:
    assert classify("Fix the bug in this class") == "code"
    assert classify("How many apples are left? Solve step by step.") == "reasoning"
    assert classify("Write an essay about lighthouses") == "prose"
    assert classify("Hello, how are you today?") == "conversation"
    assert classify("Give me a summary") == "conversation"  # "sum" is a word, not a prefix


@given(st.text(max_size=200))
def test_tokenize_is_lossless(text: str) -> None:
    assert "".join(tokenize(text)) == text


def test_text_looks_like_model_output() -> None:
    for category, prompt in [
        ("code", CODE_PROMPT),
        ("reasoning", "Calculate 15 percent of 240"),
        ("prose", "Write an essay on bread"),
        ("conversation", CHAT_PROMPT),
    ]:
        reply = reply_for(prompt)
        assert reply.category == category
        assert 150 <= reply.natural_len <= 600  # ends naturally after a few hundred tokens
        tokens = reply.tokens(2000)  # repeats past the natural end
        assert len(tokens) == 2000 and tokens == reply_for(prompt).tokens(2000)
        assert 2.5 <= statistics.mean(map(len, tokens)) <= 5.0
        assert "\n" in tokens
    code = "".join(reply_for(CODE_PROMPT).tokens(500))
    assert "\n        " in code and "def " in code
    every = "".join(
        "".join(reply_for(p).tokens(1400)) for p in ("essay", "hi", "solve x", "code")
    )
    assert "—" in every and any(ch in every for ch in "éï")


@settings(max_examples=30)
@given(st.integers(1, 3000), st.sampled_from(CATEGORIES), st.integers(0, 2**32))
def test_plan_steps_split_exactly(n: int, category: str, seed: int) -> None:
    sizes, accepted = plan_steps(DFLASH, category, n, seed)
    assert sum(sizes) == n and sizes[0] == 1
    assert all(1 <= s <= DFLASH.spec_k + 1 for s in sizes)
    assert len(accepted) == len(sizes) - 1
    assert all(a + 1 >= s for a, s in zip(accepted, sizes[1:], strict=False))
    assert plan_steps(DFLASH, category, n, seed) == (sizes, accepted)
    assert plan_steps(BF16, category, n, seed) == ([1] * n, [])


def test_plan_steps_mean_matches_acceptance_length() -> None:
    for category, length in DFLASH.acceptance.items():
        sizes, accepted = plan_steps(DFLASH, category, 20_000, seed=7)
        assert statistics.mean(a + 1 for a in accepted) == pytest.approx(length, rel=0.03)


def test_seed_ladder_reproduces_the_write_up() -> None:
    assert BF16.expected_tok_s("code") == pytest.approx(97, rel=0.02)
    assert NVFP4.expected_tok_s("prose") == pytest.approx(137, rel=0.02)
    rates = {c: DFLASH.expected_tok_s(c) for c in CATEGORIES}
    assert rates["code"] == pytest.approx(670, rel=0.03)
    assert rates["reasoning"] == pytest.approx(500, rel=0.03)
    assert 280 <= rates["prose"] <= 320 and 280 <= rates["conversation"] <= 320
    with pytest.raises(ValueError):
        Profile(id="x", label="x", model="m", decode_tok_s=1, ttft_s=0, fault="flaky")


# --- streaming -------------------------------------------------------------------------


def test_chat_stream_role_chunk_then_one_chunk_per_step(sim: SimCluster) -> None:
    s = chat(sim, "bf16", CHAT_PROMPT, max_tokens=20, ignore_eos=True, logprobs=True, **USAGE)
    assert s.status == 200 and s.headers["content-type"].startswith("text/event-stream")
    role, first = s.events[0], s.events[1]
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert role["usage"]["completion_tokens"] == 0
    assert _text(first) and first["usage"]["completion_tokens"] == 1
    assert s.times[1] - s.times[0] < 0.005  # sent together, right before the first token
    chunks = s.token_chunks
    assert len(chunks) == 20  # no speculation: one token per step, one step per chunk
    assert all(len(c["choices"][0]["logprobs"]["content"]) == 1 for c in chunks)
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * 19 + ["length"]
    assert s.usage["completion_tokens"] == 20 and s.done
    assert s.usage["prompt_tokens"] > 0


def test_spec_stream_carries_several_tokens_per_chunk(sim: SimCluster) -> None:
    s = chat(sim, "nvfp4-dflash2", CODE_PROMPT, max_tokens=300, ignore_eos=True,
             return_token_ids=True, **USAGE)
    counts = [e["usage"]["completion_tokens"] for e in s.events]
    deltas = [b - a for a, b in zip(counts, counts[1:], strict=False)]
    chunks = s.token_chunks
    assert deltas == [len(c["choices"][0]["token_ids"]) for c in chunks] + [0]  # + usage chunk
    assert sum(deltas) == s.usage["completion_tokens"] == 300
    assert deltas[0] == 1  # prefill yields one token
    assert max(deltas) > 1 and max(deltas) <= DFLASH.spec_k + 1
    assert statistics.mean(deltas[1:-1]) == pytest.approx(DFLASH.acceptance["code"], rel=0.2)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_text_ends_naturally_unless_ignore_eos(sim: SimCluster) -> None:
    natural = chat(sim, "nvfp4-dflash2", CHAT_PROMPT, max_tokens=1000,
                   stream_options={"include_usage": True})
    n = natural.usage["completion_tokens"]
    assert n == reply_for(CHAT_PROMPT).natural_len < 1000
    assert natural.token_chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert all("usage" not in e for e in natural.events[:-1])  # not continuous
    forced = chat(sim, "nvfp4-dflash2", CHAT_PROMPT, max_tokens=1000, ignore_eos=True,
                  stream_options={"include_usage": True})
    assert forced.usage["completion_tokens"] == 1000
    assert "".join(map(_text, forced.events)).startswith("".join(map(_text, natural.events)))


def test_same_prompt_same_stream(sim: SimCluster) -> None:
    runs = [chat(sim, "nvfp4-dflash2", CODE_PROMPT, max_tokens=120, **USAGE) for _ in range(2)]
    shapes = [[(_text(e), e["usage"]["completion_tokens"]) for e in s.events] for s in runs]
    assert shapes[0] == shapes[1]
    other = chat(sim, "nvfp4-dflash2", "Debug this Python class for me", max_tokens=120)
    assert [_text(e) for e in other.events] != [_text(e) for e in runs[0].events[:-1]]


def test_max_completion_tokens_wins(sim: SimCluster) -> None:
    s = chat(sim, "bf16", CHAT_PROMPT, max_tokens=30, max_completion_tokens=5,
             ignore_eos=True, stream_options={"include_usage": True})
    assert s.usage["completion_tokens"] == 5


def test_completions_stream(sim: SimCluster) -> None:
    url = sim.base_url("nvfp4") + "/completions"
    s = stream(url, {"model": NVFP4.model, "prompt": "Once upon a time", "logprobs": 1,
                     "stream_options": {"include_usage": True}})
    assert s.usage["completion_tokens"] == 16  # the completions default
    assert all(e["object"] == "text_completion" for e in s.events)
    chunks = s.token_chunks
    assert len(chunks) == 16 and "delta" not in chunks[0]["choices"][0]  # no role chunk
    tokens = [t for c in chunks for t in c["choices"][0]["logprobs"]["tokens"]]
    assert "".join(tokens) == "".join(map(_text, chunks))
    offsets = [o for c in chunks for o in c["choices"][0]["logprobs"]["text_offset"]]
    assert offsets == [sum(map(len, tokens[:i])) for i in range(16)]


def test_non_streaming_json(sim: SimCluster) -> None:
    body = {"model": BF16.model, "messages": [{"role": "user", "content": CHAT_PROMPT}],
            "max_tokens": 12, "return_token_ids": True}
    r = HTTP.post(sim.base_url("bf16") + "/chat/completions", json=body)
    answer = r.json()
    assert r.status_code == 200 and answer["object"] == "chat.completion"
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "length" and len(choice["token_ids"]) == 12
    assert choice["message"]["content"] == "".join(reply_for(CHAT_PROMPT).tokens(12))
    assert answer["usage"]["completion_tokens"] == 12


def test_request_errors_look_like_vllm(sim: SimCluster) -> None:
    url = sim.base_url("bf16") + "/chat/completions"
    messages = [{"role": "user", "content": "hi"}]
    r = HTTP.post(url, json={"model": BF16.model, "messages": messages,
                              "stream_options": {"include_usage": True}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "stream_options"
    r = HTTP.post(url, json={"model": "nope", "messages": messages, "stream": True})
    error = r.json()["error"]
    assert r.status_code == 404 and error["type"] == "NotFoundError" and error["code"] == 404
    r = HTTP.post(url, json={"model": BF16.model, "messages": messages, "max_tokens": 10**6})
    assert r.status_code == 400 and "maximum context length" in r.json()["error"]["message"]


def test_info_endpoints(sim: SimCluster) -> None:
    models = HTTP.get(sim.base_url("nvfp4") + "/models").json()
    assert models["data"][0]["id"] == NVFP4.model
    assert models["data"][0]["max_model_len"] == NVFP4.max_model_len
    version = HTTP.get(sim.root_url("nvfp4") + "/version").json()
    assert version == {"version": "0.33.0", "simulated": True, "time_scale": 0.02,
                       "profile": "nvfp4", "engine": "vllm"}
    assert HTTP.get(sim.root_url("nvfp4") + "/health").status_code == 200
    chat(sim, "nvfp4", "remember me", max_tokens=1)
    logged = HTTP.get(sim.root_url("nvfp4") + "/sim/requests", headers=sim.control_headers).json()["requests"]
    assert logged[-1]["messages"][0]["content"] == "remember me"


# --- metrics ---------------------------------------------------------------------------


def test_metrics_counters_follow_the_stream(sim: SimCluster) -> None:
    before = metrics(sim, "nvfp4-dflash2")
    s = chat(sim, "nvfp4-dflash2", CODE_PROMPT, max_tokens=400, ignore_eos=True, **USAGE)
    after = metrics(sim, "nvfp4-dflash2")
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    n = s.usage["completion_tokens"]
    assert delta["vllm:generation_tokens_total"] == n
    assert delta["vllm:prompt_tokens_total"] == s.usage["prompt_tokens"]
    drafts = delta["vllm:spec_decode_num_drafts_total"]
    assert drafts == len(s.token_chunks) - 1  # every step after prefill is one draft
    assert delta["vllm:spec_decode_num_draft_tokens_total"] == DFLASH.spec_k * drafts
    accepted = delta["vllm:spec_decode_num_accepted_tokens_total"]
    assert 0 <= accepted - (n - 1 - drafts) <= DFLASH.spec_k  # only the last step is cut
    assert 1 + accepted / drafts == pytest.approx(DFLASH.acceptance["code"], rel=0.15)
    assert after["vllm:num_requests_running"] == 0
    assert "vllm:spec_decode_num_drafts_total" not in metrics(sim, "bf16")


def test_running_gauge_counts_requests_in_flight(make_sim) -> None:
    slow = Profile(id="slow", label="slow", model="m", decode_tok_s=50, ttft_s=0.0)
    cluster = make_sim([slow], time_scale=1.0)
    body = {"model": "m", "prompt": "x", "max_tokens": 1000, "ignore_eos": True, "stream": True}
    url = cluster.base_url("slow") + "/completions"
    with HTTP.stream("POST", url, json=body) as a, HTTP.stream("POST", url, json=body) as b:
        lines = [a.iter_lines(), b.iter_lines()]  # keep them: a dropped iterator hangs up
        assert all(next(it).startswith("data: ") for it in lines)
        assert metrics(cluster, "slow")["vllm:num_requests_running"] == 2
    assert_goes_idle(cluster, "slow")  # a hang-up aborts the request, as in vLLM


def test_busy_and_contention_controls(make_sim) -> None:
    cluster = make_sim([BF16])
    state = arm(cluster, "bf16", busy={"running": 2, "waiting": 3, "seconds": 0.3},
                contention={"tok_s": 1000, "seconds": 0.3})
    assert state["busy"]["running"] == 2 and 0 < state["busy"]["seconds"] <= 0.3 + 1e-6
    start = metrics(cluster, "bf16")
    assert start["vllm:num_requests_running"] == 2 and start["vllm:num_requests_waiting"] == 3
    time.sleep(0.35)
    end = metrics(cluster, "bf16")
    assert end["vllm:num_requests_running"] == 0 and end["vllm:num_requests_waiting"] == 0
    background = end["vllm:generation_tokens_total"] - start["vllm:generation_tokens_total"]
    assert 200 <= background <= 300  # 1000 tok/s for what was left of 0.3 s
    time.sleep(0.05)
    assert metrics(cluster, "bf16")["vllm:generation_tokens_total"] == \
        end["vllm:generation_tokens_total"]
    r = HTTP.post(cluster.root_url("bf16") + "/sim/state", json={"fault": {"mode": "busy"}}, headers=cluster.control_headers)
    assert r.status_code == 400


# --- faults ----------------------------------------------------------------------------


def test_profile_faults_refuse_busy_401_404(make_sim) -> None:
    def variant(fault: str) -> Profile:
        return Profile(id=fault, label=fault, model="m", decode_tok_s=100, ttft_s=0.1,
                       fault=fault)

    cluster = make_sim([variant(f) for f in ("refuse", "busy", "401", "404")])
    with pytest.raises(httpx.ConnectError):
        HTTP.get(cluster.base_url("refuse") + "/models")
    busy = metrics(cluster, "busy")
    assert busy["vllm:num_requests_running"] > 0 and busy["vllm:num_requests_waiting"] > 0
    assert HTTP.get(cluster.base_url("401") + "/models").status_code == 401
    assert chat(cluster, "401", "hi").status == 401
    served = HTTP.get(cluster.base_url("404") + "/models").json()["data"][0]["id"]
    assert served != "m" and chat(cluster, "404", "hi").status == 404


@pytest.mark.parametrize("status", [401, 404, 429, 500])
def test_armed_http_faults(make_sim, status: int) -> None:
    cluster = make_sim([BF16])
    arm(cluster, "bf16", fault={"mode": str(status), "count": 2})
    failed = [chat(cluster, "bf16", "hi", max_tokens=2) for _ in range(2)]
    assert [f.status for f in failed] == [status, status]
    if status == 429:
        assert failed[0].headers["retry-after"] == "1"
    assert chat(cluster, "bf16", "hi", max_tokens=2).status == 200  # used up


def test_error_event_mid_stream(make_sim) -> None:
    cluster = make_sim([BF16])
    arm(cluster, "bf16", fault={"mode": "error_event"})
    s = chat(cluster, "bf16", "hi", max_tokens=50)
    assert s.status == 200 and s.done
    assert len(s.token_chunks) == 3
    assert s.events[-1]["error"]["code"] == 500 and s.events[-1]["error"]["param"] is None


def test_drop_mid_stream(make_sim) -> None:
    cluster = make_sim([BF16])
    arm(cluster, "bf16", fault={"mode": "drop"})
    with pytest.raises(httpx.RemoteProtocolError):
        chat(cluster, "bf16", "hi", max_tokens=50)


def test_stall_trips_the_read_timeout(make_sim) -> None:
    cluster = make_sim([BF16])
    arm(cluster, "bf16", fault={"mode": "stall"})
    seen: list[str] = []
    body = {"model": BF16.model, "prompt": "hi", "max_tokens": 50, "stream": True}
    timeout = httpx.Timeout(5.0, read=0.3)
    with pytest.raises(httpx.ReadTimeout):
        with HTTP.stream("POST", cluster.base_url("bf16") + "/completions", json=body,
                         timeout=timeout) as r:
            seen.extend(line for line in r.iter_lines() if line)
    assert len(seen) == 3
    assert_goes_idle(cluster, "bf16")  # the stalled request ends when the client hangs up


def test_malformed_line_then_stream_continues(make_sim) -> None:
    cluster = make_sim([BF16])
    arm(cluster, "bf16", fault={"mode": "malformed"})
    s = chat(cluster, "bf16", "hi", max_tokens=10, ignore_eos=True)
    broken = [e for e in s.events if isinstance(e, str)]
    assert broken == ['{"choices": [']
    assert len(s.token_chunks) == 10 and s.done


def test_no_done(make_sim) -> None:
    cluster = make_sim([BF16])
    arm(cluster, "bf16", fault={"mode": "no_done"})
    s = chat(cluster, "bf16", "hi", max_tokens=10, ignore_eos=True,
             stream_options={"include_usage": True})
    assert not s.done and s.usage["completion_tokens"] == 10


def test_early_stop_ignores_ignore_eos(make_sim) -> None:
    cluster = make_sim([BF16])
    arm(cluster, "bf16", fault={"mode": "early_stop"})
    s = chat(cluster, "bf16", "hi", max_tokens=90, ignore_eos=True,
             stream_options={"include_usage": True})
    assert s.usage["completion_tokens"] == 30
    assert s.token_chunks[-1]["choices"][0]["finish_reason"] == "stop"


# --- timing ----------------------------------------------------------------------------


def test_timing_follows_the_profiles(make_sim) -> None:
    """Chunks leave on an absolute schedule: TTFT, then one step per step_s, scaled.

    Observed times can only be late (the schedule starts after the request was sent), so
    lower bounds are tight and upper bounds loose for a noisy 2-core machine.
    """
    # real speed: the client reads in this process, beside the simulator's thread, and at a quarter
    # (0.15 s a reply) one stall of a loaded box moved a reply's rate by a third
    scale = 1.0
    cluster = make_sim(SEED_LADDER, time_scale=scale)
    rates = {}
    for profile, n in ((BF16, 60), (NVFP4, 80), (DFLASH, 300)):
        assert HTTP.get(cluster.root_url(profile.id) + "/health").status_code == 200  # connect
        s = chat(cluster, profile.id, CODE_PROMPT, max_tokens=n, ignore_eos=True, **USAGE)
        ttft, total = s.times[1] / scale, s.times[-1] / scale
        expected = profile.ttft_s + (len(s.token_chunks) - 1) * profile.step_s
        assert profile.ttft_s * 0.99 <= ttft < profile.ttft_s * 1.5 + 0.2
        assert expected * 0.99 <= total < expected * 1.5 + 0.2
        rates[profile.id] = (n - 1) / (total - profile.ttft_s)
    assert rates["bf16"] == pytest.approx(BF16.decode_tok_s, rel=0.3)
    assert rates["nvfp4"] / rates["bf16"] == pytest.approx(136.7 / 97.1, rel=0.3)
    assert rates["nvfp4-dflash2"] / rates["nvfp4"] == pytest.approx(
        DFLASH.expected_tok_s("code") / NVFP4.decode_tok_s, rel=0.4
    )
