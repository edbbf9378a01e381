"""What render, report and verify open and where render writes (issue 11, items 3 and 5): only
regular files of bounded size are read, the replay has a length cap, a prompt id cannot choose a
path outside out/, and a manifest cannot make verify open what it likes."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.session_factory import MS, session, stream, words
from tests.test_render_encode import SMALL, write_session
from tokenreel.renderer import verify
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render import render
from tokenreel.renderer.render_plan import build_plan
from tokenreel.session import archive

GIB = 1 << 30


def limited() -> None:
    """Whatever the code under test does, it may not take more than 2 GiB (old code read
    /dev/zero until the machine ran out)."""
    resource.setrlimit(resource.RLIMIT_AS, (2 * GIB, 2 * GIB))


def tokenreel(*args: object, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tokenreel", *map(str, args)], capture_output=True, text=True, timeout=timeout,
        cwd=cwd, preexec_fn=limited,
    )


def test_report_refuses_a_device_at_once() -> None:
    result = tokenreel("report", "/dev/zero")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == "tokenreel: /dev/zero: is not a regular file (a character device), expected a session file"


@pytest.mark.parametrize("command", ["report", "render"])
def test_a_fifo_as_the_session_is_refused_without_hanging(tmp_path: Path, command: str) -> None:
    fifo = tmp_path / "session.json"
    os.mkfifo(fifo)
    result = tokenreel(command, fifo, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "is not a regular file (a FIFO), expected a session file" in result.stderr


def test_a_fifo_as_a_manifest_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "out.mp4.render.json"
    os.mkfifo(fifo)
    result = tokenreel("verify", fifo)
    assert result.returncode == 2 and "is not a regular file (a FIFO), expected a render manifest" in result.stderr


def test_files_past_the_size_bound_say_what_they_are(tmp_path: Path) -> None:
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as handle:  # sparse: no disk space used
        handle.truncate(257 << 20)
    result = tokenreel("report", huge)
    assert result.returncode == 2
    assert result.stderr.strip() == f"tokenreel: {huge}: larger than 256 MiB, the most tokenreel reads as a session file"
    manifest = tmp_path / "out.mp4.render.json"
    huge.rename(manifest)
    [checked] = verify.verify([manifest])
    assert checked.exit_code == 2 and "larger than 256 MiB, the most tokenreel reads as a render manifest" in checked.message


def long_session(path: Path, minutes: int) -> Path:
    """Two arms whose runs last `minutes` minutes (30 tokens, evenly spaced)."""
    step = minutes * 60_000 * MS // 30
    archive.save(session([("slow", "bf16", [stream(words(30), 300 * MS, step)]),
                          ("fast", "nvfp4", [stream(words(30), 200 * MS, step // 2)])]), path)
    return path


def test_the_replay_length_is_capped_with_a_clear_error(tmp_path: Path) -> None:
    long = archive.load(long_session(tmp_path / "week.json", 120))
    with pytest.raises(ValueError, match=r"^max_duration: the replay would last 12\d\.\d min .* longer than the 30\.0 min"):
        build_plan(long, SMALL)
    plan = build_plan(long, RenderOptions(size="320x180", fps=10, hold_s="1", max_duration_s="9000"))
    assert plan.clock.replay_frames > 120 * 60 * 10
    result = tokenreel("render", tmp_path / "week.json", "--out", tmp_path / "week.mp4", timeout=60)
    assert result.returncode == 2 and "--max-duration" in result.stderr and not (tmp_path / "week.mp4").exists()


def test_a_prompt_id_cannot_choose_where_render_writes(tmp_path: Path) -> None:
    work = tmp_path / "a" / "b" / "work"
    work.mkdir(parents=True)
    data = orjson.loads(archive.dumps(session([("slow", "bf16", [stream(words(10), 300 * MS, 70 * MS)]),
                                                ("fast", "nvfp4", [stream(words(10), 200 * MS, 25 * MS)])])))
    evil = "/../../../escaped"
    data["prompts"][0]["id"] = evil
    for run in data["runs"]:
        run["prompt"] = evil
    (work / "s.json").write_bytes(orjson.dumps(data))
    result = tokenreel("render", "s.json", "--size", "320x180", "--fps", "10", "--title-s", "0", "--hold-s", "0",
                       cwd=work, timeout=120)
    assert result.returncode == 0, result.stderr
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.mp4"))
    assert written == ["a/b/work/out/s-_.._.._.._escaped.mp4"]


def test_a_manifest_session_path_is_only_opened_when_render_wrote_it(tmp_path: Path) -> None:
    """An edited session path is caught by the manifest's seal before anything is opened."""
    session_file = write_session(tmp_path / "project" / "session.json") if (tmp_path / "project").mkdir() is None else None
    manifest = render(session_file, tmp_path / "project" / "out.mp4", SMALL).manifest
    data = orjson.loads(manifest.read_bytes())
    manifest.write_bytes(orjson.dumps({**data, "session": "../../../../../../../../etc/passwd"}))
    [result] = verify.verify([manifest])
    assert result.status == verify.MANIFEST_EDITED and result.exit_code == 1, result.message


def test_render_refuses_an_output_that_is_a_directory(tmp_path: Path) -> None:
    session_file = write_session(tmp_path / "session.json")
    (tmp_path / "out.mp4").mkdir()
    with pytest.raises(ValueError, match="exists and is not a regular file"):
        render(session_file, tmp_path / "out.mp4", SMALL)
