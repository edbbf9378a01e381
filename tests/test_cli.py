"""The `tokenreel` command end to end, against simulated endpoints on real sockets.

Faults give one line per run and exit code 1 with the partial runs saved; bad input gives one
line and exit code 2; an API key never reaches any output; Ctrl-C keeps completed runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from tests.test_recorder_support import FAST_TIMEOUTS, seed
from tokenreel.cli import app
from tokenreel.recorder.client import sse_client
from tokenreel.session import archive
from tokenreel.simulator.profiles import SEED_LADDER
from tokenreel.simulator.server import SimCluster

SENTINEL = "sk-tokenreel-SENTINEL-7d1f0c"
REPO = Path(__file__).resolve().parents[1]


def write_config(
    path: Path, cluster: SimCluster, *, max_tokens: int = 64, repeats: int = 1, warmup: int = 0,
    prompts: str = "builtin:ladder4", timeouts: dict[str, float] | None = None, key_env: str | None = None,
    session: tuple[str, ...] = (),
) -> Path:
    """A config recording every profile of `cluster`; `session`: more `key = value` lines for [session]."""
    lines = [
        "[session]",
        'name = "cli-test"',
        *session,
        f'prompts = "{prompts}"',
        f"max_tokens = {max_tokens}",
        f"warmup = {warmup}",
        f"repeats = {repeats}",
        "idle_wait_s = 0.5",
        # These recordings (unless they set it) are not about the host: no host reading before each
        # run (0.1-1 s each, longer than the run), and no 5 s wait per arm on the loaded test box.
        *([] if any(line.startswith("host_wait_s") for line in session) else ["host_wait_s = 0"]),
        "[session.timeouts]",
        *(f"{k} = {v}" for k, v in (timeouts or FAST_TIMEOUTS).items()),
    ]
    for profile in cluster.profiles:
        lines += [
            "[[arms]]",
            f'id = "{profile.id}"',
            f'label = "{profile.label}"',
            f'base_url = "{cluster.base_url(profile.id)}"',
            f'model = "{profile.model}"',
        ]
        if key_env:
            lines.append(f'api_key_env = "{key_env}"')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, [str(a) for a in args], env=env, catch_exceptions=False)


def test_record_report_render_never_write_the_key(tmp_path: Path, make_sim) -> None:
    # A tenth of real speed, recorded by a process of its own: the video races each arm's one run,
    # and at the suite's fiftieth the drafter's whole 64-token answer (3 ms) can reach a loaded
    # recorder in one read (no decode to race by), more so one sharing this process's lock with
    # the simulator.
    cluster = make_sim([*SEED_LADDER, seed("bf16", id="locked", fault="401")], time_scale=0.1)
    config = write_config(tmp_path / "c.toml", cluster, prompts="builtin:ladder4", key_env="TR_KEY")
    session = tmp_path / "s.json"
    env = {"TR_KEY": SENTINEL}
    checked = invoke("record", "--config", config, "--out", session, env=env)
    assert checked.exit_code == 2 and not session.exists()  # the preflight finds the locked arm
    assert "locked: http" in checked.output and "refused the request (HTTP 401); check TR_KEY" in checked.output
    recorded = run_cli("record", "--config", config, "--out", session, "--no-preflight", env={**os.environ, **env})
    assert recorded.returncode == 1, recorded.stderr  # the locked arm fails
    assert "locked" in recorded.stderr and "401" in recorded.stderr
    outputs = [checked.output, recorded.stdout, recorded.stderr]
    for fmt in ("md", "json", "csv"):
        result = invoke("report", session, "--format", fmt, "--out", tmp_path / f"r.{fmt}")
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    refused = invoke("render", session, "--out", tmp_path / "v.mp4", "--size", "640x360", "--prompt", "code-1")
    assert refused.exit_code == 2 and "arm 'locked' has no usable measured run" in refused.output  # never left out unasked
    outputs.append(refused.output)
    arms = ",".join(a.id for a in archive.load(session).arms if a.id != "locked")
    rendered = invoke("render", session, "--out", tmp_path / "v.mp4", "--size", "640x360", "--prompt", "code-1", "--arms", arms)
    assert rendered.exit_code == 0, rendered.output
    outputs.append(rendered.output)
    files = sorted(tmp_path.iterdir())
    assert {"s.json", "r.md", "r.json", "r.csv", "v.mp4", "v.mp4.render.json"} <= {f.name for f in files}
    for file in files:
        assert SENTINEL.encode() not in file.read_bytes(), file.name
    for text in outputs:
        assert SENTINEL not in text
    report = orjson.loads((tmp_path / "r.json").read_bytes())
    assert [row["arm"] for row in report["ladder"]] == ["bf16", "nvfp4", "nvfp4-dflash2", "locked"]
    assert set(report["cells"][0]) >= {
        "arm", "prompt", "category", "runs", "output_tokens", "ttft_s", "tpot_ms", "decode_tok_s",
        "e2e_tok_s", "spread_tok_s", "acceptance_length", "like_for_like", "contended",
    }


MID_STREAM = {"error_event", "drop", "stall", "malformed"}


def test_every_fault_is_one_line_a_saved_run_and_exit_1(tmp_path: Path, make_sim, monkeypatch) -> None:
    monkeypatch.setattr(sse_client, "RETRY_AFTER_CAP_S", 0.05)
    faults = ["refuse", "401", "404", "429", "500", "error_event", "drop", "stall", "malformed", "no_done", "busy"]
    cluster = make_sim([seed("bf16", id=f"f-{fault}", fault=fault) for fault in faults], time_scale=0.01)
    timeouts = {**FAST_TIMEOUTS, "between_chunks": 0.5}
    config = write_config(tmp_path / "c.toml", cluster, prompts="builtin:ladder4", timeouts=timeouts)
    session_path = tmp_path / "s.json"
    result = invoke("record", "--config", config, "--out", session_path, "--no-preflight")
    assert result.exit_code == 1
    session = archive.load(session_path)
    for fault in faults:
        runs = [r for r in session.runs if r.arm == f"f-{fault}"]
        assert len(runs) == 4, fault  # one per prompt, every one kept
        expected = "skipped" if fault == "busy" else "failed"
        assert {r.status for r in runs} == {expected}, fault
        assert all(r.error and "\n" not in r.error for r in runs), fault
        if fault in MID_STREAM:
            assert all(sum(r.chunks.tokens) > 0 for r in runs), f"{fault}: partial chunks kept"
        lines = [line for line in result.output.splitlines() if f"f-{fault} / " in line]
        assert len(lines) == 4, (fault, result.output)
        assert all(" run 0: " in line for line in lines)
    assert "Traceback" not in result.output
    # how to go on is said once, by the recording (a sweep, which has no --resume, never says it)
    assert result.output.count("`tokenreel record --resume` retries them") == 1


def test_fail_fast_stops_at_the_first_failure(tmp_path: Path, make_sim) -> None:
    cluster = make_sim([seed("bf16", id="broken", fault="500"), seed("nvfp4")])
    config = write_config(tmp_path / "c.toml", cluster)
    result = invoke("record", "--config", config, "--out", tmp_path / "s.json", "--fail-fast")
    assert result.exit_code == 1
    session = archive.load(tmp_path / "s.json")
    assert [(r.arm, r.status) for r in session.runs] == [("broken", "failed")]


def test_early_stop_is_reported_not_like_for_like(tmp_path: Path, make_sim) -> None:
    cluster = make_sim([seed("bf16"), seed("nvfp4", fault="early_stop")])
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=90)
    recorded = invoke("record", "--config", config, "--out", tmp_path / "s.json")
    assert recorded.exit_code == 1, recorded.output  # a wrong length is the endpoint's doing (issue 21)
    assert "4 measured run(s) missed the forced length" in recorded.output
    report = orjson.loads(invoke("report", tmp_path / "s.json", "--format", "json").output)
    nvfp4 = [c for c in report["cells"] if c["arm"] == "nvfp4"]
    assert nvfp4 and all(not c["like_for_like"] and "30 of 90" in c["note"] for c in nvfp4)
    assert all(not c["like_for_like"] for c in report["cells"])  # bf16 has no equal-length partner
    assert report["like_for_like_prompts"] == 0


def run_cli(*args: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess[str]:
    """`tokenreel ARGS` in a subprocess; `timeout` bounds a hang, it is no speed test."""
    return subprocess.run(
        [sys.executable, "-m", "tokenreel", *map(str, args)], capture_output=True, text=True, timeout=timeout, **kwargs
    )


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b'{"format": "tokenreel.session", "version": 1, "name": "x"', "truncated"),
        (b'{"format": "something-else"}', "field 'format'"),
        (b'{"format": "tokenreel.session", "version": 7}', "newer"),
        (b"\x00\x01garbage", "not valid JSON"),
    ],
)
def test_bad_session_is_one_line_and_exit_2(tmp_path: Path, content: bytes, words: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    for command in (["report", bad], ["render", bad, "--out", tmp_path / "v.mp4"]):
        result = run_cli(*command)
        assert result.returncode == 2
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr and "bad.json" in result.stderr


def test_outputs_are_not_overwritten_without_force(tmp_path: Path, make_sim) -> None:
    cluster = make_sim([seed("bf16")])
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=32)
    session = tmp_path / "s.json"
    assert invoke("record", "--config", config, "--out", session).exit_code == 0
    before = session.read_bytes()
    again = invoke("record", "--config", config, "--out", session)
    assert again.exit_code == 2 and "--resume" in again.output and session.read_bytes() == before
    (tmp_path / "r.md").write_text("mine")
    assert invoke("report", session, "--out", tmp_path / "r.md").exit_code == 2
    assert (tmp_path / "r.md").read_text() == "mine"
    assert invoke("report", session, "--out", tmp_path / "r.md", "--force").exit_code == 0


def test_ctrl_c_keeps_completed_runs_and_resume_finishes(tmp_path: Path, make_sim) -> None:
    cluster = make_sim([seed("bf16"), seed("nvfp4")], time_scale=0.2)
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=48, repeats=2)
    session_path = tmp_path / "s.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenreel", "record", "--config", str(config), "--out", str(session_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if session_path.exists() and len(archive.load(session_path).runs) >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "--resume" in stderr
    partial = archive.load(session_path)
    assert 2 <= len(partial.runs) < 16 and all(r.status == "ok" for r in partial.runs)
    kept = {r.key: r.chunks for r in partial.runs}
    resumed = run_cli("record", "--config", config, "--out", session_path, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    final = archive.load(session_path)
    assert len(final.runs) == 16 and all(r.status == "ok" for r in final.runs)
    assert all(final_run.chunks == kept[final_run.key] for final_run in final.runs if final_run.key in kept)


def test_help_answers_the_question() -> None:
    result = run_cli("record", "--help", env={**os.environ, "COLUMNS": "120"})
    assert result.returncode == 0
    for flag in ("--config", "--out", "--arms", "--repeats", "--warmup", "--resume"):
        assert flag in result.stdout
