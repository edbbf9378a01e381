"""The host gate's measure with real processes: the engine's process tree (children included,
as vLLM runs its engine core in a child) is discounted, any other process is counted, and a
CPU-bound engine launched through `launch` is recorded alone and beside two CPU hogs.

The machine may be shared, so "idle" is never assumed: the measure is checked against the CPU
time of processes the test controls, and the recordings against each other.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.test_launch import SIM, SIM_MODEL, record, write_config
from tokenreel.analysis.selection import RunSelection
from tokenreel.recorder.gates.gpu_gate import with_descendants
from tokenreel.recorder.gates.host_gate import MIN_WINDOW_S, TICK_S, EngineRoots, HostWatch, process_ticks
from tokenreel.report import build_report, render_report
from tokenreel.session import archive
from tokenreel.session.model import Run

REPO = Path(__file__).resolve().parents[1]
SPIN_S = 30  # every spinning process stops by itself after this, whatever happens to the test
HOG_S = 600  # a hog, killed by its pid when its test ends, outlives a record on a loaded box
WINDOW_S = 0.6
THRESHOLD_PCT = 10.0


def spin(seconds: float = SPIN_S) -> list[str]:
    return [sys.executable, "-c", f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass"]


@contextmanager
def processes(*argvs: list[str]) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start the commands, stop each by its pid afterwards."""
    started = [subprocess.Popen(argv) for argv in argvs]
    try:
        yield started
    finally:
        for process in started:
            process.kill()
        for process in started:
            process.wait()


def engine_with_busy_child() -> list[str]:
    """A parent that starts a spinning child and waits: the child does the engine's work."""
    child = spin()
    return [sys.executable, "-c", f"import subprocess, time\nsubprocess.Popen({child!r})\ntime.sleep({SPIN_S})"]


def tree_ticks(root: int) -> dict[int, int]:
    return {pid: ticks for pid in with_descendants(frozenset({root})) if (ticks := process_ticks(pid)) is not None}


def test_the_engines_children_are_its_own_and_a_hogs_time_is_others(tmp_path: Path) -> None:
    with processes(engine_with_busy_child(), spin()) as (engine, hog):
        deadline = time.monotonic() + 10
        while len(with_descendants(frozenset({engine.pid}))) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(with_descendants(frozenset({engine.pid}))) == 2, "the engine's child did not start"
        # Each process watched once as the engine, the other then being the "others" it must count.
        for watched, other in ((engine, hog), (hog, engine)):
            watch = HostWatch(EngineRoots(frozenset({watched.pid}), "test"), THRESHOLD_PCT, 0)
            own_before, other_before = tree_ticks(watched.pid), tree_ticks(other.pid)
            mark = watch.sample()
            time.sleep(WINDOW_S)
            load, now = watch.load_since(mark)
            own_after, other_after = tree_ticks(watched.pid), tree_ticks(other.pid)
            own = sum(own_after.values()) - sum(own_before.values())
            other_ticks = sum(other_after.values()) - sum(other_before.values())
            engine = now.engine - mark.engine
            others = (now.busy - mark.busy) - engine - (now.recorder - mark.recorder)
            slack = now.processes + len(other_after) + 2  # one tick a process read, and the reads around the gate's
            assert own > slack and other_ticks > slack, (own, other_ticks)  # both ran: the test can tell
            assert abs(engine - own) <= slack, (engine, own)  # the watched tree, child included, is the engine's
            assert others >= other_ticks - slack - watch.counted_cpus, (others, other_ticks)  # the other is counted
            assert load.engine_pct > 0 and load.others_pct > 0


def engine_of_many_processes(sleepers: int) -> list[str]:
    """A busy engine of many processes (vLLM runs an API server, an engine core and workers): one
    spinning child and `sleepers` idle ones, so a short window's share is known only coarsely."""
    children = [spin(), *([sys.executable, "-c", f"import time\ntime.sleep({SPIN_S})"] for _ in range(sleepers))]
    return [sys.executable, "-c", f"import subprocess, time\nfor argv in {children!r}: subprocess.Popen(argv)\ntime.sleep({SPIN_S})"]


def test_a_gate_sample_too_coarse_to_tell_the_line_is_widened_until_it_can(tmp_path: Path) -> None:
    """A busy engine of 26 processes beside two hogs: over the gate's shortest window (0.1 s) a
    share is known only to +-100 %, so the hogs' could not be told from none (the runs of a CPU
    vLLM beside two hogs went unflagged so); the sample widens (up to RESOLVE_S) until it can."""
    with processes(engine_of_many_processes(24), spin(), spin()) as (engine, *_):
        deadline = time.monotonic() + 10
        while len(with_descendants(frozenset({engine.pid}))) < 26 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(with_descendants(frozenset({engine.pid}))) == 26, "the engine's children did not start"
        watch = HostWatch(EngineRoots(frozenset({engine.pid}), "test"), THRESHOLD_PCT, 0)
        coarse = (watch.counted_cpus + 27) * 100 / (MIN_WINDOW_S / TICK_S * watch.counted_cpus)
        assert coarse >= 100  # the shortest window alone could tell no share from none
        load, _, _ = asyncio.run(watch.settle())
        assert load.over(THRESHOLD_PCT), load  # the hogs' share, told apart
        assert load.resolution_pct < coarse / 2, load  # over a window widened past the shortest


def ladder_arm(burners: int) -> dict:
    """An engine whose burners spin while it lives (launch's stop ends them, HOG_S bounds them) and
    whose runs last about 0.4 s: long enough that a burner sharing 2 loaded CPUs with hogs and the
    suite's other workers still gets ticks within each run (at the launch tests' time scale a run
    lasts 36 ms, and a busy engine's share of it can read 0)."""
    simulate = [*SIM[4:SIM.index("--time-scale") + 1], "0.2"]
    engine = [sys.executable, str(REPO / "tests" / "cpu_engine.py"), str(burners), str(HOG_S), "--", *simulate]
    return {"id": "cpu", "base_url": "http://127.0.0.1:{port}/v1", "model": SIM_MODEL, "launch": engine,
            "ready_timeout_s": 60}


def measured(path: Path) -> list[Run]:
    return [r for r in archive.load(path).runs if not r.warmup and r.status == "ok"]


def test_a_cpu_bound_engine_is_flagged_beside_two_hogs_and_its_own_load_is_not_others(tmp_path: Path) -> None:
    """The same CPU-bound engine (a busy child) recorded alone, then beside two hogs the test
    starts: its own load is the engine's in both; beside the hogs every run is flagged."""
    # A short host gate: beside the hogs it waits once, briefly.
    config = write_config(tmp_path, [ladder_arm(1)], max_tokens=16, repeats=3, host_wait_s=0.5)
    text = config.read_text().replace("[session]\n", f"[session]\nhost_pressure_pct = {THRESHOLD_PCT}\n")
    config.write_text(text)
    alone = record(config, tmp_path / "alone.json")
    assert alone.returncode == 0, alone.stderr
    with processes(spin(HOG_S), spin(HOG_S)) as hogs:
        beside = record(config, tmp_path / "beside.json")
        hogs_ran = all(hog.poll() is None for hog in hogs)
    assert beside.returncode == 0, beside.stderr
    assert hogs_ran
    quiet, loaded = measured(tmp_path / "alone.json"), measured(tmp_path / "beside.json")
    assert len(quiet) == 3 and len(loaded) == 3
    for run in quiet + loaded:
        assert run.host is not None and run.host.source == "/proc/stat" and run.host.engine_pct is not None, run.host_note
        assert run.host.engine_pct > 0, run.host  # the busy children count as the engine's
    assert all(r.host is not None and r.host.contended for r in loaded), [r.host for r in loaded]
    if all(r.host and r.host.engine_pct and r.host.engine_pct > 50 for r in quiet):  # the machine left the engine alone
        assert not any(r.host and r.host.contended for r in quiet), [r.host for r in quiet]
    waited = [line for line in beside.stderr.splitlines() + beside.stdout.splitlines()
              if "other processes kept the engine's CPUs busy" in line]
    assert len(waited) == 1, beside.stdout + beside.stderr  # said once for the arm, not per run
    session = archive.load(tmp_path / "beside.json")
    assert build_report(session)["host"]["contended_runs"] == 3
    markdown = render_report(session, "md")
    assert "the CPU load of processes other than its engine and the recorder" in markdown
    assert "3 over 10 % (host contended)" in markdown and "Host contended: cpu / code-1 / run" in markdown
    left_out = build_report(session, selection=RunSelection(exclude_host_contended=True))
    assert left_out["cells"] == [] and "other processes' CPU load" in left_out["missing_cells"][0]["reason"]
