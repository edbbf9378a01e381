"""The config reference (docs/config.md) is written from the loader's own schema: it is never
stale, every key the loader accepts has its entry, and every example it shows loads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_token_counting import word_tokenizer
from tokenreel.recorder import config
from tokenreel.recorder.config import load_config
from tokenreel.recorder.config_reference import main, reference
from tokenreel.recorder.config_schema import ARM, SESSION, TABLES, TIMEOUTS, Key, toml_value

PAGE = Path(__file__).resolve().parents[1] / "docs" / "config.md"
ARM_TABLE = 'id = "a"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'


def test_the_page_is_the_generators_output() -> None:
    assert PAGE.read_text(encoding="utf-8") == reference(), "regenerate: python -m tokenreel.recorder.config_reference docs/config.md"
    assert main([str(PAGE), "--check"]) == 0


def test_a_stale_page_fails_the_check(tmp_path: Path) -> None:
    stale = tmp_path / "config.md"
    stale.write_text(reference().replace("| `max_tokens` |", "| `max_tokenz` |"), encoding="utf-8")
    assert main([str(stale), "--check"]) == 1


def _sections(page: str) -> dict[str, str]:
    parts = re.split(r"^## `([^`]+)`$", page, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


@pytest.mark.parametrize(("header", "allowed"), [
    ("[session]", config.SESSION_KEYS), ("[session.timeouts]", config.TIMEOUT_KEYS),
    ("[[arms]]", config.ARM_KEYS), ("[arms.timeouts]", config.TIMEOUT_KEYS),
])
def test_every_key_the_loader_accepts_has_its_row(header: str, allowed: tuple[str, ...]) -> None:
    section = _sections(reference())[header]
    rows = re.findall(r"^\| `([a-z_0-9]+)` \| (\S[^|]*) \| ([^|]+) \| `[^`]+` \| (\S[^|]*) \|$", section, flags=re.M)
    assert [row[0] for row in rows] == list(allowed)
    assert all(kind.strip() and default.strip() and doc.strip() for _, kind, default, doc in rows)


def test_every_table_of_the_page_is_one_the_loader_reads() -> None:
    assert list(_sections(reference())) == [table.header for table in TABLES]
    assert {"[arms.settings]", "[arms.extra_body]"} <= set(_sections(reference()))


def test_session_defaults_are_the_settings_defaults(tmp_path: Path) -> None:
    """What the page says an absent key reads as is what the loader puts in `Settings`."""
    (tmp_path / "c.toml").write_text(f"[session]\n[[arms]]\n{ARM_TABLE}", encoding="utf-8")
    loaded = load_config(tmp_path / "c.toml").settings
    checked = [key for key in SESSION if key.name != "timeouts" and hasattr(loaded, key.name)]
    assert len(checked) >= 12
    for key in checked:
        assert key.default == toml_value(getattr(loaded, key.name)), key.name


# What an example needs beside it to load: the keys that go together.
SESSION_CONTEXT = {"ray_resources": ('base_urls = ["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"]\nmodel = "m"\nid = "a"\n')}
ARM_CONTEXT = {
    "base_urls": 'id = "a"\nmodel = "m"\n',
    "metrics_urls": 'id = "a"\nmodel = "m"\nbase_urls = ["http://gpu0:8000/v1", "http://gpu1:8000/v1"]\n',
    "launch": 'id = "a"\nmodel = "m"\nbase_url = "http://127.0.0.1:{port}/v1"\n',
    "ready_url": 'id = "a"\nmodel = "m"\nbase_url = "http://127.0.0.1:{port}/v1"\nlaunch = ["llama-server", "--port", "{port}"]\n',
    "ready_timeout_s": 'id = "a"\nmodel = "m"\nbase_url = "http://127.0.0.1:{port}/v1"\nlaunch = ["llama-server", "--port", "{port}"]\n',
}


def _without(table: str, key: Key) -> str:
    return "".join(line + "\n" for line in table.splitlines() if line.split(" = ")[0] != key.name)


@pytest.mark.parametrize("key", SESSION, ids=lambda key: key.name)
def test_every_session_example_loads(key: Key, tmp_path: Path) -> None:
    word_tokenizer(tmp_path / "tokenizer.json")
    arm = SESSION_CONTEXT.get(key.name, ARM_TABLE)
    (tmp_path / "c.toml").write_text(f"[session]\n{key.name} = {key.example}\n[[arms]]\n{arm}", encoding="utf-8")
    load_config(tmp_path / "c.toml")


@pytest.mark.parametrize("key", ARM, ids=lambda key: key.name)
def test_every_arm_example_loads(key: Key, tmp_path: Path) -> None:
    word_tokenizer(tmp_path / "tokenizer.json")
    arm = _without(ARM_CONTEXT.get(key.name, ARM_TABLE), key)
    target = '[[arms]]\nid = "nvfp4"\nbase_url = "http://127.0.0.1:8/v1"\nmodel = "m"\n' if key.name == "drafts_for" else ""
    (tmp_path / "c.toml").write_text(f"[session]\n{target}[[arms]]\n{arm}{key.name} = {key.example}\n", encoding="utf-8")
    assert load_config(tmp_path / "c.toml").arms[-1].id == ("nvfp4" if key.name == "id" else "a")


@pytest.mark.parametrize("key", TIMEOUTS, ids=lambda key: key.name)
def test_every_timeout_example_loads_in_both_tables(key: Key, tmp_path: Path) -> None:
    text = f"[session]\n[session.timeouts]\n{key.name} = {key.example}\n[[arms]]\n{ARM_TABLE}[arms.timeouts]\n{key.name} = {key.example}\n"
    (tmp_path / "c.toml").write_text(text, encoding="utf-8")
    loaded = load_config(tmp_path / "c.toml")
    assert loaded.settings.timeouts[key.name] == loaded.arms[0].timeouts[key.name] == float(key.example)
