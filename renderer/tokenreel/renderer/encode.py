"""ffmpeg recipes per output format, and the pipe that feeds raw frames to ffmpeg.

Every recipe is pinned so the same frames give the same bytes on every run and every CPU
(REFERENCE.md §4): fixed thread counts, CPU-independent x264, no version strings or tags, a
fixed timescale. Video gets yuv420p frames converted by yuv.py, so ffmpeg does no colour
conversion at all (its bit-exact one cost as much as x264); GIF gets RGB. Recipes are
argument templates with placeholders ({chunk}, {list}, {palette}, {output}) so the manifest can record exactly what
was run without recording any path.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import TypedDict

import imageio_ffmpeg
import numpy as np

from tokenreel.base.safe_text import shown_path
from tokenreel.renderer import yuv


class OutputFormat(StrEnum):
    """What render writes, named by the output file's extension."""

    MP4 = "mp4"  # H.264
    WEBM = "webm"  # VP9
    GIF = "gif"
    PNG = "png"  # the poster: one frame of the video


# bench/render_throughput.py frames, 1080p yuv420p, ffmpeg alone, one thread: medium 39 fps at
# 1.6 Mbit/s, veryfast 73-77 fps at 2.8 Mbit/s, ultrafast 163-179 fps at 8.1 Mbit/s. medium cannot
# keep up with real time; veryfast can, twice over with two workers, at a third of ultrafast's size.
X264_PRESET = "veryfast"
# Part of the bytes (another count gives another stream): a constant, never the CPU count. One:
# chunk workers fill the cores; each x264 thread costs ~50 MB.
X264_THREADS = 1
# libvpx-vp9, same frames, ffmpeg alone, one thread: `-deadline good` (its -cpu-used stops at 5)
# 11-13 fps, 6x slower than real time; `-deadline realtime -cpu-used 5 -tune-content screen`
# 65-104 fps at about the same size and PSNR (without screen tuning: 2-5x the size). Realtime
# speed is still a fixed function of -cpu-used, never of the clock (VP8's auto-speed is not in VP9).
VP9_DEADLINE = "realtime"
VP9_CPU_USED = 5  # 6-8: no faster on text, up to 1.6x the size
VP9_THREADS = 1  # libvpx with one thread and one tile column: nothing left to schedule
# Pillow writes no metadata chunks unless asked; zlib level fixed (the bytes follow Pillow's zlib).


class PngSave(TypedDict):
    """Image.save's arguments for the poster, in the order the manifest records them."""

    format: str
    compress_level: int
    optimize: bool


PNG_SAVE: PngSave = {"format": "PNG", "compress_level": 9, "optimize": False}

PIPE_BYTES = 1 << 20
RGB24, YUV420P = "rgb24", "yuv420p"  # raw frame formats, as ffmpeg names them

CHUNK, LIST, PALETTE, OUTPUT = "{chunk}", "{list}", "{palette}", "{output}"

_GLOBAL = ("-hide_banner", "-nostdin", "-loglevel", "error", "-y")
_BITEXACT = ("-map_metadata", "-1", "-fflags", "+bitexact", "-flags:v", "+bitexact")
# How yuv.py converts, said in the stream: BT.709 (what browsers assume for HD anyway), limited
# range, chroma sited at the centre of each 2x2 block.
_COLOUR_TAGS = "setparams=color_primaries=bt709:color_trc=bt709:colorspace=bt709:range=tv:chroma_location=center"
_CONTEXT = re.compile(r"^(\[[^\]]*\] )+")  # "[vost#0:0 @ 0x5563...] " prefixes


class EncodeError(RuntimeError):
    """ffmpeg failed; the one-line message carries its exit status and its own words."""


def output_format(path: str | os.PathLike[str]) -> OutputFormat:
    """The format named by the file extension; ValueError for anything else."""
    suffix = Path(path).suffix.lower()
    try:
        return OutputFormat(suffix[1:])
    except ValueError:
        supported = ", ".join(f".{f}" for f in OutputFormat)
        shown = f"'{suffix}'" if suffix else "no extension"
        raise ValueError(f"{shown_path(Path(path).name)}: unsupported output extension {shown}; supported: {supported}") from None


def frame_format(fmt: OutputFormat) -> str:
    """The raw frames a format's encoder reads: yuv420p for video (converted by yuv.py), RGB for
    GIF (its palette is made from the colours as drawn)."""
    return RGB24 if fmt == OutputFormat.GIF else YUV420P


def frame_shape(pix_fmt: str, width: int, height: int) -> tuple[int, ...]:
    """Shape of one raw frame as a uint8 array: (height, width, 3) RGB, or flat yuv420p planes."""
    return (height, width, 3) if pix_fmt == RGB24 else (yuv.frame_bytes(width, height),)


def _raw_input(pix_fmt: str, width: int, height: int, fps: int) -> list[str]:
    """Raw frames on stdin."""
    return ["-f", "rawvideo", "-pix_fmt", pix_fmt, "-s", f"{width}x{height}", "-r", str(fps), "-i", "-"]


def _timescale(fps: int) -> list[str]:
    """A timescale of fps makes every timestamp a whole frame, so chunk offsets add up exactly
    (the default 1000 of the movie header rounds 8 frames at 30 fps to 267 ms and drifts)."""
    return ["-video_track_timescale", str(fps), "-movie_timescale", str(fps)]


def steps(fmt: OutputFormat, width: int, height: int, fps: int) -> list[list[str]]:
    """The encoder steps of a format, in order, as recorded in the manifest.

    mp4/webm: [encode one chunk, join the chunks]; gif: [palette pass, encode pass]: ffmpeg
    argument templates. png: [the Pillow save settings] (the poster frame is not ffmpeg's).
    """
    source = _raw_input(frame_format(fmt), width, height, fps)
    if fmt == OutputFormat.MP4:
        encode = [
            *source, "-vf", _COLOUR_TAGS,
            "-c:v", "libx264", "-preset", X264_PRESET, "-crf", "20", "-pix_fmt", "yuv420p",
            "-threads", str(X264_THREADS), "-x264-params", "cpu-independent=1",
            *_BITEXACT, "-bsf:v", "filter_units=remove_types=6", *_timescale(fps), "-f", "mp4", CHUNK,
        ]
        join = [
            "-f", "concat", "-safe", "0", "-i", LIST, "-c", "copy",
            *_BITEXACT, *_timescale(fps), "-movflags", "+faststart", "-f", "mp4", OUTPUT,
        ]
        return [encode, join]
    if fmt == OutputFormat.WEBM:
        encode = [
            *source, "-vf", _COLOUR_TAGS,
            "-c:v", "libvpx-vp9", "-deadline", VP9_DEADLINE, "-cpu-used", str(VP9_CPU_USED),
            "-tune-content", "screen", "-crf", "32", "-b:v", "0", "-pix_fmt", "yuv420p",
            "-threads", str(VP9_THREADS), "-row-mt", "0", "-tile-columns", "0", "-frame-parallel", "0",
            "-lag-in-frames", "0", "-auto-alt-ref", "0",
            *_BITEXACT, "-f", "webm", CHUNK,
        ]
        join = ["-f", "concat", "-safe", "0", "-i", LIST, "-c", "copy", *_BITEXACT, "-f", "webm", OUTPUT]
        return [encode, join]
    if fmt == OutputFormat.GIF:
        # The palette needs every frame, so a GIF is one stream, not chunks. Pass 1 keeps only
        # a colour histogram; pass 2 re-renders the frames against the palette. Memory stays
        # flat, where split+palettegen in one pass would queue every frame inside ffmpeg.
        # No dithering: flat panels and crisp text, and the smallest file (bayer: +16%);
        # diff_mode=rectangle re-encodes only the changed part of each frame.
        palette = [*source, "-vf", "palettegen=stats_mode=full", *_BITEXACT, "-update", "1", "-f", "image2", PALETTE]
        encode = [
            *source, "-i", PALETTE,
            "-lavfi", "[0:v][1:v]paletteuse=dither=none:diff_mode=rectangle",
            *_BITEXACT, "-loop", "-1", "-f", "gif", OUTPUT,  # played once: it stays on the end card
        ]
        return [palette, encode]
    if fmt == OutputFormat.PNG:
        return [["pillow", *(f"{key}={value}" for key, value in PNG_SAVE.items())]]
    raise ValueError(f"unknown format {fmt!r}")


def fill(template: list[str], **paths: str | os.PathLike[str]) -> list[str]:
    """Replace the placeholders of a template with real paths."""
    values = {"{" + name + "}": os.fspath(value) for name, value in paths.items()}
    return [values.get(arg, arg) for arg in template]


@dataclass(frozen=True)
class Ffmpeg:
    """The ffmpeg binary in use: its path (for running it) and how to name it without the path."""

    exe: str
    version: str  # "ffmpeg version n9.0.2-..." as `ffmpeg -version` prints it
    origin: str  # where it came from, without directories (safe for the manifest)
    warning: str | None  # set when the binary is not imageio-ffmpeg's own

    def command(self, args: list[str]) -> list[str]:
        return [self.exe, *_GLOBAL, *args]


def find_ffmpeg() -> Ffmpeg:
    """imageio-ffmpeg's binary, or the one IMAGEIO_FFMPEG_EXE names (then with a warning: it
    changes the output bytes without telling anyone)."""
    exe = imageio_ffmpeg.get_ffmpeg_exe()
    try:
        result = subprocess.run([exe, "-version"], capture_output=True, text=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EncodeError(f"cannot run ffmpeg at {exe}: {exc}") from None
    version = result.stdout.splitlines()[0].split(" Copyright")[0] if result.stdout else "unknown"
    name = Path(exe).name
    bundled = Path(imageio_ffmpeg.__file__).parent.resolve() in Path(exe).resolve().parents
    warning = None
    if os.environ.get("IMAGEIO_FFMPEG_EXE"):
        origin = f"IMAGEIO_FFMPEG_EXE: {name}"
        warning = (
            f"IMAGEIO_FFMPEG_EXE is set: encoding with {exe} ({version}), not imageio-ffmpeg's own ffmpeg;"
            " the bytes may differ from renders made with that one"
        )
    elif bundled:
        origin = f"imageio-ffmpeg {imageio_ffmpeg.__version__}: {name}"
    else:
        origin = f"system: {name}"
        warning = f"imageio-ffmpeg has no bundled ffmpeg here: encoding with {exe} ({version})"
    return Ffmpeg(exe=exe, version=version, origin=origin, warning=warning)


def _failure(argv: list[str], code: int, stderr: bytes) -> EncodeError:
    """One line: ffmpeg's first error (the cause) and its last (the consequence)."""
    lines = [_CONTEXT.sub("", line).strip() for line in stderr.decode(errors="replace").splitlines()]
    lines = [line for line in lines if line]
    detail = " ... ".join(dict.fromkeys([lines[0], lines[-1]])) if lines else "no message"
    return EncodeError(f"ffmpeg exited with status {code} writing {Path(argv[-1]).name}: {detail}")


def run(ffmpeg: Ffmpeg, args: list[str]) -> None:
    """Run one ffmpeg step that reads files (a join)."""
    argv = ffmpeg.command(args)
    result = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if result.returncode != 0:
        raise _failure(argv, result.returncode, result.stderr)


class FramePipe:
    """One ffmpeg process reading raw frames of one shape on stdin; frames stream, nothing accumulates.

    ffmpeg's messages go to a temporary file rather than a pipe nobody reads while frames are
    being written (a full stderr pipe would block ffmpeg and so this process).
    """

    def __init__(self, ffmpeg: Ffmpeg, args: list[str], shape: tuple[int, ...]) -> None:
        self.shape = shape
        self.argv = ffmpeg.command(args)
        self._stderr = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self._stderr)
        assert self._proc.stdin is not None
        try:  # a 3-6 MB frame through 64 KiB at a time costs ~100 context switches; Linux allows 1 MiB
            fcntl.fcntl(self._proc.stdin.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except (AttributeError, OSError):
            pass  # not Linux, or a lower /proc/sys/fs/pipe-max-size: the default pipe works too

    def write(self, frame: np.ndarray) -> None:
        if frame.shape != self.shape or frame.dtype != np.uint8 or not frame.flags.c_contiguous:
            got = f"{frame.dtype} {frame.shape}"
            raise ValueError(f"expected a C-contiguous uint8 frame of shape {self.shape}, got {got}")
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(frame.data)
        except BrokenPipeError:
            raise self._error() from None

    def close(self) -> None:
        """Finish the stream and wait for ffmpeg; EncodeError if it failed."""
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.close()
        except BrokenPipeError:
            pass
        if self._proc.wait() != 0:
            raise self._error()
        self._stderr.close()

    def kill(self) -> None:
        self._proc.kill()
        try:
            self._proc.stdin.close()  # type: ignore[union-attr]
        except BrokenPipeError:
            pass
        self._proc.wait()
        self._stderr.close()

    def _error(self) -> EncodeError:
        code = self._proc.wait()
        self._stderr.seek(0)
        error = _failure(self.argv, code, self._stderr.read())
        self._stderr.close()
        return error

    def __enter__(self) -> FramePipe:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            self.close()
        else:
            self.kill()
