"""The recording machine as a session archives it: enough to tell two recordings' hosts apart.

A re-recording that differs on the same weights is most often explained by the machine (another
kernel, another CPU), so the session says what it was recorded on: the host name, the platform
and Python tokenreel ran on, the kernel release, the CPU model and how many CPUs there are. The
GPUs, their driver, clocks and power limit are the GPU gate's (`Arm.gpu`, read before each arm);
the engine build is the arm's fingerprint's.
"""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
# The line naming the CPU in /proc/cpuinfo: x86's "model name", some ARM kernels' "Model".
_MODEL_KEYS = ("model name", "Model", "cpu model")


def host_facts() -> dict[str, str]:
    """`Session.host`: what is readable here, a fact left out where it is not (no empty values)."""
    facts = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "cpu_model": cpu_model(),
        "cpus": str(os.cpu_count() or ""),
    }
    return {key: value for key, value in facts.items() if value}


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what the platform module says ("" if nothing)."""
    try:
        text = CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in _MODEL_KEYS and value.strip():
            return value.strip()
    return platform.processor()
