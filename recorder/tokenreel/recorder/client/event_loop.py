"""The event loop every recording runs on: asyncio's own selector loop, whatever the policy says.

Why: the kernel's receive times (kernel_clock) are read where asyncio's selector transports call
the socket's `recv`. A loop that reads sockets itself in C, such as uvloop, never makes that call,
so every run would keep its user-space stamps, late by however busy the client is. Ray's workers
install uvloop's policy whenever uvloop is importable, and a plain `asyncio.run` there gets a
uvloop loop: recorded on Ray, every run fell back to the user clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on a new `asyncio.SelectorEventLoop`, never the policy's loop."""
    with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop) as runner:
        return runner.run(main)
