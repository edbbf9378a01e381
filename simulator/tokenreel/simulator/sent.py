"""What a simulated endpoint really sent, per streamed generation request (GET /sim/sent).

The ground truth the recorder's times are held against (simulator/tokenreel/simulator/truth.py): every
write of a streamed response body gets `time.perf_counter_ns()` (CLOCK_MONOTONIC, the clock of
a run's `send_monotonic_ns`) just before and just after the write call, and the tokens its
events carry. A write is the unit because its events leave together: the role chunk rides with
the first token (vLLM, SGLang), a llama.cpp step's tokens are one event each in one write. Its
tokens are what the shape's running count grows by across its events (vLLM's and SGLang's
cumulative `usage.completion_tokens`, llama.cpp's `timings.predicted_n`), so they match what
tokenreel counts per event; writes after the last token (finish, usage, [DONE], the chunked
body's end) carry 0. On loopback the kernel takes the bytes, and stamps their arrival, inside
the call unless the socket's buffer is full (a reader far behind): aiohttp keeps the rest and
sends it after the call, which `truth.py` cannot see. Nor bytes the kernel took but has not
sent yet (TCP holding segments back: seen with 32-64 streams on 2 busy cores), so each write
also logs the bytes still unsent in the socket's send queue after the call (SIOCOUTQNSD; -1
where it cannot be read): above 0, some of the stream's bytes left after the call.

Columns of signed 64-bit integers (`array`): a few appends per write, 32 bytes each.
"""

from __future__ import annotations

import fcntl
import socket
from array import array
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from aiohttp import web

SENT_LOG_LEN = 200  # streamed requests kept per endpoint, the oldest dropped first
COLUMNS = ("before_ns", "after_ns", "tokens", "unsent")
SIOCOUTQNSD = 0x894B  # Linux: bytes in a TCP socket's send queue not yet sent


def _column() -> array[int]:
    return array("q")


@dataclass
class SentStream:
    """One streamed response as the server wrote it; index i is its i-th body write."""

    request_id: str
    response_id: str  # the `id` its events carried, which the recorder archives (Run.response_id)
    prompt_tokens: int
    start_ns: int  # perf_counter_ns() as the response began, before its headers
    before_ns: array[int] = field(default_factory=_column)
    after_ns: array[int] = field(default_factory=_column)
    tokens: array[int] = field(default_factory=_column)
    unsent: array[int] = field(default_factory=_column)
    sock: socket.socket | None = field(default=None, repr=False, compare=False)  # the response's, not logged

    async def write(self, response: web.StreamResponse, data: bytes, tokens: int = 0) -> None:
        """`response.write(data)`, stamped on both sides."""
        before = perf_counter_ns()
        await response.write(data)
        self._logged(before, tokens)

    async def write_eof(self, response: web.StreamResponse) -> None:
        """`response.write_eof()` (the chunked body's last bytes), stamped like a write."""
        before = perf_counter_ns()
        await response.write_eof()
        self._logged(before, 0)
        self.sock = None  # the body is whole: nothing more to ask of its socket

    def _logged(self, before: int, tokens: int) -> None:
        self.after_ns.append(perf_counter_ns())
        self.before_ns.append(before)
        self.tokens.append(tokens)
        self.unsent.append(unsent_bytes(self.sock))

    def to_json(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "response_id": self.response_id,
            "prompt_tokens": self.prompt_tokens,
            "start_ns": self.start_ns,
            "writes": {name: getattr(self, name).tolist() for name in COLUMNS},
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> SentStream:
        """The inverse of to_json; ValueError names `where` and the field that is wrong."""
        if not isinstance(data, dict) or not isinstance(data.get("writes"), dict):
            raise ValueError(f"{where}: not a sent stream (an object with 'writes')")
        request_id, response_id = data.get("request_id"), data.get("response_id")
        prompt_tokens, start_ns = data.get("prompt_tokens"), data.get("start_ns")
        if not isinstance(request_id, str) or not isinstance(response_id, str) or not _is_int(prompt_tokens) or not _is_int(start_ns):
            raise ValueError(f"{where}: request_id and response_id must be strings, prompt_tokens and start_ns integers")
        columns = [data["writes"].get(name) for name in COLUMNS]
        if not all(isinstance(c, list) and all(_is_int(v) for v in c) for c in columns):
            raise ValueError(f"{where}.writes: {', '.join(COLUMNS)} must be lists of integers")
        if len({len(c) for c in columns}) != 1:
            raise ValueError(f"{where}.writes: {', '.join(COLUMNS)} differ in length")
        before_ns, after_ns, tokens, unsent = (array("q", c) for c in columns)
        stream = cls(request_id, response_id, prompt_tokens, start_ns, before_ns, after_ns, tokens, unsent)
        if any(b > a for b, a in zip(stream.before_ns, stream.after_ns, strict=False)) or any(t < 0 for t in stream.tokens):
            raise ValueError(f"{where}.writes: a write ends before it begins, or carries fewer than 0 tokens")
        return stream


def unsent_bytes(sock: socket.socket | None) -> int:
    """Bytes the kernel holds unsent in the socket's send queue; -1 where it cannot say."""
    if sock is None:
        return -1
    count = array("i", [0])
    try:
        fcntl.ioctl(sock.fileno(), SIOCOUTQNSD, count, True)
    except OSError:
        return -1
    return count[0]


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
