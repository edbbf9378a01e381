"""The CLI reads well in a terminal and in a log.

Help pages carry an example and name values in plain words; the command list is never cut;
output to a pipe never wraps a value; the ladder in a narrow terminal (a real pty) truncates
labels, never numbers; `report -o` takes the format from the extension; `render --prompt`
lists the session's prompt ids. Everything runs the real command on real files and sockets.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import orjson
import pytest

from tests.test_cli import REPO, invoke, run_cli, write_config
from tests.test_recorder_support import seed
from tokenreel.analysis.ladder import build_cells, build_ladder
from tokenreel.session import archive

COMMANDS = ["report", "compare", "plot", "init", "record", "grade", "sweep", "simulate", "render", "render-all",
            "verify", "demo", "plan", "prompts", "import"]
SEED_SESSION = REPO / "sessions" / "seed-ladder-demo.json"
SEED_PROMPTS = ["conversation-1", "reasoning-1", "prose-1", "code-1"]
LONG_LABEL = "Original checkpoint in bf16, served by vLLM with tensor parallel 8 on the old cluster"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def help_page(*command: str, columns: int = 80) -> str:
    result = run_cli(*command, "--help", env={**os.environ, "COLUMNS": str(columns)})
    assert result.returncode == 0, result.stderr
    return result.stdout


def section(page: str, title: str) -> list[str]:
    """The lines of one help section ("Options:", "Commands:"...), up to the next one."""
    lines = page.splitlines()
    if f"{title}:" not in lines:
        return []
    start = lines.index(f"{title}:") + 1
    end = next((i for i in range(start, len(lines)) if lines[i] and not lines[i].startswith(" ")), len(lines))
    return lines[start:end]


@pytest.mark.parametrize("command", [[], *([c] for c in COMMANDS), ["prompts", "import"]],
                         ids=["tokenreel", *COMMANDS, "prompts-import"])
def test_every_help_page_has_an_example_and_plain_metavars(command: list[str]) -> None:
    page = help_page(*command)
    assert "Example" in page
    usage = page.splitlines()[0]
    assert not re.search(r"[{}<>]", usage), usage
    for line in section(page, "Arguments") + section(page, "Options"):
        if line.startswith("  ") and not line.startswith("   "):  # an entry, not a continued help line
            term = re.split(r"\s{2,}", line.strip())[0]
            assert not re.search(r"[{}<>]", term), line
    assert not re.search(r"<(int|float|str|path|list|bool|text|file|dir)\b", page, re.IGNORECASE), page


def test_metavars_are_words_for_the_value() -> None:
    assert "Usage: tokenreel render [OPTIONS] SESSION" in help_page("render")
    assert "Usage: tokenreel verify [OPTIONS] PATH..." in help_page("verify")
    render = help_page("render")
    for entry in ("-o, --out FILE", "--prompt ID", "--arms IDS", "--size WxH", "--fps N", "--at SECONDS"):
        assert entry in render
    record = help_page("record")
    for entry in ("-c, --config FILE", "--arms IDS", "--repeats N", "--warmup N"):
        assert entry in record


def test_prompts_import_help_says_formats_columns_and_the_first_turn() -> None:
    page = " ".join(help_page("prompts", "import").split())
    assert "Usage: tokenreel prompts import [OPTIONS] FILE" in page
    for words in (".jsonl or .json", ".csv", ".parquet", "--id-column COLUMN", "--prompt-column COLUMN",
                  "only the first turn is used", "fewer than 8 prompts", "tokenreel prompts import qualitative.parquet"):
        assert words in page, words


def test_render_help_documents_the_default_out_arms_and_sizes() -> None:
    page = help_page("render")
    assert "out/<session-stem>-<prompt>.mp4" in page
    assert "2 to 4 arms" in page
    for size in ("1920x1080", "3840x2160", "1080x1920"):
        assert size in page


@pytest.mark.parametrize("columns", [60, 80, 200])
def test_top_level_help_lists_every_command_whole(columns: int) -> None:
    page = help_page(columns=columns)
    listing = section(page, "Commands")
    assert listing
    text = "\n".join(listing)
    assert "…" not in text and "..." not in text
    names = [line.split()[0] for line in listing if line.startswith("  ") and not line.startswith("   ")]
    assert names == COMMANDS
    entries = " ".join(" ".join(listing).split())
    assert "Record each arm's token timings into a session file." in entries  # the whole short help


def test_piped_output_keeps_each_value_on_one_line(tmp_path: Path) -> None:
    folder = tmp_path / ("a-folder-name-long-enough-to-pass-eighty-columns-on-its-own" * 2)
    folder.mkdir()
    session = folder / "session.json"
    shutil.copyfile(SEED_SESSION, session)
    video = folder / "replay.mp4"
    env = {**os.environ, "COLUMNS": "40"}  # a pipe never wraps, whatever COLUMNS says
    result = run_cli(
        "render", session, "--prompt", "code-1", "--size", "640x360", "--hold-s", "0", "-o", video, env=env
    )
    assert result.returncode == 0, result.stderr
    manifest = Path(f"{video}.render.json")
    sha256 = orjson.loads(manifest.read_bytes())["output_sha256"]
    lines = result.stdout.splitlines()
    assert f"video: {video}  (" in lines[0] and f"sha256 {sha256[:16]}" in lines[0], result.stdout
    assert lines[1].startswith(f"manifest: {manifest}  ") and lines[1].endswith(f"tokenreel verify {manifest}`)")
    assert len(lines) == 2
    assert all("simulated endpoints" in line for line in result.stderr.splitlines() if "warning" in line)
    still = folder / "poster.png"
    result = run_cli("render", session, "--prompt", "code-1", "--size", "640x360", "--hold-s", "0", "-o", still, env=env)
    assert result.returncode == 0, result.stderr
    frames = orjson.loads(Path(f"{still}.render.json").read_bytes())["frame_count"]
    assert result.stdout.splitlines()[0].startswith(f"image: {still}  (one frame of the {frames}-frame video, sha256 ")


def record_long_label(tmp_path: Path, make_sim, extra_env: dict[str, str], terminal_columns: int | None = None):
    """Record two arms (one with a long label) by the real command; returns (session, output)."""
    cluster = make_sim([seed("bf16", label=LONG_LABEL), seed("nvfp4")])
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=32)
    session = tmp_path / "s.json"
    args = ["record", "--config", config, "--out", session, "--no-preflight"]
    env = {**os.environ, **extra_env}
    if terminal_columns is None:
        result = run_cli(*args, env=env)
        assert result.returncode == 0, result.stderr
        return session, result.stdout
    return session, run_in_terminal(args, env, terminal_columns)


def run_in_terminal(args: list, env: dict[str, str], columns: int) -> str:
    """Run `tokenreel ARGS` with a real pseudo-terminal of `columns` columns as its stdout and
    stderr; returns what it showed, escape sequences removed."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenreel", *map(str, args)], stdin=child, stdout=child, stderr=child, env=env,
    )
    os.close(child)
    chunks, deadline = [], time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            data = os.read(main, 65536)
        except OSError as exc:  # EIO: the child side is closed
            if exc.errno != errno.EIO:
                raise
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    assert proc.wait(timeout=60) == 0, b"".join(chunks).decode(errors="replace")
    return ANSI.sub("", b"".join(chunks).decode())


def ladder_cells(session_path: Path) -> list[list[str]]:
    """The figures each ladder row must show, formatted as the table does."""
    session = archive.load(session_path)

    def num(value: float | None, digits: int = 1, suffix: str = "") -> str:
        return "—" if value is None else f"{value:.{digits}f}{suffix}"

    return [
        [str(step), num(row.decode_tok_s), num(row.vs_prior, 2, "x"), num(row.vs_first, 2, "x"),
         num(row.ttft_s, 2), num(row.acceptance_length, 2)]
        for step, row in enumerate(build_ladder(session, build_cells(session)), start=1)
    ]


def table_rows(text: str) -> list[list[str]]:
    rows = []
    for line in text.replace("\r", "\n").splitlines():
        if line.startswith("│"):
            rows.append([cell.strip() for cell in line.strip().strip("│").split("│")])
    return rows


@pytest.mark.parametrize("colour", ["", "1"], ids=["plain", "FORCE_COLOR"])
def test_piped_ladder_keeps_a_long_label_whole(tmp_path: Path, make_sim, colour: str) -> None:
    extra = {"COLUMNS": "60", "FORCE_COLOR": colour} if colour else {"COLUMNS": "60"}
    session, output = record_long_label(tmp_path, make_sim, extra)  # a CI log may force colours: still no wraps
    output = ANSI.sub("", output)
    expected = ladder_cells(session)
    rows = table_rows(output)[: len(expected)]
    assert [row[1] for row in rows] == [LONG_LABEL, "Quantized · NVFP4"], output
    assert [[row[0], *row[2:]] for row in rows] == expected
    assert "Decode tok/s" in output  # headers are not wrapped either
    assert f"session: {session}  (" in output


def test_ladder_in_a_narrow_terminal_truncates_labels_never_numbers(tmp_path: Path, make_sim) -> None:
    columns = 60
    session, shown = record_long_label(tmp_path, make_sim, {"COLUMNS": str(columns), "NO_COLOR": "1"}, columns)
    expected = ladder_cells(session)
    table = [line for line in shown.replace("\r", "\n").splitlines() if line[:1] in "┏┃┡│└"]
    assert table and all(len(line) <= columns for line in table), "\n".join(table)
    rows = table_rows(shown)
    ladder = [row for row in rows if len(row) == 7][: len(expected)]
    assert [[row[0], *row[2:]] for row in ladder] == expected, "\n".join(table)
    first, second = ladder[0][1], ladder[1][1]
    assert first.endswith("…") and LONG_LABEL.startswith(first[:-1]) and len(first) >= 5, first
    assert second == "Quantized · NVFP4" or (second.endswith("…") and "Quantized · NVFP4".startswith(second[:-1]))


@pytest.mark.parametrize(
    ("name", "fmt", "check"),
    [
        ("r.csv", None, lambda text: text.startswith("arm,prompt,category,")),
        ("r.json", None, lambda text: orjson.loads(text)["format"] == "tokenreel.report"),
        ("r.md", None, lambda text: "| " in text and not text.startswith("{") and not text.startswith("arm,")),
        ("R.CSV", None, lambda text: text.startswith("arm,prompt,category,")),
        ("r.txt", "csv", lambda text: text.startswith("arm,prompt,category,")),
    ],
)
def test_report_out_takes_its_format_from_the_extension(tmp_path: Path, name: str, fmt: str | None, check) -> None:
    target = tmp_path / name
    result = invoke("report", SEED_SESSION, "-o", target, *(["--format", fmt] if fmt else []))
    assert result.exit_code == 0, result.output
    assert check(target.read_text(encoding="utf-8"))


def test_report_format_wins_over_the_extension_and_an_unknown_extension_needs_it(tmp_path: Path) -> None:
    chosen = run_cli("report", SEED_SESSION, "--format", "json", "-o", tmp_path / "r.csv")
    assert chosen.returncode == 0, chosen.stderr
    assert orjson.loads((tmp_path / "r.csv").read_bytes())["format"] == "tokenreel.report"
    (tmp_path / "r.csv").unlink()
    unknown = run_cli("report", SEED_SESSION, "-o", tmp_path / "r.txt")
    assert unknown.returncode == 2 and len(unknown.stderr.strip().splitlines()) == 1
    assert all(ext in unknown.stderr for ext in (".md", ".json", ".csv")) and "r.txt" in unknown.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "args",
    [["--prompt"], ["--prompt", "--size", "160x90"], ["--prompt", "nope"], ["--prompt="]],
    ids=["bare-last", "bare-before-option", "unknown", "empty"],
)
def test_render_prompt_lists_the_sessions_prompt_ids(tmp_path: Path, args: list[str]) -> None:
    result = run_cli("render", SEED_SESSION, "-o", tmp_path / "v.mp4", *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tokenreel: --prompt: ") and f"choose one of {', '.join(SEED_PROMPTS)}" in lines[0]
    assert f"(session {SEED_SESSION})" in lines[0]
    if "nope" in args:
        assert "'nope'" in lines[0]
    assert not list(tmp_path.iterdir())
