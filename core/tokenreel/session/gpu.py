"""What the GPU gate archives per arm: the GPUs as NVML read them, and the verdict.

`Arm.gpu` holds one `GpuCheck` per recording of an arm whose engine runs on this machine
(`tokenreel.recorder.gates.gpu_gate` takes it). NVML's own units are kept: bytes, MHz, milliwatts,
host pids, within the bounds here (`tokenreel.session.gpu_validate` checks them on load and drops a
reading past them before the recorder archives it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

GPU_STATUSES = ("idle", "busy", "unavailable")
# Bounds on what NVML may report (a value outside is a driver bug and is dropped to None).
MAX_GPU_DEVICES = 64
MAX_GPU_PROCESSES = 4096
MAX_GPU_NAME = 256
MAX_GPU_MEMORY_BYTES = 2**50  # a pebibyte: far above any one GPU
MAX_GPU_CLOCK_MHZ = 100_000
MAX_GPU_POWER_MW = 10_000_000  # 10 kW
MAX_PID = 2**31 - 1


@dataclass
class GpuProcess:
    """A compute process NVML lists on a GPU. `engine`: it is the arm's own engine (True), another
    program (False), or it could not be told (None: the engine's processes are not known, or
    NVML's pids are another pid namespace's, as in a container)."""

    pid: int
    used_memory_bytes: int | None = None  # None: the driver does not say (some drivers, containers)
    name: str = ""  # /proc/<pid>/comm where that pid is visible here; "" where it is not
    engine: bool | None = None


@dataclass
class GpuDevice:
    """One GPU as NVML read it before an arm; None where the device does not support the query."""

    index: int
    name: str
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    mem_clock_mhz: int | None = None
    mem_clock_max_mhz: int | None = None
    power_limit_mw: int | None = None  # the enforced limit, in NVML's milliwatts
    utilization_pct: int | None = None  # the GPU's busy share over NVML's last sample period
    processes: list[GpuProcess] = field(default_factory=list)


@dataclass
class GpuCheck:
    """The GPU gate before one recording of an arm whose engine runs on this machine.

    "idle": no compute process other than the arm's engine and utilisation at most
    `settings.gpu_util_pct` on the GPUs checked; "busy": still not so after `waited_s` (at most
    `settings.gpu_wait_s`), the arm recorded anyway and flagged, `detail` says what was seen;
    "unavailable": NVML could not be read, `detail` says why. `devices` is the last reading
    (every GPU of this machine); `checked` the indexes the verdict looked at (the engine's GPUs
    where they were found, else all).
    """

    status: str
    at: str = ""  # UTC time of the verdict
    driver: str = ""
    cuda_driver: str = ""  # the CUDA version the driver supports ("12.4")
    devices: list[GpuDevice] = field(default_factory=list)
    checked: list[int] = field(default_factory=list)
    waited_s: float = 0.0
    detail: str = ""


def gpu_hardware(checks: list[GpuCheck]) -> str:
    """The GPUs an arm's last GPU check looked at, as the end card names hardware ("1x NVIDIA
    H200", "2x NVIDIA H200 / 1x NVIDIA L4"); "" when no check read a GPU."""
    check = next((c for c in reversed(checks) if c.devices), None)
    if check is None:
        return ""
    names = [d.name or "unnamed GPU" for d in check.devices if d.index in check.checked]
    return " / ".join(f"{names.count(name)}x {name}" for name in dict.fromkeys(names))
