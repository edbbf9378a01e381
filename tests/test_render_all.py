"""`tokenreel render-all` (issue 28, item 3, locally): a catalogue of 2 layouts x 2 themes of one
prompt of the archived seed session, short (no title card, no end card, small frames). Every
video, poster and manifest is written, the index page lists them, a video is byte for byte what
`render` writes, a second run keeps them all, --force and a changed file render again, a video
that cannot be rendered is said while the rest go on, bad input is one line and exit 2, an
interrupted catalogue leaves only whole files, and `verify DIR` passes. Real processes, real ffmpeg."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.test_cli import run_cli
from tests.test_render_signals import REPO, SESSION

SHORT = ["--hold-s", "0", "--title-s", "0", "--workers", "1"]
ARGS = ["--layouts", "640x360,360x640", "--themes", "dark,light", "--prompts", "code-1", *SHORT]
NAMES = [f"code-1-{layout}-{theme}" for layout in ("640x360", "360x640") for theme in ("dark", "light")]


def outputs(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """The seed session copied into a folder, and its catalogue in DIR, rendered once."""
    root = tmp_path_factory.mktemp("catalogue")
    session = root / "seed.json"
    shutil.copyfile(SESSION, session)
    result = run_cli("render-all", session, "--out", root / "DIR", *ARGS)
    return session, root / "DIR", result


def test_every_video_has_its_poster_manifests_and_a_line(catalogue) -> None:
    _, folder, result = catalogue
    assert result.returncode == 0, result.stderr
    expected = sorted(folder / "seed" / f"{name}{ext}" for name in NAMES
                      for ext in (".mp4", ".mp4.render.json", ".png", ".png.render.json"))
    assert outputs(folder) == sorted([*expected, folder / "index.html"])
    assert [line.split(": ")[0] for line in result.stdout.splitlines()] == ["rendered"] * 4 + ["index"]
    assert result.stdout.splitlines()[-1].endswith("(4 videos: 4 rendered, 0 kept, 0 failed)")


def test_the_index_lists_every_video_with_its_poster(catalogue) -> None:
    _, folder, _ = catalogue
    page = (folder / "index.html").read_text()
    videos = re.findall(r'<video controls preload="none" poster="([^"]+)" src="([^"]+)"></video>', page)
    assert videos == [(f"seed/{name}.png", f"seed/{name}.mp4") for name in NAMES]
    for poster, video in videos:
        assert (folder / poster).is_file() and (folder / video).is_file()
    assert "<script" not in page and "<h2>seed</h2>" in page and "<h3>code-1</h3>" in page
    assert "640x360 · dark" in page and "360x640 · light" in page


def test_a_catalogue_video_and_poster_are_the_bytes_render_writes(catalogue, tmp_path: Path) -> None:
    session, folder, _ = catalogue
    common = [session, "--prompt", "code-1", "--size", "360x640", "--theme", "light", *SHORT]
    for ext in (".mp4", ".png"):
        result = run_cli("render", *common, "-o", tmp_path / f"one{ext}")
        assert result.returncode == 0, result.stderr
        assert (tmp_path / f"one{ext}").read_bytes() == (folder / "seed" / f"code-1-360x640-light{ext}").read_bytes()


def test_a_second_run_keeps_every_video_and_writes_the_same_index(catalogue) -> None:
    session, folder, _ = catalogue
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in outputs(folder)}
    result = run_cli("render-all", session, "--out", folder, *ARGS)
    assert result.returncode == 0, result.stderr
    assert [line.split(": ")[0] for line in result.stdout.splitlines()] == ["kept"] * 4 + ["index"]
    assert "catalogue" not in result.stderr  # nothing to render: no bar
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in outputs(folder)}
    index = folder / "index.html"
    assert {p: v for p, v in after.items() if p != index} == {p: v for p, v in before.items() if p != index}
    assert after[index][1] == before[index][1]


def test_force_and_a_changed_file_render_again_the_same_bytes(catalogue) -> None:
    session, folder, _ = catalogue
    video = folder / "seed" / "code-1-640x360-dark.mp4"
    original = video.read_bytes()
    video.write_bytes(original + b"\0")  # no longer the file its manifest hashed
    result = run_cli("render-all", session, "--out", folder, *ARGS)
    assert result.returncode == 0, result.stderr
    assert [line.split(": ")[0] for line in result.stdout.splitlines()] == ["rendered"] + ["kept"] * 3 + ["index"]
    assert video.read_bytes() == original
    before = {p: p.read_bytes() for p in outputs(folder)}
    forced = run_cli("render-all", session, "--out", folder, *ARGS, "--force")
    assert forced.returncode == 0, forced.stderr
    assert [line.split(": ")[0] for line in forced.stdout.splitlines()] == ["rendered"] * 4 + ["index"]
    assert {p: p.read_bytes() for p in outputs(folder)} == before


def test_verify_passes_on_the_catalogue(catalogue) -> None:
    _, folder, _ = catalogue
    result = run_cli("verify", folder, "--workers", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert len([line for line in result.stdout.splitlines() if line.startswith("ok: ")]) == 8


def test_a_video_that_cannot_be_rendered_is_said_and_the_rest_go_on(tmp_path: Path) -> None:
    data = orjson.loads(SESSION.read_bytes())
    data["runs"] = [run for run in data["runs"] if (run["arm"], run["prompt"]) != ("nvfp4", "prose-1")]
    session = tmp_path / "holes.json"
    session.write_bytes(orjson.dumps(data))
    result = run_cli("render-all", session, "--out", tmp_path / "DIR", "--layouts", "640x360", "--themes", "dark",
                     "--prompts", "prose-1,code-1", *SHORT)
    assert result.returncode == 1, result.stderr
    failed = [line for line in result.stderr.splitlines() if line.startswith("failed: ")]
    assert len(failed) == 1 and "prose-1-640x360-dark.mp4: arms: arm 'nvfp4' has no usable measured run" in failed[0]
    assert result.stdout.splitlines()[0] == f"rendered: {tmp_path / 'DIR' / 'holes' / 'code-1-640x360-dark.mp4'}"
    assert not (tmp_path / "DIR" / "holes" / "prose-1-640x360-dark.mp4").exists()
    assert "not rendered: arms: arm &#x27;nvfp4&#x27;" in (tmp_path / "DIR" / "index.html").read_text()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--layouts", "16:10"], "layouts: unknown layout '16:10'"),
        (["--themes", "dark,blue"], "theme: unknown theme 'blue'"),
        (["--prompts", "nope"], "prompts: no prompt 'nope' in"),
        (["--arms", "bf16,x"], "arms: no arm 'x'"),
        (["--layouts", "9:16,9:16"], "layouts: two layouts would both write"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], words: str) -> None:
    result = run_cli("render-all", SESSION, "--out", tmp_path / "DIR", *args)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and words in result.stderr, result.stderr
    assert not (tmp_path / "DIR").exists()


def test_a_missing_session_is_named_in_one_line(tmp_path: Path) -> None:
    result = run_cli("render-all", SESSION, tmp_path / "gone.json", "--out", tmp_path / "DIR")
    assert result.returncode == 2 and result.stderr.splitlines() == [f"tokenreel: {tmp_path / 'gone.json'}: no such file"]


def test_an_interrupted_catalogue_leaves_whole_files_and_goes_on(tmp_path: Path) -> None:
    """SIGTERM while the second video renders: the first is whole and kept next time, the second
    has no file under its name and no staging folder is left."""
    folder = tmp_path / "DIR" / "seed-ladder-demo"
    args = ["render-all", SESSION, "--out", tmp_path / "DIR", "--themes", "dark", "--prompts", "code-1", "--speed", "1/2", *SHORT]
    command = [sys.executable, "-m", "tokenreel", *map(str, args), "--layouts", "640x360,1920x1080"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not any(p.name.startswith(".code-1-1920x1080-dark.mp4.") for p in folder.glob(".*")):
            assert time.monotonic() < deadline and proc.poll() is None, "the second video never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    finally:
        proc.kill()
    assert code == 128 + signal.SIGTERM
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"code-1-640x360-dark{ext}" for ext in (".mp4", ".mp4.render.json", ".png", ".png.render.json")
    )
    again = run_cli(*args, "--layouts", "640x360")
    assert again.returncode == 0 and again.stdout.splitlines()[0].startswith("kept: "), again.stderr


def test_the_command_is_documented() -> None:
    page = run_cli("render-all", "--help").stdout
    assert "<prompt>-<layout>-<theme>.mp4" in page and "index.html" in page and "16:9" in page
    docs = REPO / "docs"
    assert "tokenreel render-all" in (docs / "getting-started.md").read_text(encoding="utf-8")
    assert ".../catalogue/   render-all" in (docs / "architecture.md").read_text(encoding="utf-8")
