"""Simulated OpenAI-compatible engines on loopback: vLLM 0.33, SGLang 0.5 or llama.cpp.

`tokenreel demo` runs without a GPU and every test talks to real sockets, so the simulator
reproduces what a recorder observes from the engine a profile names (`Profile.engine`): its
SSE shape (shape_vllm, shape_sglang, shape_llamacpp), its /metrics (counters.py), its info
endpoints, and the ways real endpoints fail. endpoint.py holds one endpoint's timing and
faults; this module runs endpoints (a cluster on ephemeral ports, or `tokenreel simulate`).

Faults (Profile.fault, or armed for the next N requests through /sim/state), on every shape:
    refuse       connection refused (per profile only: the port never listens)
    401 404 429 500   HTTP errors before generation (429 carries Retry-After: 1; a "404"
                 profile serves another model name)
    error_event  HTTP 200, 3 token steps, the engine's {"error": ...} event, then [DONE]
    drop         the connection closes after 3 token steps
    stall        nothing more after 3 token steps for an hour (a client read timeout fires)
    malformed    one broken `data: {"choices": [` line after 3 token steps, then carry on
    no_done      the stream ends without [DONE]
    early_stop   finish_reason "stop" after max_tokens // 3 tokens, ignore_eos or not
    busy         running/waiting gauges never drop to zero (per profile only)

Test controls (not part of any engine; every /sim request needs the process's token in the
X-Sim-Token header, and POST needs Content-Type: application/json: see control.py):
    POST /sim/state  {"busy": {"running": 2, "waiting": 1, "seconds": 1.5},
                      "contention": {"tok_s": 300.0, "seconds": 2.0},
                      "fault": {"mode": "500", "count": 1}}
        Every key is optional; "seconds" omitted or null means until changed; running,
        waiting, tok_s or count set to 0 clears that part. Answers the resulting state.
        Durations and rates are unscaled wall-clock seconds, and so is the stall.
    GET /sim/state   the current state, same shape.
    GET /sim/requests  {"requests": [...]}: the last 100 generation request bodies, oldest first.
    GET /sim/sent    {"requests": [{"request_id", "response_id", "prompt_tokens", "start_ns", "writes":
                      {"before_ns": [...], "after_ns": [...], "tokens": [...]}}]}: what the last
        200 streamed generation requests were really sent, oldest first: per write of the body
        (one or more SSE events), time.perf_counter_ns() just before and just after the write
        call and the tokens its events carry (0 after the last token); start_ns when the
        response began. The truth the recorder's times are held against (sent.py, truth.py).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from tokenreel.simulator.control import SIM_TOKEN, TOKEN_HEADER
from tokenreel.simulator.endpoint import SimServer
from tokenreel.simulator.generation import Plan, plan_steps
from tokenreel.simulator.profiles import Profile

__all__ = ["Plan", "SimCluster", "SimServer", "plan_steps", "running", "serve_forever"]

log = logging.getLogger(__name__)


# --- running servers ---------------------------------------------------------------------

MAX_PORT = 65535


def exposure(host: str) -> str | None:
    """Where a simulator may listen, the one rule: an explicit IP address
    (or "localhost"), never "" or a name that would quietly mean every interface. None for
    loopback; for any other address, the warning to print loudly (the simulator has no
    authentication on its OpenAI routes and is reachable from other machines there).
    ValueError names what to give instead."""
    if host == "localhost":
        return None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(
            f"--host {host!r}: give an explicit IP address: 127.0.0.1 or ::1 (this machine only), "
            "or 0.0.0.0 or :: if every interface is really meant"
        ) from None
    if address.is_loopback:
        return None
    return (
        f"listening on {host}, not loopback: other machines can reach these simulated endpoints "
        "(their OpenAI routes need no key); use --host 127.0.0.1 unless that is meant"
    )


def ports_for(profiles: Sequence[Profile], base_port: int) -> list[int]:
    """Profile i gets base_port + i; ValueError when the last one would pass 65535."""
    last = base_port + len(profiles) - 1
    if not 1 <= base_port <= MAX_PORT or last > MAX_PORT:
        raise ValueError(
            f"--port {base_port}: {len(profiles)} profile(s) need ports {base_port}-{last}, past {MAX_PORT}; "
            f"choose --port {MAX_PORT - len(profiles) + 1} or lower"
        )
    return [base_port + i for i in range(len(profiles))]


def _bound_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port; not listening yet, so connections to it are refused."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    if port:  # a fixed port may be restarted while old connections sit in TIME_WAIT
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


class SimCluster:
    """One simulated engine per profile, served from a background thread's event loop.

    A profile whose fault is "refuse" gets a port that is bound but never listens, so
    connecting to it is refused for as long as the cluster lives (no other process can take
    the port meanwhile).
    """

    def __init__(
        self, profiles: Sequence[Profile], time_scale: float = 1.0, host: str = "127.0.0.1"
    ) -> None:
        ids = [p.id for p in profiles]
        if len(set(ids)) != len(ids):
            raise ValueError(f"profile ids must be unique: {ids}")
        if warning := exposure(host):
            log.warning("%s", warning)
        self.host = host
        self.token = SIM_TOKEN  # what every /sim request must carry (control.py)
        self.control_headers = {TOKEN_HEADER: SIM_TOKEN}
        self.time_scale = time_scale
        self.profiles = tuple(profiles)
        self.servers = {
            p.id: SimServer(p, time_scale) for p in profiles if p.fault != "refuse"
        }
        self._sockets = {p.id: _bound_socket(host, 0) for p in profiles}
        self._ports: dict[str, int] = {pid: s.getsockname()[1] for pid, s in self._sockets.items()}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sim", daemon=True)

    def start(self) -> SimCluster:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(self._start_all(), self._loop)
        try:
            started.result(timeout=10)
        except BaseException:
            self.close()
            raise
        return self

    async def _start_all(self) -> None:
        for pid, server in self.servers.items():
            await server.start(self._sockets[pid])

    def close(self) -> None:
        """Stop every server, then the loop and its thread; close the refusing sockets."""
        if self._thread.is_alive():
            stopping = asyncio.run_coroutine_threadsafe(
                _stop_all(self.servers.values()), self._loop
            )
            stopping.result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        if not self._loop.is_running() and not self._loop.is_closed():
            self._loop.close()
        for sock in self._sockets.values():
            sock.close()

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def port(self, profile_id: str) -> int:
        return self._ports[profile_id]

    def root_url(self, profile_id: str) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port(profile_id)}"

    def base_url(self, profile_id: str) -> str:
        """The OpenAI base URL (ends in /v1)."""
        return self.root_url(profile_id) + "/v1"

    def metrics_url(self, profile_id: str) -> str:
        return self.root_url(profile_id) + "/metrics"


async def _stop_all(servers: Iterable[SimServer]) -> None:
    await asyncio.gather(*(server.stop() for server in servers))


@contextmanager
def running(
    profiles: Sequence[Profile], time_scale: float = 1.0, host: str = "127.0.0.1"
) -> Iterator[SimCluster]:
    """Serve profiles on ephemeral loopback ports for the duration of a with-block."""
    with SimCluster(profiles, time_scale, host) as cluster:
        yield cluster


async def serve_forever(
    profiles: Sequence[Profile],
    host: str = "127.0.0.1",
    base_port: int = 8100,
    time_scale: float = 1.0,
) -> None:
    """Serve profile i on base_port + i until cancelled (for `tokenreel simulate`).

    A "refuse" profile leaves its port closed. Listen on loopback unless told otherwise
    (`exposure`). A port that cannot be bound is a ValueError naming it (the servers
    already started are stopped).
    """
    exposure(host)
    servers: list[SimServer] = []
    try:
        for profile, port in zip(profiles, ports_for(profiles, base_port), strict=False):
            if profile.fault == "refuse":
                log.info("%s: port %d left closed (fault refuse)", profile.id, port)
                continue
            try:
                sock = _bound_socket(host, port)
            except OSError as exc:
                raise ValueError(
                    f"cannot listen on {host}:{port} (profile {profile.id}): {exc.strerror or exc}; "
                    "stop what holds that port or choose another --port"
                ) from None
            server = SimServer(profile, time_scale)
            await server.start(sock)
            servers.append(server)
            log.info("%s: http://%s:%d/v1 serves %s (%s)", profile.id, host, port, profile.model, profile.engine)
        await asyncio.Event().wait()
    finally:
        await _stop_all(servers)
