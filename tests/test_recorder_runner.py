"""Whole recordings: order, events, saving after every run, resume after a kill, --arms, fail-fast."""

from __future__ import annotations

import asyncio
import os
import platform
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import tokenreel.base.version
from tests.test_recorder_support import arm_for, chat_prompt, fast_settings, seed, sent_bodies, set_state
from tokenreel.analysis.metrics import run_metrics
from tokenreel.recorder.client.sse_client import PROGRESS_EVERY_NS
from tokenreel.recorder.events import (
    ArmFinished,
    ArmStarted,
    GpuUnchecked,
    HostWaitedOut,
    RecordEvent,
    RunFinished,
    RunProgress,
    RunStarted,
)
from tokenreel.recorder.runner import RecordResult, new_session, record
from tokenreel.session.archive import dumps, load
from tokenreel.session.model import Session
from tokenreel.simulator.server import SimCluster

PROMPTS = [
    chat_prompt("Implement a Python function that merges overlapping intervals.", "code"),
    chat_prompt("Write a short story about a lighthouse keeper.", "prose"),
]


def ladder_session(cluster: SimCluster, ids: list[str], **settings: Any) -> Session:
    arms = [arm_for(cluster, profile_id) for profile_id in ids]
    return new_session("ladder", fast_settings(**settings), list(PROMPTS), arms)


def run_record(session: Session, path: Path, **kwargs: Any) -> tuple[RecordResult, list[RecordEvent]]:
    events: list[RecordEvent] = []
    result = asyncio.run(record(session, path, on_event=events.append, **kwargs))
    return result, events


def test_ladder_recording_round_trips_through_the_archive(sim: SimCluster, tmp_path: Path) -> None:
    path = tmp_path / "ladder.json"
    session = ladder_session(sim, ["bf16", "nvfp4", "nvfp4-dflash2"], warmup=1, repeats=2, max_tokens=64)
    result, events = run_record(session, path)
    assert (result.ok, result.failed, result.skipped, result.interrupted) == (18, 0, 0, False)
    assert [(r.arm, r.prompt, r.index, r.warmup) for r in session.runs] == [
        (arm, prompt.id, index, index == 0)
        for arm in ("bf16", "nvfp4", "nvfp4-dflash2")
        for prompt in PROMPTS
        for index in range(3)
    ]
    assert all(r.gate.status == "idle" and r.gate.running == 0 and r.contended is False for r in session.runs)
    loaded = load(path)
    assert loaded == session
    assert dumps(loaded) == path.read_bytes()
    assert loaded.simulated is True
    assert all(len(arm.recorded) == 1 and set(arm.recorded[0]) == {"started_at", "finished_at"} for arm in loaded.arms)
    assert loaded.arm("bf16").fingerprint["version"]["simulated"] is True
    assert loaded.arm("bf16").fingerprint["max_model_len"] == 32768
    starts = [e for e in events if isinstance(e, ArmStarted)]
    assert [(e.arm, e.position, e.arms, e.runs_todo) for e in starts] == [
        ("bf16", 1, 3, 6), ("nvfp4", 2, 3, 6), ("nvfp4-dflash2", 3, 3, 6)
    ]
    finished = [e for e in events if isinstance(e, RunFinished)]
    assert len(finished) == 18
    assert all(e.status == "ok" and e.tokens == 64 and e.ttft_s for e in finished)
    # decode_tok_s may be None: at 50x speed a late simulator thread can send a whole reply in one
    # read, and events that share a read share its stamp (no decode interval). The event mirrors the run.
    assert [(e.ttft_s, e.decode_tok_s) for e in finished] == [
        (m.ttft_s, m.decode_tok_s) for m in map(run_metrics, session.runs)
    ]
    # NVML absent (the test venv): said once for the whole record, right after the first arm starts.
    # Notes about this machine (no NVML, a loaded host) come between; the runs' own events in order.
    assert sum(isinstance(e, GpuUnchecked) for e in events) <= 1
    own = [type(e) for e in events if not isinstance(e, (GpuUnchecked, HostWaitedOut))]
    assert own[:3] == [ArmStarted, RunStarted, RunFinished]
    assert [e.arm for e in events if isinstance(e, ArmFinished)] == ["bf16", "nvfp4", "nvfp4-dflash2"]


def test_new_session_stamps_version_host_and_time(sim: SimCluster) -> None:
    session = ladder_session(sim, ["bf16"])
    assert session.tool_version == tokenreel.base.version.__version__
    assert {"hostname", "platform", "python", "kernel", "cpus"} <= set(session.host)
    # The machine's own facts, read here another way: what tells two recordings' hosts apart.
    assert session.host["kernel"] == os.uname().release
    assert session.host["cpus"] == str(os.cpu_count())
    models = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
              if line.startswith("model name")]
    assert session.host.get("cpu_model") == (models[0] if models else platform.processor() or None)
    assert datetime.fromisoformat(session.created_at).tzinfo is not None
    assert session.runs == [] and session.simulated is False


def _spaced(times_s: list[float], gap_s: float) -> int:
    """The most of these times, the first at least gap_s after 0, that are each at least gap_s
    apart (taking each as soon as it may: the greedy choice is the largest such set)."""
    taken, last = 0, 0.0
    for t in sorted(times_s):
        if t - last >= gap_s:
            taken, last = taken + 1, t
    return taken


def test_progress_events_are_throttled(make_sim: Any, tmp_path: Path) -> None:
    """At most one progress event a PROGRESS_EVERY_NS, and one whenever a read comes that long
    after the last: as many as the run's own arrival times allow (a starved simulator that sends
    its reply in a burst leaves room for fewer), with the live rate since the first event's."""
    cluster = make_sim([seed("bf16")], time_scale=0.5)  # 97 tok/s x2: 128 tokens in ~0.7 s
    session = new_session("p", fast_settings(max_tokens=128), [PROMPTS[0]], [arm_for(cluster, "bf16")])
    _, events = run_record(session, tmp_path / "p.json")
    progress = [e for e in events if isinstance(e, RunProgress)]
    gap_s = PROGRESS_EVERY_NS / 1e9
    times = [e.elapsed_s for e in progress]
    assert all(later - earlier >= gap_s - 1e-9 for earlier, later in zip(times, times[1:], strict=False)), times
    # each token event's arrival is a read's (the kernel's stamp, a moment before the loop sees it)
    arrivals = _spaced([t / 1e9 for t in session.runs[0].chunks.t_ns], gap_s)
    assert len(progress) >= max(1, arrivals - 1) and arrivals >= 1, (len(progress), arrivals)
    first = next(e for e in progress if e.tokens)
    for event in progress[progress.index(first) + 1 :]:
        assert event.tok_s == pytest.approx((event.tokens - first.tokens) / (event.elapsed_s - first.elapsed_s))
    assert progress[-1].tokens <= 128


def test_api_key_never_reaches_the_session_file(
    sim: SimCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sentinel = "sk-SENTINEL-never-saved-7e21"
    monkeypatch.setenv("TR_RUNNER_KEY", sentinel)
    session = ladder_session(sim, ["bf16"], max_tokens=16)
    session.arms[0].api_key_env = "TR_RUNNER_KEY"
    result, _ = run_record(session, tmp_path / "k.json")
    assert result.ok == 2
    data = (tmp_path / "k.json").read_bytes()
    assert sentinel.encode() not in data and b"TR_RUNNER_KEY" in data


def test_recording_only_some_arms_leaves_the_others_untouched(sim: SimCluster, tmp_path: Path) -> None:
    path = tmp_path / "arms.json"
    session = ladder_session(sim, ["bf16", "nvfp4"], max_tokens=16)
    run_record(session, path, arm_ids=["bf16"])
    before = [r for r in load(path).runs]
    assert {r.arm for r in before} == {"bf16"}
    session = load(path)
    result, _ = run_record(session, path, arm_ids=["nvfp4"])
    after = load(path)
    assert result.ok == 2 and [r for r in after.runs if r.arm == "bf16"] == before
    assert {r.arm for r in after.runs} == {"bf16", "nvfp4"}
    assert len(after.arm("bf16").recorded) == 1 and len(after.arm("nvfp4").recorded) == 1
    with pytest.raises(ValueError, match="unknown arm 'fp8'; known arms: bf16, nvfp4"):
        asyncio.run(record(session, path, arm_ids=["fp8"]))


def test_failed_runs_are_retried_and_replaced(make_sim: Any, tmp_path: Path) -> None:
    cluster = make_sim([seed("bf16")])
    path = tmp_path / "retry.json"
    session = ladder_session(cluster, ["bf16"], max_tokens=16)
    set_state(cluster, "bf16", fault={"mode": "500", "count": 1})
    result, events = run_record(session, path)
    assert (result.ok, result.failed) == (1, 1)
    failed = [e for e in events if isinstance(e, RunFinished) and e.status == "failed"]
    assert failed[0].error.startswith("HTTP 500 from")
    result, _ = run_record(load(path), path)
    assert (result.ok, result.failed, result.already_ok) == (1, 0, 1)
    runs = load(path).runs
    assert len(runs) == 2 and all(r.status == "ok" for r in runs)
    assert len({r.key for r in runs}) == 2


def test_fail_fast_stops_at_the_first_failed_run(make_sim: Any, tmp_path: Path) -> None:
    cluster = make_sim([seed("bf16"), seed("nvfp4")])
    session = ladder_session(cluster, ["bf16", "nvfp4"], max_tokens=16)
    set_state(cluster, "bf16", fault={"mode": "500", "count": 1})
    result, _ = run_record(session, tmp_path / "ff.json", fail_fast=True)
    assert (result.failed, result.ok, result.stopped_on_failure) == (1, 0, True)
    assert len(load(tmp_path / "ff.json").runs) == 1 and sent_bodies(cluster, "nvfp4") == []


def test_cancel_saves_completed_runs_and_stops_cleanly(sim: SimCluster, tmp_path: Path) -> None:
    path = tmp_path / "cancel.json"
    session = ladder_session(sim, ["bf16", "nvfp4"], repeats=3, max_tokens=32)

    async def main() -> RecordResult:
        task = asyncio.current_task()
        assert task is not None

        def on_event(event: RecordEvent) -> None:
            if isinstance(event, RunFinished) and event.index == 1:
                task.cancel()

        return await record(session, path, on_event=on_event)

    result = asyncio.run(main())
    assert result.interrupted and result.ok == 2
    saved = load(path)
    assert [r.index for r in saved.runs] == [0, 1]
    assert "finished_at" in saved.arm("bf16").recorded[0] and saved.arm("nvfp4").recorded == []


CHILD = """
import asyncio, sys
from tokenreel.recorder.config import load_config
from tokenreel.recorder.runner import new_session, record
config = load_config(sys.argv[1])
session = new_session(config.name, config.settings, config.prompts, config.arms)
asyncio.run(record(session, sys.argv[2]))
"""


def test_resume_after_a_killed_recording(make_sim: Any, tmp_path: Path) -> None:
    cluster = make_sim([seed("bf16")], time_scale=0.1)
    config = tmp_path / "ladder.toml"
    config.write_text(
        '[session]\nname = "killed"\nprompts = "builtin:ladder4"\nmax_tokens = 128\n'
        "warmup = 1\nrepeats = 2\nidle_wait_s = 5\n"
        f'[[arms]]\nid = "bf16"\nbase_url = "{cluster.base_url("bf16")}"\nmodel = "Qwen/Qwen3.8-27B"\n'
    )
    path = tmp_path / "killed.json"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(config), str(path)], cwd=Path(__file__).parents[1])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and child.poll() is None:
            if path.exists() and sum(r.status == "ok" for r in load(path).runs) >= 3:
                break
            time.sleep(0.02)
        assert child.poll() is None, "the recording finished before it could be killed"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=10)
    killed = load(path)  # valid: saves are atomic
    done = [r for r in killed.runs if r.status == "ok"]
    total = len(killed.prompts) * 3
    assert 3 <= len(done) < total
    assert len(killed.arm("bf16").recorded) == 1 and "finished_at" not in killed.arm("bf16").recorded[0]
    result, _ = run_record(killed, path)
    assert (result.already_ok, result.ok, result.failed) == (len(done), total - len(done), 0)
    final = load(path)
    assert sorted(r.key for r in final.runs) == sorted(("bf16", p.id, i) for p in final.prompts for i in range(3))
    assert all(r.status == "ok" for r in final.runs)
    assert [r for r in final.runs if r.key in {d.key for d in done}] == done  # completed runs kept as they were
    assert len(final.arm("bf16").recorded) == 2 and "finished_at" in final.arm("bf16").recorded[1]
