"""llama-server arms as subprocesses on free loopback ports, and what the tests read back from them.

The engine's own per-request figures come from its log: llama-server prints `print_timing` for
every finished request (`eval time = ... ms / N tokens (... tokens per second)`: the same
`predicted_ms`, `predicted_n` and `predicted_per_second` as the response's `timings`), so the
tests can compare every run tokenreel recorded with the engine's view of that very request.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.engines import build

HEALTH_TIMEOUT_S = 60.0
_EVAL = re.compile(
    r"task (\d+) \|\s+eval time =\s+([\d.]+) ms /\s+(\d+) tokens \(\s*[\d.]+ ms per token,\s+([\d.]+) tokens per second\)"
)
_DRAFT = re.compile(r"task (\d+) \| draft acceptance = ([\d.]+) \(\s*(\d+) accepted /\s+(\d+) generated\), mean len =\s+([\d.]+)")


class ServerError(RuntimeError):
    """A server that would not start; the message is one line with the log's last line."""


@dataclass(frozen=True)
class EngineTiming:
    """One finished request as llama-server logged it (its `timings` in the log's precision)."""

    task: int
    predicted_ms: float
    predicted_n: int
    predicted_per_second: float
    draft_n: int | None = None
    draft_n_accepted: int | None = None
    mean_len: float | None = None  # 1 + accepted / verify steps, as logged (2 decimals)


@dataclass
class Server:
    """One running llama-server; `args` are the model/speculation flags, kept for a restart."""

    name: str
    args: list[str]
    port: int
    log: Path
    metrics: bool = True
    parallel: int = 2
    # One thread for single-token decode on a 2-core machine: the other core serves the HTTP thread
    # and the client, so events leave and arrive when the tokens are made (with -t 2 runs jittered
    # by up to 1%). Batches (prompts, the drafter's verify step) use both cores: no token is sent
    # while they run, and CPU verification of 9 tokens on one core ate most of the drafter's gain.
    threads: int = 1
    threads_batch: int = 1
    health_timeout_s: float = HEALTH_TIMEOUT_S
    env: dict[str, str] | None = None  # added to this process's environment
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def engine(self) -> str:
        return "llama-server"

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def command(self) -> list[str]:
        cmd = [str(build.binary("llama-server")), *self.args, "--host", "127.0.0.1", "--port", str(self.port),
               "-np", str(self.parallel), "-c", str(2048 * self.parallel), "-t", str(self.threads), "-tb", str(self.threads_batch),
               "--poll", "0", "--no-webui"]
        return cmd + (["--metrics"] if self.metrics else [])

    def start(self) -> Server:
        """Start and wait for /health (the model is loaded once it answers 200)."""
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env={**os.environ, **(self.env or {})})
        deadline = time.monotonic() + self.health_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(f"{self.engine} {self.name} exited with {self.proc.returncode}: {self.last_log_line()}")
            try:
                with urllib.request.urlopen(f"{self.root}/health", timeout=2) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise ServerError(f"{self.engine} {self.name} not healthy after {self.health_timeout_s:g} s: {self.last_log_line()}")

    def kill(self) -> None:
        """SIGKILL, as a crash would: no graceful end of the streams."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def last_log_line(self) -> str:
        lines = self.log.read_text(errors="replace").strip().splitlines() if self.log.exists() else []
        return lines[-1][:200] if lines else "(no output)"

    def log_offset(self) -> int:
        return self.log.stat().st_size if self.log.exists() else 0

    def timings(self, since: int = 0) -> list[EngineTiming]:
        """Every finished request logged after byte `since`, in order."""
        text = self.log.read_bytes()[since:].decode(errors="replace")
        drafts = {int(m[1]): (int(m[4]), int(m[3]), float(m[5])) for m in _DRAFT.finditer(text)}
        out = []
        for m in _EVAL.finditer(text):
            task = int(m[1])
            drafted, accepted, mean_len = drafts.get(task, (None, None, None))
            out.append(EngineTiming(task, float(m[2]), int(m[3]), float(m[4]), drafted, accepted, mean_len))
        return out

    def metrics_text(self) -> str:
        with urllib.request.urlopen(f"{self.root}/metrics", timeout=5) as response:
            return response.read().decode()

    def metric(self, name: str) -> float:
        """One unlabelled llama.cpp metric, e.g. `spec_decode_num_drafts_total`."""
        for line in self.metrics_text().splitlines():
            if line.startswith(f"llamacpp:{name} "):
                return float(line.split()[1])
        raise KeyError(f"llamacpp:{name} not in {self.root}/metrics")


def free_port() -> int:
    """A port the kernel just had free on 127.0.0.1 (the server binds it a moment later)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_metric(server: Server, name: str, predicate, timeout_s: float = 30.0) -> float:
    """Poll a metric until predicate(value) holds; the value, or TimeoutError naming it."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = server.metric(name)
        if predicate(value):
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"llamacpp:{name} stayed at {value:g} for {timeout_s:g} s on {server.name}")
        time.sleep(0.02)
