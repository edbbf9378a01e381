"""`tokenreel init` writes a starter ladder that loads as written, whose `record --check` names
each unreachable endpoint on one line, and never overwrites a file without --force."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from tests.test_cli import invoke
from tokenreel.recorder.config import load_config
from tokenreel.recorder.config_schema import ARM, SESSION
from tokenreel.recorder.starter import PLANS, StarterEngine

IDS = ["original", "quantized", "quantized-drafter"]


@pytest.mark.parametrize("engine", list(StarterEngine))
@pytest.mark.parametrize("arms", [1, 2, 3])
def test_the_starter_loads_as_written(engine: StarterEngine, arms: int, tmp_path: Path) -> None:
    path = tmp_path / "ladder.toml"
    result = invoke("init", "--engine", engine.value, "--arms", str(arms), "--out", path)
    assert result.exit_code == 0, result.output
    assert f"wrote {path}" in result.output and "--check" in result.output
    config = load_config(path)
    port = PLANS[engine].port
    assert [arm.id for arm in config.arms] == IDS[:arms]
    assert [arm.base_url for arm in config.arms] == [f"http://127.0.0.1:{port + i}/v1" for i in range(arms)]
    assert [arm.metrics_url for arm in config.arms] == [f"http://127.0.0.1:{port + i}/metrics" for i in range(arms)]
    assert [arm.drafts_for for arm in config.arms] == [None, None, "quantized"][:arms]
    assert config.name == "ladder" and config.settings.ignore_eos and config.settings.max_tokens == 512
    assert all(arm.settings.get("quantization") for arm in config.arms)
    text = path.read_text(encoding="utf-8")
    starts = re.findall(r"^#   (\S.*--port (\d+).*)$", text, flags=re.M)
    assert [int(found) for _, found in starts] == [port + i for i in range(arms)]  # one start command per arm, on its port


def test_every_key_written_says_what_it_is_for(tmp_path: Path) -> None:
    path = tmp_path / "ladder.toml"
    assert invoke("init", "--out", path).exit_code == 0
    lines = path.read_text(encoding="utf-8").splitlines()
    docs = {key.name: key.doc for key in (*SESSION, *ARM)}
    first_arm = lines.index("[[arms]]")
    second_arm = lines.index("[[arms]]", first_arm + 1)
    for i, line in enumerate(lines[:second_arm]):
        key = line.split(" = ")[0]
        if key in docs and not line.startswith("#"):
            comment = []
            for above in reversed(lines[:i]):
                if not above.startswith("# "):
                    break
                comment.insert(0, above[2:])
            assert " ".join(comment) == docs[key], key


def test_vllm_starter_turns_on_every_per_request_figure(tmp_path: Path) -> None:
    path = tmp_path / "ladder.toml"
    assert invoke("init", "--engine", "vllm", "--out", path).exit_code == 0
    starts = [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("#   vllm serve")]
    assert len(starts) == 3 and all("--enable-per-request-metrics" in line for line in starts)
    assert "--per-request-spec-decode-metrics summary" in starts[2] and "--speculative-config" in starts[2]


@contextmanager
def closed_ports(count: int) -> Iterator[list[int]]:
    """Ports bound on loopback and not listening: a connection there is refused, and nothing
    else can take them while the test runs."""
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
        yield ports


@pytest.mark.parametrize("engine", list(StarterEngine))
def test_record_check_names_each_unreachable_endpoint_on_one_line(engine: StarterEngine, tmp_path: Path) -> None:
    path = tmp_path / "ladder.toml"
    assert invoke("init", "--engine", engine.value, "--out", path).exit_code == 0
    port = PLANS[engine].port
    with closed_ports(3) as ports:
        text = path.read_text(encoding="utf-8")
        for i, closed in enumerate(ports):  # the default ports may serve something on this machine
            text = text.replace(f"127.0.0.1:{port + i}/", f"127.0.0.1:{closed}/")
        path.write_text(text, encoding="utf-8")
        result = invoke("record", "--config", path, "--check")
    assert result.exit_code == 2, result.output
    problems = [line.strip() for line in result.output.splitlines() if "unreachable" in line]
    assert [line.split(":")[0] for line in problems] == IDS
    assert all("connection refused" in line and f":{closed}/" in line for line, closed in zip(problems, ports, strict=True))
    assert "Traceback" not in result.output


def test_init_never_overwrites_without_force(tmp_path: Path) -> None:
    path = tmp_path / "ladder.toml"
    path.write_text("# mine\n", encoding="utf-8")
    refused = invoke("init", "--out", path)
    assert refused.exit_code == 2 and len(refused.output.strip().splitlines()) == 1
    assert "already exists; pass --force" in refused.output and path.read_text(encoding="utf-8") == "# mine\n"
    forced = invoke("init", "--out", path, "--force", "--arms", "1")
    assert forced.exit_code == 0 and [arm.id for arm in load_config(path).arms] == ["original"]


def test_init_writes_ladder_toml_in_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert invoke("init", "--engine", "sglang").exit_code == 0
    assert load_config(tmp_path / "ladder.toml").arms[0].base_url == "http://127.0.0.1:30000/v1"


@pytest.mark.parametrize("args", [("--arms", "4"), ("--arms", "0"), ("--engine", "tgi")])
def test_bad_options_are_bad_input(args: tuple[str, ...], tmp_path: Path) -> None:
    result = invoke("init", "--out", tmp_path / "x.toml", *args)
    assert result.exit_code == 2 and not (tmp_path / "x.toml").exists()
