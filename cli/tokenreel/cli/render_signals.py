"""Ctrl-C and SIGTERM during a render or a verify: clean up, say one line, exit 128 + the signal."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from tokenreel.base.interrupts import Interrupted, interrupted_line, second_signal_exits
from tokenreel.cli.app import err


@contextmanager
def interruptible(doing: str, outcome: str = "nothing was written") -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C: the work stops, workers and temporary files are removed,
    one line is printed, and the exit code is 128 + the signal (130 Ctrl-C, 143 SIGTERM). A
    second Ctrl-C (or SIGTERM) during that clean-up exits at once and quietly with the same
    code; whatever it left behind is removed by the next render."""
    def first(signum: int, frame: object) -> None:
        second_signal_exits()
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, first) for sig in (signal.SIGINT, signal.SIGTERM)}
    interrupted = False
    try:
        yield
    except KeyboardInterrupt as exc:
        interrupted = True
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        second_signal_exits()
        err.print(interrupted_line(signum, doing, outcome), markup=False, soft_wrap=True)
        raise typer.Exit(128 + signum) from None
    finally:
        # Once interrupted, the second-signal handler stays until the process exits: a second
        # Ctrl-C right after a quick clean-up must still exit quietly, not as a KeyboardInterrupt.
        if not interrupted:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
