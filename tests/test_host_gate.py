"""The host gate: other processes' CPU load on the engine's host, read only for an endpoint on
this machine whose engine's processes are known, archived per run, said once when it cannot be
read. Real processes throughout: tests/test_host_load.py holds the measure itself (an engine's
own busy children discounted, a hog counted, runs beside two hogs flagged).
"""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

from tests.test_cli import invoke, write_config
from tests.test_recorder_support import seed
from tokenreel.recorder.gates import gpu_gate, host_gate
from tokenreel.report import build_report, render_report
from tokenreel.session import archive


def record(tmp_path: Path, make_sim, *session: str, arms: int = 2):
    cluster = make_sim([seed("bf16", id=f"a{i}") for i in range(arms)])
    config = write_config(tmp_path / "c.toml", cluster, prompts="builtin:ladder4", repeats=1, session=session)
    out = tmp_path / "s.json"
    return invoke("record", "--config", config, "--out", out), out


def test_a_local_endpoint_is_watched_with_its_engines_load_discounted(tmp_path: Path, make_sim) -> None:
    """The simulator here runs inside the recording process: the listener on its port is the
    engine, and the gate measures everything else on this machine's CPUs."""
    result, out = record(tmp_path, make_sim)
    assert result.exit_code == 0, result.output
    measured = [r for r in archive.load(out).runs if not r.warmup]
    assert measured and all(r.host is not None and r.host.source == "/proc/stat" for r in measured)
    assert all(r.host.some_pct is None and r.host.cpus == len(os.sched_getaffinity(0)) for r in measured)
    assert all(0 <= r.host.others_pct <= 100 and r.host.engine_pct is not None for r in measured)
    assert all(r.host.gate_pct() > 10 for r in measured if r.host.contended)  # the line: host_pressure_pct
    report = build_report(archive.load(out))
    assert report["host"]["watched_runs"] == len(measured) and report["host"]["measure"] == "others_cpu"
    assert all(c["host_pressure_pct"] is not None for c in report["cells"])
    assert "the CPU load of processes other than its engine and the recorder" in render_report(archive.load(out), "md")


def test_a_reading_before_each_run_unless_host_wait_s_is_0(tmp_path: Path, make_sim) -> None:
    """With a wait the gate reads others' load before each run (archived beside the run's own);
    `host_wait_s = 0` reads none (no time between runs spent on it), the run's own still read."""
    for wait, before_read in (("0.5", True), ("0", False)):
        folder = tmp_path / wait
        folder.mkdir()
        result, out = record(folder, make_sim, f"host_wait_s = {wait}", arms=1)
        assert result.exit_code == 0, result.output
        measured = [r for r in archive.load(out).runs if not r.warmup]
        assert measured and all(r.host is not None and r.host.others_pct is not None for r in measured)
        assert all((r.host.others_before_pct is not None) == before_read for r in measured), (wait, [r.host for r in measured])


def test_an_engine_whose_processes_cannot_be_found_is_said_once_and_not_flagged(tmp_path: Path, make_sim, monkeypatch) -> None:
    """No listener visible (as for another user's engine) and no GPU: the gate cannot tell the
    engine's load from others', says so once per arm, and flags no run."""
    (tmp_path / "no-proc").mkdir()
    monkeypatch.setattr(gpu_gate, "PROC", tmp_path / "no-proc")  # no /proc/net/tcp: no listener found
    result, out = record(tmp_path, make_sim)
    assert result.exit_code == 0, result.output
    said = [line for line in result.output.splitlines() if "engine host not watched" in line]
    assert sorted(line.split(":")[1].strip() for line in said) == ["a0", "a1"], result.output  # once per arm
    assert all("the engine's processes were not found" in line for line in said)
    session = archive.load(out)
    measured = [r for r in session.runs if not r.warmup]
    assert measured and all(r.host is None and "processes were not found" in r.host_note for r in measured)
    assert build_report(session)["host"]["contended_runs"] == 0


def test_a_remote_endpoint_gets_no_host_check(tmp_path: Path, make_sim, monkeypatch) -> None:
    async def remote(base_url: str) -> bool:
        return False

    monkeypatch.setattr("tokenreel.recorder.runner.endpoint_is_local", remote)
    result, out = record(tmp_path, make_sim, arms=1)
    assert result.exit_code == 0, result.output
    assert "note: a0: engine host not watched: remote endpoint" in result.output
    session = archive.load(out)
    assert all(r.host is None and r.host_note.startswith("remote endpoint") for r in session.runs)
    assert "not watched (remote endpoint" in render_report(session, "md")


def test_which_endpoints_are_local() -> None:
    """Loopback and this host's own addresses are local; an address this host does not own is
    not (found by binding a UDP socket to it: nothing is sent anywhere)."""
    local = asyncio.run(host_gate.endpoint_is_local("http://127.0.0.1:8000/v1"))
    named = asyncio.run(host_gate.endpoint_is_local("http://localhost:8000/v1"))
    v6 = asyncio.run(host_gate.endpoint_is_local("http://[::1]:8000/v1"))
    documentation = asyncio.run(host_gate.endpoint_is_local("http://192.0.2.7:8000/v1"))  # TEST-NET-1
    assert (local, named, v6, documentation) == (True, True, True, False)
    own = next((info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
                if not info[4][0].startswith("127.")), None)
    if own is not None:  # this host's own non-loopback address, where it has one
        assert asyncio.run(host_gate.endpoint_is_local(f"http://{own}:8000/v1"))


