"""The real H200 ladder archived in sessions/h200-llamacpp/ (issue 29, item 8): recorded through
`launch` on one GPU, its engines one at a time, the engine's figures beside ours within the
issue's bounds, every run a fresh prefill, the GPU checked and idle before each arm."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from tokenreel.session import archive

H200 = Path(__file__).resolve().parents[1] / "sessions" / "h200-llamacpp"


def report() -> dict:
    done = subprocess.run([sys.executable, "-m", "tokenreel", "report", str(H200 / "session.json"), "--format", "json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_h200_ladder_s_engines_never_overlapped_and_agree_with_ours() -> None:
    session = archive.load(H200 / "session.json")
    assert all(run.status == "ok" for run in session.runs) and len(session.runs) == 288
    spans = []
    for arm in session.arms:
        [turn] = arm.recorded
        spans.append((datetime.fromisoformat(turn["engine_started_at"]), datetime.fromisoformat(turn["engine_exited_at"])))
        assert (H200 / "session.engines" / f"{arm.id}.log").stat().st_size > 0
        assert arm.fingerprint.get("launch"), arm.id
        [check] = arm.gpu
        assert check.status == "idle" and "H200" in check.devices[0].name, check
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:], strict=False))  # one engine at a time
    data = report()
    agreement = {row["arm"]: row for row in data["engine_agreement"]}
    for arm in session.arms:
        row = agreement[arm.id]
        assert row["runs"] == 64 and row["median_pct"] <= 0.05 and row["worst_pct"] <= 0.2, row
    assert data["prompt_cache"]["policy"] == "fresh"
    assert all(arm["cache_hits"] == 0 for arm in data["prompt_cache"]["arms"])
    last = data["ladder"][-1]
    low, high = last["vs_first_ci95"]
    assert 2.0 < low <= last["vs_first"] <= high  # the drafter arm's ladder, with its interval
