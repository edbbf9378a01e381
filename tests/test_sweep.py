"""`tokenreel sweep` (issue 27, items 1 and 6) against simulated endpoints on real sockets.

Each arm alone at each level, exactly N requests in flight, every request archived with its
level, the engine's counters per level; bad levels are one line and exit 2; an endpoint that
refuses a level fails that level, kept; Ctrl-C keeps the levels done; the commands that read
ladder sessions refuse a sweep in one line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import httpx
import orjson
import pytest

from tests.test_cli import REPO, invoke, write_config
from tests.test_recorder_support import seed
from tokenreel.session import archive
from tokenreel.session.model import Run
from tokenreel.simulator.profiles import SEED_LADDER


def _end_ns(run: Run) -> int:
    assert run.send_monotonic_ns is not None and len(run.chunks)
    return run.send_monotonic_ns + run.chunks.t_ns[-1]


def _most_in_flight(runs: list[Run]) -> int:
    """The most runs in flight at once, from their send and last-event times."""
    events = sorted([(r.send_monotonic_ns, 1) for r in runs] + [(_end_ns(r), -1) for r in runs])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_sweep_two_arms_records_every_level_alone(tmp_path: Path, make_sim) -> None:
    # requests long beside the client's own overhead (80-160 ms): level 4's aggregate, over a window
    # of two rounds, is held against level 1's; at a tenth of real speed that window is 30 ms, and
    # one stall of a loaded box (the simulator shares this process) would decide the ratio
    cluster = make_sim(SEED_LADDER[:2], time_scale=0.5)
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=16)
    out = tmp_path / "sweep.json"
    result = invoke("sweep", "--config", config, "--concurrency", "1,2,4", "--requests", "6", "--out", out)
    assert result.exit_code == 0, result.output
    session = archive.load(out)
    assert session.kind == "sweep"
    arms = [arm.id for arm in session.arms]
    assert [(r.arm, r.level, r.status) for r in session.levels] == [(a, n, "ok") for a in arms for n in (1, 2, 4)]
    for record in session.levels:
        runs = [r for r in session.runs if r.arm == record.arm and r.level == record.level]
        measured = [r for r in runs if not r.warmup]
        fill = [r for r in runs if r.warmup and r.index >= record.level + 6]
        assert len([r for r in runs if r.warmup]) == record.level + len(fill) and len(measured) == 6 == record.completed
        assert all(r.status == "ok" for r in runs)
        assert sorted(r.index for r in runs) == list(range(record.level + 6 + len(fill)))
        # exactly N in flight: never more, and N reached in the measured window
        assert _most_in_flight(measured) == record.level
        # the fill: every slot refilled while a measured request ran, never more than N in flight
        assert _most_in_flight(measured + fill) == record.level
        assert len(fill) >= record.level - 1, (record.level, len(fill))
        assert _most_in_flight(runs) <= record.level
        assert record.after["generated_tokens"] - record.before["generated_tokens"] >= 6 * 16
        assert "running" in record.before and record.peak_running is not None
    first, second = ([r for r in session.runs if r.arm == arm] for arm in arms)
    assert max(map(_end_ns, first)) < min(r.send_monotonic_ns for r in second)  # arms never overlap
    # prompts cycle through the suite in order within a level
    level4 = sorted((r for r in first if r.level == 4), key=lambda r: r.index)
    assert [r.prompt for r in level4] == [session.prompts[i % len(session.prompts)].id for i in range(len(level4))]
    # item 2's data: a row per arm and level in the json report
    report = invoke("report", out, "--format", "json")
    assert report.exit_code == 0, report.output
    rows = orjson.loads(report.output)["levels"]
    assert [(row["arm"], row["level"]) for row in rows] == [(a, n) for a in arms for n in (1, 2, 4)]
    for row in rows:
        assert row["status"] == "ok" and row["completed"] == 6 and row["output_tokens"] == 6 * 16
        assert row["median_decode_tok_s"] > 0 and row["median_ttft_s"] > 0
        assert row["counters"]["generated_tokens"] >= 6 * 16
    by = {(row["arm"], row["level"]): row["aggregate_output_tok_s"] for row in rows}
    for arm in arms:  # the simulator's default batching: each request as fast alone as in a batch
        assert by[(arm, 4)] > 1.5 * by[(arm, 1)]


def test_more_than_a_hundred_in_flight(tmp_path: Path, make_sim) -> None:
    """aiohttp's connector holds 100 connections by default: a sweep's holds every level."""
    # requests of about 0.9 s at real speed: longer than a loaded client takes to open 120 streams,
    # so the server sees them overlap (at time_scale 0.2 one lasted 0.16 s and a busy CI box saw 99)
    cluster = make_sim(SEED_LADDER[:1], time_scale=1.0)
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=16)
    out = tmp_path / "sweep.json"
    result = invoke("sweep", "--config", config, "--concurrency", "120", "--requests", "120", "--out", out)
    assert result.exit_code == 0, result.output
    session = archive.load(out)
    measured = [r for r in session.runs if not r.warmup]
    assert len(measured) == 120 and all(r.status == "ok" for r in measured)
    # the server's own log: when each response began and its last write (the last 200 requests,
    # the fill's and the later measured ones: never more than 120 at once, past the 100 of aiohttp)
    sent = httpx.get(cluster.root_url(SEED_LADDER[0].id) + "/sim/sent", headers={"X-Sim-Token": cluster.token}).json()
    spans = [(r["start_ns"], r["writes"]["after_ns"][-1]) for r in sent["requests"]]
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    assert 100 < most <= 120 and _most_in_flight(measured) == 120, most


def test_duration_measures_each_level_for_that_long_then_drains(tmp_path: Path, make_sim) -> None:
    cluster = make_sim(SEED_LADDER[:1], time_scale=0.1)
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=8)
    out = tmp_path / "sweep.json"
    result = invoke("sweep", "--config", config, "--concurrency", "1,3", "--duration", "0.6s", "--out", out)
    assert result.exit_code == 0, result.output
    session = archive.load(out)
    for record in session.levels:
        assert record.requests is None and record.duration_s == 0.6 and record.status == "ok"
        measured = [r for r in session.runs if r.level == record.level and not r.warmup]
        assert len(measured) == record.completed >= 2 * record.level  # short requests: several rounds
        assert all(r.status == "ok" for r in measured)  # the drain lets the last ones finish
        starts = [r.send_monotonic_ns for r in measured]
        assert (max(starts) - min(starts)) / 1e9 < 0.6  # nothing sent after the duration
        assert record.wall_s is not None and record.wall_s >= 0.6


@pytest.mark.parametrize(
    ("levels", "words"),
    [
        ("2,1", "levels must increase, but 1 follows 2"),
        ("1,1", "levels must increase"),
        ("0,1", "level 0 keeps no request in flight"),
        ("-1", "level -1 keeps no request in flight"),
        ("1,x", "'x' is not a whole number"),
        ("1,2.5", "'2.5' is not a whole number"),
        ("1,4096", "level 4096 is above the limit of 1024"),
    ],
)
def test_bad_levels_are_one_line_and_exit_2(tmp_path: Path, levels: str, words: str) -> None:
    out = tmp_path / "s.json"
    result = invoke("sweep", "--config", "builtin:seed-ladder", "--concurrency", levels, "--out", out)
    assert result.exit_code == 2
    assert f"--concurrency: {words}" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not out.exists()


def test_a_level_above_the_endpoints_slots_is_refused(tmp_path: Path, make_sim) -> None:
    cluster = make_sim([replace(SEED_LADDER[0], engine="llamacpp")])  # llama.cpp reports 4 slots
    config = write_config(tmp_path / "c.toml", cluster)
    out = tmp_path / "s.json"
    result = invoke("sweep", "--config", config, "--concurrency", "1,8", "--out", out)
    assert result.exit_code == 2
    assert "--concurrency: level 8 is above the 4 requests arm 'bf16' serves at once" in result.output
    assert not out.exists() or not archive.load(out).runs


def test_requests_and_duration_together_are_refused(tmp_path: Path) -> None:
    result = invoke("sweep", "--config", "builtin:seed-ladder", "--concurrency", "1", "--requests", "4",
                    "--duration", "5s", "--out", tmp_path / "s.json")
    assert result.exit_code == 2 and "give one of them" in result.output


@pytest.mark.parametrize("status", ["429", "503"])
def test_a_refusing_endpoint_fails_its_level_and_the_sweep_goes_on(tmp_path: Path, make_sim, status: str) -> None:
    cluster = make_sim([SEED_LADDER[0], seed("nvfp4", fault=status)])
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=8)
    out = tmp_path / "sweep.json"
    result = invoke("sweep", "--config", config, "--concurrency", "1,2", "--requests", "2", "--out", out, "--no-preflight")
    assert result.exit_code == 1
    session = archive.load(out)
    labels = {arm.id: arm.label for arm in session.arms}  # the terminal names arms as the report does
    assert labels["nvfp4"] != "nvfp4"
    assert f"{labels['nvfp4']} level 1 failed: the endpoint refused concurrency 1 (HTTP {status})" in result.output
    assert "--resume" not in result.output  # sweep has none: no line of it advises one
    assert f"[1/4] {labels['bf16']} level 1: ok" in result.output and f"{labels['bf16']} level 2: ok" in result.output
    assert not [line for line in result.output.splitlines() if line.startswith(("nvfp4 ", "bf16 ", "[1/4] bf16"))]
    statuses = {(r.arm, r.level): r.status for r in session.levels}
    assert statuses == {("bf16", 1): "ok", ("bf16", 2): "ok", ("nvfp4", 1): "failed", ("nvfp4", 2): "skipped"}
    skipped = next(r for r in session.levels if r.status == "skipped")
    assert skipped.error == "not tried: level 1 was refused"
    assert sum(1 for r in session.runs if r.arm == "bf16" and not r.warmup and r.status == "ok") == 4


def test_a_level_where_nothing_completes_fails_and_the_next_is_tried(tmp_path: Path, make_sim) -> None:
    cluster = make_sim([seed("bf16", fault="500")])
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=8)
    out = tmp_path / "sweep.json"
    result = invoke("sweep", "--config", config, "--concurrency", "1,2", "--requests", "2", "--out", out, "--no-preflight")
    assert result.exit_code == 1
    session = archive.load(out)
    assert [(r.level, r.status) for r in session.levels] == [(1, "failed"), (2, "failed")]  # not a refusal: 2 is tried
    assert all(r.error.startswith(f"no request completed at concurrency {r.level}: ") and "500" in r.error
               for r in session.levels)
    assert len([r for r in session.runs if r.level == 2 and not r.warmup]) == 2
    assert all(r.gate.status == "idle" for r in session.runs)


def _sweep_copy(tmp_path: Path) -> Path:
    """The seed ladder session made into a sweep (every run at level 1)."""
    session = archive.load(REPO / "sessions" / "seed-ladder-demo.json")
    session.kind = "sweep"
    for run in session.runs:
        run.level = 1
    path = tmp_path / "sweep.json"
    archive.save(session, path)
    return path


@pytest.mark.parametrize(
    "command",
    [("report", "{s}", "--format", "csv"), ("compare", "{s}", "{s}"), ("render", "{s}", "--out", "{o}")],
)
def test_ladder_commands_refuse_a_sweep_in_one_line(tmp_path: Path, command: tuple[str, ...]) -> None:
    path = _sweep_copy(tmp_path)
    args = [part.format(s=path, o=tmp_path / "out.mp4") for part in command]
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert "a sweep session (tokenreel sweep)" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_record_resume_into_a_sweep_is_refused(tmp_path: Path, make_sim) -> None:
    path = _sweep_copy(tmp_path)
    cluster = make_sim(SEED_LADDER[:1])
    config = write_config(tmp_path / "c.toml", cluster)
    result = invoke("record", "--config", config, "--out", path, "--resume", "--no-preflight")
    assert result.exit_code == 2
    assert "is a sweep session (tokenreel sweep): record does not add to it" in result.output


def test_a_ladder_file_carries_no_sweep_fields(tmp_path: Path) -> None:
    seed_path = REPO / "sessions" / "seed-ladder-demo.json"
    data = orjson.loads(seed_path.read_bytes())
    assert "kind" not in data and "levels" not in data and all("level" not in run for run in data["runs"])
    session = archive.load(seed_path)
    assert session.kind == "ladder" and session.levels == [] and all(r.level is None for r in session.runs)


def test_ctrl_c_keeps_the_levels_done(tmp_path: Path, make_sim) -> None:
    cluster = make_sim(SEED_LADDER[:1], time_scale=0.2)
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=24)
    out = tmp_path / "sweep.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenreel", "sweep", "--config", str(config), "--concurrency", "1,2,4,8",
         "--requests", "8", "--out", str(out), "--no-preflight"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env={**os.environ, "COLUMNS": "200"},
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if out.exists() and any(level.get("status") == "ok" for level in orjson.loads(out.read_bytes()).get("levels", [])):
                break
            time.sleep(0.1)
        else:
            pytest.fail("no level finished within 60 s")
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr
    session = archive.load(out)
    assert session.levels[0].status == "ok" and session.levels[0].level == 1
    assert session.levels[-1].status in ("ok", "interrupted")
    assert len([r for r in session.runs if r.level == 1 and not r.warmup]) == 8


def _sweep_dict(tmp_path: Path) -> dict:
    return orjson.loads(_sweep_copy(tmp_path).read_bytes())


LEVEL = {"arm": "bf16", "level": 2, "status": "ok", "before": {"drafts": 3.0}, "after": {"drafts": 9.0}}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d.update(kind="fleet"), "field 'kind'"),
        (lambda d: d["runs"][0].update(level=0), "field 'runs[0].level': expected a concurrency level of 1 or more"),
        (lambda d: d["runs"][0].pop("level"), "field 'runs[0].level': a sweep's runs carry their concurrency level"),
        (lambda d: d.pop("kind"), "field 'runs[0].level': a sweep's runs carry their concurrency level"),
        (lambda d: d.update(levels=[dict(LEVEL, arm="nope")]), "field 'levels[0].arm': unknown arm 'nope'"),
        (lambda d: d.update(levels=[dict(LEVEL, level=-2)]), "field 'levels[0].level'"),
        (lambda d: d.update(levels=[dict(LEVEL, status="great")]), "field 'levels[0].status'"),
        (lambda d: d.update(levels=[dict(LEVEL, before={"drafts": -1})]), "field 'levels[0].before.drafts'"),
        (lambda d: d.update(levels=[dict(LEVEL, before={"bogus": 1})]), "field 'levels[0].before.bogus'"),
        (lambda d: d.update(levels=[dict(LEVEL, wall_s=-3)]), "field 'levels[0].wall_s'"),
    ],
)
def test_sweep_fields_are_checked_on_load(tmp_path: Path, change, words: str) -> None:
    data = _sweep_dict(tmp_path)
    data["levels"] = [dict(LEVEL)]
    archive.loads(orjson.dumps(data), "ok.json")  # the base loads
    change(data)
    with pytest.raises(archive.ArchiveError, match=None) as caught:
        archive.loads(orjson.dumps(data), "bad.json")
    assert words in str(caught.value)


def test_levels_in_a_ladder_are_refused(tmp_path: Path) -> None:
    data = orjson.loads((REPO / "sessions" / "seed-ladder-demo.json").read_bytes())
    data["levels"] = [dict(LEVEL)]
    with pytest.raises(archive.ArchiveError) as caught:
        archive.loads(orjson.dumps(data), "bad.json")
    assert "only a sweep session has levels" in str(caught.value)


def test_a_level_that_lost_requests_is_named_and_the_sweep_exits_1(tmp_path: Path, make_sim) -> None:
    """Three requests answered HTTP 500, the rest completed: the level is ok over those that did,
    and a line says how many failed; exit 1, since its figures are over fewer than asked."""
    from tests.test_recorder_support import set_state

    cluster = make_sim([SEED_LADDER[0]])
    set_state(cluster, "bf16", fault={"mode": "500", "count": 3})
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=8)
    out = tmp_path / "sweep.json"
    result = invoke("sweep", "--config", config, "--concurrency", "1", "--requests", "8", "--out", out, "--no-preflight")
    assert result.exit_code == 1, result.output
    [record] = archive.load(out).levels
    assert record.status == "ok" and record.failed > 0, record
    label = archive.load(out).arm("bf16").label
    assert (f"{label} level 1: {record.failed} of {record.completed + record.failed} requests failed; its figures are over"
            f" the {record.completed} that completed") in result.output, result.output
