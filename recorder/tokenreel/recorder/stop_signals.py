"""Ctrl-C and SIGTERM while recording: stop between runs, never mid-save, and say what is kept."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from tokenreel.base.interrupts import Interrupted, interrupted_line, second_signal_exits

T = TypeVar("T")


class RecordSignals:
    """Ctrl-C and SIGTERM while recording, the one rule: SIGTERM behaves like
    Ctrl-C. The first stops the recording: during the runs the recording task is cancelled, so
    it stops at its next await with every completed run already saved (never mid-save);
    anywhere else the command stops at its next `check` (raising KeyboardInterrupt there). One line is printed and the exit code is
    128 + the signal (130 Ctrl-C, 143 SIGTERM). A second signal exits at once and quietly
    with 128 + its number; a save it cuts short leaves a temporary that the next record removes
    (`session_file.remove_stale_temps`), and the file on disk is the previous complete one."""

    def __init__(self, doing: str, outcome: str, say: Callable[[str], None]) -> None:
        """`say` prints the one line (the caller's console)."""
        self.doing, self.outcome, self.say = doing, outcome, say
        self.signum: int | None = None
        self._said = False
        self._cancel: Callable[[], None] | None = None
        self._previous = {sig: signal.signal(sig, self._first) for sig in (signal.SIGINT, signal.SIGTERM)}

    def _first(self, signum: int, frame: object) -> None:
        """During the runs (or the preflight) cancel them; anywhere else only note the signal
        for the next `check`: raised at a random point, a KeyboardInterrupt can land inside a C
        extension's import ("ImportError: initialization failed", then an abort at exit)."""
        self.signum = signum
        second_signal_exits()
        if self._cancel is not None:
            self._cancel()

    def check(self) -> None:
        """Stop here (Interrupted) if a signal came: called where stopping is safe."""
        if self.signum is not None:
            raise Interrupted(self.signum)

    async def run(self, recording: Coroutine[Any, Any, T]) -> T:
        """Await the recording so that a signal cancels it (as asyncio.run does on Ctrl-C)."""
        if self.signum is not None:  # a signal before the loop started stops here, not in the first await
            recording.close()  # never started: closed, so no "never awaited" warning
            self.check()
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        assert task is not None

        def cancel() -> None:
            task.cancel()
            loop.call_soon_threadsafe(lambda: None)  # wake the loop out of its select

        self._cancel = cancel
        try:
            return await recording
        finally:
            self._cancel = None

    def exit_code(self, code: int, interrupted: bool = False) -> int:
        """`code`, or after a signal (or an interruption) the one line and 128 + the signal."""
        if self.signum is None and not interrupted:
            return code
        signum = self.signum or signal.SIGINT
        if not self._said:
            self._said = True
            self.say(interrupted_line(signum, self.doing, self.outcome))
        return 128 + signum

    def restore(self) -> None:
        """The handlers from before; after a signal, none: the process is on its way out with
        128 + that signal, and a second one must not cut its last steps short."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if self.signum is None else signal.SIG_IGN)
