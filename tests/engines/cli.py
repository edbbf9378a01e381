"""The `tokenreel` command as the real-engine tests run it: a subprocess, like a user's shell."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

TOKENREEL = [sys.executable, "-m", "tokenreel"]
# A bound for a hang, not a speed test: a ladder recorded on 2 busy cores with the portable
# llama.cpp build passed 300 s beside two CPU hogs, and each vLLM arm starts in 25 s to minutes.
RECORD_TIMEOUT_S = 2400


def tokenreel(*args: str, cwd: Path, timeout: float = RECORD_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TOKENREEL, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def record(tmp: Path, config: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`tokenreel record --config CONFIG --out TMP/<config stem>.json`: (the process, the session path)."""
    out = tmp / f"{config.stem}.json"
    done = tokenreel("record", "--config", str(config), "--out", str(out), *extra, cwd=tmp)
    return done, out


def main_of(step: Callable[[], object], what: str, errors: tuple[type[Exception], ...]) -> int:
    """A `python -m tests.engines.X` entry point: run step; a failure is one line naming `what`, exit 2."""
    try:
        step()
    except errors as exc:
        print(f"{what}: {exc}", file=sys.stderr)
        return 2
    return 0
