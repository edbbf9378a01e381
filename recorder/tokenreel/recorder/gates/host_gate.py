"""The host gate: was the engine disturbed by other work on its host?

A recording client that wakes late does not make its kernel-clock times wrong, and says nothing
about the engine's host when the endpoint is remote. What can disturb the arm is other programs
taking the CPUs the engine runs on, and that is only visible from here when the endpoint runs on
this machine (loopback or one of its addresses) and its processes are known: the engine
tokenreel launched (its process and every descendant, since vLLM runs its engine core in a
child), else the process listening on the endpoint's port and its descendants, else the GPU's
compute processes the GPU gate saw.

The measure is others' CPU load: over an interval, the busy time `/proc/stat` counts on the CPUs
the engine and the recorder may run on, less the CPU time of the engine's processes and of this
recorder (`/proc/PID/stat` utime + stime, with reaped children's), as a share of those CPUs'
time. Linux PSI ("some task waited for a CPU") is not used: an engine that serves on the CPU
keeps its own threads waiting, so PSI is high on every run of it, however idle the rest of the
machine is. Both counters tick at the kernel's clock rate (USER_HZ), so a share is known to one
tick per CPU and per process counted; a run is flagged only when others' share is over
`settings.host_pressure_pct` by more than that resolution.

Before each run the gate samples that share over short windows and waits, at most
`settings.host_wait_s`, for it to fall below the line, like the idle gate waits for the
endpoint. When it does not fall, the run is recorded anyway and flagged `host_contended`; after
one such wait an arm does not wait again while the host stays loaded. The run's own share is
measured over the run itself. When the engine's processes cannot be found, the gate says so once
and does not watch the host: it could not tell the engine's load from others'.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tokenreel.recorder.gates.gpu_gate import listener_pids, with_descendants
from tokenreel.session.gpu import GpuCheck
from tokenreel.session.model import HostPressure

STAT = Path("/proc/stat")
PROC = Path("/proc")
TICK_S = 1 / os.sysconf("SC_CLK_TCK")  # the unit of /proc/stat and /proc/PID/stat times (USER_HZ)
SAMPLE_S = 0.25  # one gate sample: long enough to average a scheduler's time slices
MIN_WINDOW_S = 0.1  # the shortest window a share is taken over
# The longest a gate sample grows while its share is above the line but within its resolution (a
# share over 0.1 s is known to one tick per CPU and process: an engine of 8 processes on 2 CPUs reads
# to +-50 %, so hogs taking 30 % could not be told apart from none). Only a sample whose share is
# within its resolution of the line, above or below it, grows.
RESOLVE_S = 1.0
RESOLVE_TIMEOUT_S = 2.0
BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)  # /proc/stat cpuN: user nice system [idle iowait] irq softirq steal


class Unwatched(Exception):
    """The engine's load cannot be told from others'; the message is the one line to say (once)."""


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


@dataclass(frozen=True)
class EngineRoots:
    """The engine's top processes on this machine (their descendants are found at each sample)
    and how they were found, for the notes."""

    pids: frozenset[int]
    found_by: str


def endpoint_port(base_url: str) -> int:
    """The TCP port an endpoint URL names (its scheme's default when it names none)."""
    parts = urlsplit(base_url)
    return parts.port or (443 if parts.scheme == "https" else 80)


def find_engine(base_url: str, launched_pid: int | None, gpu: GpuCheck | None) -> EngineRoots:
    """The engine's processes: the one tokenreel launched, else the listener on the endpoint's
    port, else the GPU's compute processes visible here; Unwatched saying what was tried."""
    if launched_pid is not None:
        return EngineRoots(frozenset({launched_pid}), f"launched by tokenreel (pid {launched_pid})")
    port = endpoint_port(base_url)
    listeners = listener_pids(port)
    if listeners:
        return EngineRoots(listeners, f"listening on port {port} (pid {', '.join(map(str, sorted(listeners)))})")
    on_gpu = frozenset(p.pid for d in (gpu.devices if gpu else []) for p in d.processes if p.name and p.engine is not False)
    if on_gpu:
        return EngineRoots(on_gpu, f"the GPU's compute processes (pid {', '.join(map(str, sorted(on_gpu)))})")
    raise Unwatched(
        f"the engine's processes were not found (not launched by tokenreel, no process visible here listening on"
        f" port {port}, no GPU compute process visible here), so its CPU load cannot be told from others': runs"
        " are not checked for a busy host (launch the engine from the config, or record as its user)"
    )


def cpu_list(text: str) -> frozenset[int]:
    """A kernel CPU list ("0-3,8,10-11") as CPU numbers."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        low, _, high = part.partition("-")
        if low:
            cpus.update(range(int(low), int(high or low) + 1))
    return frozenset(cpus)


def allowed_cpus(pid: int) -> frozenset[int]:
    """The CPUs a process may run on (its affinity); empty when it cannot be read."""
    try:
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                return cpu_list(line.split(":", 1)[1])
    except OSError:
        pass
    return frozenset()


def busy_ticks(cpus: frozenset[int]) -> tuple[int, int]:
    """(busy ticks summed over `cpus`, how many of them /proc/stat lists): everything but idle and iowait."""
    busy = counted = 0
    for line in STAT.read_text().splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            values = [int(v) for v in rest.split()]
            busy += sum(values[i] for i in BUSY_COLUMNS if i < len(values))
            counted += 1
    return busy, counted


def process_ticks(pid: int) -> int | None:
    """A process's CPU time in ticks: utime + stime of all its threads, with its reaped
    children's (cutime + cstime), so a worker that exits stays counted; None when it is gone."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the name in parentheses may hold spaces
    return sum(int(v) for v in fields[11:15])  # fields 14-17 of proc(5): utime stime cutime cstime


@dataclass
class Sample:
    """The counters at one moment, in ticks."""

    busy: int  # ticks
    engine: int  # ticks
    recorder: int  # ticks (0 when the recorder is one of the engine's processes)
    processes: int  # how many processes were counted
    at_ns: int


@dataclass(frozen=True)
class Load:
    """Shares of the CPUs' time over one interval, in %."""

    others_pct: float
    engine_pct: float
    resolution_pct: float

    def over(self, threshold_pct: float) -> bool:
        return self.others_pct - self.resolution_pct > threshold_pct


class HostWatch:
    """The gate and the per-run measurement for one arm whose engine runs on this machine."""

    def __init__(self, engine: EngineRoots, threshold_pct: float, wait_s: float) -> None:
        self.engine, self.threshold_pct, self.wait_s = engine, threshold_pct, wait_s
        self.gave_up = False  # the last wait ran out: do not wait again while the host stays loaded
        allowed = allowed_cpus(os.getpid()).union(*(allowed_cpus(pid) for pid in engine.pids))
        self.cpus = allowed or frozenset(range(os.cpu_count() or 1))
        self._mark = self.sample()

    def sample(self) -> Sample:
        """The counters now, the engine's descendants found again (a worker it started since counts)."""
        processes = with_descendants(self.engine.pids)
        engine = [t for t in map(process_ticks, processes) if t is not None]
        if not engine:
            raise Unwatched(f"the engine's processes ({self.engine.found_by}) are gone: runs are no longer checked"
                            " for a busy host")
        me = os.getpid()
        recorder = 0 if me in processes else process_ticks(me) or 0
        busy, counted = busy_ticks(self.cpus)
        if not counted:
            raise Unwatched(f"{STAT} lists none of the CPUs {sorted(self.cpus)}: runs are not checked for a busy host")
        self.counted_cpus = counted
        return Sample(busy, sum(engine), recorder, len(engine) + (me not in processes), time.monotonic_ns())

    def load_since(self, mark: Sample) -> tuple[Load, Sample]:
        """The shares of the CPUs' time from `mark` to now, and the sample taken now."""
        now = self.sample()
        capacity = max((now.at_ns - mark.at_ns) / 1e9 / TICK_S, 1.0) * self.counted_cpus  # ticks the CPUs had
        engine = now.engine - mark.engine
        others = (now.busy - mark.busy) - engine - (now.recorder - mark.recorder)
        resolution = self.counted_cpus + max(now.processes, mark.processes)

        def pct(ticks: float) -> float:
            return min(100.0, max(0.0, ticks * 100 / capacity))

        return Load(pct(others), pct(engine), pct(resolution)), now

    async def _resolved(self) -> Load:
        """Others' share since the mark (the mark then moved to now); a window whose share is within
        its resolution of the line, on either side, is widened, up to RESOLVE_S, until it can tell
        (a loaded box's short window reads a hogs' share as low as it reads it high)."""
        while True:
            load, now = self.load_since(self._mark)
            ambiguous = abs(load.others_pct - self.threshold_pct) < load.resolution_pct
            if not ambiguous or (now.at_ns - self._mark.at_ns) / 1e9 >= RESOLVE_S:
                self._mark = now
                return load
            await asyncio.sleep(MIN_WINDOW_S)

    async def settle(self) -> tuple[Load, float, bool]:
        """Wait (bounded) for others' load to fall; (last load, seconds waited, waited out)."""
        elapsed = (time.monotonic_ns() - self._mark.at_ns) / 1e9
        if elapsed < MIN_WINDOW_S:
            await asyncio.sleep(MIN_WINDOW_S - elapsed)
        load = await self._resolved()
        started = time.monotonic()
        while load.over(self.threshold_pct) and not self.gave_up:
            waited = time.monotonic() - started
            if waited >= self.wait_s:
                self.gave_up = True
                return load, waited, True
            await asyncio.sleep(SAMPLE_S)
            load = await self._resolved()
        if not load.over(self.threshold_pct):
            self.gave_up = False
        return load, time.monotonic() - started, False

    def begin_run(self) -> None:
        self._mark = self.sample()

    def end_run(self, before: Load | None, waited_s: float) -> HostPressure:
        """The run's load since `begin_run`; contended when it or the gate's last sample before it
        (None: not read, host_wait_s 0) was over the line."""
        load, self._mark = self.load_since(self._mark)
        was_over = before is not None and before.over(self.threshold_pct)
        return HostPressure(
            source=str(STAT), waited_s=waited_s, contended=load.over(self.threshold_pct) or was_over,
            others_pct=load.others_pct, others_before_pct=None if before is None else before.others_pct, engine_pct=load.engine_pct,
            resolution_pct=load.resolution_pct, cpus=self.counted_cpus,
        )
