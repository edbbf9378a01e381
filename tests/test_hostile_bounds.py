"""Servers that never end their stream, or send counts no server could (issue 25, items 1, 2
and 12): the recorder stops each run at its bound while it streams, in bounded memory, and says
what happened in one line. Real aiohttp servers on 127.0.0.1, no mocks; the memory figures are
those of a real `tokenreel record` process (its peak RSS, VmHWM)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.test_cli import REPO
from tests.test_hostile_servers import FINISH, delta, sse, stream_via, streaming
from tests.test_recorder_support import serve
from tokenreel.recorder.engines.engine_metrics import MetricsUnavailable, fetch_snapshot
from tokenreel.session import archive

MiB = 1 << 20
PEAK_RSS_LIMIT = 300 * MiB


class EndlessAfterFirst:
    """Answers its first request with a normal 20-token stream, the next one with `event`
    (already SSE-framed) repeated without end, as fast as the socket takes it; every later one
    normally again. Records when the endless answer started and when the client dropped it."""

    def __init__(self, event: bytes) -> None:
        self.event, self.requests = event, 0
        self.started = self.dropped = 0.0
        self.sent = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method != "POST":
            return web.Response(status=404)
        self.requests += 1
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if self.requests != 2:
            events = [delta("a", n) for n in range(1, 21)]
            await response.write(sse(*events, FINISH | {"usage": {"completion_tokens": 20}}, "[DONE]"))
            return response
        block = self.event * max(1, (256 << 10) // len(self.event))
        self.started = time.monotonic()
        try:
            while time.monotonic() - self.started < 60:
                await response.write(block)
                self.sent += len(block)
        except (ConnectionError, asyncio.CancelledError):
            pass
        self.dropped = time.monotonic()
        return response


@contextmanager
def served_in_thread(handle: Any) -> Iterator[str]:
    """An aiohttp app answering every path with `handle`, in its own thread and loop (the
    recorder under test is another process); yields its root URL."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    root: list[str] = []

    async def start() -> web.AppRunner:
        application = web.Application()
        application.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(application, shutdown_timeout=0.1)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        root.append(f"http://127.0.0.1:{runner.addresses[0][1]}")
        return runner

    def run() -> None:
        asyncio.set_event_loop(loop)
        runner = loop.run_until_complete(start())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield root[0]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def record_peak(tmp_path: Path, root: str) -> tuple[subprocess.CompletedProcess[str], int, float]:
    """Run `tokenreel record` (4 prompts, max_tokens 20) against root; (result, peak RSS bytes, seconds)."""
    config = tmp_path / "c.toml"
    config.write_text(
        '[session]\nname = "bounds"\nprompts = "builtin:ladder4"\nmax_tokens = 20\nwarmup = 0\nrepeats = 1\n'
        f'idle_wait_s = 0.1\n[[arms]]\nid = "a"\nlabel = "a"\nbase_url = "{root}/v1"\nmodel = "m"\n',
        encoding="utf-8",
    )
    command = [sys.executable, "-m", "tokenreel", "record", "--config", str(config), "--out", str(tmp_path / "s.json"),
               "--no-preflight"]
    started = time.monotonic()
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    status = Path(f"/proc/{proc.pid}/status")
    while proc.poll() is None and time.monotonic() - started < 60:
        try:
            line = next(x for x in status.read_text().splitlines() if x.startswith("VmHWM:"))
            peak = max(peak, int(line.split()[1]) * 1024)
        except (OSError, StopIteration):
            pass
        time.sleep(0.02)
    stdout, stderr = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr), peak, time.monotonic() - started


@pytest.mark.parametrize(
    "event, bound",
    [
        # 64 KiB of text per event, the usage stuck at 1: the bytes bound (16 MiB + 8 KiB a token).
        (sse(delta("x" * (64 << 10), 1)), "bytes of event data, over its bound of 17465344 (16 MiB + 8 KiB a token)"),
        # One character per event and no usage: each is a token, over max_tokens 20 + 64.
        (sse(delta("y")), "85 tokens, over max_tokens + its margin (84)"),
        # One character per event, the usage stuck at 1: the events bound (2 x 84 + 1024).
        (sse(delta("z", 1)), "more than 1192 events"),
    ],
    ids=["64KiB-events", "1-char-events", "stuck-usage"],
)
def test_an_endless_stream_fails_at_its_bound_in_bounded_memory(tmp_path: Path, event: bytes, bound: str) -> None:
    server = EndlessAfterFirst(event)
    with served_in_thread(server.handle) as root:
        result, peak, _ = record_peak(tmp_path, root)
    print(f"peak RSS {peak / MiB:.0f} MiB; endless answer dropped after {server.dropped - server.started:.2f} s,"
          f" {server.sent / MiB:.1f} MiB sent")
    assert result.returncode == 1, result.stderr
    assert peak < PEAK_RSS_LIMIT, f"peak RSS {peak / MiB:.0f} MiB"
    assert 0 < server.dropped - server.started < 10
    assert "Traceback" not in result.stderr
    failed = [line for line in result.stderr.splitlines() if "passed its bound" in line]
    assert len(failed) == 1 and bound in failed[0] and "max_tokens 20" in failed[0], result.stderr
    session = archive.load(tmp_path / "s.json")
    assert sorted(run.status for run in session.runs) == ["failed", "ok", "ok", "ok"]
    (bad,) = [run for run in session.runs if run.status == "failed"]
    assert len(bad.chunks) == 0 and bound in bad.error


def test_a_usage_counter_that_jumps_past_the_run_is_quarantined() -> None:
    body = sse(delta("a", 1), delta("b", 1_000_000), delta("c", 1_999_999), FINISH, "[DONE]")
    run = asyncio.run(stream_via({"/v1/chat/completions": streaming(body)}, max_tokens=3000))
    assert run.status == "invalid" and "\n" not in run.error
    assert "usage.completion_tokens jumped by 999999 tokens in one event (from 1 to 1000000) at event 1" in run.error
    assert "more than the whole run may stream (3750 for max_tokens 3000)" in run.error
    assert len(run.chunks) == 0 and run.usage is None and "--resume" in run.error


def test_a_count_ahead_of_the_time_since_send_is_quarantined() -> None:
    """Within the token bound of a long run, but a million tokens moments after send (10 M tok/s
    would need 100 ms): a jump over what the time allows is impossible too."""
    body = sse(delta("a", 1), delta("b", 1_000_000), FINISH, "[DONE]")
    run = asyncio.run(stream_via({"/v1/chat/completions": streaming(body)}, max_tokens=1_000_000))
    assert run.status == "invalid" and "\n" not in run.error
    assert "usage.completion_tokens reached 1000000 tokens" in run.error
    assert "ms after send at event 1, more than the time allows" in run.error and "10,000,000 tok/s" in run.error
    assert len(run.chunks) == 0 and run.usage is None


def test_a_usage_counter_that_goes_backwards_says_so() -> None:
    events = [delta(c, n) for n, c in enumerate("abcdefghij", start=1)]
    body = sse(*events, FINISH | {"usage": {"completion_tokens": 5}}, "[DONE]")
    run = asyncio.run(stream_via({"/v1/chat/completions": streaming(body)}, max_tokens=5))
    assert run.status == "invalid"
    assert "usage.completion_tokens went backwards, from 10 to 5 tokens at event 10" in run.error
    assert "forced length" not in run.error


@pytest.mark.parametrize("number", [b"NaN", b"1e400", b"-Infinity"])
def test_a_non_finite_number_in_an_event_is_named_not_called_invalid_text(number: bytes) -> None:
    odd = b'data: {"choices": [{"index": 0, "delta": {"content": "b"}}], "usage": {"completion_tokens": 2}, "x": ' + number
    body = sse(delta("a", 1)) + odd + b"}\n\n" + sse(delta("c", 3), FINISH | {"usage": {"completion_tokens": 3}}, "[DONE]")
    run = asyncio.run(stream_via({"/v1/chat/completions": streaming(body)}, max_tokens=3))
    assert run.status == "ok" and run.chunks.content == ["a", "b", "c", ""]
    assert "1 event(s) held a number JSON does not allow (NaN, Infinity or one past a double" in run.error
    assert "invalid text" not in run.error and "UTF-8" not in run.error


@pytest.mark.parametrize("text, named", [
    ("vllm:num_requests_running NaN\nvllm:num_requests_waiting 0\n", "vllm:num_requests_running (nan)"),
    ("vllm:num_requests_running 0\nvllm:num_requests_waiting +Inf\n", "vllm:num_requests_waiting (inf)"),
    ("vllm:num_requests_running 0\nvllm:num_requests_waiting NaN\n", "vllm:num_requests_waiting (nan)"),
], ids=["running NaN", "waiting +Inf", "waiting NaN"])
def test_a_request_gauge_that_is_not_a_number_is_named_never_read_as_idle(text: str, named: str) -> None:
    async def main() -> str:
        app = web.Application()

        async def metrics(request: web.Request) -> web.Response:
            return web.Response(text=text)

        app.router.add_get("/metrics", metrics)
        async with serve(app) as root, aiohttp.ClientSession() as http:
            with pytest.raises(MetricsUnavailable) as caught:
                await fetch_snapshot(http, f"{root}/metrics")
            return str(caught.value)

    message = asyncio.run(main())
    assert f"the request gauge {named} is not a number" in message and "no request gauges" not in message


def test_an_overshoot_within_the_margin_stays_ok() -> None:
    """The bounds leave a run that overshoots max_tokens within the margin ok (its note says so)."""
    events = [delta("a", n) for n in range(1, 31)]
    body = sse(*events, FINISH | {"usage": {"completion_tokens": 30}}, "[DONE]")
    run = asyncio.run(stream_via({"/v1/chat/completions": streaming(body)}, max_tokens=20))
    assert run.status == "ok" and "forced length not met: 30 of 20 tokens" in run.error
    assert run.chunks.tokens == [1] * 30 + [0]
