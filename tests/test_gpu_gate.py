"""The GPU gate (issue 29): NVML absent is said once and archived; the gate's decisions, the
archive, the report and the end card on GPU snapshots shaped as NVML gives them.

No GPU is reachable here and pynvml is not in the test venv, so the NVML reading itself
(`gpu_gate.read_gpus`, kept thin) is exercised on a real GPU by bench/gpu_probe.py; these tests
feed the pure decision functions `GpuSnapshot`s with an H200's values (NVML's units: bytes,
MHz, milliwatts, pids as `nvmlDeviceGetComputeProcesses` lists them).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from tests.session_factory import ladder
from tests.test_cli import invoke, write_config
from tests.test_recorder_support import seed
from tokenreel.recorder.gates import gpu_gate
from tokenreel.recorder.gates.gpu_gate import (
    EngineProcesses,
    GpuSnapshot,
    GpuWait,
    NoNvml,
    classify,
    cuda_version,
    listener_pids,
    read_gpus,
    verdict,
    with_descendants,
)
from tokenreel.renderer.end_facts import end_facts
from tokenreel.report import build_report, render_report
from tokenreel.session import archive
from tokenreel.session.gpu import GpuDevice, GpuProcess
from tokenreel.session.gpu_validate import bound_gpu
from tokenreel.session.json_form import session_to_dict
from tokenreel.session.model import ArchiveError
from tokenreel.session.validate import from_dict

H200_MIB = 143_771  # what NVML reports as an H200's memory total
ENGINE, OTHER = 4242, 5151


def h200(index: int = 0, util: int = 0, processes: tuple[GpuProcess, ...] = ()) -> GpuDevice:
    return GpuDevice(
        index=index, name="NVIDIA H200", memory_total_bytes=H200_MIB * 2**20, memory_used_bytes=2_400 * 2**20,
        sm_clock_mhz=1980, sm_clock_max_mhz=1980, mem_clock_mhz=3201, mem_clock_max_mhz=3201,
        power_limit_mw=700_000, utilization_pct=util, processes=list(processes),
    )


def proc(pid: int, mib: int | None = 2_200, name: str = "llama-server") -> GpuProcess:
    return GpuProcess(pid, None if mib is None else mib * 2**20, name)


def snapshot(*devices: GpuDevice) -> GpuSnapshot:
    return GpuSnapshot(driver="570.86.15", cuda_driver=cuda_version(12080), devices=list(devices))


def decide(snap: GpuSnapshot, engine: EngineProcesses, util: float = 10.0) -> tuple[bool, list[int], str]:
    return verdict(classify(snap, engine), util)


# --- NVML absent ----------------------------------------------------------------------------


def needs_no_pynvml() -> None:
    if importlib.util.find_spec("pynvml") is not None:
        pytest.fail("this test needs a venv without nvidia-ml-py (the test venv has none): it checks NVML absent")


def test_read_gpus_without_the_package_says_why() -> None:
    needs_no_pynvml()
    with pytest.raises(NoNvml, match=r"nvidia-ml-py package is not installed \(pip install 'tokenreel\[gpu\]'\)"):
        read_gpus()


@pytest.mark.parametrize("driver", [True, False], ids=["nvidia-driver", "no-gpu"])
def test_record_without_nvml_says_so_once_and_archives_why(tmp_path: Path, make_sim, monkeypatch: pytest.MonkeyPatch,
                                                           driver: bool) -> None:
    """Said once where an NVIDIA driver is (its GPU goes unchecked); on a machine without one,
    only archived."""
    needs_no_pynvml()
    monkeypatch.setattr(gpu_gate, "NVIDIA_DRIVER", tmp_path if driver else tmp_path / "absent")
    cluster = make_sim([seed("bf16", id=f"a{i}") for i in range(3)])
    config = write_config(tmp_path / "c.toml", cluster, prompts="builtin:ladder4", repeats=1)
    out = tmp_path / "s.json"
    result = invoke("record", "--config", config, "--out", out)
    assert result.exit_code == 0, result.output
    assert result.output.count("NVML not readable") == (1 if driver else 0), result.output
    session = archive.load(out)
    assert all(r.status == "ok" for r in session.runs)
    for arm in session.arms:
        assert [c.status for c in arm.gpu] == ["unavailable"]
        assert "nvidia-ml-py package is not installed" in arm.gpu[0].detail and arm.gpu[0].at
    report = build_report(session)
    assert [g["status"] for g in report["gpu"]] == ["unavailable"] * 3
    assert "GPU (a0): not read: NVML not readable" in render_report(session, "md")
    assert end_facts(session, ["a0"]).hardware == "simulated endpoints, no GPU"


# --- the decisions -----------------------------------------------------------------------------


def test_the_engine_alone_on_its_gpu_is_idle() -> None:
    busy, looked, seen = decide(snapshot(h200(0, processes=(proc(ENGINE),)), h200(1)), EngineProcesses(pids=frozenset({ENGINE})))
    assert (busy, looked, seen) == (False, [0], "")


def test_another_process_on_the_engines_gpu_is_busy_and_named() -> None:
    snap = snapshot(h200(0, processes=(proc(ENGINE), proc(OTHER, 8_192, "python3"))), h200(1, processes=(proc(77),)))
    busy, looked, seen = decide(snap, EngineProcesses(pids=frozenset({ENGINE})))
    assert busy and looked == [0]  # GPU 1's process is on another GPU: listed in the archive, not counted
    assert seen == "GPU 0: 1 other compute process(es): pid 5151 python3 8.0 GiB"


def test_utilisation_over_the_threshold_is_busy() -> None:
    busy, _, seen = decide(snapshot(h200(0, util=87, processes=(proc(ENGINE),))), EngineProcesses(pids=frozenset({ENGINE})))
    assert busy and seen == "GPU 0 utilisation 87 % (over 10 %)"
    assert not decide(snapshot(h200(0, util=10)), EngineProcesses(pids=frozenset({ENGINE})))[0]  # at the threshold: idle


def test_processes_not_told_apart_are_listed_not_counted() -> None:
    # The engine's pids unknown, or NVML's pids another namespace's (a container): not visible here.
    for engine, process in ((EngineProcesses(), proc(OTHER)), (EngineProcesses(pids=frozenset({ENGINE})), proc(OTHER, None, ""))):
        busy, looked, seen = decide(snapshot(h200(0, processes=(process,)), h200(1)), engine)
        assert not busy and looked == [0, 1]
        assert "1 compute process(es) not told apart from the engine (listed, not counted): pid 5151" in seen


def test_a_process_there_before_the_engine_started_is_another_programs() -> None:
    snap = snapshot(h200(0, processes=(proc(OTHER, 4_096, ""), proc(9000, 2_000, ""))))
    busy, _, seen = decide(snap, EngineProcesses(before=frozenset({OTHER})))  # a launched engine: 9000 appeared after
    assert busy and "1 other compute process(es): pid 5151 (not visible here) 4.0 GiB" in seen
    assert "not told apart from the engine (listed, not counted): pid 9000" in seen


def test_the_wait_decides_at_idle_or_when_it_runs_out() -> None:
    wait = GpuWait(util_pct=10.0, wait_s=30.0, engine=EngineProcesses(pids=frozenset({ENGINE})))
    busy = snapshot(h200(0, processes=(proc(ENGINE), proc(OTHER))))
    assert wait.step(busy, 12.0) is None  # keep waiting
    check = wait.step(busy, 30.4)
    assert check is not None and check.status == "busy" and check.waited_s == 30.4
    assert check.detail.endswith("still so after 30 s (gpu_wait_s 30)")
    assert [p.engine for p in check.devices[0].processes] == [True, False]
    idle = wait.step(snapshot(h200(0, processes=(proc(ENGINE),))), 3.0)
    assert idle is not None and (idle.status, idle.checked, idle.driver, idle.cuda_driver) == ("idle", [0], "570.86.15", "12.8")


# --- the engine's processes on this machine ----------------------------------------------------


def test_the_engine_is_the_process_listening_on_the_port_and_its_children() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = (f"import socket, subprocess, sys, time; s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen();"
            " c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); print(c.pid, flush=True);"
            " time.sleep(60)")
    server = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        child = int(server.stdout.readline())
        assert listener_pids(port) == {server.pid}
        assert with_descendants(frozenset({server.pid})) == {server.pid, child}
        assert os.getpid() not in with_descendants(frozenset({server.pid}))
    finally:
        os.kill(child, 9)
        server.kill()
        server.wait()


# --- the archive ---------------------------------------------------------------------------


def gpu_session(status: str = "idle", hardware: str | None = None):
    session = ladder({"bf16": {"p1": [100.0]}, "q4": {"p1": [180.0]}})
    wait = GpuWait(10.0, 30.0, EngineProcesses(pids=frozenset({ENGINE})))
    for arm in session.arms:
        others = (proc(OTHER, 8_192, "python3"),) if status == "busy" else ()
        check = wait.step(snapshot(h200(0, processes=(proc(ENGINE), *others))), 30.0)
        assert check is not None
        arm.gpu.append(replace(check, at="2026-12-02T17:00:00+00:00"))
        if hardware:
            arm.settings["hardware"] = hardware
    return session


def test_gpu_checks_round_trip_and_old_arms_write_no_gpu_key(tmp_path: Path) -> None:
    session = gpu_session("busy")
    archive.save(session, tmp_path / "s.json")
    loaded = archive.load(tmp_path / "s.json")
    assert [a.gpu for a in loaded.arms] == [a.gpu for a in session.arms]
    assert loaded.arms[0].gpu[0].devices[0].processes[1] == GpuProcess(OTHER, 8_192 * 2**20, "python3", False)
    plain = ladder({"bf16": {"p1": [100.0]}})
    assert "gpu" not in session_to_dict(plain)["arms"][0]


@pytest.mark.parametrize("path, value, problem", [
    (("devices", 0, "utilization_pct"), 101, "expected at most 100"),
    (("devices", 0, "sm_clock_mhz"), 10**6, "expected at most 100000"),
    (("devices", 0, "processes", 0, "pid"), -1, "must not be negative"),
    (("checked",), [3], "only those of the devices listed"),
    (("status",), "warm", "must be one of idle, busy, unavailable"),
])
def test_impossible_gpu_values_are_named_on_load(path: tuple, value: object, problem: str) -> None:
    data = orjson.loads(orjson.dumps(session_to_dict(gpu_session())))
    target = data["arms"][0]["gpu"][0]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ArchiveError, match=problem) as caught:
        from_dict(data, "s.json")
    assert caught.value.field.startswith("arms[0].gpu[0]")


def test_bound_gpu_drops_what_nvml_cannot_mean() -> None:
    device = replace(h200(processes=(proc(ENGINE), proc(2**40))), sm_clock_mhz=2**32 - 1, name="x" * 300)
    dropped = bound_gpu(device)
    assert dropped == ["sm_clock_mhz 4294967295", "pid 1099511627776"]
    assert device.sm_clock_mhz is None and [p.pid for p in device.processes] == [ENGINE] and len(device.name) == 256


# --- report and end card -------------------------------------------------------------------------


def test_the_report_shows_the_gpu_in_md_html_and_json() -> None:
    session = gpu_session("busy")
    entry = build_report(session)["gpu"][0]
    assert (entry["arm"], entry["status"], entry["flagged"], entry["hardware"]) == ("bf16", "busy", True, "1x NVIDIA H200")
    assert entry["last"]["devices"][0]["power_limit_mw"] == 700_000  # the json: full precision, NVML's units
    line = ("GPU (bf16): GPU 0 NVIDIA H200, 140.4 GiB, SM 1980 of 1980 MHz, memory 3201 of 3201 MHz, power limit 700 W;"
            " driver 570.86.15 (CUDA 12.8); busy, recorded anyway (flagged): GPU 0: 1 other compute process(es):"
            " pid 5151 python3 8.0 GiB; still so after 30 s (gpu_wait_s 30).")
    assert line in render_report(session, "md")
    assert line in render_report(session, "html")
    assert orjson.loads(render_report(session, "json"))["gpu"][1]["hardware"] == "1x NVIDIA H200"


def test_the_end_card_names_the_archived_gpu_when_no_hardware_is_declared() -> None:
    assert end_facts(gpu_session(), ["bf16", "q4"]).hardware == "1x NVIDIA H200"
    assert end_facts(gpu_session(hardware="8x H200 SXM"), ["bf16", "q4"]).hardware == "8x H200 SXM"
    assert end_facts(ladder({"bf16": {"p1": [100.0]}}), ["bf16"]).hardware == "hardware not stated (config: [session] hardware)"
