"""Config loading: the example loads; every mistake is one line naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenreel.recorder.config import ConfigError, load_config

EXAMPLE = """
[session]
name = "qwen-27b-ladder"
prompts = "builtin:mixed"
max_tokens = 1024
ignore_eos = true
temperature = 0
warmup = 1
repeats = 3
idle_wait_s = 30
[session.timeouts]
first_token = 120

[[arms]]
id = "bf16"
label = "Original · bf16"
base_url = "http://127.0.0.1:8000/v1"
model = "Qwen/Qwen3.8-27B"
api = "chat"
api_key_env = "BF16_API_KEY"
extra_body = { chat_template_kwargs = { enable_thinking = false } }

[[arms]]
id = "nvfp4"
base_url = "http://127.0.0.1:8001/v1/"
model = "ThakiCloud/Qwen3.8-27B-NVFP4-FP8ATTN"
api = "completions"
metrics_url = "http://127.0.0.1:9001/metrics"
[arms.timeouts]
between_chunks = 5
"""


def write(tmp_path: Path, text: str, name: str = "ladder.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_example_config_loads(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, EXAMPLE))
    assert config.name == "qwen-27b-ladder"
    s = config.settings
    assert (s.prompts, s.max_tokens, s.ignore_eos, s.temperature, s.warmup, s.repeats, s.idle_wait_s) == (
        "builtin:mixed", 1024, True, 0.0, 1, 3, 30.0
    )
    assert s.timeouts == {"first_token": 120.0}
    bf16, nvfp4 = config.arms
    assert bf16.label == "Original · bf16" and bf16.api_key_env == "BF16_API_KEY"
    assert bf16.metrics_url == "http://127.0.0.1:8000/metrics"  # derived: /v1 stripped
    assert bf16.extra_body == {"chat_template_kwargs": {"enable_thinking": False}}
    assert nvfp4.label == "nvfp4" and nvfp4.api == "completions"
    assert nvfp4.base_url == "http://127.0.0.1:8001/v1"
    assert nvfp4.metrics_url == "http://127.0.0.1:9001/metrics"
    assert nvfp4.timeouts == {"between_chunks": 5.0}
    assert len(config.prompts) >= 4 and all(p.id and p.category for p in config.prompts)


def test_relative_prompt_path_resolves_against_the_config_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "mine.jsonl").write_text('{"id": "a", "category": "code", "prompt": "Write code"}\n')
    path = write(tmp_path, EXAMPLE.replace('"builtin:mixed"', '"suites/mine.jsonl"'))
    monkeypatch.chdir("/")
    config = load_config(path)
    assert [p.id for p in config.prompts] == ["a"]
    assert config.settings.prompts == "suites/mine.jsonl"  # archived as written


MINIMAL = """
[session]
{session}
[[arms]]
id = "a"
base_url = "http://h:1/v1"
model = "m"
{arm}
"""


@pytest.mark.parametrize(
    ("session", "arm", "field", "hint"),
    [
        ("colour = 1", "", "session.colour", "unknown key"),
        ("", "colour = 1", "arms[0].colour", "unknown key"),
        ('max_tokens = "1024"', "", "session.max_tokens", "must be an integer"),
        ("max_tokens = 0", "", "session.max_tokens", "at least 1"),
        ("ignore_eos = 1", "", "session.ignore_eos", "true or false"),
        ("temperature = -1", "", "session.temperature", "0 or more"),
        ("repeats = 0", "", "session.repeats", "at least 1"),
        ("timeouts = { read = 3 }", "", "session.timeouts.read", "unknown key"),
        ("timeouts = { total = 0 }", "", "session.timeouts.total", "greater than 0"),
        ("", 'api = "responses"', "arms[0].api", '"chat" or "completions"'),
        ("", 'api_key_env = "sk-live-1234"', "arms[0].api_key_env", "never hold the key"),
        ("", "extra_body = { stream = false }", "arms[0].extra_body.stream", "set by the recorder"),
        ("", 'metrics_url = "localhost:8000/metrics"', "arms[0].metrics_url", "http://"),
        ("", "extra_body = 3", "arms[0].extra_body", "must be a table"),
    ],
)
def test_bad_fields_name_file_and_field(tmp_path: Path, session: str, arm: str, field: str, hint: str) -> None:
    path = write(tmp_path, MINIMAL.format(session=session, arm=arm))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: {field}: ")
    assert hint in message


def test_duplicate_arm_ids(tmp_path: Path) -> None:
    text = MINIMAL.format(session="", arm="") + '[[arms]]\nid = "a"\nbase_url = "http://h:2/v1"\nmodel = "m"\n'
    with pytest.raises(ConfigError, match=r"arms\[1\]\.id: duplicate arm id 'a'"):
        load_config(write(tmp_path, text))


def test_missing_fields(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"arms\[0\]\.model: missing"):
        load_config(write(tmp_path, '[session]\n[[arms]]\nid = "a"\nbase_url = "http://h/v1"\n'))
    with pytest.raises(ConfigError, match=r": arms: missing; add at least one \[\[arms\]\]"):
        load_config(write(tmp_path, "[session]\nmax_tokens = 8\n"))
    with pytest.raises(ConfigError, match=r": session: missing"):
        load_config(write(tmp_path, '[[arms]]\nid = "a"\nbase_url = "http://h/v1"\nmodel = "m"\n'))


def test_bad_toml_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "[session]\nmax_tokens = 8\nrepeats = = 3\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}: invalid TOML") and "line 3" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml")


def test_arm_settings_declare_what_the_endpoint_cannot_tell(tmp_path: Path) -> None:
    base = '[session]\nprompts = "builtin:ladder4"\n[[arms]]\nid = "q4"\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "m"\n'
    path = tmp_path / "c.toml"
    path.write_text(base + '[arms.settings]\nquantization = "Q4_0"\ndrafter = "Qwen3-0.6B Q8_0, --draft-max 16"\n')
    assert load_config(path).arms[0].settings == {"quantization": "Q4_0", "drafter": "Qwen3-0.6B Q8_0, --draft-max 16"}
    for body, problem in (
        ("quantization = 4\n", "arms[0].settings.quantization: must be a non-empty string, got an integer"),
        ('flags = "--port 1 --api-key sk-abc"\n', "arms[0].settings.flags: holds a secret flag value"),
    ):
        path.write_text(base + "[arms.settings]\n" + body)
        with pytest.raises(ConfigError) as caught:
            load_config(path)
        assert str(caught.value).startswith(f"{path}: {problem}") and "\n" not in str(caught.value)
        assert "sk-abc" not in str(caught.value)
    path.write_text(base + 'settings = "Q4_0"\n')
    with pytest.raises(ConfigError, match=r"arms\[0\]\.settings: must be a table, got a string"):
        load_config(path)


@pytest.mark.parametrize(
    ("field", "url", "hint"),
    [
        ("base_url", "http://127.0.0.1:99999/v1", "Port out of range"),
        ("base_url", "http://", "has no host"),
        ("base_url", "https:///v1", "has no host"),
        ("base_url", "http://h:0/v1", "port 0 is not a port"),
        ("base_url", "http://h:80x/v1", "is not a valid URL"),
        ("base_url", "http://h/v1?key=1", "query or fragment"),
        ("base_url", "http://h /v1", "spaces or control characters"),
        ("metrics_url", "http://h:123456/metrics", "Port out of range"),
    ],
)
def test_invalid_urls_are_refused_at_load_naming_arm_and_field(tmp_path: Path, field: str, url: str, hint: str) -> None:
    """Issue 11 item 10: a URL no request could reach is a config error, before any endpoint."""
    arm = f'metrics_url = "{url}"' if field == "metrics_url" else ""
    text = MINIMAL.format(session="", arm=arm)
    if field == "base_url":
        text = text.replace('base_url = "http://h:1/v1"', f'base_url = "{url}"')
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: arms[0].{field}: ") and "\n" not in message
    assert hint in message and f"(arm 'a'); fix {field}" in message


@pytest.mark.parametrize("field", ["base_url", "metrics_url"])
def test_credentials_in_a_url_are_refused_without_echoing_them(tmp_path: Path, field: str) -> None:
    """Issue 11 item 6: a key in a URL's userinfo would be archived, printed and drawn."""
    url = "http://user:sk-userinfo-SECRET-91a@127.0.0.1:8000/v1"
    text = MINIMAL.format(session="", arm=f'metrics_url = "{url}"' if field == "metrics_url" else "")
    if field == "base_url":
        text = text.replace('base_url = "http://h:1/v1"', f'base_url = "{url}"')
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    message = str(caught.value)
    assert f"arms[0].{field}: holds credentials" in message and "api_key_env" in message
    assert "sk-userinfo" not in message and "SECRET-91a" not in message


def test_session_hardware_goes_to_every_arm_unless_it_says_its_own(tmp_path: Path) -> None:
    """The end card names the hardware; an engine never says it, so the config may, once."""
    text = EXAMPLE.replace("[session]\n", '[session]\nhardware = "1x NVIDIA H200"\n', 1)
    text = text.replace('enable_thinking = false } }\n', 'enable_thinking = false } }\nsettings = { hardware = "2x NVIDIA B200" }\n', 1)
    bf16, nvfp4 = load_config(write(tmp_path, text)).arms
    assert (bf16.settings["hardware"], nvfp4.settings["hardware"]) == ("2x NVIDIA B200", "1x NVIDIA H200")
    with pytest.raises(ConfigError, match="session.hardware"):
        load_config(write(tmp_path, EXAMPLE.replace("[session]\n", "[session]\nhardware = 3\n", 1)))
