"""verify checks everything a manifest claims and what is on disk (issue 11, item 4): an edited
field, a renamed output, an output that is a symlink, directory or FIFO, and a session file
replaced while it was being rendered are never "identical"."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

from tests.test_render_encode import CHUNK, SMALL, write_session
from tokenreel.renderer import verify
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render import render


@pytest.fixture
def rendered(tmp_path: Path) -> Path:
    session_file = write_session(tmp_path / "session.json")
    return render(session_file, tmp_path / "out.mp4", SMALL, chunk_frames=CHUNK).manifest


def edit(manifest: Path, **changes: object) -> None:
    data = orjson.loads(manifest.read_bytes())
    data.update(changes)
    manifest.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))


def cli_verify(*args: object, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tokenreel", "verify", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def test_renamed_output_field_does_not_leave_a_tampered_video_unchecked(rendered: Path, tmp_path: Path) -> None:
    video = tmp_path / "out.mp4"
    video.write_bytes(video.read_bytes()[:-1] + b"\x01")
    edit(rendered, output="other.mp4")  # other.mp4 is not on disk: "compared with the manifest" before
    [result] = verify.verify([rendered])
    assert not result.ok and result.exit_code == 1, result.message
    assert "other.mp4" in result.message and "out.mp4.render.json" in result.message


@pytest.mark.parametrize("field", ["versions", "encoder_args"])
def test_an_edited_field_is_detected(rendered: Path, field: str) -> None:
    data = orjson.loads(rendered.read_bytes())
    if field == "versions":
        edit(rendered, versions={**data["versions"], "ffmpeg": "ffmpeg version 1.0"})
    else:
        edit(rendered, encoder_args=[[*data["encoder_args"][0][:-1], "-an", "{chunk}"], data["encoder_args"][1]])
    [result] = verify.verify([rendered])
    assert not result.ok and result.exit_code == 1 and "edited" in result.message, result.message


def test_a_changed_poster_frame_is_detected(tmp_path: Path) -> None:
    session_file = write_session(tmp_path / "session.json")
    manifest = render(session_file, tmp_path / "poster.png", RenderOptions(size="320x180", fps=10, at="1")).manifest
    assert orjson.loads(manifest.read_bytes())["poster_frame"] == 10
    edit(manifest, poster_frame=11)
    [result] = verify.verify([manifest])
    assert not result.ok and result.exit_code == 1, result.message


def test_reformatting_a_manifest_is_not_an_edit(rendered: Path) -> None:
    rendered.write_bytes(orjson.dumps(orjson.loads(rendered.read_bytes())))  # one line, same content
    [result] = verify.verify([rendered])
    assert result.ok, result.message


def test_a_missing_output_verifies_against_the_manifest_unless_required(rendered: Path, tmp_path: Path) -> None:
    """The archived manifests ship without their videos: the re-render is compared with the
    manifest's hashes and the line says so; --require-output makes the absence a difference."""
    (tmp_path / "out.mp4").unlink()
    lenient = cli_verify(rendered)
    assert lenient.returncode == 0 and "out.mp4 not on disk" in lenient.stdout, lenient.stderr
    strict = cli_verify(rendered, "--require-output")
    assert strict.returncode == 1 and "out.mp4 is not on disk" in strict.stderr, strict.stderr


@pytest.mark.parametrize("kind", ["dangling symlink", "symlink", "directory", "fifo"])
def test_an_output_that_is_not_a_regular_file_differs(rendered: Path, tmp_path: Path, kind: str) -> None:
    video = tmp_path / "out.mp4"
    if kind == "symlink":
        video.rename(tmp_path / "elsewhere.mp4")
        video.symlink_to(tmp_path / "elsewhere.mp4")
    else:
        video.unlink()
        if kind == "dangling symlink":
            video.symlink_to(tmp_path / "gone.mp4")
        elif kind == "directory":
            video.mkdir()
        else:
            os.mkfifo(video)
    result = cli_verify(rendered, timeout=120)  # a FIFO must not hang it
    assert result.returncode == 1, result.stdout + result.stderr
    assert "not a regular file" in result.stderr and "Traceback" not in result.stderr


def test_the_session_is_hashed_from_the_bytes_that_were_rendered(tmp_path: Path) -> None:
    """While the file is replaced over and over (two sessions that draw different title cards),
    every manifest must name the hash of the session its frames came from."""
    first = write_session(tmp_path / "a.json")
    second = tmp_path / "b.json"
    data = orjson.loads(first.read_bytes())
    second.write_bytes(orjson.dumps({**data, "name": "Another ladder, another title"}))
    options = RenderOptions(size="320x180", fps=10, at="0")
    expected = {}
    for source in (first, second):
        result = render(source, tmp_path / f"{source.stem}.png", options)
        expected[hashlib.sha256(source.read_bytes()).hexdigest()] = result.frame_sha256
    assert len({frames for frames in expected.values()}) == 2
    target = tmp_path / "session.json"
    target.write_bytes(first.read_bytes())
    stop = threading.Event()

    def swap() -> None:
        sources = [first.read_bytes(), second.read_bytes()]
        i = 0
        while not stop.is_set():
            staged = tmp_path / "staged.json"
            staged.write_bytes(sources[i % 2])
            os.replace(staged, target)
            i += 1

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        for attempt in range(30):
            result = render(target, tmp_path / "raced.png", options)
            recorded = orjson.loads(result.manifest.read_bytes())["session_sha256"]
            assert expected[recorded] == result.frame_sha256, f"attempt {attempt}: the manifest names another session"
    finally:
        stop.set()
        swapper.join()
