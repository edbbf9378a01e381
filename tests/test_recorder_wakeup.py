"""The recording thread's short scheduler slice (recorder.wakeup): asked for, then given back."""

from __future__ import annotations

import platform
import sys

import pytest

from tokenreel.recorder.client import wakeup

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or platform.machine() not in wakeup._SYSCALLS,
    reason="sched_setattr numbers known for Linux x86_64/aarch64/riscv64",
)


def test_the_recording_thread_gets_a_short_slice_and_gives_it_back() -> None:
    before = wakeup._slice(None)
    assert before is not None and before > wakeup.SLICE_NS  # the kernel's default slice
    with wakeup.prompt_wakeups():
        assert wakeup._slice(None) == wakeup.SLICE_NS
    assert wakeup._slice(None) == before
