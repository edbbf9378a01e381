"""Print what tokenreel's GPU gate reads and would archive on this machine (issue 29).

    python bench/gpu_probe.py                 # every GPU, processes not told apart (no engine named)
    python bench/gpu_probe.py --port 8080     # the engine serving on that port is the arm's own
    python bench/gpu_probe.py --util-pct 10   # the gate's threshold (default: the session default)

Run it on a GPU machine with `pip install 'tokenreel[gpu]'`: it prints the one-line reason when
NVML cannot be read, else the check as JSON (the session file's `arms[].gpu[]` entry), the
verdict as the report words it, and how long one NVML reading took. It waits for nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict

import orjson

from tokenreel.recorder.gates.gpu_gate import EngineProcesses, GpuWait, NoNvml, listener_pids, read_gpus, with_descendants
from tokenreel.report.wording import gpu_device_text
from tokenreel.session.gpu import gpu_hardware
from tokenreel.session.model import GPU_UTIL_PCT


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, help="the arm's engine is the process listening on this TCP port")
    parser.add_argument("--util-pct", type=float, default=GPU_UTIL_PCT, help="utilisation threshold, %% (default %(default)s)")
    args = parser.parse_args()
    engine = EngineProcesses()
    if args.port is not None:
        roots = listener_pids(args.port)
        engine = EngineProcesses(pids=with_descendants(roots) if roots else None)
        print(f"engine on port {args.port}: pids {sorted(engine.pids) if engine.pids else 'not visible here'}")
    started = time.perf_counter()
    try:
        snapshot = read_gpus()
    except NoNvml as exc:
        print(exc)
        return 1
    took_ms = (time.perf_counter() - started) * 1000
    check = GpuWait(args.util_pct, 0.0, engine).step(snapshot, 0.0)
    assert check is not None  # a wait of 0 s always decides
    print(orjson.dumps(asdict(check), option=orjson.OPT_INDENT_2).decode())
    print(f"end card hardware: {gpu_hardware([check]) or '(none)'}")
    for device in check.devices:
        print(gpu_device_text(asdict(device)))
    print(f"verdict: {check.status}" + (f": {check.detail}" if check.detail else ""))
    print(f"one NVML reading took {took_ms:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
