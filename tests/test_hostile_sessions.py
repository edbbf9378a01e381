"""One impossible value from a server never poisons a session (issue 11, item 1).

A small OpenAI-compatible server on 127.0.0.1 (aiohttp, in a thread of this test) sends one
poisoned value for the first `poison` requests, then behaves. After `tokenreel record`: the
run is kept as `invalid` with the reason (exit 1, the console says so), the session loads,
`report` works, and `record --resume` re-records the run once the server behaves.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from typer.testing import CliRunner

from tokenreel.cli import app
from tokenreel.session import archive, validate

MODEL = "hostile/model"
MAX_TOKENS = 4


class HostileServer:
    """vLLM-shaped endpoints whose first `poison` answers carry the chosen impossible value."""

    def __init__(self, mode: str, poison: int = 1, events: int = 0) -> None:
        self.mode, self.poison, self.events = mode, poison, events
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.runner: web.AppRunner | None = None
        self.port = 0

    def start(self) -> HostileServer:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(timeout=10)
        return self

    async def _start(self) -> None:
        app_ = web.Application()
        app_.router.add_get("/v1/models", self.models)
        app_.router.add_get("/metrics", self.metrics)
        app_.router.add_post("/v1/chat/completions", self.chat)
        self.runner = web.AppRunner(app_)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def close(self) -> None:
        if self.runner is not None:
            asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "max_model_len": 4096}]})

    async def metrics(self, request: web.Request) -> web.Response:
        running = -1 if self.mode == "negative_gauge" and self.poison > 0 else 0
        text = (
            f"vllm:num_requests_running {running}\nvllm:num_requests_waiting 0\n"
            "vllm:generation_tokens_total 0\n"
        )
        return web.Response(text=text)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        poisoned = self.poison > 0
        if self.mode != "negative_gauge":  # the gauge case poisons the gate, not the stream
            self.poison -= 1
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)

        async def send(event: dict | str) -> None:
            data = event if isinstance(event, str) else json.dumps(event)
            await response.write(f"data: {data}\n\n".encode())

        await send({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        counts = list(range(1, MAX_TOKENS + 1))
        if poisoned and self.mode == "usage_jump":
            counts = [1, 2_000_002]  # 2,000,001 tokens in one event
        if poisoned and self.mode == "many_events":
            counts = list(range(1, self.events + 1))
        for count in counts:
            usage = {"prompt_tokens": 3, "completion_tokens": count, "total_tokens": 3 + count}
            await send({"choices": [{"index": 0, "delta": {"content": "x"}}], "usage": usage})
        final: dict = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": counts[-1],
                                                "total_tokens": 3 + counts[-1]}}
        if self.mode == "acceptance":  # every answer: the value must never reach a mean
            final["metrics"] = {"speculative_decoding": {"mean_acceptance_length": 1e308 if poisoned else 2.5,
                                                         "draft_acceptance_rate": 0.5}}
        await send({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
        await send(final)
        await send("[DONE]")
        await response.write_eof()
        return response


@pytest.fixture
def hostile() -> Iterator:
    servers: list[HostileServer] = []

    def make(mode: str, **kwargs: int) -> HostileServer:
        server = HostileServer(mode, **kwargs).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


def write_config(path: Path, server: HostileServer, repeats: int = 1) -> Path:
    path.write_text(
        "\n".join([
            "[session]", 'name = "hostile"', 'prompts = "builtin:ladder4"', f"max_tokens = {MAX_TOKENS}",
            "warmup = 0", f"repeats = {repeats}", "idle_wait_s = 0.3",
            "[session.timeouts]", "connect = 5", "first_token = 10", "between_chunks = 5", "total = 30",
            "[[arms]]", 'id = "hostile"', 'label = "Hostile"', f'base_url = "{server.base_url}"', f'model = "{MODEL}"',
        ]) + "\n",
        encoding="utf-8",
    )
    return path


def invoke(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def record_poisoned(tmp_path: Path, server: HostileServer) -> tuple[Path, Path, object]:
    config = write_config(tmp_path / "c.toml", server)
    session = tmp_path / "s.json"
    result = invoke("record", "--config", config, "--out", session, "--no-preflight")
    return config, session, result


def assert_usable_after(config: Path, session: Path, tmp_path: Path, server: HostileServer) -> None:
    """The session loads, report and render-listing work, and --resume re-records the bad run."""
    loaded = archive.load(session)
    invalid = [run for run in loaded.runs if run.status == "invalid"]
    assert len(invalid) == 1, [(r.status, r.error) for r in loaded.runs]
    assert invalid[0].error.startswith("invalid: the server sent an impossible value")
    for fmt in ("md", "json"):
        report = invoke("report", session, "--format", fmt, "--out", tmp_path / f"r.{fmt}")
        assert report.exit_code == 0, report.output
    assert "invalid" in (tmp_path / "r.md").read_text(encoding="utf-8")  # the missing cell says why
    server.poison = 0
    resumed = invoke("record", "--config", config, "--out", session, "--resume", "--no-preflight")
    assert resumed.exit_code == 0, resumed.output
    after = archive.load(session)
    assert {run.status for run in after.runs} == {"ok"} and len(after.runs) == len(loaded.runs)


def test_usage_jump_of_two_million_tokens_is_kept_invalid(tmp_path: Path, hostile) -> None:
    server = hostile("usage_jump")
    config, session, result = record_poisoned(tmp_path, server)
    assert result.exit_code == 1, result.output
    # caught while streaming (issue 25), before the archive's own check of chunks.tokens
    assert "run 0: invalid: the server sent an impossible value (usage.completion_tokens jumped by" in result.output
    assert_usable_after(config, session, tmp_path, server)


def test_negative_metrics_gauge_is_kept_invalid(tmp_path: Path, hostile) -> None:
    server = hostile("negative_gauge")
    config, session, result = record_poisoned(tmp_path, server)
    assert result.exit_code == 1, result.output
    assert "gate.running: must not be negative" in result.output
    loaded = archive.load(session)
    assert all(run.status == "invalid" for run in loaded.runs) and loaded.runs
    report = invoke("report", session, "--format", "md", "--out", tmp_path / "r.md")
    assert report.exit_code == 0, report.output
    server.poison = 0
    resumed = invoke("record", "--config", config, "--out", session, "--resume", "--no-preflight")
    assert resumed.exit_code == 0, resumed.output
    assert {run.status for run in archive.load(session).runs} == {"ok"}


def test_more_events_than_the_archive_holds_is_kept_invalid(tmp_path: Path, hostile, monkeypatch) -> None:
    # The real limit is 5,000,000 events; the same check with a limit of 50 keeps the test short.
    monkeypatch.setattr(validate, "MAX_CHUNKS_PER_RUN", 50)
    server = hostile("many_events", events=60)
    config, session, result = record_poisoned(tmp_path, server)
    assert result.exit_code == 1, result.output
    assert "chunks is more than the limit of 50" in result.output
    assert_usable_after(config, session, tmp_path, server)


def test_acceptance_length_of_1e308_is_dropped_with_a_note(tmp_path: Path, hostile) -> None:
    server = hostile("acceptance", poison=2)
    config, session, result = record_poisoned(tmp_path, server)
    assert result.exit_code == 0, result.output
    loaded = archive.load(session)
    poisoned = [run for run in loaded.runs if "impossible acceptance length 1e+308" in run.acceptance_note]
    assert len(poisoned) == 2 and all(run.acceptance.mean_length is None for run in poisoned)
    assert all(run.acceptance.rate == 0.5 for run in poisoned)
    for fmt in ("md", "json", "csv"):
        report = invoke("report", session, "--format", fmt, "--out", tmp_path / f"r.{fmt}")
        assert report.exit_code == 0, report.output
    resumed = invoke("record", "--config", config, "--out", session, "--resume", "--no-preflight")
    assert resumed.exit_code == 0, resumed.output


def test_a_file_written_before_the_bound_loads_without_the_value(tmp_path: Path, hostile) -> None:
    """Sessions recorded by an older tokenreel with such a value load too (bounded at load)."""
    server = hostile("acceptance", poison=0)
    _, session, result = record_poisoned(tmp_path, server)
    assert result.exit_code == 0, result.output
    import orjson

    data = orjson.loads(session.read_bytes())
    for run in data["runs"]:
        run["acceptance"]["mean_length"] = 1e308
    session.write_bytes(orjson.dumps(data))
    loaded = archive.load(session)
    assert all(run.acceptance.mean_length is None and "1e+308" in run.acceptance_note for run in loaded.runs)
    report = invoke("report", session, "--format", "md", "--out", tmp_path / "r.md")
    assert report.exit_code == 0, report.output
