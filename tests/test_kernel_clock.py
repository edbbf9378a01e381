"""Kernel receive times (issue 13): a blocked client loop, TLS, and the user-clock fallback.

A small SSE server on a raw loopback socket (its own thread) writes each event with `send` and
notes `perf_counter_ns()` right after: the ground truth the archived times are checked against.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from time import perf_counter_ns
from typing import Any, NamedTuple, cast

import aiohttp
import orjson
import pytest
import uvloop

from tokenreel.analysis.ladder import usable_runs
from tokenreel.analysis.metrics import first_token_index
from tokenreel.analysis.selection import DEFAULT_SELECTION
from tokenreel.recorder.client import event_loop, kernel_clock
from tokenreel.recorder.client.sse_client import stream_run
from tokenreel.session.model import Arm, Prompt, Run, Settings

MS = 1_000_000
PROMPT = Prompt(id="p1", category="prose", messages=[{"role": "user", "content": "hi"}], prompt="")
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
pytestmark = pytest.mark.skipif(kernel_clock.SO_TIMESTAMPNS is None, reason="kernel receive times are Linux-only")


def _event(text: str, tokens: int, role: bool = False) -> bytes:
    delta = {"role": "assistant", "content": text} if role else {"content": text}
    body = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}], "usage": {"completion_tokens": tokens}}
    return b"data: " + orjson.dumps(body) + b"\n\n"


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


TAIL = _chunked(b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}\n\n') + _chunked(
    b"data: [DONE]\n\n"
) + b"0\r\n\r\n"


class Write(NamedTuple):
    """perf_counter_ns just before a write and just after the kernel took its bytes: the kernel's
    receive time lies between (the server is a thread of the test's process, so under load the
    "after" stamp can wait some ms for the GIL)."""

    before: int
    after: int


def near(t: int, write: Write) -> bool:
    """`t` is the write's time within 0.5 ms: inside [before, after], 0.5 ms either side."""
    return write.before - 0.5 * MS <= t <= write.after + 0.5 * MS


class SseServer:
    """One-connection-at-a-time SSE server: `script(send)` writes the body (the headers too,
    unless `head`); `send` returns its `Write` stamps."""

    def __init__(self, script: Callable[[Callable[[bytes], Write]], None], tls: ssl.SSLContext | None = None,
                 head: bool = True) -> None:
        self.script, self.tls, self.head = script, tls, head
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.error: BaseException | None = None

    def __enter__(self) -> SseServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.listener.close()
        self.thread.join(5)

    def _serve(self) -> None:
        try:
            conn, _ = self.listener.accept()
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            with conn:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                request = b""
                while b"\r\n\r\n" not in request:
                    request += conn.recv(65536)
                head, _, body = request.partition(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
                while len(body) < length:
                    body += conn.recv(65536)

                def send(data: bytes) -> Write:
                    before = perf_counter_ns()
                    conn.sendall(data)
                    return Write(before, perf_counter_ns())

                if self.head:
                    send(HEAD)
                self.script(send)
                conn.recv(1)  # until the client hangs up (or reuses: it gets EOF)
        except BaseException as exc:  # the test names it
            self.error = exc


class Stamped:
    """The session stream_run is given, noting when it builds its request: its send stamp t0
    follows within microseconds, which turns archived offsets into perf_counter times."""

    def __init__(self, http: aiohttp.ClientSession) -> None:
        self.http, self.built_ns = http, 0

    def post(self, *args: Any, **kwargs: Any) -> Any:
        request = self.http.post(*args, **kwargs)
        self.built_ns = perf_counter_ns()
        return request


def record(server: SseServer, connector: Callable[[], aiohttp.BaseConnector | None], scheme: str = "http",
           runner: Callable[[Coroutine[Any, Any, int]], int] = asyncio.run) -> tuple[Run, int]:
    """One run against the server, its loop from `runner`; (run, perf_counter_ns of the request's build)."""
    arm = Arm(id="a", label="a", base_url=f"{scheme}://127.0.0.1:{server.port}/v1", model="m")
    run = Run(arm="a", prompt="p1", index=0, warmup=False)

    async def main() -> int:
        async with aiohttp.ClientSession(connector=connector(), response_class=kernel_clock.StampedResponse) as http:
            client = Stamped(http)
            await stream_run(cast(aiohttp.ClientSession, client), arm, PROMPT, Settings(max_tokens=4, ignore_eos=False), run)
            return client.built_ns

    built = runner(main())
    assert server.error is None, server.error
    assert run.status == "ok", run.error
    return run, built


def run_with_a_blocked_loop(
    script: Callable[[Callable[[bytes], Write], Callable[[], None], Callable[[], None]], None], head: bool = True
) -> tuple[Run, int]:
    """One run whose server `script(send, hold, release)` can block the client's event loop:
    after a 20 ms "prefill" (the client waits in its loop), `hold()` returns once the loop is
    inside a blocking call, which ends 50 ms after the script calls `release()`. `head`: the
    server sends the headers before the script (else the script does)."""
    loop_holder: list[asyncio.AbstractEventLoop] = []
    started, released = threading.Event(), threading.Event()

    def block() -> None:  # runs on the client's event loop
        started.set()
        released.wait(5)
        time.sleep(0.05)

    def hold() -> None:
        loop_holder[0].call_soon_threadsafe(block)
        started.wait(5)

    def serve(send: Callable[[bytes], Write]) -> None:
        time.sleep(0.02)
        script(send, hold, released.set)

    def connector() -> aiohttp.BaseConnector:
        loop_holder.append(asyncio.get_running_loop())
        return kernel_clock.stamping_connector()

    with SseServer(serve, head=head) as server:
        return record(server, connector)


def blocked_run() -> tuple[Run, int, list[Write]]:
    """The issue's scenario: event 1 is written while the client's loop is blocked for 50 ms,
    then the server pauses 100 ms. Returns (run, its request's build stamp, the server's writes)."""
    writes: list[Write] = []

    def script(send: Callable[[bytes], Write], hold: Callable[[], None], release: Callable[[], None]) -> None:
        hold()  # the loop cannot read until 50 ms after the write
        writes.append(send(_chunked(_event("Hello", 1, role=True))))
        release()
        time.sleep(0.1)
        writes.append(send(_chunked(_event(" world", 2))))
        writes.append(send(_chunked(_event("!", 3))))
        send(TAIL)

    run, built = run_with_a_blocked_loop(script)
    return run, built, writes


def test_a_blocked_client_loop_does_not_move_the_archived_time() -> None:
    """The issue's test: the event's archived time stays within 0.5 ms of the write, the
    user-space stamp is >= 50 ms late, and the run is flagged client_busy (its first token was
    read alone: its times hold, but a recorder that waited for a CPU leaves the run out)."""
    run, built, writes = blocked_run()
    chunks = run.chunks
    first = first_token_index(chunks)
    assert first == 0 and run.clock is not None and run.clock.source == "kernel", run.clock
    archived = built + chunks.t_ns[first]
    user = archived + chunks.client_delay_us[first] * 1000
    assert near(archived, writes[0]), (archived - writes[0].before) / MS
    assert user - writes[0].after >= 50 * MS, (user - writes[0].after) / MS
    for i, write in zip((1, 2), writes[1:], strict=False):
        assert near(built + chunks.t_ns[i], write), (built + chunks.t_ns[i] - write.before) / MS
    assert run.client_busy is True and run.clock.delay_max_ms is not None and run.clock.delay_max_ms >= 50
    assert not run.clock.first_shared and DEFAULT_SELECTION.counts_ttft(run)  # exact: kept, TTFT too


def test_the_console_names_a_client_busy_run_only_when_it_is_left_out() -> None:
    """A kernel-clock run is exact however late the client woke: no line per run (record sums them
    up at the end); on the user-space clock the same run is late and left out: said."""
    from rich.console import Console

    from tokenreel.cli.progress import RecordDisplay
    from tokenreel.recorder.events import ArmStarted
    from tokenreel.recorder.runner import _finished
    from tokenreel.session.model import Clock

    run, _, _ = blocked_run()
    texts = []
    for clock in (run.clock, Clock("user", "no kernel receive times on this platform")):
        run.clock = clock
        console = Console(record=True, width=200, force_terminal=False)
        with RecordDisplay(console) as display:
            display(ArmStarted("a", "A", 1, 1, 1))
            display(_finished(run))
        texts.append(console.export_text())
    assert "client busy" not in texts[0]
    assert ("a / p1 / run 0: client busy: this machine was busy and the run was timed by the user-space clock (no kernel"
            " receive times on this platform): its times are late, left out") in texts[1]


def test_tls_streams_get_kernel_times(tmp_path: Path) -> None:
    """The SSL protocol reads the raw TCP segments through the same socket: kernel times too."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    client_tls = ssl.create_default_context(cafile=str(cert))
    writes: list[Write] = []

    def script(send: Callable[[bytes], Write]) -> None:
        for i, text in enumerate(("One", " two", " three")):
            time.sleep(0.02)
            writes.append(send(_chunked(_event(text, i + 1, role=i == 0))))
        send(TAIL)

    def connector() -> aiohttp.BaseConnector:
        return aiohttp.TCPConnector(socket_factory=kernel_clock.stamping_socket, ssl=client_tls)

    with SseServer(script, server_tls) as server:
        run, built = record(server, connector, "https")
    assert run.clock is not None and run.clock.source == "kernel", run.clock
    assert run.chunks.content[:3] == ["One", " two", " three"]
    for i, write in enumerate(writes):
        # The kernel time precedes the user stamp, and both follow the write.
        assert near(built + run.chunks.t_ns[i], write), (built + run.chunks.t_ns[i] - write.before) / MS
    assert len(run.chunks.client_delay_us) == len(run.chunks)


@pytest.mark.parametrize("way", ["plain session", "no platform support"])
def test_without_kernel_times_the_run_says_user_clock_and_why(way: str, monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[Write] = []

    def script(send: Callable[[bytes], Write]) -> None:
        for i, text in enumerate(("a", "b")):
            time.sleep(0.01)
            writes.append(send(_chunked(_event(text, i + 1, role=i == 0))))
        send(TAIL)

    if way == "no platform support":  # what a non-Linux recorder sees: the constant is absent
        monkeypatch.setattr(kernel_clock, "SO_TIMESTAMPNS", None)
        connector, reason = kernel_clock.stamping_connector, kernel_clock.NO_PLATFORM
    else:  # a caller's own aiohttp session, not the recorder's connector
        connector, reason = (lambda: None), kernel_clock.NOT_STAMPED
    with SseServer(script) as server:
        run, built = record(server, connector)
    assert run.clock is not None and (run.clock.source, run.clock.reason) == ("user", reason)
    assert run.client_busy is None and run.chunks.client_delay_us == []
    # User stamps are taken when the client reads, never before the server wrote (a loaded client
    # may read the first event late, so their spacing is not the writes').
    assert len(writes) == 2 and len(run.chunks) >= 2
    assert all(built + t >= write.before for t, write in zip(run.chunks.t_ns, writes, strict=False))


@pytest.mark.parametrize("runner", ["asyncio.run", "event_loop.run"])
def test_under_uvloops_policy_the_recorders_loop_keeps_the_kernel_times(runner: str) -> None:
    """Ray's workers install uvloop's policy when uvloop is importable; uvloop reads sockets in C,
    past StampedSocket.recv. asyncio.run then gets its loop and the run says so (user clock, the
    loop named); the recorder's own runner takes asyncio's selector loop and keeps kernel times."""

    def script(send: Callable[[bytes], Write]) -> None:
        for i, text in enumerate(("a", "b")):
            time.sleep(0.01)
            send(_chunked(_event(text, i + 1, role=i == 0)))
        send(TAIL)

    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    try:
        with SseServer(script) as server:
            run, _ = record(server, kernel_clock.stamping_connector, runner=asyncio.run if runner == "asyncio.run" else event_loop.run)
    finally:
        asyncio.set_event_loop_policy(None)
    assert run.clock is not None
    if runner == "asyncio.run":
        assert (run.clock.source, run.clock.reason) == ("user", kernel_clock.OWN_READS.format("uvloop.Loop"))
    else:
        assert (run.clock.source, run.clock.reason) == ("kernel", "")
        assert len(run.chunks.client_delay_us) == len(run.chunks)


def test_a_busy_run_whose_first_token_shared_its_read_keeps_its_decode_not_its_ttft() -> None:
    """Block the loop across the first two tokens: one read takes both, so the first token has the
    second's time; the run is flagged and kept, its TTFT left out of TTFT figures."""

    def script(send: Callable[[bytes], Write], hold: Callable[[], None], release: Callable[[], None]) -> None:
        hold()
        send(_chunked(_event("Hello", 1, role=True)))
        time.sleep(0.01)
        send(_chunked(_event(" world", 2)))
        release()
        time.sleep(0.06)
        send(_chunked(_event("!", 3)))
        send(TAIL)

    run, _ = run_with_a_blocked_loop(script)
    assert run.clock is not None and run.clock.source == "kernel" and run.clock.first_shared
    assert run.chunks.t_ns[0] == run.chunks.t_ns[1]  # one read: the kernel's one time
    assert run.client_busy is True and DEFAULT_SELECTION.counts(run) and not DEFAULT_SELECTION.counts_ttft(run)
    from tokenreel.recorder.runner import new_session

    session = new_session(
        "s", Settings(max_tokens=4, ignore_eos=False, warmup=0), [PROMPT], [Arm(id="a", label="a", base_url="http://x/v1", model="m")]
    )
    session.runs.append(run)
    assert usable_runs(session, "a", "p1") == [run]


def test_a_client_starved_through_the_whole_response_keeps_the_kernel_time() -> None:
    """Headers, every event and the end arrive while the loop is blocked: one read takes them all
    and aiohttp hands the connection back before the recorder asks for its socket. The response
    noted its socket when it started: the run keeps the kernel's time of that read (the last
    packet's), flagged busy, its first token sharing its read (no decode rate: one time for all)."""
    writes: list[Write] = []

    def script(send: Callable[[bytes], Write], hold: Callable[[], None], release: Callable[[], None]) -> None:
        hold()
        send(HEAD)
        for i, text in enumerate(("One", " two", " three")):
            send(_chunked(_event(text, i + 1, role=i == 0)))
        writes.append(send(TAIL))
        release()

    run, built = run_with_a_blocked_loop(script, head=False)
    assert run.clock is not None and run.clock.source == "kernel" and run.clock.first_shared, run.clock
    assert run.chunks.content[:3] == ["One", " two", " three"]
    assert len(set(run.chunks.t_ns)) == 1 and near(built + run.chunks.t_ns[0], writes[0])
    assert run.client_busy is True


def test_a_wall_clock_step_or_an_impossible_time_keeps_the_user_stamps() -> None:
    """The kernel's times come in CLOCK_REALTIME: if it stepped between the send and the end of
    the run (NTP), or a time falls outside send..read stamp, they are not used, and the run says why."""
    from tokenreel.session.model import Chunks

    def fresh() -> tuple[Chunks, list[int], kernel_clock.Reads]:
        chunks = Chunks()
        chunks.append(20 * MS, 1, "a")  # user stamps, ns from the send
        chunks.append(30 * MS, 1, "b")
        wall = 1_000 * 10**9  # the offset: CLOCK_REALTIME - perf_counter; t0 = 0
        reads = kernel_clock.Reads(kernel=[wall + 19 * MS, wall + 29 * MS], user=[20 * MS, 30 * MS], starts=[-1, 10])
        return chunks, [10, 20], reads

    chunks, ends, reads = fresh()
    clock, busy = kernel_clock.apply(chunks, ends, reads, 0, (1_000 * 10**9, 1_000 * 10**9), 2.0)
    assert (clock.source, chunks.t_ns, chunks.client_delay_us, busy) == ("kernel", [19 * MS, 29 * MS], [1000, 1000], False)
    chunks, ends, reads = fresh()
    clock, busy = kernel_clock.apply(chunks, ends, reads, 0, (1_000 * 10**9, 1_000 * 10**9 + 3 * MS), 2.0)
    assert clock.source == "user" and "wall clock stepped +3.000 ms" in clock.reason and busy is None
    assert chunks.t_ns == [20 * MS, 30 * MS] and chunks.client_delay_us == []
    chunks, ends, reads = fresh()
    reads.kernel[1] += 2 * MS  # after its read's user stamp: impossible unless the clock moved
    clock, _ = kernel_clock.apply(chunks, ends, reads, 0, (1_000 * 10**9, 1_000 * 10**9), 2.0)
    assert clock.source == "user" and "outside its request's send..read stamps" in clock.reason
    chunks, ends, reads = fresh()
    reads.kernel[0] = 0  # the kernel gave no time for that read
    clock, _ = kernel_clock.apply(chunks, ends, reads, 0, (1_000 * 10**9, 1_000 * 10**9), 2.0)
    assert clock.source == "user" and clock.reason.startswith("the kernel gave no receive time for 1 of 2 events")
