"""A vLLM-format streaming server, in its own process, that logs when it wrote every event.

It is the ground truth of bench/recorder_fidelity.py: chat completions streamed like vLLM (the
role chunk together with the first token, one content chunk per engine step with cumulative
`usage.completion_tokens`, a final usage chunk, [DONE]) at an exact pace, with the
`perf_counter_ns()` (CLOCK_MONOTONIC, the clock the recorder stamps with) at which the kernel
took each event. Its own process, so it never shares the recorder's GIL or event loop.

Raw non-blocking sockets rather than aiohttp: aiohttp's `write` returns once the bytes sit in
its transport buffer, so neither the moment the kernel took them nor a full socket is visible.
Here `send` returning is the write time, and a `send` that cannot take a whole event is
server-side backpressure, the state in which vLLM merges engine steps. Nagle is off.

Every request is answered as a chat stream. Its body's `reference` object sets the pace,
{"tok_s": 1000, "per_event": 4}, and `max_tokens` the length. After each
response the server sends a `StreamLog` to the parent through the pipe.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import select
import socket
import threading
import time
import zlib
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from time import perf_counter_ns
from typing import Any

import numpy as np
import orjson

from tokenreel.analysis.metrics import NS_PER_S
from tokenreel.simulator.answer_text import reply_for, tokenize
from tokenreel.simulator.shape_vllm import ROLE_CHOICE, ChoiceShape
from tokenreel.simulator.wire import sse, usage

# With 1 ns timer slack, time.sleep wakes 20-60 us late (50 us more with the default slack):
# sleep until this close to a target, then busy-wait. Short on purpose: on 2 cores a server
# spinning 200 us per event took the client's CPU and tripled its p99 gap error at 10k tok/s.
SPIN_NS = 60_000
TIMER_SLACK_NS = 1
PR_SET_TIMERSLACK = 29  # prctl option (Linux)
TTFT_NS = 20_000_000  # headers leave at once, the first token this much later, like vLLM
HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
)
LAST_CHUNK = b"0\r\n\r\n"
CHAT = ChoiceShape(chat=True, token_ids=False, logprobs=False, top_logprobs=0)
START_TIMEOUT_S = 30.0
LOG_TIMEOUT_S = 60.0


@dataclass
class StreamLog:
    """One response as the server wrote it; index i is content event i (the role chunk rides on 0)."""

    target_ns: np.ndarray  # when event i was due
    start_ns: np.ndarray  # just before its send
    write_ns: np.ndarray  # just after the kernel took its last byte: the ground truth
    tokens: np.ndarray  # tokens it carried
    crc: np.ndarray  # crc32 of its content, so the recorder's chunk can be matched to it
    blocked_events: int  # events the socket could not take at once (send buffer full)
    completed: bool  # False: the client hung up mid-stream


@dataclass
class _Log:
    """StreamLog under construction: lists append faster than arrays fill."""

    target_ns: list[int] = field(default_factory=list)
    start_ns: list[int] = field(default_factory=list)
    write_ns: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    crc: list[int] = field(default_factory=list)
    blocked_events: int = 0
    completed: bool = True

    def frozen(self) -> StreamLog:
        return StreamLog(
            np.array(self.target_ns, dtype=np.int64),
            np.array(self.start_ns, dtype=np.int64),
            np.array(self.write_ns, dtype=np.int64),
            np.array(self.tokens, dtype=np.int64),
            np.array(self.crc, dtype=np.uint32),
            self.blocked_events,
            self.completed,
        )


class ReferenceServer:
    """The server process on 127.0.0.1 and an ephemeral port, for a with-block."""

    def __enter__(self) -> ReferenceServer:
        context = multiprocessing.get_context("spawn")  # a fresh interpreter: no inherited loop or threads
        self._conn, child = context.Pipe()
        self._process = context.Process(target=serve, args=(child,), name="reference-server", daemon=True)
        self._process.start()
        child.close()
        if not self._conn.poll(START_TIMEOUT_S):
            self.__exit__()
            raise RuntimeError("the reference server did not start")
        try:
            port = self._conn.recv()
        except EOFError:
            self.__exit__()
            raise RuntimeError("the reference server exited while starting") from None
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    def log(self) -> StreamLog:
        """What the server wrote for the response that just ended."""
        if not self._conn.poll(LOG_TIMEOUT_S):
            raise RuntimeError("the reference server sent no log for the last response")
        return self._conn.recv()

    def __exit__(self, *exc: object) -> None:
        self._process.terminate()
        self._process.join(5)
        self._conn.close()


def serve(conn: Connection) -> None:
    """Process entry point: send the port through `conn`, then serve until terminated.

    A thread per connection, so an idle keep-alive connection never blocks another; the bench
    streams one response at a time, so they never compete for the GIL.
    """
    ctypes.CDLL(None).prctl(PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0)  # Linux: sleeps end on time
    with socket.create_server(("127.0.0.1", 0)) as listener:
        conn.send(listener.getsockname()[1])
        while True:
            sock, _ = listener.accept()
            threading.Thread(target=_serve_connection, args=(sock, conn), daemon=True).start()


def _serve_connection(sock: socket.socket, conn: Connection) -> None:
    with sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pending = bytearray()
        while (body := _read_request(sock, pending)) is not None:
            log = _stream(sock, body)
            conn.send(log)
            if not log.completed:
                return


def _read_request(sock: socket.socket, pending: bytearray) -> dict[str, Any] | None:
    """The next request's JSON body (keep-alive); None once the client closes the connection."""
    sock.setblocking(True)
    while (end := pending.find(b"\r\n\r\n")) < 0:
        if not (data := sock.recv(65536)):
            return None
        pending += data
    lines = bytes(pending[:end]).decode("latin-1").split("\r\n")[1:]
    del pending[: end + 4]
    length = next((int(v) for k, _, v in (line.partition(":") for line in lines) if k.lower() == "content-length"), 0)
    while len(pending) < length:
        if not (data := sock.recv(65536)):
            return None
        pending += data
    body = orjson.loads(bytes(pending[:length]))
    del pending[:length]
    return body


def _stream(sock: socket.socket, body: dict[str, Any]) -> StreamLog:
    """Answer one request: headers at once, then every event at its absolute target time."""
    pace = body["reference"]
    tok_s, per_event = float(pace["tok_s"]), int(pace["per_event"])
    n = int(body["max_tokens"])
    prompt = body["messages"][-1]["content"]
    pieces = reply_for(prompt).tokens(n)
    prompt_tokens = len(tokenize(prompt))
    envelope = {"id": "chatcmpl-reference", "object": "chat.completion.chunk", "created": int(time.time()), "model": body["model"]}
    events = -(-n // per_event)
    log = _Log()
    sock.setblocking(False)
    try:
        _write(sock, HEAD, log)
        first_ns = perf_counter_ns() + TTFT_NS
        for i in range(events):
            tokens = pieces[i * per_event : (i + 1) * per_event]
            choice = CHAT.choice(tokens, 0, "length" if i == events - 1 else None)
            data = _chunked(sse({**envelope, "choices": [choice], "usage": usage(prompt_tokens, min(n, (i + 1) * per_event))}))
            if i == 0:  # vLLM yields the role chunk right before the first token: one write here
                data = _chunked(sse({**envelope, "choices": [ROLE_CHOICE], "usage": usage(prompt_tokens, 0)})) + data
            target = first_ns + round(i * per_event * NS_PER_S / tok_s)
            _wait_until(target)
            start = perf_counter_ns()
            _write(sock, data, log)
            log.write_ns.append(perf_counter_ns())
            log.start_ns.append(start)
            log.target_ns.append(target)
            log.tokens.append(len(tokens))
            log.crc.append(zlib.crc32(choice["delta"]["content"].encode()))
        tail = sse({**envelope, "choices": [], "usage": usage(prompt_tokens, n)})
        _write(sock, _chunked(tail) + _chunked(b"data: [DONE]\n\n") + LAST_CHUNK, log)
    except (BrokenPipeError, ConnectionResetError):
        log.completed = False
    return log.frozen()


def _wait_until(target_ns: int) -> None:
    """Sleep, then spin the last SPIN_NS: a late event would be the server's fault, not the client's."""
    remaining = target_ns - perf_counter_ns()
    if remaining > SPIN_NS:
        time.sleep((remaining - SPIN_NS) / NS_PER_S)
    while perf_counter_ns() < target_ns:
        pass


def _write(sock: socket.socket, data: bytes, log: _Log) -> None:
    """Hand all of data to the kernel; a full send buffer counts as backpressure and is waited out."""
    view = memoryview(data)
    blocked = False
    while view:
        try:
            view = view[sock.send(view) :]
        except BlockingIOError:
            pass
        if view:
            blocked = True
            select.select([], [sock], [])
    log.blocked_events += blocked


def _chunked(data: bytes) -> bytes:
    """One HTTP/1.1 chunk, as uvicorn frames each SSE event vLLM yields."""
    return b"%x\r\n%s\r\n" % (len(data), data)
