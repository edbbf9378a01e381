"""verify: identical re-renders pass; a changed session, a changed renderer, another encoder
and a changed output file are each told apart."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.test_render_encode import CHUNK, SMALL, write_session
from tokenreel.renderer import encode, frames, verify
from tokenreel.renderer import manifest as manifests
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.layout import Rect
from tokenreel.renderer.render import render
from tokenreel.renderer.render_plan import build_plan
from tokenreel.session import archive


def system_ffmpeg() -> str:
    """Debian's ffmpeg, another build than imageio-ffmpeg's (`make test` installs it)."""
    found = shutil.which("ffmpeg", path="/usr/bin:/usr/local/bin")
    if found is None:
        pytest.fail("no system ffmpeg: run `make test` (it installs Debian's ffmpeg) or install ffmpeg")
    return found


@pytest.fixture
def rendered(tmp_path: Path) -> Path:
    """A session and its mp4 render, both in tmp_path; returns the manifest."""
    session_file = write_session(tmp_path / "session.json")
    return render(session_file, tmp_path / "out.mp4", SMALL, chunk_frames=CHUNK).manifest


def delay_from_chunk(session_file: Path, chunk: int, delay_ns: int) -> None:
    """Edit the saved file: the first run's chunks from `chunk` on arrive delay_ns later."""
    data = orjson.loads(session_file.read_bytes())
    t_ns = data["runs"][0]["chunks"]["t_ns"]
    t_ns[chunk:] = [t + delay_ns for t in t_ns[chunk:]]
    session_file.write_bytes(orjson.dumps(data))


def first_differing_frame(before: Path, after: Path) -> int:
    """Straight from the renderer, independently of verify's hashes."""
    a = FrameRenderer(build_plan(archive.load(before), SMALL))
    b = FrameRenderer(build_plan(archive.load(after), SMALL))
    index = 0
    while np.array_equal(a.render(index), b.render(index)):
        index += 1
    return index


def test_untouched_render_is_identical(rendered: Path) -> None:
    [result] = verify.verify([rendered])
    assert result.ok and result.status == verify.IDENTICAL, result.message
    assert result.message.startswith("identical: ") and result.first_differing_frame is None


def test_png_and_gif_verify_too(tmp_path: Path) -> None:
    session_file = write_session(tmp_path / "session.json")
    paths = [render(session_file, tmp_path / f"out.{ext}", SMALL).manifest for ext in ("png", "gif")]
    results = verify.verify(paths)
    assert [r.status for r in results] == [verify.IDENTICAL] * 2
    png, gif = (manifests.load(p) for p in paths)
    assert results[0].message.startswith(f"identical: the image (frame {png.poster_frame} of the {png.frame_count}-frame video), sha256 ")
    assert results[1].message.startswith(f"identical: {gif.frame_count} frames, sha256 ")


def test_changed_session_names_the_first_differing_frame(rendered: Path, tmp_path: Path) -> None:
    session_file = tmp_path / "session.json"
    original = tmp_path / "original.json"
    shutil.copy(session_file, original)
    delay_from_chunk(session_file, chunk=15, delay_ns=400_000_000)
    expected = first_differing_frame(original, session_file)
    assert 0 < expected < manifests.load(rendered).frame_count - 1  # a frame in the middle
    [result] = verify.verify([rendered])
    assert not result.ok and result.status == verify.SESSION_CHANGED
    assert result.first_differing_frame == expected
    assert result.message.startswith(f"session changed since the render: frames differ from frame {expected} on")


def test_missing_session_is_reported(rendered: Path, tmp_path: Path) -> None:
    (tmp_path / "session.json").rename(tmp_path / "elsewhere.json")
    [result] = verify.verify([rendered])
    assert result.status == verify.SESSION_MISSING
    assert result.message == (
        f"cannot re-render: the session file it was rendered from, {tmp_path / 'session.json'}, is missing (put it back there)"
    )


def test_paths_are_said_without_the_manifests_hops(tmp_path: Path) -> None:
    """Before: "session file out/l/../../ml/session.json is missing"."""
    (tmp_path / "ml").mkdir()
    session_file = write_session(tmp_path / "ml" / "session.json")
    manifest = render(session_file, tmp_path / "out" / "l" / "out.png", SMALL).manifest
    assert manifests.load(manifest).session == "../../ml/session.json"
    session_file.unlink()
    [result] = verify.verify([manifest])
    assert ".." not in result.message and str(tmp_path / "ml" / "session.json") in result.message


def test_changed_renderer_is_frames_differ_with_the_session_unchanged(rendered: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A renderer that draws frame 20 on differently: verify re-renders in this process (one
    worker), so patching the renderer here stands for a new tokenreel version."""
    draw = frames.FrameRenderer.frame

    def changed(self: FrameRenderer, index: int) -> tuple[np.ndarray, tuple[Rect, ...] | None]:
        pixels, regions = draw(self, index)
        if index < 20:
            return pixels, regions
        pixels = pixels.copy()
        pixels[0, 0] ^= 1
        return pixels, None

    monkeypatch.setattr(frames.FrameRenderer, "frame", changed)
    [result] = verify.verify([rendered])
    assert result.status == verify.FRAMES_DIFFER and result.first_differing_frame == 20
    assert "frames differ from frame 20 on" in result.message and "session is unchanged" in result.message


def test_another_encoder_recipe_is_an_encoding_difference(rendered: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Verify with another x264 preset, as after a tokenreel upgrade that changed the recipe:
    a real re-encode of the same frames."""
    monkeypatch.setattr(encode, "X264_PRESET", "ultrafast")
    [result] = verify.verify([rendered])
    assert result.status == verify.ENCODING_DIFFERS and result.first_differing_frame is None
    frame_count = manifests.load(rendered).frame_count
    assert result.message == f"all {frame_count} frames identical, encoded bytes differ: the encoder arguments changed"


def test_another_ffmpeg_is_an_encoding_difference_naming_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Render with the system's ffmpeg through IMAGEIO_FFMPEG_EXE (the way it happens to users),
    verify with the bundled one. A GIF: Debian's ffmpeg 5.1 writes the same mp4 bytes as the
    bundled 9.0.2, but not the same GIF."""
    session_file = write_session(tmp_path / "session.json")
    monkeypatch.setenv("IMAGEIO_FFMPEG_EXE", system_ffmpeg())
    before = render(session_file, tmp_path / "out.gif", SMALL)
    monkeypatch.delenv("IMAGEIO_FFMPEG_EXE")
    bundled = render(session_file, tmp_path / "bundled" / "out.gif", SMALL)
    assert before.output_sha256 != bundled.output_sha256, f"{before.ffmpeg_version} wrote the bundled ffmpeg's bytes: nothing to tell apart"
    [result] = verify.verify([before.manifest])
    assert result.status == verify.ENCODING_DIFFERS and result.first_differing_frame is None
    assert result.message.startswith(f"all {before.frame_count} frames identical, encoded bytes differ: ffmpeg then: ")
    assert f"{before.ffmpeg_version!r} (IMAGEIO_FFMPEG_EXE: ffmpeg)" in result.message
    assert f"now: {bundled.ffmpeg_version!r} (imageio-ffmpeg " in result.message


def test_changed_output_file_is_reported(rendered: Path, tmp_path: Path) -> None:
    video = tmp_path / "out.mp4"
    video.write_bytes(video.read_bytes()[:-1] + b"\x00")
    [result] = verify.verify([rendered])
    assert result.status == verify.OUTPUT_CHANGED
    assert result.message.startswith("out.mp4 on disk was changed after it was rendered: its bytes differ from the manifest's,")


def test_missing_output_file_still_verifies_against_the_manifest(rendered: Path, tmp_path: Path) -> None:
    (tmp_path / "out.mp4").unlink()
    [result] = verify.verify([rendered])
    assert result.ok and "not on disk" in result.message


def test_invalid_manifest_and_one_result_per_manifest(rendered: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.mp4.render.json"
    broken.write_text('{"format": "tokenreel.render", "version": 1}')
    results = verify.verify([rendered, broken, tmp_path / "absent.render.json"])
    assert [r.status for r in results] == [verify.IDENTICAL, verify.INVALID, verify.INVALID]
    assert results[1].message.startswith(f"{broken}: field 'session': missing")
    assert "no such file" in results[2].message


# --- the command: exit codes and folders ------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
SOURCE_ROOTS = ("core", "recorder", "renderer", "simulator", "report", "cli", "assets")


def run_tokenreel(*args: object, pythonpath: Path | None = None, cwd: Path | None = None):
    import os
    import subprocess
    import sys

    env = {**os.environ, **({"PYTHONPATH": str(pythonpath)} if pythonpath else {})}
    return subprocess.run([sys.executable, "-m", "tokenreel", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=cwd)


def test_verify_takes_folders_and_exits_1_naming_the_frame_when_frames_differ(rendered: Path, tmp_path: Path) -> None:
    second = render(tmp_path / "session.json", tmp_path / "more" / "out.gif", SMALL, chunk_frames=CHUNK).manifest
    result = run_tokenreel("verify", tmp_path)
    assert result.returncode == 0, result.stderr
    assert [line.split(": ")[1] for line in result.stdout.splitlines()] == [str(second), str(rendered)]
    delay_from_chunk(tmp_path / "session.json", 3, 200_000_000)
    changed = run_tokenreel("verify", rendered)
    assert changed.returncode == 1 and f"DIFFERS: {rendered}: session changed since the render: frames differ from frame" \
        in changed.stderr


def test_verify_of_a_folder_without_manifests_is_bad_input(tmp_path: Path) -> None:
    result = run_tokenreel("verify", tmp_path)
    assert result.returncode == 2 and "no *.render.json manifests" in result.stderr and "Traceback" not in result.stderr


def test_verify_on_a_broken_install_exits_2_not_1(rendered: Path, tmp_path: Path) -> None:
    """The package laid out as a wheel installs it, without its themes: nothing can be
    re-rendered, which must read as 'could not verify', never as 'differs'."""
    site = tmp_path / "site"
    for root in SOURCE_ROOTS:
        shutil.copytree(REPO / root / "tokenreel", site / "tokenreel", ignore=shutil.ignore_patterns("__pycache__"),
                        dirs_exist_ok=True)
    shutil.rmtree(site / "tokenreel" / "assets" / "themes")
    where = run_tokenreel("--version", pythonpath=site, cwd=tmp_path)
    assert where.returncode == 0
    probe = run_tokenreel("verify", rendered, pythonpath=site, cwd=tmp_path)
    assert probe.returncode == 2, probe.stderr
    assert f"UNVERIFIED: {rendered}: could not re-render:" in probe.stderr and "themes" in probe.stderr
    assert "DIFFERS" not in probe.stderr and "Traceback" not in probe.stderr
    healthy = run_tokenreel("verify", rendered, cwd=tmp_path)
    assert healthy.returncode == 0, healthy.stderr


def test_a_png_tampered_and_its_manifest_resealed_is_not_blamed_on_the_encoder(tmp_path: Path) -> None:
    """The image changed on disk and the manifest's hash re-sealed to match it: the frames still
    re-render identically, so the cause named is the change after the render, never "the encoder
    is not deterministic"."""
    import hashlib

    from PIL import Image

    session_file = write_session(tmp_path / "session.json")
    manifest = render(session_file, tmp_path / "out.png", SMALL).manifest
    image = tmp_path / "out.png"
    with Image.open(image) as png:
        pixels = png.convert("RGB")
    pixels.putpixel((0, 0), (255, 0, 255))
    pixels.save(image)
    data = orjson.loads(manifest.read_bytes())
    data["output_sha256"] = hashlib.sha256(image.read_bytes()).hexdigest()
    data[manifests.SEAL] = manifests.seal(data)
    manifest.write_bytes(orjson.dumps(data))
    [result] = verify.verify([manifest])
    assert result.status == verify.ENCODING_DIFFERS, result.message
    assert "out.png on disk matches the manifest but not its re-render" in result.message
    assert "changed together after the render (re-sealed)" in result.message


def test_derived_fields_that_moved_with_the_session_blame_the_session(rendered: Path) -> None:
    """A record still adding runs changes what the re-render derives (here its claims) while the
    frames stay the same: the session changed, the manifest was not edited."""
    from dataclasses import replace

    record = manifests.load(rendered)
    now = replace(record, session_sha256="0" * 64, claims=[])
    result = verify._compare(rendered, record, now, ("absent", None), False)
    assert record.claims and result.status == verify.SESSION_CHANGED, result.message
    assert result.message.startswith("session changed since the render: the speed-ups it lists (claims)")
    unchanged = verify._compare(rendered, record, replace(record, claims=[]), ("absent", None), False)
    assert unchanged.status == verify.MANIFEST_EDITED


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_manifest_is_unverified_in_one_line_naming_the_re_render(rendered: Path, tmp_path: Path, version: int) -> None:
    """Manifests before version 3 hold a SHA-256 of each whole frame, which a re-render no longer
    computes: verify says so and exits 2 (unverified), never "frames differ"; a render job's
    output with such a manifest is not current, so render-all renders it again."""
    data = orjson.loads(rendered.read_bytes())
    data["version"] = version
    if version == 1:
        del data[manifests.SEAL]
    else:
        data[manifests.SEAL] = manifests.seal(data)
    rendered.write_bytes(orjson.dumps(data))
    [result] = verify.verify([rendered])
    assert result.status == verify.OLDER and result.exit_code == verify.EXIT_UNVERIFIED, result.message
    assert result.message == (
        f"a version-{version} manifest holds a SHA-256 of each whole frame, this tokenreel the digest of its tiles"
        " (version 3): re-render it to write a version-3 manifest"
    )
    _, problem = manifests.read(rendered)
    assert problem is not None and not problem.edited
    cli = run_tokenreel("verify", rendered, cwd=tmp_path)
    assert cli.returncode == 2 and "Traceback" not in cli.stderr + cli.stdout
