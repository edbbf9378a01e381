"""Arms that start their own engine: `record` launches an arm's engine for its
turn and stops it after, so no two launched engines ever share the GPU.

The engine runs under a small keeper (`engines.supervise`) in a session (and process group) of
its own, without a shell, its output read through a pipe into a bounded log beside the session
(`<session stem>.engines/<arm>.log`, secrets scrubbed). It is stopped with SIGTERM to its process
group and SIGKILL after a grace; Ctrl-C, SIGTERM and a crash of `record` reach that stop through
the recording's `finally`, and on Linux PR_SET_PDEATHSIG has the kernel SIGTERM the keeper when
`record` itself dies (even by SIGKILL), which then stops the whole group: the engine's own
children (a wrapper's server, vLLM's engine core) included.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

import aiohttp

from tokenreel.recorder.config import PORT, Launch
from tokenreel.recorder.engines.fingerprint import scrubbed_argv
from tokenreel.recorder.gates.gpu_gate import listener_pids
from tokenreel.recorder.gates.host_gate import endpoint_port
from tokenreel.recorder.replicas import arm_view
from tokenreel.recorder.secrets import one_line, scrub_secret_flags, scrub_secrets
from tokenreel.session.model import Arm

MAX_LOG_BYTES = 8 * 1024 * 1024  # per arm's log, over all its launches: the rest is counted, not kept
MAX_LINE_BYTES = 64 * 1024  # an output line is read (and kept) in pieces of at most this
TAIL_LINES = 5  # the log's last lines quoted when an engine fails
STOP_GRACE_S = 15.0  # SIGTERM, then SIGKILL: a GPU engine frees its memory on a clean exit
POLL_S = 0.25
# After a failed run, how long an engine whose server went away is given to finish exiting (its
# wrapper or API process outlives the socket by a moment) before the failure is taken as the run's.
EXIT_GRACE_S = 2.0
EXIT_POLL_S = 0.02
PR_SET_PDEATHSIG = 1


class EngineFailed(Exception):
    """The engine exited or never answered: one line naming the command, the URL and the log's tail."""


def free_port() -> int:
    """A TCP port free on loopback now (the kernel's pick); the engine binds it a moment later."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def engine_log_path(session_path: Path, arm_id: str) -> Path:
    """Where an arm's engine output goes: beside the session, one file per arm."""
    return session_path.parent / f"{session_path.stem}.engines" / f"{arm_id}.log"


def launched_arm(arm: Arm, port: int) -> Arm:
    """The arm as its engine on `port` serves it ({port} filled into base_url and metrics_url)."""
    return arm_view(arm, base_url=arm.base_url.replace(PORT, str(port)),
                    metrics_url=arm.metrics_url.replace(PORT, str(port)) if arm.metrics_url else None)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _die_with_parent() -> None:
    """Linux: have the kernel SIGTERM the engine's keeper when the process that launched it dies
    (the keeper then stops the engine's whole process group)."""
    libc = _LIBC
    if libc is None:
        return
    parent = os.getppid()
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # record died between fork and prctl: nobody would stop us
        os._exit(1)


def _load_libc() -> ctypes.CDLL | None:
    """libc for prctl, loaded before any fork (never in the child); None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


_LIBC = _load_libc()


@dataclass
class Engine:
    """One launched engine: its process, its log and the times `record` archives with the arm."""

    arm_id: str
    argv: list[str]
    ready_url: str
    ready_timeout_s: float
    log_path: Path
    endpoint: str  # the arm's base_url as this engine serves it: nothing may answer there before it starts
    process: subprocess.Popen[bytes] | None = None
    started_at: str = ""
    exited_at: str = ""
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    log_problem: str = ""  # why the log could not be written ("": it was); the output was drained all the same
    _reader: threading.Thread | None = None

    def start(self) -> None:
        """Start the engine in its own session; its output is logged by a reader thread."""
        self._refuse_a_served_port()
        if shutil.which(self.argv[0]) is None:
            raise EngineFailed(f"launch {self.argv[0]!r} (arm {self.arm_id}) could not start: not an executable file"
                               " (nor on PATH); fix the arm's launch command")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        try:  # through the keeper (engines.supervise), which stops the engine's whole group when record dies
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tokenreel.recorder.engines.supervise", *self.argv], stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent,
                close_fds=True,
            )
        except OSError as exc:
            raise EngineFailed(f"launch {self.argv[0]!r} (arm {self.arm_id}) could not start: {exc.strerror or exc};"
                               " fix the arm's launch command") from None
        self.started_at = _now()
        self._reader = threading.Thread(target=self._log, name=f"engine-log-{self.arm_id}", daemon=True)
        self._reader.start()

    def _refuse_a_served_port(self) -> None:
        """EngineFailed when the endpoint answers before the engine starts: a launch with a fixed
        port would fail to bind it, and what answered the runs would be that other server."""
        host, port = urlsplit(self.endpoint).hostname or "127.0.0.1", endpoint_port(self.endpoint)
        try:
            socket.create_connection((host, port), timeout=1).close()
        except OSError:
            return
        holders = ", ".join(map(str, sorted(listener_pids(port))))
        raise EngineFailed(
            f"engine of arm {self.arm_id} not started: {host}:{port} already answers"
            f"{f' (pid {holders})' if holders else ''}, so the runs would measure that server, not this launch;"
            " stop it, or write {port} in base_url and the launch command so a free port is picked"
        )

    def _log(self) -> None:
        """Copy the engine's output into its log, scrubbed, in lines of at most MAX_LINE_BYTES (a
        line without end would otherwise grow in memory), until the log is full or cannot be
        written (`log_problem`); keep draining past that (an engine blocked on a full pipe would
        stall) and keep the last lines."""
        assert self.process is not None and self.process.stdout is not None
        stdout = self.process.stdout
        log = self._write(None, f"tokenreel: started pid {self.process.pid} at {self.started_at}: {' '.join(scrubbed_argv(self.argv))}\n")
        room = MAX_LOG_BYTES - (log.tell() if log is not None else 0)
        dropped = 0
        try:
            while raw := stdout.readline(MAX_LINE_BYTES):
                line = scrub_secret_flags(scrub_secrets(raw.decode("utf-8", "replace")))
                self.tail.append(line.rstrip("\n"))
                size = len(line.encode("utf-8"))
                if log is not None and size <= room:
                    log = self._write(log, line)
                    room -= size
                else:
                    dropped += size
            if dropped and log is not None:
                log = self._write(log, f"tokenreel: {dropped} bytes of output not kept (the log is capped at {MAX_LOG_BYTES} bytes)\n")
        finally:
            if log is not None:
                log.close()

    def _write(self, log: BinaryIO | None, text: str) -> BinaryIO | None:
        """Append `text` to the log (opened when None), or note once why it cannot be and return
        None: the output is then drained and not kept."""
        if self.log_problem:
            return None
        try:
            if log is None:
                log = open_log(self.log_path)
            log.write(text.encode("utf-8"))
            log.flush()
            return log
        except OSError as exc:
            self.log_problem = f"{self.log_path} cannot be written ({exc.strerror or exc})"
            if log is not None:
                with contextlib.suppress(OSError):
                    log.close()
            return None

    async def wait_ready(self, http: aiohttp.ClientSession) -> None:
        """Poll `ready_url` until it answers 200; EngineFailed when the engine exits or the time is up."""
        assert self.process is not None
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            code = self.process.poll()
            if code is not None:
                raise EngineFailed(self._failure(f"exited with code {code} before {self.ready_url} answered"))
            try:
                async with http.get(self.ready_url, timeout=aiohttp.ClientTimeout(total=5)) as response:
                    if response.status == 200:
                        break
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
                pass
            if time.monotonic() >= deadline:
                raise EngineFailed(self._failure(f"did not answer {self.ready_url} with 200 within {self.ready_timeout_s:g} s"
                                                 " (ready_timeout_s)"))
            await asyncio.sleep(POLL_S)
        code = self.process.poll()
        if code is not None:  # what answered is another server on the port it failed to bind
            raise EngineFailed(self._failure(f"exited with code {code} while {self.ready_url} answered"))

    async def raise_if_exited(self) -> None:
        """After a failed run: EngineFailed naming the exit code and the log's last lines when the
        engine has exited or does within EXIT_GRACE_S (a run failing on a dead engine says why,
        not "cannot connect")."""
        deadline = time.monotonic() + EXIT_GRACE_S
        while self.process is not None:
            code = self.process.poll()
            if code is not None:
                raise EngineFailed(self._failure(f"exited with code {code} during the runs"))
            if time.monotonic() >= deadline:
                return
            await asyncio.sleep(EXIT_POLL_S)

    def _failure(self, what: str) -> str:
        if self._reader is not None and self.process is not None and self.process.poll() is not None:
            self._reader.join(timeout=2)  # its last words are in the pipe still
        last = " | ".join(line for line in self.tail if line.strip()) or "(no output)"
        return one_line(f"engine of arm {self.arm_id} ({self.argv[0]}) {what}; last lines of {self.log_path}: {last}", 600)

    def stop(self) -> None:
        """SIGTERM to the engine's process group, SIGKILL after the grace; blocking, so that it also
        runs to the end in a `finally` reached by cancellation. Idempotent."""
        process = self.process
        if process is None or self.exited_at:
            return
        for sig, wait_s in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, STOP_GRACE_S)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                pass  # the group is gone: the engine and all it started exited
            try:
                process.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        _kill_group(process.pid)  # a child the engine left in its group
        self.exited_at = _now()
        if self._reader is not None:
            self._reader.join(timeout=5)
        if not self.log_problem:
            with contextlib.suppress(OSError), open_log(self.log_path) as log:
                log.write(f"tokenreel: stopped pid {process.pid} at {self.exited_at} (exit code {process.returncode})\n".encode())

    def times(self) -> dict[str, str]:
        """What the arm's recording entry keeps: when the engine ran and where its log is."""
        pid = str(self.process.pid) if self.process is not None else ""
        return {"engine_pid": pid, "engine_started_at": self.started_at, "engine_exited_at": self.exited_at,
                "engine_log": str(self.log_path)}


def open_log(path: Path) -> BinaryIO:
    """The engine log, opened to append without following a link planted at its name."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600), "ab")


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def engine_for(arm: Arm, launch: Launch, session_path: Path) -> tuple[Engine, Arm]:
    """The engine to start for this turn of the arm and the arm as it will serve (its port picked now)."""
    port = free_port()
    view = launched_arm(arm, port)
    argv = [item.replace(PORT, str(port)) for item in launch.argv]
    ready_url = (launch.ready_url or f"{view.base_url}/models").replace(PORT, str(port))
    return Engine(arm.id, argv, ready_url, launch.ready_timeout_s, engine_log_path(session_path, arm.id), view.base_url), view
