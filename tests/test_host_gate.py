"""The host gate (issue 21): the CPU pressure of the engine's host, read only for an endpoint on
this machine, archived per run, flagged, said when it cannot be read, and left out on request.

The PSI file is the real kernel's where the test needs real behaviour, and a file the test
writes where it needs a known pressure (the gate reads a file; the kernel's is one too).
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from tests.test_cli import invoke, write_config
from tests.test_recorder_support import seed
from tokenreel.analysis.selection import RunSelection
from tokenreel.recorder.gates import host_gate
from tokenreel.report import build_report, render_report
from tokenreel.session import archive


def no_psi(monkeypatch, tmp_path: Path) -> None:
    """A host without PSI: neither the system file nor a cgroup one exists."""
    monkeypatch.setattr(host_gate, "SYSTEM_PSI", tmp_path / "no-pressure" / "cpu")
    monkeypatch.setattr(host_gate, "CGROUP_ROOT", tmp_path / "no-cgroup")


@contextmanager
def saturated_psi(path: Path) -> Iterator[Path]:
    """A PSI file whose `some` total grows as fast as time: 100 % pressure, as under two hogs."""
    stop = threading.Event()
    start = time.monotonic_ns()

    def grow() -> None:
        staged = path.with_name(path.name + ".new")
        while not stop.is_set():  # replaced whole, as the kernel's file is read whole
            total = (time.monotonic_ns() - start) // 1000
            staged.write_text(
                f"some avg10=100.00 avg60=100.00 avg300=100.00 total={total}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
            )
            os.replace(staged, path)
            time.sleep(0.005)

    grow_thread = threading.Thread(target=grow, daemon=True)
    path.write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    grow_thread.start()
    try:
        yield path
    finally:
        stop.set()
        grow_thread.join()


def record(tmp_path: Path, make_sim, *session: str, arms: int = 2):
    cluster = make_sim([seed("bf16", id=f"a{i}") for i in range(arms)])
    config = write_config(tmp_path / "c.toml", cluster, prompts="builtin:ladder4", repeats=1, session=session)
    out = tmp_path / "s.json"
    return invoke("record", "--config", config, "--out", out), out


def test_local_endpoints_are_watched_with_the_real_psi(tmp_path: Path, make_sim) -> None:
    if host_gate.psi_candidates()[0].exists() is False:
        pytest.fail("this test needs a Linux kernel with PSI (/proc/pressure/cpu)")
    result, out = record(tmp_path, make_sim)
    assert result.exit_code == 0, result.output
    measured = [r for r in archive.load(out).runs if not r.warmup]
    assert measured and all(r.host is not None and r.host.source == str(host_gate.SYSTEM_PSI) for r in measured)
    assert all(0 <= r.host.some_pct <= 100 for r in measured)
    report = build_report(archive.load(out))
    assert report["host"]["watched_runs"] == len(measured)
    assert all(c["host_pressure_pct"] is not None for c in report["cells"])


def test_psi_missing_is_said_once_and_the_runs_are_kept(tmp_path: Path, make_sim, monkeypatch) -> None:
    no_psi(monkeypatch, tmp_path)
    result, out = record(tmp_path, make_sim)
    assert result.exit_code == 0, result.output
    said = [line for line in result.output.splitlines() if "engine host not watched" in line]
    assert len(said) == 1 and "no CPU pressure (PSI) readable on this host" in said[0], result.output
    assert "no-pressure/cpu does not exist" in said[0]
    session = archive.load(out)
    assert all(r.host is None and "no CPU pressure (PSI)" in r.host_note for r in session.runs if not r.warmup)
    markdown = render_report(session, "md")
    assert markdown.count("Host not watched: no CPU pressure (PSI) readable on this host") == 1
    assert len(build_report(session)["cells"]) == 8  # every cell present


def test_psi_unreadable_is_said_with_the_reason(tmp_path: Path, make_sim, monkeypatch) -> None:
    no_psi(monkeypatch, tmp_path)
    garbled = tmp_path / "garbled"
    garbled.write_text("this is not a pressure file\n")
    monkeypatch.setattr(host_gate, "SYSTEM_PSI", garbled)
    unreadable = tmp_path / "unreadable"
    unreadable.mkdir()  # a folder where the file should be: reading it fails
    monkeypatch.setattr(host_gate, "psi_candidates", lambda: [garbled, unreadable])
    result, out = record(tmp_path, make_sim, arms=1)
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if "engine host not watched" in line)
    assert f"{garbled} unreadable ({garbled}: no 'some ... total=' line)" in line
    assert f"{unreadable} unreadable (Is a directory)" in line


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


def test_a_loaded_host_is_waited_for_bounded_then_flagged_and_left_out_on_request(tmp_path: Path, make_sim, monkeypatch) -> None:
    psi = tmp_path / "cpu"
    monkeypatch.setattr(host_gate, "psi_candidates", lambda: [psi])
    with saturated_psi(psi):
        started = time.monotonic()
        result, out = record(tmp_path, make_sim, "host_wait_s = 0.6", arms=2)
        elapsed = time.monotonic() - started
    assert result.exit_code == 0, result.output  # never 1 because a machine was busy
    waited = [line for line in result.output.splitlines() if "stayed under CPU pressure" in line]
    assert len(waited) == 2, result.output  # once per arm: it does not wait again while the load lasts
    assert "busy machine: measured runs " in result.output and "host_contended" in result.output
    assert elapsed < 30
    session = archive.load(out)
    measured = [r for r in session.runs if not r.warmup]
    assert all(r.host is not None and r.host.contended and r.host.before_pct > 90 for r in measured), [r.host for r in measured]
    kept = build_report(session)
    assert len(kept["cells"]) == 8 and all(c["host_contended"] == 1 for c in kept["cells"])
    assert "Host contended: 8 runs (a0 4, a1 4); kept in the figures, flagged" in render_report(session, "md")
    left_out = build_report(session, selection=RunSelection(exclude_host_contended=True))
    assert left_out["cells"] == [] and len(left_out["missing_cells"]) == 8
    reason = re.fullmatch(r"all 1 run host contended: CPU pressure (\d+) % on the engine's host \(--exclude-host-contended left it out\)",
                          left_out["missing_cells"][0]["reason"])
    assert reason and int(reason.group(1)) >= 90, left_out["missing_cells"][0]["reason"]
    cli = orjson.loads(invoke("report", out, "--format", "json", "--exclude-host-contended").output)
    assert cli["selection"]["exclude_host_contended"] is True and cli["cells"] == []
