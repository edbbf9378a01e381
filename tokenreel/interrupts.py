"""Ctrl-C and SIGTERM, one rule for every long command: SIGTERM behaves like Ctrl-C.

The first signal stops the work (as a KeyboardInterrupt, `Interrupted`, so every clean-up path
runs for both); a second one exits at once and quietly with 128 + its number
(`second_signal_exits`), so a user who presses Ctrl-C twice is never left waiting. The one line
to print says what was stopped and what is left (`interrupted_line`). Recording
(`tokenreel.recorder.signals`) and rendering (the CLI) build on these.
"""

from __future__ import annotations

import os
import signal


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM, as a KeyboardInterrupt so every clean-up path runs for both."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def second_signal_exits() -> None:
    """After a first Ctrl-C or SIGTERM, a second one exits at once and quietly, 128 + its number."""

    def again(signum: int, frame: object) -> None:
        os._exit(128 + signum)

    signal.signal(signal.SIGINT, again)
    signal.signal(signal.SIGTERM, again)


def exit_while_starting() -> None:
    """Until a command takes Ctrl-C over, it exits at once with 130 and one line: while the
    command line loads (a second or more on a busy machine) nothing has been done yet, and a
    KeyboardInterrupt raised inside an import gave a traceback and exit 1 or -2 (issue 25)."""

    def starting(signum: int, frame: object) -> None:
        os.write(2, (interrupted_line(signum, "starting", "nothing was done") + "\n").encode())
        os._exit(128 + signum)

    signal.signal(signal.SIGINT, starting)


def interrupted_line(signum: int, doing: str, outcome: str) -> str:
    """The one line a Ctrl-C or SIGTERM prints: what was stopped and what is left."""
    name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    return f"tokenreel: interrupted ({name}) while {doing}; {outcome}"
