"""The GPU gate: is the GPU idle before an arm whose engine runs on this machine?

Two arms sharing a GPU measure each other. Before each arm, NVML (the `nvidia-ml-py` package,
`pip install 'tokenreel[gpu]'`) lists every GPU's compute processes and utilisation. A process
that is not the arm's engine, or utilisation above `settings.gpu_util_pct`, makes the gate wait
(at most `settings.gpu_wait_s`, polling like the idle gate); when it does not clear, the arm is
recorded anyway and its `GpuCheck` says "busy" with what was seen.

Which processes are the engine's cannot always be told: an engine on this machine is the
process listening on the endpoint's port and its descendants (vLLM's and SGLang's workers are
children), or, for an engine tokenreel launches, its process group; NVML's pids are the host's
pid namespace, which in a container is not this one. A process present before the engine was
started (`EngineProcesses.before`) is never the engine's. Processes that cannot be told apart are
archived with their pids and memory and not counted (utilisation still is).

The NVML reading (`read_gpus`) is kept thin: one function producing a plain `GpuSnapshot`;
every decision is a pure function of snapshots (`classify`, `verdict`, `GpuWait.step`).
Without NVML (package absent, or no driver library) the gate says so once and records on;
on a machine without an NVIDIA driver it only archives why.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from tokenreel.session.gpu import GpuCheck, GpuDevice, GpuProcess
from tokenreel.session.gpu_validate import bound_gpu

try:
    import pynvml
except ImportError:  # an optional extra (tokenreel[gpu]): `read_gpus` says how to install it
    HAS_NVML = False
else:
    HAS_NVML = True

POLL_S = 1.0  # NVML's utilisation is an average over its last sample period (up to a second)
PROC = Path("/proc")
GIB = 2**30


# The NVIDIA kernel driver's folder: a machine without it has no NVIDIA GPU to check.
NVIDIA_DRIVER = Path("/proc/driver/nvidia")


class NoNvml(Exception):
    """NVML cannot be read here; the message is the one line to archive, and to say (once) on a
    machine with an NVIDIA driver: on one without (no GPU to check) it would be noise."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.gpu_here = NVIDIA_DRIVER.exists()


@dataclass
class GpuSnapshot:
    """Every GPU of this machine as NVML read it at one moment."""

    driver: str = ""
    cuda_driver: str = ""
    devices: list[GpuDevice] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # impossible values NVML gave, dropped to None


@dataclass(frozen=True)
class EngineProcesses:
    """What is known of the arm's engine: its processes on this machine (None: unknown) and the
    GPU processes present before it was started (None: not read, as for an engine started by hand)."""

    pids: frozenset[int] | None = None
    before: frozenset[int] | None = None


# --- reading NVML: thin, one function ---------------------------------------------------------


def read_gpus() -> GpuSnapshot:
    """Read every GPU once; NoNvml (with the reason) when the package or the driver is absent."""
    if not HAS_NVML:
        raise NoNvml(
            "NVML not readable: the nvidia-ml-py package is not installed (pip install 'tokenreel[gpu]');"
            " the GPU is not checked or archived"
        ) from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NoNvml(f"NVML not readable: {type(exc).__name__}: {exc} (no NVIDIA driver here?); the GPU is not"
                     " checked or archived") from None
    try:
        def ask(call: Callable[..., Any], *args: Any) -> Any:
            try:
                return call(*args)
            except pynvml.NVMLError:  # not supported on this device or driver: said missing
                return None

        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = ask(pynvml.nvmlDeviceGetMemoryInfo, handle)
            busy = ask(pynvml.nvmlDeviceGetUtilizationRates, handle)
            processes = ask(pynvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
            devices.append(GpuDevice(
                index=index,
                name=_text(ask(pynvml.nvmlDeviceGetName, handle)),
                memory_total_bytes=memory.total if memory else None,
                memory_used_bytes=memory.used if memory else None,
                sm_clock_mhz=ask(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_SM),
                sm_clock_max_mhz=ask(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM),
                mem_clock_mhz=ask(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_MEM),
                mem_clock_max_mhz=ask(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_MEM),
                power_limit_mw=ask(pynvml.nvmlDeviceGetEnforcedPowerLimit, handle),
                utilization_pct=busy.gpu if busy else None,
                processes=[GpuProcess(p.pid, p.usedGpuMemory, process_name(p.pid)) for p in processes],
            ))
        cuda = ask(pynvml.nvmlSystemGetCudaDriverVersion)
        snapshot = GpuSnapshot(_text(ask(pynvml.nvmlSystemGetDriverVersion)), cuda_version(cuda), devices)
    finally:
        pynvml.nvmlShutdown()
    for device in snapshot.devices:
        snapshot.dropped += [f"GPU {device.index} {what}" for what in bound_gpu(device)]
    return snapshot


def gpu_pids() -> frozenset[int] | None:
    """The compute processes on every GPU now (None without NVML): taken just before tokenreel
    starts an engine, they are never that engine's."""
    try:
        snapshot = read_gpus()
    except NoNvml:
        return None
    return frozenset(p.pid for d in snapshot.devices for p in d.processes)


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else "" if value is None else str(value)


def cuda_version(value: int | None) -> str:
    """NVML's CUDA driver version (12040) as people write it (12.4); "" when not given."""
    return "" if value is None else f"{value // 1000}.{value % 1000 // 10}"


def process_name(pid: int) -> str:
    """The program of a pid as this machine sees it; "" where that pid is not visible here."""
    try:
        return (PROC / str(pid) / "comm").read_text(errors="replace").strip()
    except OSError:
        return ""


# --- the engine's processes on this machine ----------------------------------------------------


def listener_pids(port: int) -> frozenset[int]:
    """The processes holding a TCP socket listening on `port` (/proc/net/tcp and tcp6, then each
    process's open files): an engine started by hand is the one serving its endpoint. Empty where
    no such socket or its owner is visible (another user's process without privileges)."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    owners = set()
    for pid in _pids():
        try:
            fds = os.scandir(PROC / str(pid) / "fd")
        except OSError:
            continue
        with fds:
            for fd in fds:
                try:
                    if os.readlink(fd.path) in inodes:
                        owners.add(pid)
                        break
                except OSError:
                    continue
    return frozenset(owners)


def with_descendants(roots: frozenset[int]) -> frozenset[int]:
    """`roots` and every process below them (an engine's worker processes)."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        try:
            stat = (PROC / str(pid) / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])  # the name in parentheses may hold spaces
        children.setdefault(parent, []).append(pid)
    found, todo = set(roots), list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return frozenset(found)


def _pids() -> list[int]:
    return [int(entry.name) for entry in os.scandir(PROC) if entry.name.isdigit()]


# --- decisions: pure functions of snapshots ----------------------------------------------------


def classify(snapshot: GpuSnapshot, engine: EngineProcesses) -> GpuSnapshot:
    """The snapshot with each process marked the engine's (True), another program's (False) or
    not told apart (None). A pid present before the engine started is another program's; with
    the engine's pids known, a process is not the engine's when NVML's pids are this machine's
    own (one of them is the engine's, or the process is visible here)."""
    pids = engine.pids or frozenset()
    gpu_pids = {p.pid for d in snapshot.devices for p in d.processes}
    same_namespace = bool(pids & gpu_pids)

    def mark(process: GpuProcess) -> GpuProcess:
        if engine.before is not None and process.pid in engine.before:
            return replace(process, engine=False)
        if process.pid in pids:
            return replace(process, engine=True)
        if engine.pids is not None and (same_namespace or process.name):
            return replace(process, engine=False)
        return replace(process, engine=None)

    devices = [replace(d, processes=[mark(p) for p in d.processes]) for d in snapshot.devices]
    return replace(snapshot, devices=devices)


def verdict(snapshot: GpuSnapshot, util_pct: float) -> tuple[bool, list[int], str]:
    """(busy, the device indexes looked at, what was seen) for a classified snapshot: the GPUs
    that hold the engine where it was found, else all; busy when one has another program's
    compute process or utilisation over `util_pct`. Processes not told apart are named, not counted."""
    engine_gpus = [d for d in snapshot.devices if any(p.engine for p in d.processes)]
    looked = engine_gpus or snapshot.devices
    busy, seen = False, []
    for device in looked:
        others = [p for p in device.processes if p.engine is False]
        unknown = [p for p in device.processes if p.engine is None]
        if device.utilization_pct is not None and device.utilization_pct > util_pct:
            busy = True
            seen.append(f"GPU {device.index} utilisation {device.utilization_pct} % (over {util_pct:g} %)")
        if others:
            busy = True
            seen.append(f"GPU {device.index}: {len(others)} other compute process(es): {processes_text(others)}")
        if unknown:
            seen.append(f"GPU {device.index}: {len(unknown)} compute process(es) not told apart from the engine"
                        f" (listed, not counted): {processes_text(unknown)}")
    if not snapshot.devices:
        seen.append("NVML lists no GPU")
    return busy, [d.index for d in looked], "; ".join(seen + snapshot.dropped)


def processes_text(processes: list[GpuProcess]) -> str:
    """"pid 4242 python3 8.1 GiB, pid 77 (not visible here) memory not given"."""
    def one(p: GpuProcess) -> str:
        memory = "memory not given" if p.used_memory_bytes is None else f"{p.used_memory_bytes / GIB:.1f} GiB"
        return f"pid {p.pid} {p.name or '(not visible here)'} {memory}"

    return ", ".join(one(p) for p in processes)


@dataclass
class GpuWait:
    """The gate's state over one wait: `step` takes each reading and the seconds waited so far,
    and returns the check once the GPU is idle or the wait ran out (None: read again)."""

    util_pct: float
    wait_s: float
    engine: EngineProcesses = field(default_factory=EngineProcesses)

    def step(self, snapshot: GpuSnapshot, waited_s: float) -> GpuCheck | None:
        classified = classify(snapshot, self.engine)
        busy, looked, seen = verdict(classified, self.util_pct)
        if busy and waited_s < self.wait_s:
            return None
        return GpuCheck(
            status="busy" if busy else "idle", driver=classified.driver, cuda_driver=classified.cuda_driver,
            devices=classified.devices, checked=looked, waited_s=round(waited_s, 3),
            detail=f"{seen}; still so after {waited_s:.0f} s (gpu_wait_s {self.wait_s:g})" if busy else seen,
        )


def unavailable(reason: str) -> GpuCheck:
    """The check archived when NVML cannot be read: that it was not, and why."""
    return GpuCheck(status="unavailable", detail=reason)


async def gpu_gate(wait: GpuWait, on_busy: Callable[[str], None] | None = None) -> GpuCheck:
    """Read the GPUs until `wait` decides; `on_busy` hears the first busy reading. NoNvml when NVML
    cannot be read (the caller archives `unavailable`)."""
    started = time.monotonic()
    told = False
    while True:
        snapshot = await asyncio.to_thread(read_gpus)
        waited = time.monotonic() - started
        check = wait.step(snapshot, waited)
        if check is not None:
            return check
        if on_busy is not None and not told:
            told = True
            on_busy(verdict(classify(snapshot, wait.engine), wait.util_pct)[2])
        await asyncio.sleep(min(POLL_S, max(0.0, wait.wait_s - waited)))
