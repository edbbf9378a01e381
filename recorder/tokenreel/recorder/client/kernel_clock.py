"""Kernel receive times for every read of a streamed response, so a busy client cannot skew them.

Why: the recorder stamps each read in Python when the event loop gets round to it; on a busy
machine (recording on the GPU host, beside the engine's CPU threads) that stamp is late by up to
tens of ms. Linux notes when each packet arrived: with SO_TIMESTAMPNS set, `recvmsg` returns the
receive time (CLOCK_REALTIME) of the last packet a read consumed as ancillary data. Probed on
loopback (Linux 6.18): TCP gives it with every read, a read of several packets gets the last
one's time (packets queued behind an unread one are merged and keep the later time), and the
first read after the option is set can lack it (the kernel turns stamping on lazily). The
SIOCGSTAMPNS ioctl is not used: for TCP it answers ENOENT (it reports a socket's last datagram
time, which TCP never sets).

How: `stamping_session`'s connector makes aiohttp open every connection as a `StampedSocket`. asyncio's
transport reads through the socket's `recv` (plain HTTP) or `recv_into` (TLS: the SSL protocol
reads the raw TCP segments the same way), which here call `recvmsg` and log per read the kernel
time, the perf_counter stamp and how many decoded body bytes came before it (the response's
`StreamReader.total_bytes`: aiohttp decodes each read, chunked framing and TLS, before the
next one). `attach` hands a response's body to its socket once its headers are in; an event
whose last byte is at decoded offset o was delivered by the last read that began before o
(`apply`). Reads before the attach (the one with the headers, and any that arrived before the
task resumed) form one group with the last one's time. The response notes its socket as it
starts (`StampedResponse`), before the headers are read: when a starved client reads the whole
response with its headers, aiohttp hands the connection back before `attach` can ask for it.

The kernel's CLOCK_REALTIME is moved onto the perf_counter (CLOCK_MONOTONIC) timeline with an
offset sampled at the request's send and again at its end: NTP slews both clocks alike, but a
step of the wall clock between the two samples (or a kernel time outside send..user stamp)
means the times cannot be trusted, and the run keeps its user-space stamps, saying why.
"""

from __future__ import annotations

import asyncio
import math
import platform
import socket
import struct
import sys
import weakref
from bisect import bisect_right
from dataclasses import dataclass
from time import perf_counter_ns, time_ns
from typing import Any

import aiohttp

from tokenreel.analysis.metrics import first_token_index
from tokenreel.session.model import Chunks, Clock

# Linux only; Python does not name it, and alpha, mips, parisc and sparc number it otherwise.
_GENERIC_ABI = ("x86_64", "i386", "i686", "aarch64", "armv6l", "armv7l", "riscv64", "ppc64le", "ppc64", "s390x")
SO_TIMESTAMPNS: int | None = getattr(
    socket, "SO_TIMESTAMPNS", 35 if sys.platform == "linux" and platform.machine() in _GENERIC_ABI else None
)
_CMSG_SPACE = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0
_TIMESPEC = struct.Struct("@ll")  # struct timespec {time_t tv_sec; long tv_nsec} on Linux
# Reads logged while no body is attached (requests that are not streams: /metrics, fingerprint)
# are kept only this far back; a stream's own unattached reads are its first few.
MAX_UNATTACHED_READS = 1024
# The wall clock may move this much against the monotonic one during a run (sampling noise of
# the offset is < 1 us); more is a step, and the kernel's times are not used.
MAX_CLOCK_STEP_NS = 100_000
# A kernel time may follow the user stamp of its read by this much (offset sampling noise).
USER_STAMP_SLACK_NS = 20_000
NO_PLATFORM = "this platform gives no kernel receive times (SO_TIMESTAMPNS is Linux-only)"
NOT_STAMPED = "the connection was not opened by the recorder's stamping connector"
OWN_READS = ("the event loop ({}) reads sockets itself, so the kernel's receive times never reach the recorder; "
             "record on asyncio's own loop (tokenreel.recorder.client.event_loop.run)")

# fileno -> its socket, to find the socket under a response (asyncio exposes only a wrapper).
_SOCKETS: weakref.WeakValueDictionary[int, StampedSocket] = weakref.WeakValueDictionary()


class StampedSocket(socket.socket):
    """A TCP socket that logs, for every read, the kernel's receive time of its last packet."""

    def __init__(self, family: int = -1, type: int = -1, proto: int = -1, fileno: int | None = None) -> None:
        super().__init__(family, type, proto, fileno)
        self.kernel: list[int] = []  # CLOCK_REALTIME ns of each read's last packet; 0: none given
        self.user: list[int] = []  # perf_counter_ns right after each read
        self.starts: list[int] = []  # decoded body bytes before each read; -1: no body attached
        self.body: aiohttp.StreamReader | None = None
        self.refused = ""  # why the kernel would not stamp (then reads are plain)
        try:
            self.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS or 0, 1)
        except OSError as exc:
            self.refused = f"the kernel refused SO_TIMESTAMPNS ({exc.strerror or exc})"
        _SOCKETS[self.fileno()] = self

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        if self.refused:
            return super().recv(bufsize, flags)
        data, ancdata, _, _ = self.recvmsg(bufsize, _CMSG_SPACE, flags)
        if data:
            self._log(ancdata)
        return data

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        if self.refused:
            return super().recv_into(buffer, nbytes, flags)
        view = memoryview(buffer).cast("B")
        n, ancdata, _, _ = self.recvmsg_into([view[:nbytes] if nbytes else view], _CMSG_SPACE, flags)
        if n:
            self._log(ancdata)
        return n

    def _log(self, ancdata: list[tuple[int, int, bytes]]) -> None:
        stamp = 0
        for level, kind, payload in ancdata:
            if kind == SO_TIMESTAMPNS and level == socket.SOL_SOCKET:
                seconds, nanoseconds = _TIMESPEC.unpack_from(payload)
                stamp = seconds * 1_000_000_000 + nanoseconds
        body = self.body
        self.user.append(perf_counter_ns())
        self.kernel.append(stamp)
        self.starts.append(-1 if body is None else body.total_bytes)
        if body is None and len(self.kernel) > MAX_UNATTACHED_READS:
            half = MAX_UNATTACHED_READS // 2
            del self.kernel[:half], self.user[:half], self.starts[:half]


def stamping_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """aiohttp's `socket_factory`: a StampedSocket where the platform stamps, else a plain one."""
    family, kind, proto = addr_info[0], addr_info[1], addr_info[2]
    if SO_TIMESTAMPNS is None:
        return socket.socket(family, kind, proto)
    return StampedSocket(family, kind, proto)


def stamping_connector(limit: int = 100, fresh: bool = False) -> aiohttp.TCPConnector:
    """The recorder's connector: every connection it opens logs kernel receive times; at most
    `limit` connections at once (aiohttp's default; a sweep raises it above its highest level).
    `fresh`: a new connection for every request, none kept alive (a sweep's: see recorder.sweep)."""
    return aiohttp.TCPConnector(socket_factory=stamping_socket, limit=limit, force_close=fresh)


def stamping_session(headers: dict[str, str], limit: int = 100, fresh: bool = False) -> aiohttp.ClientSession:
    """The recorder's HTTP session: `stamping_connector`'s connections, `StampedResponse`s."""
    return aiohttp.ClientSession(headers=headers, connector=stamping_connector(limit, fresh), response_class=StampedResponse)


def _socket_of(connection: Any) -> StampedSocket | None:
    """The open StampedSocket under an aiohttp connection, or None."""
    transport = connection.transport if connection is not None else None
    raw = transport.get_extra_info("socket") if transport is not None else None
    fd = raw.fileno() if raw is not None else -1
    stamped = _SOCKETS.get(fd)
    return stamped if stamped is not None and stamped.fileno() == fd else None  # not a closed one that had this fd


class StampedResponse(aiohttp.ClientResponse):
    """A response that notes its connection's StampedSocket before reading the headers (module
    docstring: the connection may be gone by the time `attach` runs)."""

    socket: StampedSocket | None = None

    async def start(self, connection: Any) -> aiohttp.ClientResponse:
        self.socket = _socket_of(connection)
        return await super().start(connection)


@dataclass
class Reads:
    """One response's reads: kernel time (CLOCK_REALTIME ns, 0: none), user stamp (perf_counter
    ns) and decoded body bytes before each (-1: before the body was attached)."""

    kernel: list[int]
    user: list[int]
    starts: list[int]


def attach(response: aiohttp.ClientResponse, since_ns: int) -> StampedSocket | str:
    """Hand the response's body to its socket, dropping reads logged before `since_ns` (earlier
    requests on a kept-alive connection); the reason when its reads are not stamped."""
    if SO_TIMESTAMPNS is None:
        return NO_PLATFORM
    loop = asyncio.get_running_loop()
    if not isinstance(loop, asyncio.selector_events.BaseSelectorEventLoop):  # uvloop's, for one
        return OWN_READS.format(f"{type(loop).__module__}.{type(loop).__qualname__}")
    stamped = response.socket if isinstance(response, StampedResponse) else _socket_of(response.connection)
    if stamped is None:
        return NOT_STAMPED
    if stamped.refused:
        return stamped.refused
    keep = bisect_right(stamped.user, since_ns - 1)
    del stamped.kernel[:keep], stamped.user[:keep], stamped.starts[:keep]
    stamped.body = response.content
    return stamped


def release(stamped: StampedSocket) -> Reads:
    """The response's reads; the socket starts a new log for the next request."""
    reads = Reads(stamped.kernel, stamped.user, stamped.starts)
    stamped.kernel, stamped.user, stamped.starts, stamped.body = [], [], [], None
    return reads


def realtime_offset_ns() -> int:
    """CLOCK_REALTIME minus perf_counter, from the tightest of five bracketed samples."""
    best_width, best = None, 0
    for _ in range(5):
        before = perf_counter_ns()
        wall = time_ns()
        after = perf_counter_ns()
        if best_width is None or after - before < best_width:
            best_width, best = after - before, wall - (before + after) // 2
    return best


def apply(
    chunks: Chunks, ends: list[int], reads: Reads | str, t0: int, offsets: tuple[int, int], busy_p99_ms: float
) -> tuple[Clock, bool | None]:
    """Put the kernel's receive times into `chunks.t_ns` (the user stamps move to
    `client_delay_us`); returns the run's Clock and its client_busy flag.

    `ends[i]`: decoded body offset just past event i's last byte; `t0`: the send stamp the
    chunks' user times count from; `offsets`: `realtime_offset_ns()` at send and at the end.
    Any doubt (no kernel time for a read, a clock step, a time outside send..user stamp) keeps
    the user stamps, with the reason in the Clock.
    """
    reason = reads if isinstance(reads, str) else _kernel_times(chunks, ends, reads, t0, offsets)
    if reason:
        return Clock(source="user", reason=reason, first_shared=_first_shared(chunks)), None
    delays = sorted(chunks.client_delay_us)
    p99 = _nearest_rank(delays, 0.99) / 1000 if delays else None
    clock = Clock(
        source="kernel",
        delay_p50_ms=_nearest_rank(delays, 0.5) / 1000 if delays else None,
        delay_p99_ms=p99,
        delay_max_ms=delays[-1] / 1000 if delays else None,
        first_shared=_first_shared(chunks),
    )
    return clock, (p99 > busy_p99_ms if p99 is not None else None)


def _kernel_times(chunks: Chunks, ends: list[int], reads: Reads, t0: int, offsets: tuple[int, int]) -> str:
    """Rewrite chunks with kernel times; the reason instead (chunks untouched) when they cannot be used."""
    step = offsets[1] - offsets[0]
    if abs(step) > MAX_CLOCK_STEP_NS:
        return f"the wall clock stepped {step / 1e6:+.3f} ms during the run (NTP?), so its kernel times were not used"
    n = len(chunks)
    if len(ends) != n:
        return f"{n} events but {len(ends)} byte offsets (a recorder bug): kernel times not used"
    starts = [max(start, 0) for start in reads.starts]  # reads before the attach: one group from 0
    base = offsets[0] + t0
    kernel_ns: list[int] = []
    delays: list[int] = []
    missing = 0
    previous = 0
    for i in range(n):
        read = bisect_right(starts, ends[i] - 1) - 1
        if read < 0:
            return f"no read was logged for event {i}: kernel times not used"
        stamp = reads.kernel[read]
        if not stamp:
            missing += 1
            continue
        t = stamp - base
        user = chunks.t_ns[i]
        if t < 0 or t > user + USER_STAMP_SLACK_NS or t < previous:
            return (
                f"a kernel time fell outside its request's send..read stamps (event {i}: {t / 1e6:.3f} ms vs read at"
                f" {user / 1e6:.3f} ms; the wall clock stepped?), so kernel times were not used"
            )
        previous = t
        kernel_ns.append(t)
        delays.append(max(user - t, 0) // 1000)
    if missing:
        return f"the kernel gave no receive time for {missing} of {n} events: kernel times not used"
    chunks.t_ns, chunks.client_delay_us = kernel_ns, delays
    return ""


def _first_shared(chunks: Chunks) -> bool:
    """True when the first token's read also delivered a later token event (same time)."""
    first = first_token_index(chunks)
    if first is None:
        return False
    for i in range(first + 1, len(chunks)):
        if chunks.tokens[i] > 0 or chunks.has_text(i):
            return chunks.t_ns[i] == chunks.t_ns[first]
    return False


def _nearest_rank(ordered: list[int], fraction: float) -> int:
    """The nearest-rank percentile of a sorted, non-empty list."""
    return ordered[max(math.ceil(len(ordered) * fraction), 1) - 1]
