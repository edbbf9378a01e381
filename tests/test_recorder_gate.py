"""/metrics parsing, the idle gate, contention and acceptance from counters."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.test_recorder_support import arm_for, chat_prompt, fast_settings, seed, serve, set_state
from tokenreel.recorder.engines.engine_metrics import EngineSnapshot, MetricsUnavailable, acceptance_between, fetch_snapshot, parse_metrics
from tokenreel.recorder.gates.idle_gate import contention, wait_idle
from tokenreel.recorder.runner import new_session, record
from tokenreel.session.model import Gate, Session
from tokenreel.simulator.answer_text import prompt_digest, reply_for
from tokenreel.simulator.server import SimCluster, plan_steps

VLLM_TEXT = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 1.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 3.0
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="m"} 1000.0
vllm:generation_tokens_total{engine="1",model_name="m"} 24.0
vllm:generation_tokens_created{engine="0",model_name="m"} 1.7e9
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0
# TYPE vllm:spec_decode_num_draft_tokens counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 700.0
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 350.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="+Inf",engine="0",model_name="m"} 5.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 5.0
"""

SGLANG_TEXT = """\
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 0.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 4.0
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m"} 77.0
"""

LLAMACPP_TEXT = """\
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 1
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 0
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 512
"""


def test_vllm_names_summed_over_engines_with_total_suffix() -> None:
    snap = parse_metrics(VLLM_TEXT)
    assert snap == EngineSnapshot(
        running=3, waiting=3, generated_tokens=1024, drafts=100, draft_tokens=700, accepted_tokens=350
    )


def test_sglang_and_llamacpp_names() -> None:
    assert parse_metrics(SGLANG_TEXT) == EngineSnapshot(running=0, waiting=4, generated_tokens=77)
    assert parse_metrics(LLAMACPP_TEXT) == EngineSnapshot(running=1, waiting=0, generated_tokens=512)


def test_acceptance_between_counter_snapshots() -> None:
    before = EngineSnapshot(drafts=100, draft_tokens=700, accepted_tokens=350)
    after = EngineSnapshot(drafts=150, draft_tokens=1050, accepted_tokens=550)
    acceptance = acceptance_between(before, after)
    assert acceptance is not None
    assert (acceptance.mean_length, acceptance.rate, acceptance.source) == (1 + 200 / 50, 200 / 350, "metrics")
    assert acceptance_between(after, before) is None  # counters went back: a restart
    assert acceptance_between(EngineSnapshot(), EngineSnapshot()) is None
    assert acceptance_between(before, before) is None  # no drafts in between


def test_contention_verdicts() -> None:
    before, after = EngineSnapshot(generated_tokens=100), EngineSnapshot(generated_tokens=1600)
    assert contention(before, after, 1500) == (False, "")
    assert contention(before, EngineSnapshot(generated_tokens=3100), 1500) == (
        True, "endpoint generated 3000 tokens during the run, this run generated 1500"
    )
    assert contention(None, None, 10)[0] is None
    assert contention(EngineSnapshot(), EngineSnapshot(), 10)[0] is None


def gate(url: str, idle_wait_s: float) -> tuple[Gate, EngineSnapshot | None, list[float]]:
    waits: list[float] = []

    async def main() -> tuple[Gate, EngineSnapshot | None]:
        async with aiohttp.ClientSession() as http:
            return await wait_idle(http, url, idle_wait_s, lambda r, w, s: waits.append(s))

    return (*asyncio.run(main()), waits)


def test_gate_waits_for_a_busy_endpoint_to_free_up(make_sim: Any) -> None:
    cluster = make_sim([seed("bf16")])
    set_state(cluster, "bf16", busy={"running": 2, "waiting": 1, "seconds": 0.5})
    verdict, snapshot, waits = gate(cluster.metrics_url("bf16"), idle_wait_s=5)
    assert verdict.status == "idle" and (verdict.running, verdict.waiting) == (0, 0)
    assert 0.3 < verdict.waited_s < 3 and waits
    assert snapshot is not None and snapshot.running == 0


def test_gate_gives_up_and_names_the_counts(make_sim: Any) -> None:
    cluster = make_sim([seed("bf16")])
    set_state(cluster, "bf16", busy={"running": 2, "waiting": 45})
    verdict, _, _ = gate(cluster.metrics_url("bf16"), idle_wait_s=0.3)
    assert verdict.status == "busy" and (verdict.running, verdict.waiting) == (2, 45)
    assert verdict.detail == "endpoint busy: 2 running, 45 waiting after 0.3 s; free it or raise idle_wait_s"


def record_session(cluster: SimCluster, profile_id: str, tmp_path: Any, **settings: Any) -> Session:
    arm = arm_for(cluster, profile_id)
    session = new_session("gate", fast_settings(**settings), [chat_prompt()], [arm])
    asyncio.run(record(session, tmp_path / "s.json"))
    return session


def test_busy_endpoint_skips_the_run_with_a_reason(make_sim: Any, tmp_path: Any) -> None:
    cluster = make_sim([seed("bf16", id="busy", fault="busy")])  # always shows 1 running, 2 waiting
    session = record_session(cluster, "busy", tmp_path, idle_wait_s=0.2)
    [run] = session.runs
    assert run.status == "skipped" and run.gate.status == "busy" and len(run.chunks) == 0
    assert run.error == "endpoint busy: 1 running, 2 waiting after 0.2 s; free it or raise idle_wait_s"


def test_contention_during_a_run_is_flagged(make_sim: Any, tmp_path: Any) -> None:
    cluster = make_sim([seed("bf16")], time_scale=0.1)
    set_state(cluster, "bf16", contention={"tok_s": 20000, "seconds": None})
    session = record_session(cluster, "bf16", tmp_path, max_tokens=64)
    [run] = session.runs
    assert run.status == "ok" and run.gate.status == "idle" and run.contended is True
    assert run.contention_detail.startswith("endpoint generated ")
    assert run.contention_detail.endswith("tokens during the run, this run generated 64")


def test_quiet_endpoint_is_not_contended(sim: SimCluster, tmp_path: Any) -> None:
    session = record_session(sim, "bf16", tmp_path, max_tokens=64)
    [run] = session.runs
    assert (run.contended, run.contention_detail, run.acceptance) == (False, "", None)


def test_acceptance_length_from_counters_matches_the_profile(sim: SimCluster, tmp_path: Any) -> None:
    session = record_session(sim, "nvfp4-dflash2", tmp_path, max_tokens=512)
    [run] = session.runs
    profile = next(p for p in sim.profiles if p.id == "nvfp4-dflash2")
    text = chat_prompt().messages[0]["content"]
    category = reply_for(text).category
    _, accepted = plan_steps(profile, category, 512, prompt_digest(text))
    assert run.acceptance is not None and run.acceptance.source == "metrics"
    assert run.acceptance.drafts == len(accepted) and run.acceptance.accepted == sum(accepted)
    assert run.acceptance.mean_length == pytest.approx(1 + sum(accepted) / len(accepted))
    assert run.acceptance.mean_length == pytest.approx(profile.acceptance_length(category), abs=0.6)
    assert run.acceptance.rate == pytest.approx(sum(accepted) / (len(accepted) * profile.spec_k))


@pytest.mark.parametrize("body", [None, "my_app_requests 3\n", "not prometheus {{{\n"])
def test_gate_unavailable_without_usable_metrics_and_the_run_proceeds(
    sim: SimCluster, tmp_path: Any, body: str | None
) -> None:
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=body)

    async def main() -> Session:
        app = web.Application()
        if body is not None:
            app.router.add_get("/metrics", metrics)
        async with serve(app) as root:
            arm = arm_for(sim, "bf16", metrics_url=f"{root}/metrics")
            session = new_session("gate", fast_settings(max_tokens=32), [chat_prompt()], [arm])
            await record(session, tmp_path / "s.json")
            return session

    [run] = asyncio.run(main()).runs
    assert run.status == "ok" and run.gate.status == "unavailable"
    assert run.gate.detail.endswith("the run was not checked for other traffic") and "/metrics" in run.gate.detail
    assert run.contended is None and "contention unknown" in run.contention_detail


def test_refused_metrics_is_unavailable() -> None:
    async def main() -> None:
        async with aiohttp.ClientSession() as http:
            with pytest.raises(MetricsUnavailable, match="ClientConnectorError"):
                await fetch_snapshot(http, "http://127.0.0.1:9/metrics", timeout=1)

    started = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - started < 2
