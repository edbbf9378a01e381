"""The recorder against every engine shape: what a correct recorder must archive.

Each test records a small session through the real recorder (`recorder.runner.record`) against
a simulated vLLM 0.33, SGLang 0.5 or llama.cpp endpoint, and checks the archive against what
the simulator knows it sent: token counts, TTFT, contention, the idle gate without /metrics,
failures, and acceptance length. The shapes differ exactly where the engines do (one chunk per
step or one event per token, counters per step or at request end, 6-digit counters, ...), so a
recorder that is right for vLLM only fails here.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.test_recorder_support import arm_for, chat_prompt, fast_settings, set_state
from tokenreel.analysis.metrics import NS_PER_S, output_tokens, run_metrics
from tokenreel.recorder.events import RecordEvent, RunStarted
from tokenreel.recorder.runner import new_session, record
from tokenreel.session.model import Run, Session
from tokenreel.simulator.answer_text import reply_for
from tokenreel.simulator.generation import make_plan, spec_stats
from tokenreel.simulator.profiles import SEED_LADDER, Profile
from tokenreel.simulator.server import SimCluster

BF16, _, DFLASH = SEED_LADDER
ENGINES = ("vllm", "sglang", "llamacpp")
CODE = chat_prompt("Implement a Python function that merges overlapping intervals.", "code")
# Its prose reply has " café" as token 39: token 38 ends mid-character on a byte-level vocabulary.
BREAD = chat_prompt("Write an essay on bread", "prose")
HELD = 38
RUNNING_GAUGE = {"vllm": "vllm:num_requests_running", "sglang": "sglang:num_running_reqs",
                 "llamacpp": "llamacpp:requests_processing"}


def shaped(profile: Profile, engine: str, **changes: Any) -> Profile:
    return replace(profile, engine=engine, **changes)


def record_runs(cluster: SimCluster, pid: str, tmp_path: Path, prompt: Any = CODE, on_event: Any = None,
                arm_changes: dict[str, Any] | None = None, **settings: Any) -> list[Run]:
    """Record one arm's runs of one prompt; the session is saved, loaded back and returned."""
    arm = arm_for(cluster, pid, **(arm_changes or {}))
    session: Session = new_session("shapes", fast_settings(**settings), [prompt], [arm])
    asyncio.run(record(session, tmp_path / "s.json", on_event=on_event))
    return session.runs


def request_body(prompt: Any, max_tokens: int) -> dict[str, Any]:
    return {"messages": prompt.messages, "max_tokens": max_tokens, "ignore_eos": True}


# --- tokens and TTFT -------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_token_counts_equal_the_servers_count(make_sim: Any, tmp_path: Path, engine: str) -> None:
    """Both prompts, both profiles: BREAD's reply holds back a token's text (vLLM: an empty-text
    chunk that carries it; llama.cpp: no event for it), CODE's does not."""
    cluster = make_sim([shaped(BF16, engine), shaped(DFLASH, engine)])
    for pid in ("bf16", "nvfp4-dflash2"):
        for prompt in (CODE, BREAD):
            [run] = record_runs(cluster, pid, tmp_path / pid / prompt.id, prompt=prompt, max_tokens=96)
            assert run.status == "ok", run.error
            assert run.usage is not None and run.usage["completion_tokens"] == 96  # the server's own count
            assert sum(run.chunks.tokens) == 96, (pid, prompt.id, run.token_source, run.chunks.tokens)
            assert output_tokens(run) == 96


@pytest.mark.parametrize("engine", ENGINES)
def test_ttft_is_the_first_event_after_the_role_that_carries_a_token(make_sim: Any, tmp_path: Path, engine: str) -> None:
    """vLLM: a reasoning model's first token is a special token whose text is skipped, so its chunk
    has empty text but one token; it is the first token all the same (so is the token of a chunk
    whose text is held back). Every shape sends a role event first, which is not a token."""
    profile = shaped(replace(BF16, ttft_s=0.05), engine, reasoning_tokens=8)
    cluster = make_sim([profile], time_scale=0.5)  # ~10 ms per step: the next event is visibly later
    [run] = record_runs(cluster, "bf16", tmp_path, max_tokens=24)
    assert run.status == "ok", run.error
    chunks = run.chunks
    first_token = 1  # event 0 is the role event of every shape's chat stream
    ttft = run_metrics(run).ttft_s
    times = [round(t / NS_PER_S, 4) for t in chunks.t_ns[:4]]
    assert ttft == pytest.approx(chunks.t_ns[first_token] / NS_PER_S, abs=1e-6), f"TTFT {ttft} s; events at {times} s"
    assert chunks.tokens[0] == 0 and chunks.tokens[first_token] >= 1, chunks.tokens[:4]


@pytest.mark.parametrize("profile", [BF16, DFLASH], ids=["plain", "speculative"])
def test_llamacpp_counts_per_event_are_exact_from_timings_per_token(make_sim: Any, tmp_path: Path, profile: Profile) -> None:
    """llama.cpp sends no running usage; the event that carries a held-back token carries two
    tokens, and a speculative step's burst one per event. The recorder asks for
    `timings_per_token` and counts from its running `predicted_n`: exact, not estimated."""
    cluster = make_sim([shaped(profile, "llamacpp")])
    [run] = record_runs(cluster, profile.id, tmp_path, prompt=BREAD, max_tokens=45)
    assert run.status == "ok", run.error
    tokens = reply_for(BREAD.messages[0]["content"]).tokens(45)
    merged = run.chunks.content.index(tokens[HELD] + tokens[HELD + 1])
    assert sum(run.chunks.tokens) == 45
    assert run.token_source == "timings" and not run.tokens_estimated, run.token_source
    others = [n for i, n in enumerate(run.chunks.tokens) if run.chunks.has_text(i) and i != merged]
    assert run.chunks.tokens[merged] == 2 and set(others) == {1}, run.chunks.tokens


# --- contention ------------------------------------------------------------------------------


class Overlap:
    """A second client: starts once the run has started, generates until well after it ends."""

    def __init__(self, cluster: SimCluster, pid: str, delay_s: float, tokens: int) -> None:
        self.cluster, self.pid, self.delay_s, self.tokens = cluster, pid, delay_s, tokens
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.running_after_run: float | None = None

    def on_event(self, event: RecordEvent) -> None:
        if isinstance(event, RunStarted) and self.thread is None:
            self.thread = threading.Thread(target=self._run, daemon=True)
            self.thread.start()

    def _run(self) -> None:
        import time

        time.sleep(self.delay_s)
        profile = next(p for p in self.cluster.profiles if p.id == self.pid)
        body = {"model": profile.model, "prompt": "someone else", "max_tokens": self.tokens,
                "ignore_eos": True, "stream": True}
        try:
            with httpx.stream("POST", self.cluster.base_url(self.pid) + "/completions", json=body, timeout=30) as r:
                for _ in r.iter_lines():
                    pass
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error = exc

    def join(self) -> None:
        assert self.thread is not None, "the run never started"
        self.thread.join(timeout=30)
        assert self.error is None, self.error


@pytest.mark.parametrize("engine", ENGINES)
def test_a_second_client_overlapping_the_run_makes_it_contended(make_sim: Any, tmp_path: Path, engine: str) -> None:
    """The other request starts during the run and ends after it: vLLM's per-step counter sees
    its tokens; SGLang's and llama.cpp's request-end counters do not, their gauges do."""
    profile = shaped(replace(BF16, ttft_s=0.05, decode_tok_s=200.0), engine)
    cluster = make_sim([profile], time_scale=1.0)
    overlap = Overlap(cluster, "bf16", delay_s=0.1, tokens=400)  # run ~0.37 s; the other ends at ~2.1 s
    [run] = record_runs(cluster, "bf16", tmp_path, on_event=overlap.on_event, max_tokens=64, idle_wait_s=5.0)
    overlap.join()
    assert run.status == "ok", run.error
    assert run.gate.status == "idle"
    assert run.contended is True, f"contended {run.contended!r} ({run.contention_detail!r})"


@pytest.mark.parametrize("engine", ENGINES)
def test_a_long_lived_server_gives_no_false_contention(make_sim: Any, tmp_path: Path, engine: str) -> None:
    """12,345,678 tokens already generated: llama.cpp prints 1.23457e+07, so a counter moves in
    steps of 100 and a 64-token run reads as 0 or 100 tokens. Nobody else generated."""
    cluster = make_sim([shaped(BF16, engine, counter_offset=12_345_678)])
    runs = record_runs(cluster, "bf16", tmp_path, max_tokens=64, repeats=3)
    assert [r.status for r in runs] == ["ok"] * 3
    assert [r.contended for r in runs] == [False] * 3, [(r.contended, r.contention_detail) for r in runs]


# --- no /metrics, failures -------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_metrics_off_gives_the_gate_unavailable(make_sim: Any, tmp_path: Path, engine: str) -> None:
    cluster = make_sim([shaped(BF16, engine, metrics=False)])
    [run] = record_runs(cluster, "bf16", tmp_path, max_tokens=32)
    assert run.status == "ok", run.error
    assert run.gate.status == "unavailable" and run.contended is None
    assert output_tokens(run) == 32


FAULT_WORDS = {"drop": ("dropped", "closed", "connection"), "error_event": ("error",), "500": ("500",)}


@pytest.mark.parametrize("fault", sorted(FAULT_WORDS))
@pytest.mark.parametrize("engine", ENGINES)
def test_faults_fail_the_run_with_one_clear_line(make_sim: Any, tmp_path: Path, engine: str, fault: str) -> None:
    cluster = make_sim([shaped(BF16, engine)])
    set_state(cluster, "bf16", fault={"mode": fault, "count": 1})
    [run] = record_runs(cluster, "bf16", tmp_path, max_tokens=48)
    assert run.status == "failed"
    assert run.error and "\n" not in run.error and len(run.error) <= 400, run.error
    assert any(word in run.error.lower() for word in FAULT_WORDS[fault]), run.error
    httpx.get(cluster.base_url("bf16") + "/models", timeout=5).raise_for_status()  # the endpoint lives on


# --- acceptance length -----------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_acceptance_length_of_the_run(make_sim: Any, tmp_path: Path, engine: str) -> None:
    """vLLM from its counters, SGLang from `sglext` (asked per request), llama.cpp from its spec
    counters (its `timings` have drafted and accepted tokens but no count of verify steps)."""
    cluster = make_sim([shaped(DFLASH, engine)])
    extra = {"return_spec_tokens_details": True} if engine == "sglang" else {}
    [run] = record_runs(cluster, "nvfp4-dflash2", tmp_path, arm_changes={"extra_body": extra}, max_tokens=200)
    assert run.status == "ok", run.error
    plan = make_plan(DFLASH, request_body(CODE, 200), True, None)
    expected = spec_stats(plan, DFLASH.spec_k)
    assert run.acceptance is not None
    assert run.acceptance.mean_length == pytest.approx(expected.mean_length), run.acceptance
    assert run.acceptance.rate == pytest.approx(expected.rate), run.acceptance
