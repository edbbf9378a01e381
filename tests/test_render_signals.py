"""Killing a render (issue 11, item 8), with real processes: `tokenreel render --workers 2` is
started, then SIGKILLed, SIGTERMed or Ctrl-C'd mid-render. No worker (nor the resource
tracker) may outlive it, the staging folder is removed on every exit path it can see, and one
left by SIGKILL is removed by the next render."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SESSION = REPO / "sessions" / "seed-ladder-demo.json"
# 1080p at a fifth of real speed: about 2000 frames, long enough to be killed mid-render.
LONG = ["--prompt", "code-1", "--speed", "1/5", "--workers", "2", "--title-s", "0"]


def children(pid: int) -> list[int]:
    """Every descendant of pid, from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    """Running, not a zombie (an orphan reaped by nobody still has a /proc entry)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Render:
    """`tokenreel render` in the background; its output goes to files, not pipes, so a worker
    that outlives it cannot hold the test up. Everything it started is killed at the end."""

    def __init__(self, out: Path) -> None:
        self.log = out.parent.parent / f"{out.parent.name}.stderr"
        with open(self.log, "w") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tokenreel", "render", str(SESSION), "--out", str(out), *LONG],
                stdout=subprocess.DEVNULL, stderr=stderr, text=True, cwd=out.parent,
            )
        self.seen: set[int] = set()

    def descendants(self) -> list[int]:
        found = children(self.proc.pid)
        self.seen.update(found)
        return found

    def wait(self, timeout: float) -> tuple[int, str]:
        code = self.proc.wait(timeout=timeout)
        return code, self.log.read_text()

    def __enter__(self) -> Render:
        return self

    def __exit__(self, *exc: object) -> None:
        for pid in [*self.seen, *children(self.proc.pid)]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.proc.kill()
        self.proc.wait()


def staging(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.is_dir() and p.name.startswith(".")]


def wait_mid_render(render: Render, folder: Path) -> list[int]:
    """Wait until both workers are rendering into the staging folder; the python workers' pids."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert render.proc.poll() is None, render.log.read_text()
        workers = [pid for pid in render.descendants() if "spawn_main" in cmdline(pid)]
        chunks = [p for d in staging(folder) for p in d.glob("chunk*")]
        if len(workers) >= 2 and len(chunks) >= 2:
            return workers
        time.sleep(0.1)
    pytest.fail("the render never got going")


def wait_gone(pids: list[int], seconds: float = 5) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.1)
    return [pid for pid in pids if alive(pid)]


def test_sigkill_leaves_no_worker_and_the_next_render_removes_the_stale_folder(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    with Render(folder / "v.mp4") as render:
        wait_mid_render(render, folder)
        everything = render.descendants()  # workers, the resource tracker, their ffmpegs
        render.proc.send_signal(signal.SIGKILL)
        render.wait(timeout=30)
        survivors = wait_gone(everything)
        assert not survivors, [cmdline(pid) for pid in survivors]
    tmp_path = folder
    [stale] = staging(tmp_path)  # nothing could remove it: SIGKILL
    assert not (tmp_path / "v.mp4").exists()
    short = subprocess.run(
        [sys.executable, "-m", "tokenreel", "render", str(SESSION), "--out", str(tmp_path / "poster.png"), "--at", "1"],
        capture_output=True, text=True, timeout=120,
    )
    assert short.returncode == 0, short.stderr
    assert not stale.exists() and staging(tmp_path) == []


@pytest.mark.parametrize(("signum", "code", "name"), [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "Ctrl-C")])
def test_sigterm_and_ctrl_c_stop_the_workers_clean_up_and_say_one_line(
    tmp_path: Path, signum: int, code: int, name: str
) -> None:
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    with Render(tmp_path / "v.mp4") as render:
        workers = wait_mid_render(render, tmp_path)
        render.proc.send_signal(signum)
        returncode, stderr = render.wait(timeout=60)
    assert returncode == code, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    lines = [line for line in stderr.splitlines() if "interrupted" in line]
    assert lines == [f"tokenreel: interrupted ({name}) while rendering {tmp_path / 'v.mp4'}; nothing was written"]
    assert not wait_gone(workers)
    assert staging(tmp_path) == [] and not (tmp_path / "v.mp4").exists()


@pytest.mark.parametrize("gap_s", [0.01, 0.3])
def test_a_second_ctrl_c_exits_130_quietly(tmp_path: Path, gap_s: float) -> None:
    """0.3 s: the second Ctrl-C lands while Python finalizes (it gave exit -2 by SIGINT there)."""
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    with Render(tmp_path / "v.mp4") as render:
        workers = wait_mid_render(render, tmp_path)
        render.proc.send_signal(signal.SIGINT)
        time.sleep(gap_s)
        with contextlib.suppress(ProcessLookupError):  # it may be gone already
            render.proc.send_signal(signal.SIGINT)
        returncode, stderr = render.wait(timeout=60)
    assert returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr and "Aborted" not in stderr
    assert not wait_gone(workers)
