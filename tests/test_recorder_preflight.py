"""The preflight: every arm is checked before the first run, all problems are listed at once,
and nothing is recorded while any remains. Real simulated endpoints on loopback sockets."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.test_cli import invoke, write_config
from tests.test_recorder_support import arm_for, seed
from tokenreel.recorder.engines.preflight import preflight
from tokenreel.recorder.suites import load_prompts
from tokenreel.session import archive
from tokenreel.session.model import Arm, Settings


def generation_requests(cluster) -> int:
    """Completions requests the simulated engines received (their own request log)."""
    return sum(
        len(httpx.get(f"{cluster.root_url(pid)}/sim/requests", headers=cluster.control_headers).json()["requests"])
        for pid in cluster.servers
    )


def test_three_problems_listed_at_once_in_under_a_second_without_recording(tmp_path: Path, make_sim) -> None:
    cluster = make_sim([seed("bf16"), seed("nvfp4", fault="404"), seed("nvfp4-dflash2", fault="refuse")])
    config = write_config(tmp_path / "c.toml", cluster, key_env="TR_PREFLIGHT_UNSET_KEY")
    session = tmp_path / "s.json"
    started = time.perf_counter()
    result = invoke("record", "--config", config, "--out", session, env={"TR_PREFLIGHT_UNSET_KEY": ""})
    elapsed = time.perf_counter() - started
    print(f"preflight of 3 arms with problems: {elapsed * 1000:.0f} ms\n{result.output}")
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert "preflight found" in result.output and "nothing was recorded" in result.output
    key = [line for line in lines if "TR_PREFLIGHT_UNSET_KEY" in line and "is not set" in line]
    assert [line.split(":")[0].strip() for line in key] == ["bf16", "nvfp4", "nvfp4-dflash2"]
    assert any(line.strip().startswith("nvfp4: model 'ThakiCloud/") and "is not served" in line for line in lines)
    assert any(line.strip().startswith("nvfp4-dflash2: endpoint unreachable") and "connection refused" in line
               for line in lines)
    assert not session.exists()
    assert generation_requests(cluster) == 0
    assert elapsed < 1.0


def test_context_too_short_for_prompt_plus_max_tokens(make_sim) -> None:
    cluster = make_sim([seed("bf16", max_model_len=300)])
    prompts = load_prompts("builtin:ladder4", Path.cwd())
    arm = arm_for(cluster, "bf16")
    [fits] = asyncio.run(preflight([arm], prompts, Settings(max_tokens=200)))
    [too_long] = asyncio.run(preflight([arm], prompts, Settings(max_tokens=290)))
    assert fits.problems == [] and "the longest prompt" in fits.notes[1]
    longest = int(fits.notes[1].split("the longest prompt, ")[1].split(" ")[0])
    assert 200 + longest <= 300 < 290 + longest  # so the second must fail on the prompt, not max_tokens alone
    assert len(too_long.problems) == 1 and too_long.problems[0].startswith("max_model_len 300 < max_tokens 290 +")


def test_missing_metrics_is_a_warning_and_recording_goes_on(tmp_path: Path, make_sim) -> None:
    cluster = make_sim([seed("bf16")])
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=24)
    config.write_text(config.read_text() + f'metrics_url = "http://127.0.0.1:{cluster.port("bf16")}/no-metrics"\n')
    result = invoke("record", "--config", config, "--out", tmp_path / "s.json")
    assert result.exit_code == 0, result.output
    warning = [line for line in result.output.splitlines() if line.startswith("warning: bf16: no /metrics")]
    assert len(warning) == 1 and "idle gate and the contention check will be unavailable" in warning[0]
    session = archive.load(tmp_path / "s.json")
    assert session.runs and {run.gate.status for run in session.runs} == {"unavailable"}
    assert generation_requests(cluster) == len(session.runs)


def test_check_only_checks(tmp_path: Path, make_sim) -> None:
    cluster = make_sim([seed("bf16"), seed("nvfp4")])
    config = write_config(tmp_path / "c.toml", cluster)
    result = invoke("record", "--config", config, "--out", tmp_path / "s.json", "--check")
    assert result.exit_code == 0, result.output
    assert [line.split(":")[0:2] for line in result.output.splitlines() if line.startswith("ok:")] == [
        ["ok", " bf16"], ["ok", " nvfp4"]
    ]
    assert "2 arm(s) ready" in result.output
    assert not (tmp_path / "s.json").exists() and generation_requests(cluster) == 0


def test_llama_cpp_single_model_name_mismatch_is_only_a_warning() -> None:
    from tokenreel.recorder.engines.preflight import ArmCheck, _model_card

    arm = Arm(id="q4", label="q4", base_url="http://127.0.0.1:1/v1", model="qwen")
    llama = {"data": [{"id": "/models/qwen-q4_0.gguf", "owned_by": "llamacpp"}]}
    vllm = {"data": [{"id": "Qwen/Qwen3", "owned_by": "vllm"}]}
    check = ArmCheck("q4")
    assert _model_card(check, arm, llama) is not None and check.problems == [] and len(check.warnings) == 1
    check = ArmCheck("q4")
    assert _model_card(check, arm, vllm) is None and "it serves: Qwen/Qwen3" in check.problems[0]


def _free_ports(count: int, first: int = 8100) -> bool:
    for port in range(first, first + count):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return False
    return True


def test_the_shipped_config_records_against_tokenreel_simulate(tmp_path: Path) -> None:
    """As the README says: `tokenreel simulate`, then `record --config builtin:simulated-ladder` (on 4
    of its 32 prompts, one run each: each run reads the host gate first, about a second)."""
    assert _free_ports(3), "ports 8100-8102 are taken: the shipped config points there; stop what listens on them"
    sim = subprocess.Popen(
        [sys.executable, "-m", "tokenreel", "simulate", "--time-scale", "0.01"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while _free_ports(1, 8102) and time.monotonic() < deadline:
            time.sleep(0.05)
        session = tmp_path / "ladder.json"
        result = subprocess.run(
            [sys.executable, "-m", "tokenreel", "record", "--config", "builtin:simulated-ladder", "--out",
             str(session), "--repeats", "1", "--warmup", "0", "--suite", "builtin:ladder4"],
            capture_output=True, text=True, timeout=300,
        )
        assert result.returncode == 0, result.stderr
        assert "warning" not in result.stderr and "problem" not in result.stderr
        recorded = archive.load(session)
        assert [arm.id for arm in recorded.arms] == ["bf16", "nvfp4", "nvfp4-dflash2"]
        assert len(recorded.runs) == 3 * len(recorded.prompts) and all(r.status == "ok" for r in recorded.runs)
        assert {run.gate.status for run in recorded.runs} == {"idle"}
    finally:
        sim.terminate()
        sim.wait(timeout=30)


def test_llama_cpp_context_from_meta_n_ctx_is_checked() -> None:
    """llama.cpp has no max_model_len: its /v1/models card says meta.n_ctx (the slot's context)."""
    from tests.test_recorder_support import serve
    from tests.test_token_counting import llamacpp_app

    async def main(max_tokens: int) -> list[str]:
        async with serve(llamacpp_app([])) as root:
            arm = Arm(id="q4", label="q4", base_url=f"{root}/v1", model="qwen")
            [check] = await preflight([arm], load_prompts("builtin:ladder4", Path.cwd()), Settings(max_tokens=max_tokens))
            return check.problems

    assert asyncio.run(main(1024)) == []
    [problem] = asyncio.run(main(5000))
    assert problem.startswith("max_model_len 4096 < max_tokens 5000")
