"""A CPU-bound engine for the host gate's tests, launched through `launch` like vLLM's CPU build:
the serving process (the simulator) with busy child processes, as vLLM runs its engine core in a
child. `python tests/cpu_engine.py BURNERS SECONDS -- SIMULATE-ARGS...`: starts BURNERS children
that spin for at most SECONDS (bounded even if nothing stops them), then becomes the simulator
(exec: same pid, so the burners stay its children)."""

from __future__ import annotations

import os
import subprocess
import sys

SPIN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"


def main(argv: list[str]) -> None:
    burners, seconds, simulate = int(argv[0]), float(argv[1]), argv[argv.index("--") + 1:]
    for _ in range(burners):  # left running on exec; launch's stop kills the whole process group
        subprocess.Popen([sys.executable, "-c", SPIN.format(seconds=seconds)])
    os.execv(sys.executable, [sys.executable, "-m", "tokenreel", "simulate", *simulate])


if __name__ == "__main__":
    main(sys.argv[1:])
