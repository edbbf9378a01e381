"""Rendering to files: each format probed with ffprobe, chunked output independent of the
number of workers, frame hashes, progress, and the manifest."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest
from PIL import Image

from tests.session_factory import MS, session, stream, words
from tokenreel.renderer import manifest as manifests
from tokenreel.renderer.encode import EncodeError, FramePipe, find_ffmpeg, output_format
from tokenreel.renderer.frame_digest import TILE_H, TILE_W, FrameDigest, frame_digest
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.layout import Rect
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render import poster_index, render
from tokenreel.renderer.render_plan import build_plan
from tokenreel.session import archive

SMALL = RenderOptions(size="320x180", fps=10, hold_s="1")
CHUNK = 8  # several chunks in a few dozen frames



def ffprobe() -> str:
    """Debian's ffprobe (`make test` installs it): a failure, not a skip, when it is missing."""
    found = shutil.which("ffprobe")
    if found is None:
        pytest.fail("ffprobe is not installed: run `make test` (it installs Debian's ffmpeg) or install ffmpeg")
    return found


def write_session(path: Path) -> Path:
    """Two arms, about 2.5 s of replay: ~35 frames at 10 fps, so 5 chunks of 8."""
    archive.save(
        session(
            [
                ("slow", "bf16", [stream(words(30), 300 * MS, 70 * MS)]),
                ("fast", "nvfp4", [stream(words(30), 200 * MS, 25 * MS)]),
            ]
        ),
        path,
    )
    return path


@pytest.fixture
def session_file(tmp_path: Path) -> Path:
    return write_session(tmp_path / "session.json")


def expected_frames(session_file: Path, options: RenderOptions) -> list[np.ndarray]:
    """The frames straight from the renderer, to compare the pipeline's output with."""
    plan = build_plan(archive.load(session_file), options)
    renderer = FrameRenderer(plan)
    return [renderer.render(i) for i in range(plan.frame_count)]


def probe(path: Path, *entries: str) -> dict[str, str]:
    out = subprocess.run(
        [ffprobe(), "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
         "stream=" + ",".join(entries), "-of", "default=noprint_wrappers=1", str(path)],
        capture_output=True, text=True, check=True,
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines())


def top_level_boxes(path: Path) -> list[bytes]:
    data = path.read_bytes()
    boxes, offset = [], 0
    while offset < len(data):
        size = int.from_bytes(data[offset : offset + 4], "big")
        boxes.append(data[offset + 4 : offset + 8])
        offset += size
    return boxes


def test_unknown_extension_names_it_and_the_supported_ones(tmp_path: Path, session_file: Path) -> None:
    with pytest.raises(ValueError, match=r"'\.avi'.*\.mp4, \.webm, \.gif, \.png"):
        render(session_file, tmp_path / "out.avi", SMALL)
    with pytest.raises(ValueError, match="no extension"):
        output_format(tmp_path / "out")
    assert output_format("A.MP4") == "mp4"
    assert not list(tmp_path.glob("out*"))


@pytest.mark.parametrize(
    ("ext", "codec", "pix_fmt"), [("mp4", "h264", "yuv420p"), ("webm", "vp9", "yuv420p"), ("gif", "gif", None)]
)
def test_each_format_plays_with_every_frame(tmp_path: Path, session_file: Path, ext: str, codec: str, pix_fmt: str | None) -> None:
    result = render(session_file, tmp_path / f"out.{ext}", SMALL, chunk_frames=CHUNK)
    frames = len(expected_frames(session_file, SMALL))
    assert result.frame_count == frames > 3 * CHUNK
    info = probe(result.output, "codec_name", "pix_fmt", "nb_read_frames", "width", "height")
    assert info["codec_name"] == codec
    assert int(info["nb_read_frames"]) == frames
    assert (info["width"], info["height"]) == ("320", "180")
    if pix_fmt:
        assert info["pix_fmt"] == pix_fmt
    duration = subprocess.run(
        [ffprobe(), "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", str(result.output)],
        capture_output=True, text=True, check=True,
    ).stdout
    assert float(duration) == pytest.approx(frames / SMALL.fps, abs=0.011)  # gif: centiseconds
    if ext == "mp4":
        boxes = top_level_boxes(result.output)
        assert boxes.index(b"moov") < boxes.index(b"mdat")  # +faststart: plays while downloading
        color = probe(result.output, "color_space", "color_primaries", "color_transfer", "color_range", "chroma_location")
        assert color == {
            "color_space": "bt709", "color_primaries": "bt709", "color_transfer": "bt709", "color_range": "tv",
            "chroma_location": "center",  # yuv.py averages each 2x2 block
        }
        assert b"x264 - core" not in result.output.read_bytes()  # the version/options SEI is gone


def test_joined_chunks_have_one_timestamp_per_frame(tmp_path: Path, session_file: Path) -> None:
    """7 frames at 30 fps is not a whole number of milliseconds: chunk offsets must not drift."""
    options = RenderOptions(size="320x180", fps=30, hold_s="0.5")
    result = render(session_file, tmp_path / "out.mp4", options, chunk_frames=7)
    pts = subprocess.run(
        [ffprobe(), "-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts", "-of", "csv=p=0", str(result.output)],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    assert sorted(int(p) for p in pts) == list(range(result.frame_count))  # timescale = fps


@pytest.mark.parametrize("ext", ["mp4", "webm"])
def test_workers_do_not_change_the_bytes(tmp_path: Path, session_file: Path, ext: str) -> None:
    one = render(session_file, tmp_path / "one" / f"out.{ext}", SMALL, workers=1, chunk_frames=CHUNK)
    two = render(session_file, tmp_path / "two" / f"out.{ext}", SMALL, workers=2, chunk_frames=CHUNK)
    again = render(session_file, tmp_path / "again" / f"out.{ext}", SMALL, workers=1, chunk_frames=CHUNK)
    assert one.frame_count > 3 * CHUNK
    assert one.output.read_bytes() == two.output.read_bytes() == again.output.read_bytes()
    assert one.frame_sha256 == two.frame_sha256
    assert one.manifest.read_bytes() == two.manifest.read_bytes()  # the manifest is reproducible too


def test_webm_bytes_hold_where_libvpx_could_split_tiles(tmp_path: Path, session_file: Path) -> None:
    """At 320x180 libvpx has room for one tile column only; at 1024x576 it has four, so a webm
    recipe whose threads, tiles or row-mt followed the machine could give other bytes here."""
    wide = RenderOptions(size="1024x576", fps=10, hold_s="1")
    runs = [
        render(session_file, tmp_path / name / "out.webm", wide, workers=workers, chunk_frames=CHUNK)
        for name, workers in (("one", 1), ("two", 2), ("again", 2))
    ]
    assert runs[0].frame_count > 3 * CHUNK
    assert len({r.output.read_bytes() for r in runs}) == 1
    encode = list(manifests.load(runs[0].manifest).encoder_args[0])
    pinned = {flag: encode[encode.index(flag) + 1] for flag in ("-threads", "-row-mt", "-tile-columns")}
    assert pinned["-threads"].isdigit() and pinned["-threads"] != "0"  # 0 = libvpx picks from the CPUs
    assert pinned["-row-mt"] == "0"  # libvpx's row-mt is bit-exact only with a switch ffmpeg lacks
    assert pinned["-tile-columns"].isdigit()


def test_chunk_size_is_part_of_the_bytes(tmp_path: Path, session_file: Path) -> None:
    """Guards the design: chunk boundaries shape the stream, which is why they are a constant."""
    a = render(session_file, tmp_path / "a" / "out.mp4", SMALL, chunk_frames=CHUNK)
    b = render(session_file, tmp_path / "b" / "out.mp4", SMALL, chunk_frames=CHUNK * 2)
    assert a.frame_sha256 == b.frame_sha256
    assert a.output_sha256 != b.output_sha256


def test_frame_hashes_are_of_the_raw_frames_in_order(tmp_path: Path, session_file: Path) -> None:
    result = render(session_file, tmp_path / "out.mp4", SMALL, workers=2, chunk_frames=CHUNK)
    frames = expected_frames(session_file, SMALL)
    assert list(result.frame_sha256) == [frame_digest(f) for f in frames]
    assert len(set(result.frame_sha256)) > 10  # the frames do move


def tile_digest_by_hand(frame: np.ndarray) -> str:
    """The documented digest, written out: SHA-256 over each tile's SHA-256, row by row."""
    height, width, _ = frame.shape
    tiles = [
        hashlib.sha256(frame[y : y + TILE_H, x : x + TILE_W].tobytes()).digest()
        for y in range(0, height, TILE_H) for x in range(0, width, TILE_W)
    ]
    return hashlib.sha256(b"".join(tiles)).hexdigest()


def test_frame_digest_is_brought_up_to_date_from_the_changed_tiles_and_tells_where_bytes_moved() -> None:
    """Frames that change in a corner, anywhere (None), nowhere within a rectangle said changed,
    or in edge tiles cut to the frame: every digest is that of the whole frame, and what comes
    back as moved covers every byte that changed and only rectangles that were said changed."""
    rng = np.random.default_rng(7)
    height, width = 3 * TILE_H + 10, 2 * TILE_W + 6  # edge tiles narrower and shorter than the others
    frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    digests = FrameDigest(width, height)
    first, moved = digests.update(frame, ())  # the first frame is hashed whole whatever is said
    assert first == tile_digest_by_hand(frame) and moved == (Rect(0, 0, width, height),)
    changes: list[tuple[tuple[Rect, ...] | None, tuple[Rect, ...]]] = [  # (said changed, really drawn)
        ((Rect(5, 7, 3, 2),), (Rect(5, 7, 3, 2),)),
        (None, (Rect(TILE_W + 1, TILE_H, 4, 4),)),
        ((Rect(0, 0, width, 20), Rect(width - 3, height - 2, 3, 2)), (Rect(width - 3, height - 2, 3, 2),)),
        ((Rect(0, 0, width, height),), ()),  # redrawn with the same pixels: nothing moved
    ]
    for said, drawn in changes:
        before = frame.copy()
        for rect in drawn:
            frame[rect.slices] = rng.integers(0, 256, frame[rect.slices].shape, dtype=np.uint8)
        digest, moved = digests.update(frame, said)
        assert digest == tile_digest_by_hand(frame)
        covered = np.zeros((height, width), dtype=bool)
        for rect in moved:
            covered[rect.slices] = True
            assert said is None or any(r.x <= rect.x and r.y <= rect.y and rect.right <= r.right and rect.bottom <= r.bottom for r in said)
        assert covered[(frame != before).any(axis=2)].all()
        assert (moved == ()) == (not drawn)


@pytest.mark.parametrize(("ext", "workers"), [("mp4", 1), ("mp4", 2), ("gif", 1), ("png", 1)])
def test_progress_counts_every_frame(tmp_path: Path, session_file: Path, ext: str, workers: int) -> None:
    calls: list[tuple[int, int]] = []
    result = render(session_file, tmp_path / f"out.{ext}", SMALL, workers, lambda d, t: calls.append((d, t)), chunk_frames=CHUNK)
    total = {"png": 1, "gif": 2 * result.frame_count}.get(ext, result.frame_count)
    assert calls[-1] == (total, total)
    assert {t for _, t in calls} == {total}
    done = [d for d, _ in calls]
    assert done == sorted(set(done)) and done[0] >= 1
    if workers == 1:
        assert done == list(range(1, total + 1))


def test_png_poster_is_the_end_card_or_the_frame_at(tmp_path: Path, session_file: Path) -> None:
    frames = expected_frames(session_file, SMALL)
    plan = build_plan(archive.load(session_file), SMALL)
    end_card = plan.clock.title_frames + plan.clock.replay_frames
    assert poster_index(plan) == end_card < len(frames) - 1
    result = render(session_file, tmp_path / "end.png", SMALL)
    with Image.open(result.output) as image:
        assert image.mode == "RGB" and image.info == {}  # no metadata chunks
        assert np.array_equal(np.asarray(image), frames[end_card])
    at = RenderOptions(size="320x180", fps=10, hold_s="1", at="1.25")
    result = render(session_file, tmp_path / "at.png", at)
    with Image.open(result.output) as image:
        assert np.array_equal(np.asarray(image), frames[12])  # int(1.25 s * 10 fps)
    record = manifests.load(result.manifest)
    assert record.poster_frame == 12 and record.frame_sha256 == (frame_digest(frames[12]),)
    no_hold = build_plan(archive.load(session_file), RenderOptions(size="320x180", fps=10, hold_s="0"))
    assert poster_index(no_hold) == no_hold.frame_count - 1


def test_ffmpeg_override_warns_and_is_named_without_its_path(tmp_path: Path, session_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bundled = find_ffmpeg()
    assert bundled.warning is None and bundled.origin.startswith("imageio-ffmpeg ")
    plain = render(session_file, tmp_path / "plain.mp4", SMALL, chunk_frames=CHUNK)
    copy = tmp_path / "bin" / "my-ffmpeg"
    copy.parent.mkdir()
    shutil.copy2(bundled.exe, copy)
    monkeypatch.setenv("IMAGEIO_FFMPEG_EXE", str(copy))
    swapped = render(session_file, tmp_path / "swapped.mp4", SMALL, chunk_frames=CHUNK)
    assert any("IMAGEIO_FFMPEG_EXE" in w and str(copy) in w for w in swapped.warnings)
    assert not any("IMAGEIO_FFMPEG_EXE" in w for w in plain.warnings)
    assert swapped.ffmpeg_exe == str(copy)
    versions = manifests.load(swapped.manifest).versions
    assert versions["ffmpeg_binary"] == "IMAGEIO_FFMPEG_EXE: my-ffmpeg"
    assert versions["ffmpeg"] == bundled.version and versions["ffmpeg"].startswith("ffmpeg version ")
    assert swapped.output_sha256 == plain.output_sha256  # same binary, same bytes


def test_ffmpeg_failure_is_an_encode_error_with_its_message(tmp_path: Path) -> None:
    args = ["-f", "rawvideo", "-pix_fmt", "rgb24", "-s", "32x16", "-r", "10", "-i", "-", "-c:v", "no_such_codec", str(tmp_path / "x.mp4")]
    with pytest.raises(EncodeError, match="status .*no_such_codec"):
        with FramePipe(find_ffmpeg(), args, (16, 32, 3)) as pipe:
            for _ in range(50):
                pipe.write(np.zeros((16, 32, 3), np.uint8))
    null = [*args[:-3], "-f", "null", "-"]
    with FramePipe(find_ffmpeg(), null, (16, 32, 3)) as pipe:
        with pytest.raises(ValueError, match="shape"):
            pipe.write(np.zeros((16, 30, 3), np.uint8))
        pipe.write(np.zeros((16, 32, 3), np.uint8))


def test_bad_options_fail_before_any_file_is_written(tmp_path: Path, session_file: Path) -> None:
    with pytest.raises(ValueError, match="size"):
        render(session_file, tmp_path / "out.mp4", RenderOptions(size="wide"))
    with pytest.raises(ValueError, match="workers"):
        render(session_file, tmp_path / "out.mp4", SMALL, workers=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["session.json"]


# -- the manifest ---------------------------------------------------------------------------


def test_manifest_round_trips_and_holds_no_host_details(tmp_path: Path) -> None:
    session_file = write_session(tmp_path / "sessions" / "s.json")
    result = render(session_file, tmp_path / "videos" / "demo.gif", SMALL)
    assert result.manifest == tmp_path / "videos" / "demo.gif.render.json"
    payload = result.manifest.read_bytes()
    record = manifests.load(result.manifest)
    assert manifests.dumps(record) == payload
    data = orjson.loads(payload)
    assert list(data) == sorted(data) and payload.startswith(b'{\n  "chunk_frames"')
    assert data["format"] == "tokenreel.render" and data["version"] == 3
    assert data["manifest_sha256"] == manifests.seal(data)  # the seal covers every other field
    assert record.session == "../sessions/s.json" and record.output == "demo.gif"
    assert record.session_sha256 == hashlib.sha256(session_file.read_bytes()).hexdigest()
    assert record.output_sha256 == hashlib.sha256(result.output.read_bytes()).hexdigest()
    assert record.options == SMALL and record.size == "320x180" and record.fps == 10
    assert set(record.versions) == {*manifests.VERSION_KEYS, *manifests.LAYOUT_KEYS, "frame_design"}
    assert str(tmp_path).encode() not in payload and b'"/' not in payload
    assert any("palettegen" in arg for arg in record.encoder_args[0])


CORRUPTIONS = [
    ("format", lambda d: d.update(format="tokenreel.session"), "not a render manifest"),
    ("output_sha256", lambda d: d.update(output_sha256="abc"), "64 lowercase hex"),
    ("session", lambda d: d.pop("session"), "missing"),
    ("session", lambda d: d.update(session="/abs/s.json"), "relative"),
    ("options.colour", lambda d: d["options"].update(colour="red"), "unknown option"),
    ("options.fps", lambda d: d["options"].update(fps="30"), "whole number"),
    ("options.arms", lambda d: d["options"].update(arms="a,b"), "list of strings"),
    ("frame_sha256", lambda d: d["frame_sha256"].pop(), "list of"),
    ("versions.ffmpeg", lambda d: d["versions"].pop("ffmpeg"), "missing"),
    ("version", lambda d: d.update(version=4), "not one this tokenreel reads"),
    ("manifest_sha256", lambda d: d.pop("manifest_sha256"), "missing"),
]


@pytest.mark.parametrize(("field", "corrupt", "problem"), CORRUPTIONS, ids=[c[0] + ":" + c[2] for c in CORRUPTIONS])
def test_manifest_errors_name_the_file_and_field(tmp_path: Path, session_file: Path, field: str, corrupt, problem: str) -> None:
    result = render(session_file, tmp_path / "out.png", SMALL)
    data = json.loads(result.manifest.read_text())
    corrupt(data)
    result.manifest.write_text(json.dumps(data))
    with pytest.raises(manifests.ManifestError, match=problem) as caught:
        manifests.load(result.manifest)
    assert str(caught.value).startswith(f"{result.manifest}: field '{field}': ")
    assert "\n" not in str(caught.value)


def test_a_gif_plays_once_and_stays_on_its_end_card(tmp_path: Path) -> None:
    """Before: it looped from the end card back to the title card."""
    session_file = write_session(tmp_path / "s.json")
    result = render(session_file, tmp_path / "out.gif", SMALL)
    with Image.open(result.output) as gif:
        assert "loop" not in gif.info  # no NETSCAPE loop extension: viewers play it once
        gif.seek(gif.n_frames - 1)
        last = np.asarray(gif.convert("RGB"), dtype=np.int16)
    plan = build_plan(archive.load(session_file), SMALL)
    end_card = FrameRenderer(plan).render(plan.frame_count - 1).astype(np.int16)
    assert np.abs(last - end_card).mean() < 4  # the palette's rounding, not another frame


def test_a_gif_defaults_to_a_readme_size_and_frame_rate(tmp_path: Path) -> None:
    """`tokenreel render -o x.gif` without --size or --fps: 960x540 at 15 fps (it was 1920x1080 at
    30 fps, 6 MB for 14 s); an mp4 keeps 1920x1080 at 30, and --size/--fps still win."""
    session_file = write_session(tmp_path / "s.json")

    def rendered(name: str, *extra: str) -> dict:
        command = [sys.executable, "-m", "tokenreel", "render", str(session_file), "-o", str(tmp_path / name), *extra]
        subprocess.run(command, capture_output=True, text=True, check=True, timeout=300)
        return orjson.loads((tmp_path / f"{name}.render.json").read_bytes())

    gif = rendered("readme.gif")
    assert (gif["size"], gif["fps"]) == ("960x540", 15)
    assert probe(tmp_path / "readme.gif", "width", "height") == {"width": "960", "height": "540"}
    chosen = rendered("chosen.gif", "--size", "640x360", "--fps", "10")
    assert (chosen["size"], chosen["fps"]) == ("640x360", 10)
    poster = rendered("poster.png")
    assert (poster["size"], poster["fps"]) == ("1920x1080", 30)
