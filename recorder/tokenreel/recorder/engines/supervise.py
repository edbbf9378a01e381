"""The keeper of a launched engine: `python -m tokenreel.recorder.engines.supervise ARGV...`.

Why: the kernel's parent-death signal reaches only the process `record` started. An engine that
serves from a child process (a wrapper script, vLLM's engine core) would outlive a `record`
killed with SIGKILL, still holding its port and GPU memory. `record` therefore starts this small
keeper in a process group of its own, with SIGTERM as its parent-death signal; the keeper runs
the engine in that group and, on SIGTERM (from the kernel when `record` dies, or from `record`
stopping the arm), stops the whole group: SIGTERM, then SIGKILL after a grace. When the engine
exits by itself, what it left running in the group gets SIGTERM, and the keeper exits with the
engine's code, so `record` reports the engine's own exit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

GRACE_S = 10.0  # SIGTERM, then SIGKILL: a GPU engine frees its memory on a clean exit
NOT_STARTED = 127  # the shell's code for a command that could not be run


def _stop_group(signum: int, frame: object) -> None:
    """Stop every process of the group, the engine's children included, then this one."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(0, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and _others_left():
        time.sleep(0.1)
    if _others_left():
        os.killpg(0, signal.SIGKILL)  # this one too: nothing is left to report
    os._exit(128 + signum)


def _others_left() -> bool:
    """Whether a process other than this one is still in this process group."""
    me, group = os.getpid(), os.getpgrp()
    try:
        entries = list(os.scandir("/proc"))
    except OSError:  # no /proc (not Linux): assume so, and SIGKILL after the grace
        return True
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            return True
    return False


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, _stop_group)
    try:
        engine = subprocess.Popen(argv)
    except OSError as exc:
        print(f"tokenreel: could not start {argv[0]!r}: {exc.strerror or exc}", flush=True)
        return NOT_STARTED
    code = engine.wait()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(0, signal.SIGTERM)  # what the engine left running in its group
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
