"""`record --ray` (issue 28, items 2 and 5): each replica recorded by a Ray worker, on a local Ray
of 2 CPUs joined by its address, against two sets of simulated endpoints over loopback HTTP.

Checked: the pooled ladder agrees with a one-replica recording of the same prompts, every run
names the node that recorded it, the driver alone writes the session; a worker killed mid-run
loses no finished run, the other replica goes on, and `--resume --ray` records the rest; what
Ray cannot record is refused in one line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.test_cli import invoke, run_cli
from tests.test_replicas import PROFILES, QUICK_SCALE, SCALE, _config, assert_pooled_is_the_truth
from tokenreel.recorder.replicas import shards
from tokenreel.session import archive

WORKER_TITLE = b"ReplicaRecorder"  # Ray names a worker process after its actor class


def _ray_record(*args: object, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tokenreel", "record", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


def test_two_replicas_on_ray_give_the_one_replica_ladder(ray_head: str, tmp_path: Path, make_sim) -> None:
    clusters = [make_sim(PROFILES, time_scale=SCALE) for _ in range(2)]
    out = tmp_path / "two.json"
    result = _ray_record("--config", _config(tmp_path / "c.toml", clusters), "--out", out, "--ray", ray_head)
    assert result.returncode == 0, result.stdout + result.stderr
    session = archive.load(out)
    parts = shards(session.prompts, 2)
    assert len(session.runs) == 2 * len(session.prompts) * 3 and all(r.status == "ok" for r in session.runs)
    for run in session.runs:
        assert run.replica is not None and run.prompt in parts[run.replica], (run.prompt, run.replica)
        assert run.node and run.node.count(".") == 3, run.node  # the Ray node's IP
        assert run.clock is not None and run.clock.source == "kernel", run.clock  # stamped on the worker
    for arm in session.arms:
        assert sorted(entry["replica"] for entry in arm.recorded) == ["0", "1"], arm.recorded
        assert all(entry["node"] and entry["finished_at"] for entry in arm.recorded)
        assert arm.fingerprint  # replica 0's, sent back by its worker
    # replicas recorded at the same time, each its arms one after another, in rotated order
    starts = {(r.replica, r.arm): min(x.send_monotonic_ns for x in session.runs if (x.replica, x.arm) == (r.replica, r.arm))
              for r in session.runs}
    first, second = (arm.id for arm in session.arms)
    assert starts[(0, first)] < starts[(0, second)] and starts[(1, second)] < starts[(1, first)]
    report = orjson.loads(invoke("report", out, "--format", "json").output)
    assert [e["runs"] for e in report["replicas"]] == [{"ok": 2 * 3 * len(p)} for p in parts]
    assert all(e["nodes"] == [session.runs[0].node] for e in report["replicas"])  # one machine: one node
    assert_pooled_is_the_truth(report, session, clusters)


def test_arms_of_one_endpoint_on_ray_keep_their_gpu_check(ray_head: str, tmp_path: Path, make_sim) -> None:
    """One replica: one worker, every prompt, the GPU gate read on its node and archived."""
    cluster = make_sim(PROFILES, time_scale=QUICK_SCALE)
    out = tmp_path / "s.json"
    config = _config(tmp_path / "c.toml", [cluster], prompts="builtin:ladder4", repeats=1)
    result = _ray_record("--config", config, "--out", out, "--ray", ray_head)
    assert result.returncode == 0, result.stdout + result.stderr
    session = archive.load(out)
    assert len(session.runs) == len(PROFILES) * len(session.prompts)
    assert all(r.status == "ok" and r.replica is None and r.node for r in session.runs)
    for arm in session.arms:
        assert len(arm.gpu) == 1 and arm.gpu[0].status in ("unavailable", "idle", "busy"), arm.gpu
        assert [set(entry) for entry in arm.recorded] == [{"started_at", "node", "hostname", "finished_at"}]


def _workers() -> list[int]:
    """Pids of this machine's ReplicaRecorder worker processes."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if WORKER_TITLE in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _niceness(pid: int) -> int:
    """A process's niceness, from /proc (the field after its priority)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def _wait_for_no_workers(seconds: float = 60) -> list[int]:
    """Ray ends a killed actor's process a moment later: wait for it; the pids still there."""
    gone = time.monotonic() + seconds
    while (left := _workers()) and time.monotonic() < gone:
        time.sleep(0.1)
    return left


def _ok_runs(path: Path) -> dict[tuple[str, str, int], dict]:
    """The ok runs in the file as saved now, by key (the raw JSON: what a kill must not change)."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return {(r["arm"], r["prompt"], r["index"]): r for r in data.get("runs", []) if r["status"] == "ok"}


KILL_REPEATS = 1  # 24 runs, 12 a replica: the kill comes after 4, with both replicas mid-arm


@pytest.mark.parametrize("victim", ["worker", "driver", "ctrl-c"])
def test_a_kill_loses_no_finished_run_and_resume_records_the_rest(ray_head: str, tmp_path: Path, make_sim,
                                                                  victim: str) -> None:
    """SIGKILL of one replica's worker (the other goes on) or of the driver (its workers go with
    it), or Ctrl-C of the driver (exit 130, its workers stopped). A killed driver's file is its
    last save after a run, as a lost worker's is: its resume is the worker case's (and a killed
    holder's stale lock is tests/test_session_lock.py's), so it is not recorded again here."""
    clusters = [make_sim(PROFILES, time_scale=QUICK_SCALE) for _ in range(2)]
    config = _config(tmp_path / "c.toml", clusters, repeats=KILL_REPEATS)
    out = tmp_path / "s.json"
    assert _wait_for_no_workers() == []  # the last test's worker gone, so the two counted are this one's
    driver = subprocess.Popen([sys.executable, "-m", "tokenreel", "record", "--config", str(config), "--out", str(out),
                               "--ray", ray_head], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while len(_ok_runs(out)) < 4 and time.monotonic() < deadline and driver.poll() is None:
            time.sleep(0.05)
        workers = _workers()
        assert len(workers) == 2, (workers, len(_ok_runs(out)), driver.poll())
        # at the driver's niceness, not Ray's 15: a niced recorder stamps arrivals late on a busy node
        assert {_niceness(pid) for pid in workers} == {max(0, os.nice(0))}
        saved = _ok_runs(out)
        if victim == "ctrl-c":
            os.kill(driver.pid, signal.SIGINT)
        else:
            os.kill(workers[0] if victim == "worker" else driver.pid, signal.SIGKILL)
        stdout, stderr = driver.communicate(timeout=300)
    finally:
        driver.kill()
    after = _ok_runs(out)
    assert all(after[key] == run for key, run in saved.items())  # no finished run lost or changed
    session = archive.load(out)
    parts = shards(session.prompts, 2)
    done = {r.key for r in session.runs if r.status == "ok"}
    if victim == "worker":
        assert driver.returncode == 1, stdout + stderr
        lost = [line for line in stderr.splitlines() if "Ray worker was lost" in line]
        assert len(lost) == 1 and "(its process died)" in lost[0] and "every run it finished is saved" in lost[0], stderr
        assert "--resume --ray" in stderr and "retries them" not in stderr  # a lost worker is not a failed run
        replica = int(lost[0].split("replica ")[1].split(" ")[0])
        assert {(a.id, p, i) for a in session.arms for p in parts[1 - replica] for i in range(KILL_REPEATS)} <= done  # it went on
        assert not {(a.id, p, i) for a in session.arms for p in parts[replica] for i in range(KILL_REPEATS)} <= done
    else:
        assert driver.returncode == (130 if victim == "ctrl-c" else -signal.SIGKILL), stdout + stderr
        if victim == "ctrl-c":
            assert "Traceback" not in stderr and "--resume" in stderr.strip().splitlines()[-1], stderr
        assert _wait_for_no_workers() == []  # Ray ends the workers of a driver that died
        assert len(done) < 2 * len(session.prompts) * KILL_REPEATS
    if victim == "driver":
        return
    resumed = _ray_record("--config", config, "--out", out, "--resume", "--ray", ray_head)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    session = archive.load(out)
    assert len(session.runs) == 2 * len(session.prompts) * KILL_REPEATS and all(r.status == "ok" and r.node for r in session.runs)
    assert {r.key: r.started_at for r in session.runs if r.key in saved} == {
        key: run["started_at"] for key, run in saved.items()}


def test_what_ray_cannot_record_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[session]\nprompts = "builtin:ladder4"\nray_resources = ["gpu-a", "gpu-b"]\n'
                      '[[arms]]\nid = "a"\nmodel = "m"\nbase_url = "http://127.0.0.1:2/v1"\n', encoding="utf-8")
    result = invoke("record", "--config", config, "--out", tmp_path / "s.json", "--no-preflight")
    assert result.exit_code == 2 and "session.ray_resources: lists 2 resource(s) for 1 replica(s)" in result.output
    config.write_text('[session]\nprompts = "builtin:ladder4"\n[[arms]]\nid = "a"\nmodel = "m"\n'
                      'base_url = "http://127.0.0.1:{port}/v1"\nlaunch = ["llama-server", "--port", "{port}"]\n',
                      encoding="utf-8")
    result = run_cli("record", "--config", config, "--out", tmp_path / "s.json", "--no-preflight", "--ray", "127.0.0.1:9")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "--ray: arm 'a' has launch" in result.stderr and not (tmp_path / "s.json").exists()


def test_without_ray_or_a_cluster_or_with_another_tokenreel_nothing_is_written(ray_head: str, tmp_path: Path,
                                                                               make_sim) -> None:
    clusters = [make_sim(PROFILES, time_scale=QUICK_SCALE) for _ in range(2)]
    config, out = _config(tmp_path / "c.toml", clusters), tmp_path / "s.json"
    as_tokenreel = "from tokenreel.cli import app; app(prog_name='tokenreel')"
    for setup, address, said in [
        ("import sys; sys.modules['ray'] = None; ", "local", "tokenreel: --ray needs Ray, an optional extra: pip install 'tokenreel[ray]'"),
        ("", "127.0.0.1:9", "--ray 127.0.0.1:9: no Ray cluster answers there"),
        ("import tokenreel.base.version; tokenreel.base.version.__version__ = '0.0.0-other'; ", ray_head,
         "install the same tokenreel[ray] on every node"),
    ]:
        result = subprocess.run([sys.executable, "-c", setup + as_tokenreel, "record", "--config", str(config), "--out",
                                 str(out), "--ray", address], capture_output=True, text=True, timeout=300)
        assert result.returncode == 2 and said in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert not out.exists(), address
