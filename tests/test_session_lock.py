"""One writer per session (issue 11, item 2): two real `tokenreel record` processes on one --out.

The README's one-GPU workflow records `--arms bf16`, then `--arms nvfp4` into the same file;
when the second starts before the first is done, it must be refused (exit 2, naming the
holder's pid) rather than both exiting 0 and the last writer dropping the other's runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.test_cli import REPO, write_config
from tokenreel.session import archive
from tokenreel.simulator.profiles import SEED_LADDER


def start_record(config: Path, session: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tokenreel", "record", "--config", str(config), "--out", str(session), *args],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def wait_for(path: Path, process: subprocess.Popen[str], timeout: float = 30.0) -> None:
    """Until the first recorder has saved the session (it is recording by then)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the first record never saved its session"
        time.sleep(0.02)


def arms_recorded(session: Path) -> set[str]:
    return {run.arm for run in archive.load(session).runs if run.status == "ok"}


def test_second_record_on_the_same_session_is_refused_naming_the_holder(tmp_path: Path, make_sim) -> None:
    cluster = make_sim(SEED_LADDER[:2], time_scale=1.0)  # real speed: bf16 takes ~10 s for 4 prompts,
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=256)  # past a loaded machine's start-up of the second
    session = tmp_path / "s.json"
    first = start_record(config, session, "--arms", "bf16")
    try:
        wait_for(session, first)
        second = start_record(config, session, "--arms", "nvfp4")
        out, err = second.communicate(timeout=60)
        assert first.poll() is None, "the first record ended before the second was checked; slow the sim down"
        assert second.returncode == 2, (out, err)
        assert f"(pid {first.pid}) is writing this session" in err and str(session) in err
        assert len(err.strip().splitlines()) == 1, err
        out, err = first.communicate(timeout=120)
        assert first.returncode == 0, (out, err)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert arms_recorded(session) == {"bf16"}
    # Once the first is done, the same command adds its arm to what is on disk: nothing is lost.
    second = start_record(config, session, "--arms", "nvfp4")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, (out, err)
    assert arms_recorded(session) == {"bf16", "nvfp4"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml", "s.json"]  # the lock file is gone


def test_resume_and_force_are_refused_too_and_a_killed_holder_frees_the_session(tmp_path: Path, make_sim) -> None:
    cluster = make_sim(SEED_LADDER[:1], time_scale=1.0)
    # ~4 s a run: the first record must still hold the lock while two more start on a loaded machine
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=384)
    session = tmp_path / "s.json"
    first = start_record(config, session)
    try:
        wait_for(session, first)
        resumed = start_record(config, session, "--resume")
        out, err = resumed.communicate(timeout=60)
        assert first.poll() is None, "the first record ended before the resume was checked; slow the sim down"
        assert resumed.returncode == 2 and f"(pid {first.pid})" in err, (out, err)
        forced = start_record(config, session, "--force")  # --force does not bypass the lock either
        out, err = forced.communicate(timeout=60)
        assert forced.returncode == 2 and f"(pid {first.pid})" in err, (out, err)
        first.send_signal(signal.SIGKILL)  # dies holding the lock: the kernel drops the flock
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert (tmp_path / ".s.json.lock").read_text().strip() == str(first.pid)  # left behind, stale
    resumed = start_record(config, session, "--resume")
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, (out, err)
    loaded = archive.load(session)
    assert len(loaded.runs) == len(loaded.prompts) and all(run.status == "ok" for run in loaded.runs)
    assert not (tmp_path / ".s.json.lock").exists()
    assert os.path.exists(session)


def test_a_link_planted_at_the_lock_or_a_hard_linked_session_is_refused(tmp_path: Path, make_sim) -> None:
    """The lock is opened without following a link (its target is left as it was), and a session
    file with a second name (a hard link, which would take a lock of its own) is refused: exit 2,
    one line each."""
    cluster = make_sim(SEED_LADDER[:1], time_scale=0.05)
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=8)
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    session = tmp_path / "s.json"
    (tmp_path / ".s.json.lock").symlink_to(target)
    planted = start_record(config, session)
    _, stderr = planted.communicate(timeout=120)
    assert planted.returncode == 2 and ".s.json.lock: is a symbolic link, not the session's lock: remove it" in stderr, stderr
    assert target.read_text() == "keep me\n" and len(stderr.strip().splitlines()) == 1
    (tmp_path / ".s.json.lock").unlink()

    done = start_record(config, session)
    assert done.communicate(timeout=120) and done.returncode == 0
    os.link(session, tmp_path / "other-name.json")
    for name in ("s.json", "other-name.json"):
        again = start_record(config, tmp_path / name, "--resume")
        _, stderr = again.communicate(timeout=120)
        assert again.returncode == 2 and "has 2 hard links" in stderr and len(stderr.strip().splitlines()) == 1, stderr
