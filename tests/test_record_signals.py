"""Stopping `tokenreel record` (issue 11, item 8), with real processes against simulated
endpoints: SIGTERM behaves like Ctrl-C (completed runs saved, one line, exit 143), a second
Ctrl-C exits 130 quietly, and what a SIGKILL leaves next to the session is removed by the
next record, never while another record holds the session.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.test_cli import REPO, write_config
from tests.test_recorder_support import finish
from tokenreel.session import archive
from tokenreel.session.model import ArchiveError
from tokenreel.simulator.profiles import SEED_LADDER


def start_record(config: Path, session: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tokenreel", "record", "--config", str(config), "--out", str(session), *args],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def wait_for_runs(session: Path, proc: subprocess.Popen[str], runs: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            if len(archive.load(session).runs) >= runs:
                return
        except (ArchiveError, OSError):
            pass
        time.sleep(0.02)
    raise AssertionError(f"{session} never held {runs} runs")


def interruption_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "interrupted" in line]


def test_sigterm_is_like_ctrl_c(tmp_path: Path, make_sim) -> None:
    cluster = make_sim(SEED_LADDER[:2], time_scale=0.2)
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=48, repeats=2)
    session = tmp_path / "s.json"
    proc = start_record(config, session)
    wait_for_runs(session, proc, 2)
    proc.send_signal(signal.SIGTERM)
    _, stderr = finish(proc)
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr
    lines = interruption_lines(stderr)
    assert len(lines) == 1 and "SIGTERM" in lines[0] and "--resume" in lines[0], stderr
    partial = archive.load(session)
    assert 2 <= len(partial.runs) < 16 and all(run.status == "ok" for run in partial.runs)
    assert not (tmp_path / ".s.json.lock").exists()  # released on the way out, as after Ctrl-C


def test_second_ctrl_c_exits_130_quietly(tmp_path: Path, make_sim) -> None:
    cluster = make_sim(SEED_LADDER[:2], time_scale=0.2)
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=48, repeats=2)
    session = tmp_path / "s.json"
    for gap in (0.002, 0.02, 0.05):  # during the clean-up, the summary, the way out
        session.unlink(missing_ok=True)
        proc = start_record(config, session)
        wait_for_runs(session, proc, 2)
        proc.send_signal(signal.SIGINT)
        time.sleep(gap)
        proc.send_signal(signal.SIGINT)
        _, stderr = finish(proc)
        assert proc.returncode == 130, (gap, stderr)
        assert "Traceback" not in stderr and "Aborted" not in stderr and "Exception ignored" not in stderr, stderr
        assert len(interruption_lines(stderr)) <= 1
        kept = archive.load(session)  # the last complete save, whatever the second signal cut short
        assert all(run.status == "ok" for run in kept.runs)


def test_a_killed_records_temporaries_are_removed_by_the_next_one(tmp_path: Path, make_sim) -> None:
    cluster = make_sim(SEED_LADDER[:2], time_scale=0.5)
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=48, repeats=2)
    session = tmp_path / "s.json"
    holder = start_record(config, session)
    try:
        wait_for_runs(session, holder, 1)

        def leftover(name: str) -> Path:  # what `archive.save` creates, and a SIGKILL mid-save leaves
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=tmp_path)
            os.write(fd, b"x" * 4096)
            os.close(fd)
            return Path(tmp)

        stale = leftover("s.json")
        other = leftover("s.json.bak.json")  # another session's: never ours to remove
        refused = start_record(config, session, "--resume")
        _, stderr = finish(refused)
        assert refused.returncode == 2 and f"(pid {holder.pid})" in stderr
        assert stale.exists(), "a record refused by the lock removed the live writer's temporary"
    finally:
        holder.kill()
        holder.communicate()
    assert holder.returncode == -signal.SIGKILL
    resumed = start_record(config, session, "--resume")
    _, stderr = finish(resumed, timeout=120)
    assert resumed.returncode == 0, stderr
    assert not stale.exists() and other.exists()
    assert stale.name in stderr and "killed record" in stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == [other.name]
    assert len(archive.load(session).runs) == 16


def wait_for_tokenreel_code(proc: subprocess.Popen[str], timeout: float = 30) -> None:
    """Until the interpreter runs tokenreel's own imports (orjson, which `tokenreel.cli` loads after
    installing its Ctrl-C handler, is mapped): before that, Python's start-up (site, the editable
    install's finder) takes a Ctrl-C as a KeyboardInterrupt no program can catch."""
    maps = Path(f"/proc/{proc.pid}/maps")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if "orjson" in maps.read_text():
                return
        except OSError:
            pass
        time.sleep(0.002)
    raise AssertionError("tokenreel never started")


def test_ctrl_c_in_the_first_second_always_exits_130(tmp_path: Path, make_sim) -> None:
    cluster = make_sim(SEED_LADDER[:1], time_scale=1.0)
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=256)
    outcomes = []
    for tenth in range(11):  # loading the commands, the config, the preflight, the first runs
        session = tmp_path / f"s{tenth}.json"
        proc = start_record(config, session)
        wait_for_tokenreel_code(proc)
        time.sleep(tenth / 10)
        proc.send_signal(signal.SIGINT)
        _, stderr = finish(proc)
        outcomes.append((tenth / 10, proc.returncode, stderr.strip().splitlines()))
    bad = [o for o in outcomes if o[1] != 130 or "Traceback" in "\n".join(o[2]) or len(interruption_lines("\n".join(o[2]))) != 1]
    assert not bad, bad
    print(f"Ctrl-C at 0.0-1.0 s: exit codes {sorted({o[1] for o in outcomes})} in {len(outcomes)} tries, one line each")
