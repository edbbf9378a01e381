"""The user-facing text: README, docs/ and every command's --help read as documentation, and the
README's quick start runs as written.

The docs site's build (`mkdocs build --strict`: no broken link, no page left out) runs in `make
test`, not here.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tokenreel.cli import app
from tokenreel.simulator.profiles import SEED_LADDER
from tokenreel.simulator.server import SimCluster, running

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
# The simulator at half its profiles' real timing: slow enough that a busy 2-core machine still reads
# a 32-token stream in several reads (at 50x the whole stream can arrive in one, leaving no decode).
TIME_SCALE = 0.5

# Words of a development log, and paths of a development machine: a reader has no use for them.
DEV_LOG = {
    "an issue number": re.compile(r"\bissues? #?\d+", re.I),
    "a session number": re.compile(r"\bsessions? \d+\b(?!\.\d)", re.I),
    "a stop number": re.compile(r"\bstop \d+\b", re.I),
    "a helper": re.compile(r"\bhelpers?\b", re.I),
    "a lent machine": re.compile(r"\blent\b", re.I),
    "this workplace": re.compile(r"\bworkplace\b", re.I),
    "a machine path": re.compile(r"(?<![\w.$])/(?:work|root)/|(?<![\w.$])/home/[a-z_][\w-]*/|/tmp/pytest"),
}


def dev_log_words(text: str) -> list[str]:
    """Each line holding a development-log word, as `line N: what (the line)`."""
    return [f"line {number}: {what}: {line.strip()[:120]}"
            for number, line in enumerate(text.splitlines(), 1)
            for what, pattern in DEV_LOG.items() if pattern.search(line)]


def doc_files() -> list[Path]:
    return [README, *sorted((REPO / "docs").rglob("*.md"))]


def command_paths(command: object, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command and sub-command of the CLI, as the words that name it (a group has `commands`)."""
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from command_paths(sub, (*path, name))


def test_dev_log_words_are_caught() -> None:
    """The patterns catch what they are for, and leave ordinary prose alone."""
    assert dev_log_words("as issue 26 asked\nthe session 3 wording\nsee /work/main/x\n/home/ann/x")
    assert len(dev_log_words("at stop 4\nthe lent H200 machine\nour helpers\n/tmp/pytest-1/a")) == 4
    assert dev_log_words("a session of 4 prompts\nthe session 4.4 s\n/tmp/site\n$HOME/.cache\nsessions/x.json\n") == []


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_docs_read_as_documentation(path: Path) -> None:
    found = dev_log_words(path.read_text(encoding="utf-8"))
    assert not found, f"{path.relative_to(REPO)}: development-log words:\n" + "\n".join(found)


def test_help_texts_read_as_documentation() -> None:
    """Every command's --help, rendered through the CLI as a user sees it."""
    runner = CliRunner()
    paths = list(command_paths(typer.main.get_command(app)))
    assert len(paths) > 10  # the walk found the commands
    problems = []
    for path in paths:
        done = runner.invoke(app, [*path, "--help"], terminal_width=100)
        assert done.exit_code == 0, (path, done.output)
        problems += [f"tokenreel {' '.join(path)} --help: {line}" for line in dev_log_words(done.output)]
    assert not problems, "\n".join(problems)


def quick_start() -> list[str]:
    """The `tokenreel ...` lines of the README's quick start, in order, as written."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Your own ladder in five minutes", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    return [line.split("  #", 1)[0].strip() for block in blocks for line in block.splitlines()
            if line.startswith("tokenreel ")]


def to_simulator(config: str, cluster: SimCluster) -> str:
    """The config `init` wrote, pointed at the simulator and shrunk to a few seconds' recording.

    Arm i gets the seed ladder's i-th profile: its base_url, metrics_url and model. The suite
    becomes builtin:ladder4 at 32 tokens, 1 warmup and 1 repeat; keys naming what only a real
    server has (api_key_env, tokenizer, launch) are dropped. Everything else stays as init wrote it.
    """
    arm = -1
    out = []
    for line in config.splitlines():
        key = line.split("=", 1)[0].strip() if "=" in line and not line.lstrip().startswith("#") else ""
        if line.strip() == "[[arms]]":
            arm += 1
        if key in ("api_key_env", "tokenizer", "launch", "ready_url", "metrics_url"):
            continue
        profile = SEED_LADDER[arm] if 0 <= arm < len(SEED_LADDER) else None
        replaced = {
            "prompts": '"builtin:ladder4"', "max_tokens": "32", "warmup": "1", "repeats": "1",
            "base_url": f'"{cluster.base_url(profile.id)}"' if profile else None,
            "model": f'"{profile.model}"' if profile else None,
        }.get(key)
        out.append(f"{key} = {replaced}" if replaced else line)
        if key == "base_url" and profile:
            out.append(f'metrics_url = "{cluster.metrics_url(profile.id)}"')
    return "\n".join(out) + "\n"


def run(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(line)
    return subprocess.run([sys.executable, "-m", "tokenreel", *argv[1:]], cwd=cwd, capture_output=True,
                          text=True, timeout=300, check=False)


def test_quick_start_runs_as_written(tmp_path: Path) -> None:
    """Every command of the README's quick start, in order, exactly as written, in a fresh folder.

    `tokenreel init` writes the starter config; the servers the user would start are the
    simulator's seed ladder, so the test keeps init's file as `ladder.init.toml` and writes
    `ladder.toml` as its copy with the simulator's URLs and models and a short suite
    (`to_simulator`). Then `record --check`, `record`, `report` and `render` run as written.
    """
    commands = quick_start()
    assert [c.split()[1] for c in commands] == ["init", "record", "record", "report", "render"], commands
    with running(SEED_LADDER, time_scale=TIME_SCALE) as cluster:
        for line in commands:
            done = run(line, tmp_path)
            assert done.returncode == 0, f"{line}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
            if line.split()[1] == "init":
                written = tmp_path / "ladder.toml"
                assert "[[arms]]" in written.read_text(encoding="utf-8")
                written.rename(tmp_path / "ladder.init.toml")
                written.write_text(to_simulator((tmp_path / "ladder.init.toml").read_text(encoding="utf-8"),
                                                cluster), encoding="utf-8")
                assert run(line, tmp_path).returncode != 0  # init refuses to overwrite without --force
    assert (tmp_path / "sessions" / "ladder.json").is_file()
    assert (tmp_path / "out" / "code.mp4").stat().st_size > 0
