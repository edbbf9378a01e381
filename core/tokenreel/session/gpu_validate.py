"""Reading the GPU gate's archive back, and bounding what NVML reported.

`gpu_check` reads one `arms[].gpu[]` entry with every field checked against `tokenreel.session.gpu`'s
bounds (for `tokenreel.session.validate`); `bound_gpu` drops a reading past them to None before the
recorder archives it, so a driver's bad value never makes a session the loader rejects.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from tokenreel.session.fields import FieldReader
from tokenreel.session.gpu import (
    GPU_STATUSES,
    MAX_GPU_CLOCK_MHZ,
    MAX_GPU_DEVICES,
    MAX_GPU_MEMORY_BYTES,
    MAX_GPU_NAME,
    MAX_GPU_POWER_MW,
    MAX_GPU_PROCESSES,
    MAX_PID,
    GpuCheck,
    GpuDevice,
    GpuProcess,
)

# Each bounded integer field of a GPU reading and its largest value (`bound_gpu`, `_gpu_device`).
GPU_DEVICE_BOUNDS = {
    "memory_total_bytes": MAX_GPU_MEMORY_BYTES, "memory_used_bytes": MAX_GPU_MEMORY_BYTES,
    "sm_clock_mhz": MAX_GPU_CLOCK_MHZ, "sm_clock_max_mhz": MAX_GPU_CLOCK_MHZ,
    "mem_clock_mhz": MAX_GPU_CLOCK_MHZ, "mem_clock_max_mhz": MAX_GPU_CLOCK_MHZ,
    "power_limit_mw": MAX_GPU_POWER_MW, "utilization_pct": 100,
}


def _bounded(r: FieldReader, value: Any, where: str, high: int) -> int | None:
    number = r.opt_int(value, where)
    if number is not None and number > high:
        raise r.fail(where, f"expected at most {high}, got {number}")
    return number


def _name(r: FieldReader, value: Any, where: str) -> str:
    text = r.str_(value, where)
    if len(text) > MAX_GPU_NAME:
        raise r.fail(where, f"expected at most {MAX_GPU_NAME} characters, got {len(text)}")
    return text


def _gpu_process(r: FieldReader, data: Any, where: str) -> GpuProcess:
    d = r.obj(data, where)
    return GpuProcess(
        pid=_bounded(r, r.get(d, "pid", where, r.nonneg_int), f"{where}.pid", MAX_PID) or 0,
        used_memory_bytes=_bounded(r, d.get("used_memory_bytes"), f"{where}.used_memory_bytes", MAX_GPU_MEMORY_BYTES),
        name=r.get(d, "name", where, partial(_name, r), ""),
        engine=r.get(d, "engine", where, r.opt_bool, None),
    )


def _gpu_device(r: FieldReader, data: Any, where: str) -> GpuDevice:
    d = r.obj(data, where)
    processes = r.get(d, "processes", where, r.list_, [])
    if len(processes) > MAX_GPU_PROCESSES:
        raise r.fail(f"{where}.processes", f"{len(processes)} entries is more than the limit of {MAX_GPU_PROCESSES}")
    figures = {name: _bounded(r, d.get(name), f"{where}.{name}", high) for name, high in GPU_DEVICE_BOUNDS.items()}
    return GpuDevice(
        index=_bounded(r, r.get(d, "index", where, r.nonneg_int), f"{where}.index", MAX_GPU_DEVICES - 1) or 0,
        name=r.get(d, "name", where, partial(_name, r)),
        **figures,
        processes=[_gpu_process(r, item, f"{where}.processes[{i}]") for i, item in enumerate(processes)],
    )


def gpu_check(r: FieldReader, data: Any, where: str) -> GpuCheck:
    """One `arms[].gpu[]` entry of a session file, every field checked (`tokenreel.session.validate`,
    docs/session-format.md §6.1)."""
    d = r.obj(data, where)
    devices = r.get(d, "devices", where, r.list_, [])
    if len(devices) > MAX_GPU_DEVICES:
        raise r.fail(f"{where}.devices", f"{len(devices)} entries is more than the limit of {MAX_GPU_DEVICES}")
    check = GpuCheck(
        status=r.get(d, "status", where, r.one_of(GPU_STATUSES)),
        at=r.get(d, "at", where, r.str_, ""),
        driver=r.get(d, "driver", where, partial(_name, r), ""),
        cuda_driver=r.get(d, "cuda_driver", where, partial(_name, r), ""),
        devices=[_gpu_device(r, item, f"{where}.devices[{i}]") for i, item in enumerate(devices)],
        checked=[r.nonneg_int(item, f"{where}.checked[{i}]") for i, item in enumerate(r.get(d, "checked", where, r.list_, []))],
        waited_s=r.get(d, "waited_s", where, r.nonneg_num, 0.0),
        detail=r.get(d, "detail", where, r.str_, ""),
    )
    known = {device.index for device in check.devices}
    if len(known) != len(check.devices) or not set(check.checked) <= known:
        raise r.fail(f"{where}.checked", "expected distinct device indexes, and only those of the devices listed")
    return check


def bound_gpu(device: GpuDevice) -> list[str]:
    """Drop a reading NVML cannot have meant to None (a clock over 100 GHz, a pid past 2^31, ...)
    and name what was dropped: the recorder applies it before archiving, so a driver's bad value
    never makes a session the loader rejects. Names are cut to MAX_GPU_NAME characters."""
    dropped = []
    for name, high in GPU_DEVICE_BOUNDS.items():
        value = getattr(device, name)
        if value is not None and not 0 <= value <= high:
            setattr(device, name, None)
            dropped.append(f"{name} {value}")
    device.name = device.name[:MAX_GPU_NAME]
    kept = []
    for process in device.processes[:MAX_GPU_PROCESSES]:
        if not 0 <= process.pid <= MAX_PID:
            dropped.append(f"pid {process.pid}")
            continue
        if process.used_memory_bytes is not None and not 0 <= process.used_memory_bytes <= MAX_GPU_MEMORY_BYTES:
            dropped.append(f"pid {process.pid} used memory {process.used_memory_bytes}")
            process.used_memory_bytes = None
        process.name = process.name[:MAX_GPU_NAME]
        kept.append(process)
    device.processes = kept
    return dropped
