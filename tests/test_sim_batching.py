"""The simulator's batching model (issue 27): concurrent requests slow each other as the
profile says, over real HTTP; the pure truth a sweep is held against, and its crossover."""

from __future__ import annotations

import asyncio
import statistics
import time
from bisect import bisect_right
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import orjson
import pytest

from tokenreel.simulator.profiles import SEED_LADDER, Profile, crossover
from tokenreel.simulator.server import SimCluster

SCALE = 0.5  # a 100 tok/s step lasts 5 ms: long beside the loop's wake-up jitter
PROMPT = "Hi! Any tips for a weekend in Lisbon?"  # conversation
PLAIN = Profile(id="plain", label="plain", model="m", decode_tok_s=100, ttft_s=0.2,
                batch_flat_tokens=2, batch_slope=0.5)
DRAFTER = Profile(id="drafter", label="drafter", model="m", decode_tok_s=100, ttft_s=0.2, spec_k=3,
                  acceptance={"conversation": 3.0}, request_metrics=True)


@dataclass
class Reply:
    times: list[float] = field(default_factory=list)  # perf_counter at each token event
    counts: list[int] = field(default_factory=list)  # completion tokens so far at each
    last: dict[str, Any] = field(default_factory=dict)  # the final (usage) event

    @property
    def decode_tok_s(self) -> float:
        """Tokens after the first event over the time from the first to the last token event."""
        return (self.counts[-1] - self.counts[0]) / (self.times[-1] - self.times[0])


async def stream(http: aiohttp.ClientSession, cluster: SimCluster, pid: str, max_tokens: int,
                 reply: Reply | None = None) -> Reply:
    """One streamed chat request; `reply` (filled as events arrive) lets a caller watch it."""
    body = {"model": "m", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": max_tokens,
            "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    reply = reply if reply is not None else Reply()
    async with http.post(cluster.base_url(pid) + "/chat/completions", json=body) as r:
        assert r.status == 200
        async for line in r.content:
            payload = line.strip().removeprefix(b"data: ")
            if not payload or payload == b"[DONE]":
                continue
            event = orjson.loads(payload)
            count = event["usage"]["completion_tokens"]
            if count > (reply.counts[-1] if reply.counts else 0):
                reply.times.append(time.perf_counter())
                reply.counts.append(count)
            reply.last = event
    return reply


async def concurrent(cluster: SimCluster, pid: str, n: int, max_tokens: int) -> list[Reply]:
    async with aiohttp.ClientSession() as http:
        return await asyncio.gather(*(stream(http, cluster, pid, max_tokens) for _ in range(n)))


async def metrics(http: aiohttp.ClientSession, cluster: SimCluster, pid: str) -> dict[str, float]:
    async with http.get(cluster.metrics_url(pid)) as r:
        text = await r.text()
    return {line.split("{")[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("vllm:")}


# --- the pure model ----------------------------------------------------------------------


def test_defaults_keep_every_batch_as_one_request() -> None:
    for profile in SEED_LADDER:
        for batch in (1, 2, 64, 1000):
            assert profile.step_s_at(batch) == profile.step_s
            assert profile.expected_tok_s("code", batch) == profile.expected_tok_s("code")
    assert SEED_LADDER[2].step_s == SEED_LADDER[2].verify_cost / SEED_LADDER[2].decode_tok_s


def test_step_time_is_flat_then_linear_and_drafting_stops_above_n() -> None:
    assert [PLAIN.step_s_at(b) * 100 for b in (1, 2, 3, 4, 6)] == pytest.approx([1, 1, 1.5, 2, 3])
    drafter = replace(DRAFTER, batch_flat_tokens=8, batch_slope=0.25, draft_cost=0.1, drafting_off_above=4)
    # b = 3: verify 12 tokens, load 2; the drafter's 3 positions stay flat
    assert drafter.step_s_at(3) * 100 == pytest.approx(1.0 * 2 + 0.1 * 1)
    assert drafter.expected_tok_s("conversation", 3) == pytest.approx(3.0 / 0.021)
    assert drafter.expected_tok_s("conversation", 5) == pytest.approx(100)  # plain: 5 <= 8 tokens
    assert drafter.aggregate_tok_s("conversation", 5) == pytest.approx(500)


def test_crossover_of_a_known_pair() -> None:
    base = Profile(id="b", label="b", model="m", decode_tok_s=100, ttft_s=0.1, batch_flat_tokens=8, batch_slope=0.1)
    drafter = replace(base, id="d", spec_k=3, acceptance={"code": 2.2}, draft_cost=0.1)
    # b = 4: (1.0 * (1 + 0.1 * 8) + 0.1) / 100 s a step, 2.2 tokens: 115.8 tok/s > 100
    # b = 5: (1.0 * (1 + 0.1 * 12) + 0.1) / 100 s: 95.7 tok/s <= 100
    assert crossover(base, drafter, "code") == 5
    assert crossover(replace(base, batch_slope=0), replace(drafter, batch_slope=0), "code") is None
    assert crossover(base, replace(drafter, drafting_off_above=2), "code") == 3  # plain above 2: equal


@pytest.mark.parametrize("bad", [dict(batch_flat_tokens=3), dict(batch_slope=-0.1), dict(draft_cost=1.1),
                                 dict(drafting_off_above=0)])
def test_bad_batching_fields_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        replace(DRAFTER, **bad)


# --- over HTTP ---------------------------------------------------------------------------


def test_one_request_alone_decodes_as_before(make_sim) -> None:
    cluster = make_sim([PLAIN], time_scale=SCALE)
    [reply] = asyncio.run(concurrent(cluster, "plain", 1, 120))
    assert reply.counts[-1] == 120
    assert reply.decode_tok_s * SCALE == pytest.approx(PLAIN.expected_tok_s("conversation"), rel=0.03)


def test_concurrent_requests_slow_each_other_as_the_model_says(make_sim) -> None:
    """Four at once decode at half the rate of one, measured while all four decode: a request
    that starts or ends alone decodes faster then, as the model says (on a loaded box the four
    were read 5-11 % above the four-at-once rate from first to last token, their starts spread).
    The client stamps reads in this process, which the simulator shares: a starved process reads
    a reply's first events late and the rest in a burst (beside two CPU hogs one of 120 tokens
    read 3.3x too fast), so the replies are long (4.8 s) and their median is held tight, each one
    loosely."""
    cluster = make_sim([PLAIN], time_scale=SCALE)
    replies = asyncio.run(concurrent(cluster, "plain", 4, 480))
    expected = PLAIN.expected_tok_s("conversation", 4)
    assert expected == pytest.approx(50)
    assert all(reply.counts[-1] == 480 for reply in replies)
    start, end = max(reply.times[0] for reply in replies), min(reply.times[-1] for reply in replies)
    assert end - start > 3, (start, end)  # most of each reply: 4.8 s

    def count_at(reply: Reply, t: float) -> int:
        return reply.counts[bisect_right(reply.times, t) - 1]

    rates = [(count_at(reply, end) - count_at(reply, start)) / (end - start) * SCALE for reply in replies]
    assert statistics.median(rates) == pytest.approx(expected, rel=0.05), rates
    assert all(rate == pytest.approx(expected, rel=0.25) for rate in rates), rates


@pytest.mark.parametrize("off_above", [2, 3])
def test_drafting_off_above_n_counts_no_draft(make_sim, off_above: int) -> None:
    profile = replace(DRAFTER, drafting_off_above=off_above)
    cluster = make_sim([profile], time_scale=SCALE)
    # each reply lasts about 1.5 s at its own rate (drafting or not), so a late start of one on a
    # busy host still leaves all three running through both reads below
    pid, n = "drafter", round(1.5 * profile.expected_tok_s("conversation", 3) / SCALE)

    async def run() -> tuple[list[dict[str, float]], list[Reply]]:
        async with aiohttp.ClientSession() as http:
            before = await metrics(http, cluster, pid)
            replies = [Reply() for _ in range(3)]
            tasks = [asyncio.create_task(stream(http, cluster, pid, n, reply)) for reply in replies]
            while min(r.counts[-1] if r.counts else 0 for r in replies) < 20 and not any(t.done() for t in tasks):
                await asyncio.sleep(0.005)
            early = await metrics(http, cluster, pid)
            await asyncio.sleep(0.1)  # 20 steps of 5 ms: all three still running
            late = await metrics(http, cluster, pid)
            await asyncio.gather(*tasks)
            return [before, early, late, await metrics(http, cluster, pid)], replies

    (before, early, late, after), replies = asyncio.run(run())
    assert early["vllm:num_requests_running"] == late["vllm:num_requests_running"] == 3
    assert late["vllm:generation_tokens_total"] - early["vllm:generation_tokens_total"] >= 30
    moved = late["vllm:spec_decode_num_drafts_total"] - early["vllm:spec_decode_num_drafts_total"]
    assert (moved == 0) if off_above == 2 else (moved > 0)
    # every draft counted in /metrics is one the requests report, drafting or not
    spec = [r.last["metrics"]["speculative_decoding"] for r in replies]
    for name, key in (("drafts", "num_spec_steps"), ("accepted_tokens", "num_accepted_draft_tokens")):
        counted = after[f"vllm:spec_decode_num_{name}_total"] - before[f"vllm:spec_decode_num_{name}_total"]
        assert counted == sum(s[key] for s in spec)
    assert all(r.counts[-1] == n for r in replies)



def test_llamacpp_slots_queue_the_requests_beyond_them(make_sim) -> None:
    """llama.cpp serves a fixed number of slots (-np): with 2, a third request waits, counted as
    deferred in /metrics, and starts (its first token) only once one of the first two has ended."""
    server = replace(PLAIN, id="slots", engine="llamacpp", ttft_s=0.02, batch_slope=0, slots=2)
    cluster = make_sim([server], time_scale=SCALE)

    async def one(http: aiohttp.ClientSession) -> tuple[float, float]:
        body = {"model": "m", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 120, "stream": True}
        first = None
        async with http.post(cluster.base_url("slots") + "/chat/completions", json=body) as r:
            assert r.status == 200
            async for line in r.content:
                if first is None and b'"content"' in line:
                    first = time.perf_counter()
        assert first is not None
        return first, time.perf_counter()

    async def run() -> tuple[list[tuple[float, float]], float]:
        async with aiohttp.ClientSession() as http:
            tasks = [asyncio.create_task(one(http)) for _ in range(3)]
            await asyncio.sleep(0.2)
            async with http.get(cluster.metrics_url("slots")) as r:
                text = await r.text()
            deferred = next(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                            if line.startswith("llamacpp:requests_deferred"))
            return list(await asyncio.gather(*tasks)), deferred

    spans, deferred = asyncio.run(run())
    assert deferred == 1
    firsts = sorted(spans)
    assert firsts[2][0] >= min(end for _, end in firsts[:2]) - 0.005, spans  # it waited for a slot
    assert firsts[1][0] - firsts[0][0] < 0.1  # the two slots started together
    with pytest.raises(ValueError):
        replace(PLAIN, slots=2)  # a vLLM shape has no slots
