"""`record --resume` and `--arms` into an existing session (issue 25, item 6): a config that
changes an arm's endpoint, model, api or extra_body, a prompt's text or the sampling settings is
refused with one line naming it (exit 2), before anything is sent; `--force-config` records anyway."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_cli import invoke, write_config
from tokenreel.recorder.config import load_config
from tokenreel.recorder.runner import new_session
from tokenreel.session import archive
from tokenreel.simulator.profiles import SEED_LADDER

ARM = {"id": "a", "label": "A", "base_url": "http://127.0.0.1:9/v1", "model": "m", "api": "chat", "extra_body": "{ }"}
SESSION = {"max_tokens": "16", "ignore_eos": "true", "temperature": "0"}
PROMPT = "Write code"


def config_text(arm: dict[str, str], session: dict[str, str]) -> str:
    quoted = {"id", "label", "base_url", "model", "api"}
    lines = ["[session]", 'name = "guard"', 'prompts = "p.jsonl"', "warmup = 0", "repeats = 1"]
    lines += [f"{key} = {value}" for key, value in session.items()]
    lines += ["[[arms]]", *(f'{k} = "{v}"' if k in quoted else f"{k} = {v}" for k, v in arm.items())]
    return "\n".join(lines) + "\n"


def write(tmp_path: Path, name: str, arm: dict[str, str], session: dict[str, str], prompt: str = PROMPT) -> Path:
    (tmp_path / "p.jsonl").write_text(f'{{"id": "p", "category": "code", "prompt": "{prompt}"}}\n', encoding="utf-8")
    path = tmp_path / name
    path.write_text(config_text(arm, session), encoding="utf-8")
    return path


@pytest.fixture
def archived(tmp_path: Path) -> Path:
    """A session on disk recorded (so far: none of its runs) from the unchanged config."""
    cfg = load_config(write(tmp_path, "old.toml", ARM, SESSION))
    path = tmp_path / "s.json"
    archive.save(new_session(cfg.name, cfg.settings, cfg.prompts, cfg.arms), path)
    return path


@pytest.mark.parametrize(
    "arm_change, session_change, prompt, named",
    [
        ({"base_url": "http://127.0.0.1:10/v1"}, {}, PROMPT,
         "arm 'a' base_url ('http://127.0.0.1:9/v1' archived, 'http://127.0.0.1:10/v1' in the config)"),
        ({"model": "m2"}, {}, PROMPT, "arm 'a' model ('m' archived, 'm2' in the config)"),
        ({"api": "completions"}, {}, PROMPT, "arm 'a' api ('chat' archived, 'completions' in the config)"),
        ({"extra_body": "{ top_k = 5 }"}, {}, PROMPT, "arm 'a' extra_body;"),
        ({}, {"temperature": "0.7"}, PROMPT, "temperature (0.0 archived, 0.7 in the config)"),
        ({}, {"max_tokens": "32"}, PROMPT, "max_tokens (16 archived, 32 in the config)"),
        ({}, {"ignore_eos": "false"}, PROMPT, "ignore_eos (True archived, False in the config)"),
        ({}, {}, "Write other code", "prompt 'p' text;"),
    ],
    ids=["base_url", "model", "api", "extra_body", "temperature", "max_tokens", "ignore_eos", "prompt"],
)
@pytest.mark.parametrize("how", [["--resume"], ["--arms", "a"]])
def test_a_changed_config_is_refused_naming_the_field(
    tmp_path: Path, archived: Path, arm_change: dict[str, str], session_change: dict[str, str], prompt: str,
    named: str, how: list[str],
) -> None:
    before = archived.read_bytes()
    config = write(tmp_path, "new.toml", ARM | arm_change, SESSION | session_change, prompt)
    result = invoke("record", "--config", config, "--out", archived, *how)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and named in lines[0] and "--force-config" in lines[0], result.stderr
    assert str(archived) in lines[0] and "Traceback" not in result.stderr
    assert archived.read_bytes() == before


def test_force_config_records_anyway(tmp_path: Path, make_sim) -> None:
    cluster = make_sim(SEED_LADDER[:1])
    old = write_config(tmp_path / "old.toml", cluster, max_tokens=8, prompts="builtin:ladder4")
    session = tmp_path / "s.json"
    cfg = load_config(old)
    archive.save(new_session(cfg.name, cfg.settings, cfg.prompts, cfg.arms), session)
    changed = tmp_path / "new.toml"
    changed.write_text(old.read_text().replace("[[arms]]", '[[arms]]\nextra_body = { top_k = 5 }'), encoding="utf-8")
    refused = invoke("record", "--config", changed, "--out", session, "--resume", "--no-preflight")
    assert refused.exit_code == 2 and "extra_body" in refused.stderr
    forced = invoke("record", "--config", changed, "--out", session, "--resume", "--no-preflight", "--force-config")
    assert forced.exit_code == 0, forced.output
    recorded = archive.load(session)
    assert recorded.arms[0].extra_body == {"top_k": 5} and all(run.status == "ok" for run in recorded.runs)
    assert len(recorded.runs) == 4
