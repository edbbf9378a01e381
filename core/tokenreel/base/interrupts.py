"""Ctrl-C and SIGTERM, one rule for every long command: SIGTERM behaves like Ctrl-C.

The first signal stops the work (as a KeyboardInterrupt, `Interrupted`, so every clean-up path
runs for both); a second one exits at once and quietly with 128 + its number
(`second_signal_exits`), so a user who presses Ctrl-C twice is never left waiting. The one line
to print says what was stopped and what is left (`interrupted_line`). Recording
(`tokenreel.recorder.stop_signals`) and rendering (the CLI) build on these.
"""

from __future__ import annotations

import atexit
import os
import signal


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM, as a KeyboardInterrupt so every clean-up path runs for both."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_stopping: list[bool] = []  # set once a first signal was taken: the process is on its way out


def second_signal_exits() -> None:
    """After a first Ctrl-C or SIGTERM, a second one exits at once and quietly, 128 + its number."""

    def again(signum: int, frame: object) -> None:
        os._exit(128 + signum)

    _stopping.append(True)
    signal.signal(signal.SIGINT, again)
    signal.signal(signal.SIGTERM, again)


@atexit.register  # registered at import, before any other module's: so it runs after all of theirs
def _ignore_signals_while_finalizing() -> None:
    """Python's finalization puts the default handlers back, and a second Ctrl-C arriving then
    killed the process by SIGINT (exit -2 instead of 130: seen on a loaded machine). Once
    interrupted, nothing is left to stop but the exit under way, so the signals are ignored."""
    if _stopping:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def exit_while_starting() -> None:
    """Until a command takes Ctrl-C over, it exits at once with 130 and one line: while the
    command line loads (a second or more on a busy machine) nothing has been done yet, and a
    KeyboardInterrupt raised inside an import gave a traceback and exit 1 or -2."""

    def starting(signum: int, frame: object) -> None:
        os.write(2, (interrupted_line(signum, "starting", "nothing was done") + "\n").encode())
        os._exit(128 + signum)

    signal.signal(signal.SIGINT, starting)


def interrupted_line(signum: int, doing: str, outcome: str) -> str:
    """The one line a Ctrl-C or SIGTERM prints: what was stopped and what is left."""
    name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    return f"tokenreel: interrupted ({name}) while {doing}; {outcome}"
