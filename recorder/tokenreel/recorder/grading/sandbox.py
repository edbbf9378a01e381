"""A program from a model's answer, run where it cannot hurt the machine.

One process per program: `python -I` (no user site, no PYTHON* variables) starting with
`confine.py`, which takes the network away and sets the limits before the program's first line.
The parent gives it an empty environment, a closed stdin, a fresh working folder (removed
afterwards), a new session (so the wall-clock timeout kills its whole process group) and an
output file of bounded size, of which only the tail is read.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tokenreel.recorder.secrets import one_line

CONFINE = Path(__file__).with_name("confine.py")
NOBODY = 65534
OUTPUT_TAIL = 4096  # bytes of the program's output read back: its last line says why it failed
DETAIL_CHARS = 200


@dataclass(frozen=True)
class Limits:
    """What one program may use. processes: beyond those its user runs already (the kernel counts
    a user's processes, not a program's)."""

    timeout_s: float = 10.0
    memory_bytes: int = 1 << 30
    file_bytes: int = 16 << 20
    processes: int = 32

    @property
    def cpu_s(self) -> int:
        return max(1, math.ceil(self.timeout_s))


@dataclass(frozen=True)
class Outcome:
    """How a program ended: passed when it exited 0; detail one line."""

    passed: bool
    detail: str


def _sandbox_uid() -> int:
    return NOBODY if os.geteuid() == 0 else os.getuid()


def _processes_of(uid: int) -> int:
    """Processes (threads count too, as the kernel counts them) the user runs now."""
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                status = Path(entry.path, "status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if int(fields.get("Uid", "-1").split()[0]) == uid:
                count += int(fields.get("Threads", "1").strip())
    return count


def process_bound(limits: Limits, workers: int) -> int:
    """RLIMIT_NPROC for every program of one grading: what the sandbox's user runs now, one
    confined process per worker, and `limits.processes` more."""
    return _processes_of(_sandbox_uid()) + workers + limits.processes


def _command(program: str, limits: Limits, processes: int) -> list[str]:
    return [sys.executable, "-I", str(CONFINE), program, str(limits.cpu_s), str(limits.memory_bytes),
            str(limits.file_bytes), str(processes)]


def _environment(folder: str) -> dict[str, str]:
    """Nothing of the parent's: no key, no PATH."""
    return {"HOME": folder, "LC_ALL": "C.UTF-8"}


DEFAULT_LIMITS = Limits()


@cache
def isolation(limits: Limits = DEFAULT_LIMITS) -> str:
    """What the confined process gets on this machine, said in the grading's summary: "network namespace,
    user nobody", or "sockets refused (no network namespace), own user"."""
    folder = tempfile.mkdtemp(prefix="tokenreel-grade-")
    try:
        done = subprocess.run(_command("-", limits, process_bound(limits, 1)), cwd=folder, env=_environment(folder),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if done.returncode != 0:
        why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
        raise OSError(f"the grading sandbox cannot start: {one_line(why, DETAIL_CHARS)}")
    return done.stdout.strip()


def run_program(source: str, limits: Limits, processes: int) -> Outcome:
    """Run `source` in the sandbox; exit 0 passes. `processes`: `process_bound`."""
    folder = tempfile.mkdtemp(prefix="tokenreel-grade-")
    private = tempfile.mkdtemp(prefix="tokenreel-grade-out-")  # the output file, out of the program's reach
    try:
        program = Path(folder, "answer.py")
        program.write_text(source, encoding="utf-8")
        if os.geteuid() == 0:
            os.chown(folder, NOBODY, NOBODY)
        with open(Path(private, "output"), "w+b") as output:
            child = subprocess.Popen(_command(program.name, limits, processes), cwd=folder, env=_environment(folder),
                                     stdin=subprocess.DEVNULL, stdout=output, stderr=output, start_new_session=True)
            try:
                code = child.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                code = None
            _kill_group(child.pid)
            if code is None:
                child.wait()
            output.seek(max(0, output.seek(0, os.SEEK_END) - OUTPUT_TAIL))
            tail = output.read().decode("utf-8", "replace")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)
    return _outcome(code, tail, limits)


def _kill_group(pid: int) -> None:
    """Whatever the program left running in its process group (a fork that outlived it)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _outcome(code: int | None, tail: str, limits: Limits) -> Outcome:
    last = next((line for line in reversed(tail.splitlines()) if line.strip()), "")
    if code == 0:
        return Outcome(True, "tests passed")
    if code is None:
        return Outcome(False, f"timed out after {limits.timeout_s:g} s")
    if code in (-signal.SIGXCPU, -signal.SIGKILL) and not last:
        return Outcome(False, f"CPU limit ({limits.cpu_s} s)")
    if last.startswith("MemoryError"):
        return Outcome(False, "memory limit")
    if code < 0:
        return Outcome(False, f"killed by {signal.Signals(-code).name}")
    return Outcome(False, one_line(f"exit {code}: {last}" if last else f"exit {code}", DETAIL_CHARS))
