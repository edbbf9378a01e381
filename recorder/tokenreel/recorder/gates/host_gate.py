"""The host gate: was the engine disturbed by its own host?

A recording client that wakes late does not make its kernel-clock times wrong, and says nothing
about the engine's host when the endpoint is remote. What can disturb the arm is CPU pressure on
the machine that runs the engine, and that is only visible from here when the endpoint runs on
this machine (loopback or one of its addresses). Then Linux PSI (pressure stall information)
gives it exactly: `/proc/pressure/cpu` (or the cgroup's `cpu.pressure`) keeps `total`, the
microseconds during which some runnable task waited for a CPU. Its difference over an interval,
divided by the interval, is the share of time the host was short of CPU there.

Before each run the gate samples that share over short windows and waits, at most
`settings.host_wait_s`, for it to fall below `settings.host_pressure_pct`, like the idle gate
waits for the endpoint. When it does not fall, the run is recorded anyway and flagged
`host_contended` with its pressure; after one such wait an arm does not wait again while the
host stays loaded (a host kept busy by the engine's own threads would otherwise cost every run
the full wait). The run's own pressure is measured over the run itself.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tokenreel.session.model import HostPressure

SYSTEM_PSI = Path("/proc/pressure/cpu")
CGROUP_ROOT = Path("/sys/fs/cgroup")
SAMPLE_S = 0.25  # one gate sample: long enough to average a scheduler's time slices
MIN_WINDOW_S = 0.1  # the shortest window a pressure share is taken over
RESOLVE_TIMEOUT_S = 2.0


class NoPressure(Exception):
    """PSI cannot be read here; the message is the one line to say (once)."""


def psi_candidates() -> list[Path]:
    """The host's PSI file, then this process's cgroup's (cgroup v2), in that order."""
    candidates = [SYSTEM_PSI]
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                candidates.append(CGROUP_ROOT / line[3:].lstrip("/") / "cpu.pressure")
    except OSError:
        pass
    return candidates


def read_total_us(path: Path) -> int:
    """The `some` line's total: microseconds some task waited for a CPU since boot."""
    for line in path.read_text().splitlines():
        if line.startswith("some "):
            for field in line.split()[1:]:
                key, _, value = field.partition("=")
                if key == "total":
                    return int(value)
    raise ValueError(f"{path}: no 'some ... total=' line")


def find_psi() -> Path:
    """The first readable PSI file; NoPressure with the reason when there is none."""
    problems = []
    for path in psi_candidates():
        try:
            read_total_us(path)
            return path
        except FileNotFoundError:
            problems.append(f"{path} does not exist")
        except (OSError, ValueError) as exc:
            problems.append(f"{path} unreadable ({exc.strerror if isinstance(exc, OSError) and exc.strerror else exc})")
    raise NoPressure(
        "no CPU pressure (PSI) readable on this host (" + "; ".join(problems) + "): runs are not checked for a busy"
        " engine host (Linux 4.20+ with PSI enabled gives it)"
    )


async def endpoint_is_local(base_url: str) -> bool:
    """True when the endpoint's host is this machine: a loopback address, or one this host owns
    (binding a UDP socket to it succeeds; nothing is sent). A name that does not resolve in
    time counts as remote."""
    host = urlsplit(base_url).hostname or ""
    try:
        return ipaddress.ip_address(host).is_loopback or _owned(host)
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(loop.getaddrinfo(host, None, type=socket.SOCK_DGRAM), RESOLVE_TIMEOUT_S)
    except (OSError, asyncio.TimeoutError):
        return False
    addresses = {str(info[4][0]) for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback or _owned(a) for a in addresses)


def _owned(address: str) -> bool:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((address, 0))
        return True
    except OSError:
        return False


@dataclass
class _Mark:
    total_us: int
    at_ns: int


class HostWatch:
    """The gate and the per-run measurement for one arm whose engine runs on this machine."""

    def __init__(self, path: Path, threshold_pct: float, wait_s: float) -> None:
        self.path, self.threshold_pct, self.wait_s = path, threshold_pct, wait_s
        self.gave_up = False  # the last wait ran out: do not wait again while the host stays loaded
        self._mark = self._now()

    def _now(self) -> _Mark:
        return _Mark(read_total_us(self.path), time.monotonic_ns())

    def _share_since(self, mark: _Mark) -> tuple[float, _Mark]:
        now = self._now()
        elapsed_us = max((now.at_ns - mark.at_ns) / 1000, 1.0)
        return min(100.0, max(0.0, (now.total_us - mark.total_us) * 100 / elapsed_us)), now

    async def settle(self) -> tuple[float, float, bool]:
        """Wait (bounded) for the pressure to fall; (last share %, seconds waited, waited out)."""
        elapsed = (time.monotonic_ns() - self._mark.at_ns) / 1e9
        if elapsed < MIN_WINDOW_S:
            await asyncio.sleep(MIN_WINDOW_S - elapsed)
        share, self._mark = self._share_since(self._mark)
        started = time.monotonic()
        while share > self.threshold_pct and not self.gave_up:
            waited = time.monotonic() - started
            if waited >= self.wait_s:
                self.gave_up = True
                return share, waited, True
            await asyncio.sleep(SAMPLE_S)
            share, self._mark = self._share_since(self._mark)
        if share <= self.threshold_pct:
            self.gave_up = False
        return share, time.monotonic() - started, False

    def begin_run(self) -> None:
        self._mark = self._now()

    def end_run(self, before_pct: float, waited_s: float) -> HostPressure:
        """The run's pressure since `begin_run`; contended when it or the gate's was over the line."""
        share, self._mark = self._share_since(self._mark)
        contended = max(share, before_pct) > self.threshold_pct
        return HostPressure(str(self.path), share, before_pct, waited_s, contended)
