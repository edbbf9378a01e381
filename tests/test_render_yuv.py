"""RGB -> yuv420p: BT.709 limited-range values, agreement with ffmpeg's own bit-exact conversion,
incremental conversion equal to whole-frame conversion, and the encoded video decoding back to
the frames that were drawn."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.session_factory import MS, session, stream, words
from tokenreel.renderer.encode import find_ffmpeg
from tokenreel.renderer.frames import FrameRenderer
from tokenreel.renderer.layout import Rect
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render import render
from tokenreel.renderer.render_plan import build_plan
from tokenreel.renderer.yuv import Yuv420Converter, frame_bytes, to_yuv420p
from tokenreel.session import archive

W, H = 64, 48


def planes(yuv: np.ndarray, width: int, height: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    luma, chroma = width * height, width * height // 4
    return (
        yuv[:luma].reshape(height, width),
        yuv[luma : luma + chroma].reshape(height // 2, width // 2),
        yuv[luma + chroma :].reshape(height // 2, width // 2),
    )


def ffmpeg_yuv420p(rgb: np.ndarray) -> np.ndarray:
    """ffmpeg's own bit-exact BT.709 limited-range conversion of one RGB frame."""
    height, width, _ = rgb.shape
    args = [
        "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{width}x{height}", "-i", "-",
        "-sws_flags", "bitexact+accurate_rnd+full_chroma_int",
        "-vf", "scale=out_color_matrix=bt709:out_range=tv,format=yuv420p", "-f", "rawvideo", "-",
    ]
    out = subprocess.run(find_ffmpeg().command(args), input=rgb.tobytes(), capture_output=True, check=True).stdout
    return np.frombuffer(out, dtype=np.uint8)


@pytest.mark.parametrize(
    ("rgb", "ycbcr"),
    [
        ((0, 0, 0), (16, 128, 128)),
        ((255, 255, 255), (235, 128, 128)),
        ((255, 0, 0), (63, 102, 240)),  # the BT.709 colour bars' values in 8-bit limited range
        ((0, 255, 0), (173, 42, 26)),
        ((0, 0, 255), (32, 240, 118)),
    ],
)
def test_flat_colours_get_their_bt709_limited_range_values(rgb: tuple[int, int, int], ycbcr: tuple[int, int, int]) -> None:
    frame = np.empty((H, W, 3), dtype=np.uint8)
    frame[:] = rgb
    yuv = to_yuv420p(frame)
    assert yuv.shape == (frame_bytes(W, H),) == (W * H * 3 // 2,)
    for plane, value in zip(planes(yuv, W, H), ycbcr, strict=False):
        assert (plane == value).all()


def test_rendered_frame_matches_ffmpegs_own_conversion() -> None:
    """Same luma as ffmpeg's bit-exact conversion to within rounding; chroma differs only where
    the two chroma filters see an edge (ffmpeg's is wider than a 2x2 block)."""
    s = session([("a", "bf16", [stream(words(80), 100 * MS, 10 * MS)]), ("b", "nvfp4", [stream(words(80), 80 * MS, 5 * MS)])])
    plan = build_plan(s, RenderOptions(size="640x360", fps=30))
    frame = FrameRenderer(plan).render(plan.clock.title_frames + 20)
    ours = planes(to_yuv420p(frame).astype(int), 640, 360)
    theirs = planes(ffmpeg_yuv420p(frame).astype(int), 640, 360)
    assert np.abs(ours[0] - theirs[0]).max() <= 1
    for mine, reference in zip(ours[1:], theirs[1:], strict=False):
        assert np.abs(mine - reference).mean() < 0.5


def test_converting_only_what_changed_equals_converting_everything() -> None:
    """Random frames changed in random rectangles, odd edges and the frame's border included."""
    rng = np.random.default_rng(7)
    frame = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    converter = Yuv420Converter(W, H)
    assert np.array_equal(converter.convert(frame, ()), to_yuv420p(frame))  # the first frame is whole
    for _ in range(60):
        changed = []
        for _ in range(int(rng.integers(0, 4))):
            x, y = int(rng.integers(-3, W)), int(rng.integers(-3, H))
            rect = Rect(x, y, int(rng.integers(1, W + 4 - x)), int(rng.integers(1, H + 4 - y)))
            inside = frame[max(0, rect.y) : max(0, rect.bottom), max(0, rect.x) : max(0, rect.right)]
            inside[:] = rng.integers(0, 256, inside.shape, dtype=np.uint8)
            changed.append(rect)
        assert np.array_equal(converter.convert(frame, changed), to_yuv420p(frame))
    frame[:] = 200
    assert np.array_equal(converter.convert(frame, None), to_yuv420p(frame))


def test_odd_sizes_and_wrong_frames_are_refused() -> None:
    with pytest.raises(ValueError, match="even width and height"):
        Yuv420Converter(W + 1, H)
    with pytest.raises(ValueError, match="shape"):
        Yuv420Converter(W, H).convert(np.zeros((H, W, 4), dtype=np.uint8), None)


def test_encoded_video_decodes_back_to_the_drawn_frames(tmp_path: Path) -> None:
    """The whole chain: our conversion, x264, the BT.709 tags, ffmpeg decoding them back to RGB."""
    s = session([("a", "bf16", [stream(words(40), 100 * MS, 20 * MS)]), ("b", "nvfp4", [stream(words(40), 80 * MS, 8 * MS)])])
    path = tmp_path / "s.json"
    archive.save(s, path)
    options = RenderOptions(size="320x180", fps=10, hold_s="0.5")
    result = render(path, tmp_path / "out.mp4", options)
    plan = build_plan(archive.load(path), options)
    renderer = FrameRenderer(plan)
    expected = np.stack([renderer.render(i) for i in range(plan.frame_count)]).astype(float)
    args = ["-i", str(result.output), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]
    decoded = subprocess.run(find_ffmpeg().command(args), capture_output=True, check=True).stdout
    got = np.frombuffer(decoded, dtype=np.uint8).reshape(expected.shape).astype(float)
    for channel in range(3):  # every channel, so a swapped or mis-scaled plane shows
        mse = ((got[..., channel] - expected[..., channel]) ** 2).mean()
        assert 10 * np.log10(255**2 / mse) > 30  # PSNR in dB
