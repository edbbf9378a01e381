"""Fingerprints that tell arms apart (launch command, vLLM's config hash) and synthetic acceptance:
the launch-command reading on real command lines, then arms launched through `record` (the
simulator, over HTTP) and the session file it wrote, read back by every report view."""

from __future__ import annotations

import csv
import io
import json
import shlex
from pathlib import Path

import pytest
from rich.console import Console

from tests.test_launch import SIM, record, sim_arm, write_config
from tokenreel.analysis.serving_config import SYNTHETIC_LABEL, config_hash, declared_synthetic, launch_settings
from tokenreel.base.safe_text import esc
from tokenreel.report import build_report, render_report
from tokenreel.report.terminal_tables import summary_tables
from tokenreel.session import archive
from tokenreel.simulator.shape_vllm import FINGERPRINT

SPEC = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}'
SYNTHETIC = json.dumps({"method": "eagle3", "model": "org/drafter/", "num_speculative_tokens": 3,
                        "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.5})


@pytest.mark.parametrize(("argv", "expected"), [
    (["vllm", "serve", "m", "--dtype", "bfloat16", "--speculative-config", SPEC],
     {"dtype": "bfloat16", "speculative": "ngram, k 4"}),
    (["vllm", "serve", "m", f"--speculative-config={SPEC}", "--dtype=float32", "-q", "fp8"],
     {"dtype": "float32", "quantization": "fp8", "speculative": "ngram, k 4"}),
    (["vllm", "serve", "m", "--speculative_config", SPEC, "--kv_cache_dtype", "fp8_e4m3"],
     {"kv_cache_dtype": "fp8_e4m3", "speculative": "ngram, k 4"}),
    (["vllm", "serve", "m", "-sc", SPEC], {"speculative": "ngram, k 4"}),
    (["vllm", "serve", "m", "--speculative-config.method", "ngram", "--speculative-config.num_speculative_tokens", "5"],
     {"speculative": "ngram, k 5"}),
    (["vllm", "serve", "m", "--speculative-config", "{not json"], {"speculative": "unreadable --speculative-config '{not json'"}),
    (["vllm", "serve", "m", "--dtype"], {}),  # a flag without its value says nothing
    (["env", "-i", "HF_HUB_OFFLINE=1", "vllm", "serve", "m", "--quantization", "awq"], {"quantization": "awq"}),
    (["/opt/bin/llama-server", "-m", "/models/target-q4_0.gguf", "-ctk", "q8_0", "--port", "8080"],
     {"model_file": "target-q4_0.gguf", "kv_cache_dtype": "q8_0"}),
    (["llama-server", "--model=/m/target-f16.gguf", "-md", "/m/draft-q4_0.gguf", "--draft-max", "8"],
     {"model_file": "target-f16.gguf", "speculative": "draft model, k 8, draft draft-q4_0.gguf"}),
    (["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "org/m"], {}),  # python's -m is a module
])
def test_launch_commands_say_dtype_quantization_and_speculative_settings(argv: list[str], expected: dict[str, str]) -> None:
    assert launch_settings(argv) == expected


@pytest.mark.parametrize(("argv", "where"), [
    (["vllm", "serve", "m", "--speculative-config", SYNTHETIC],
     "vLLM speculative config rejection_sample_method synthetic, synthetic_acceptance_length 2.5"),
    (["env", "SGLANG_SIMULATE_ACC_LEN=3", "python", "-m", "sglang.launch_server"], "SGLANG_SIMULATE_ACC_LEN=3 (SGLang)"),
    (["TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=1.5", "trtllm-serve", "m"],
     "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=1.5 (TensorRT-LLM)"),
    (["bash", "-c", f"SGLANG_SIMULATE_ACC_LEN=2 vllm serve m --speculative-config {shlex.quote(SPEC)}"],
     "SGLANG_SIMULATE_ACC_LEN=2 (SGLang)"),
    (["sh", "-c", f"vllm serve m --speculative-config={shlex.quote(SYNTHETIC)}"],
     "vLLM speculative config rejection_sample_method synthetic, synthetic_acceptance_length 2.5"),
])
def test_forced_acceptance_is_found_in_the_command_and_its_environment(argv: list[str], where: str) -> None:
    assert launch_settings(argv)["synthetic_acceptance"] == where


@pytest.mark.parametrize("argv", [
    ["env", "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=0", "trtllm-serve", "m"],  # 0: TensorRT-LLM's off
    ["vllm", "serve", "m", "--speculative-config", SPEC.replace("}", ', "rejection_sample_method": "standard"}')],
    ["sh", "-c", "vllm serve 'unbalanced"],
    ["vllm", "serve", "m", "--served-model-name", "SGLANG_SIMULATE_ACC_LEN=3"],  # an argument, not the environment
])
def test_real_acceptance_is_not_called_synthetic(argv: list[str]) -> None:
    assert "synthetic_acceptance" not in launch_settings(argv)


def test_declared_settings_can_say_synthetic_acceptance() -> None:
    assert declared_synthetic({"SGLANG_SIMULATE_ACC_LEN": "2.5"}) == "SGLANG_SIMULATE_ACC_LEN=2.5 (SGLang), declared in [arms.settings]"
    assert declared_synthetic({"speculative_config": SYNTHETIC}).startswith("vLLM speculative config rejection_sample_method synthetic")
    assert declared_synthetic({"launch": "SGLANG_SIMULATE_ACC_LEN=4 python -m sglang.launch_server"}).startswith(
        "SGLANG_SIMULATE_ACC_LEN=4 (SGLang)")
    assert declared_synthetic({"drafter": "ngram k=4", "hardware": "1x H100"}) == ""


def test_config_hash_is_read_from_vllms_system_fingerprint() -> None:
    assert config_hash("vllm-0.32.0-5eed1ad0") == "5eed1ad0"
    assert config_hash("vllm-0.32.1.dev3+gabc-0123abcd") == "0123abcd"
    assert config_hash("b4567-abcdef0") == ""  # llama.cpp's build, no config hash
    assert config_hash(None) == ""


def test_launched_arms_are_told_apart_and_synthetic_acceptance_never_headlines(tmp_path: Path) -> None:
    """Three simulator arms through `launch`; the third's command sets SGLang's forced acceptance.
    The session file keeps each arm's system_fingerprint (from the stream's final chunk); every
    report view labels the third arm and the headline compares the other two."""
    arms = [sim_arm("base"), sim_arm("again"), sim_arm("forced", launch=["env", "SGLANG_SIMULATE_ACC_LEN=3", *SIM])]
    config = write_config(tmp_path, arms)
    session_path = tmp_path / "s.json"
    done = record(config, session_path)
    assert done.returncode == 0, done.stderr
    session = archive.load(session_path)
    assert all(a.fingerprint["system_fingerprint"] == FINGERPRINT for a in session.arms)
    assert archive.dumps(session) == session_path.read_bytes()  # loads and saves to the same bytes

    report = build_report(session)
    fingerprints = {a["arm"]: a["fingerprint"] for a in report["arms"]}
    assert fingerprints["base"]["config_hash"] == FINGERPRINT.rsplit("-", 1)[1]
    assert "synthetic_acceptance" not in fingerprints["base"]
    assert fingerprints["forced"]["synthetic_acceptance"] == (
        f"{SYNTHETIC_LABEL} (SGLANG_SIMULATE_ACC_LEN=3 (SGLang) in the launch command)")
    ladder = {row["arm"]: row for row in report["ladder"]}
    assert ladder["forced"]["synthetic_acceptance"].startswith(SYNTHETIC_LABEL) and not ladder["again"]["synthetic_acceptance"]
    assert (report["headline"]["arm"], report["headline"]["vs"]) == ("again", "base")

    markdown = render_report(session, "md")
    assert f"- forced: {SYNTHETIC_LABEL}" in markdown and "config_hash" in markdown
    assert esc(SYNTHETIC_LABEL) in render_report(session, "html")
    assert json.loads(render_report(session, "json"))["ladder"][2]["synthetic_acceptance"].startswith(SYNTHETIC_LABEL)
    rows = list(csv.DictReader(io.StringIO(render_report(session, "csv"))))
    assert {r["arm"] for r in rows if r["arm_synthetic_acceptance"].startswith(SYNTHETIC_LABEL)} == {"forced"}

    console = Console(width=400, record=True, file=io.StringIO())
    for table in summary_tables(session):  # the terminal summary
        console.print(table)
    assert SYNTHETIC_LABEL in console.export_text()


def test_check_warns_of_two_arms_it_could_not_tell_apart(tmp_path: Path) -> None:
    """Two arms launched with the same command and model are one line's warning, naming both;
    an arm whose command differs (its environment forces acceptance) is not."""
    arms = [sim_arm("a"), sim_arm("b"), sim_arm("c", launch=["env", "SGLANG_SIMULATE_ACC_LEN=3", *SIM])]
    done = record(write_config(tmp_path, arms), tmp_path / "s.json", "--check", timeout=120)
    said = done.stdout + done.stderr
    lines = [line for line in said.splitlines() if "identical fingerprints" in line]
    assert len(lines) == 1, said
    assert "arms a and b have identical fingerprints" in lines[0] and "[arms.settings]" in lines[0]
