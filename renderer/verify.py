"""Re-render what render manifests describe and say whether the bytes are the same, and if not, why.

The per-frame hashes separate the two ways a render can drift: the frames themselves differ
(the session or the renderer changed: the first differing frame is named), or every frame is
the same and only the encoded bytes differ (the encoder changed: ffmpeg then and now named).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tokenreel.renderer import manifest as manifests
from tokenreel.renderer.render import Progress, RenderResult, file_sha256, render

IDENTICAL = "identical"
SESSION_MISSING = "session_missing"
SESSION_CHANGED = "session_changed"  # the session file is not the one rendered (frames named if they differ)
FRAMES_DIFFER = "frames_differ"  # frames differ from the same session: the renderer changed
ENCODING_DIFFERS = "encoding_differs"  # same frames, other bytes: the encoder changed
OUTPUT_CHANGED = "output_changed"  # the re-render matches the manifest, the file on disk does not
INVALID = "invalid"  # the manifest cannot be read, or the render failed

# What `tokenreel verify` exits with: a re-render that failed (a broken install, a missing or
# unreadable session) proves nothing about the video, so it must never read as "differs".
EXIT_IDENTICAL, EXIT_DIFFERS, EXIT_UNVERIFIED = 0, 1, 2
_EXIT_CODES = {IDENTICAL: EXIT_IDENTICAL, INVALID: EXIT_UNVERIFIED, SESSION_MISSING: EXIT_UNVERIFIED}


@dataclass(frozen=True)
class VerifyResult:
    manifest: Path
    status: str
    message: str  # one line, for people
    first_differing_frame: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == IDENTICAL

    @property
    def exit_code(self) -> int:
        """0 identical, 1 differs, 2 could not be checked (the reason is in the message)."""
        return _EXIT_CODES.get(self.status, EXIT_DIFFERS)


def _first_difference(then: tuple[str, ...], now: tuple[str, ...]) -> int | None:
    for index, (a, b) in enumerate(zip(then, now)):
        if a != b:
            return index
    return None if len(then) == len(now) else min(len(then), len(now))


def _encoding_cause(record: manifests.Manifest, now: manifests.Manifest) -> str:
    then_v, now_v = record.versions, now.versions
    if then_v["ffmpeg"] != now_v["ffmpeg"]:
        return (
            f"ffmpeg then: {then_v['ffmpeg']!r} ({then_v['ffmpeg_binary']}),"
            f" now: {now_v['ffmpeg']!r} ({now_v['ffmpeg_binary']})"
        )
    if record.encoder_args != now.encoder_args:
        return "the encoder arguments changed"
    if then_v["pillow"] != now_v["pillow"] and record.poster_frame is not None:
        return f"pillow then {then_v['pillow']}, now {now_v['pillow']} (it writes the PNG)"
    return f"same ffmpeg ({now_v['ffmpeg']!r}) and arguments: the encoder is not deterministic here"


def _renderer_versions(record: manifests.Manifest, now: manifests.Manifest) -> str:
    """What may have changed the frames when the session did not: versions of what draws, and
    the text layout engine and its libraries (raqm, FriBiDi, HarfBuzz, FreeType), named first
    since a machine without FriBiDi or with another HarfBuzz shapes text into other pixels."""
    changed = [
        f"{key} {record.versions[key]} -> {now.versions[key]}"
        for key in ("tokenreel", "pillow", "numpy", "python")
        if record.versions[key] != now.versions[key]
    ]
    recorded = [key for key in manifests.LAYOUT_KEYS if key in record.versions]
    layout = [
        f"{key} {record.versions[key]} -> {now.versions.get(key, 'not recorded')}"
        for key in recorded
        if record.versions[key] != now.versions.get(key)
    ]
    if layout:
        changed.insert(0, "text layout changed: " + ", ".join(layout))
    if not recorded:  # a manifest from before text shaping: say what shapes text now
        now_layout = ", ".join(f"{key} {now.versions[key]}" for key in manifests.LAYOUT_KEYS if key in now.versions)
        changed.append(f"text layout not recorded then, now: {now_layout}")
    if changed:
        return "; ".join(changed)
    return "same tokenreel, pillow, numpy and python versions, same text layout engine and libraries"


def _compare(path: Path, record: manifests.Manifest, session_changed: bool, result: RenderResult) -> VerifyResult:
    now = manifests.load(result.manifest)
    index = _first_difference(record.frame_sha256, now.frame_sha256)
    if index is not None:
        frame = index + (record.poster_frame or 0)
        where = f"frames differ from frame {frame} on ({record.frame_count} frames then, {now.frame_count} now)"
        if session_changed:
            return VerifyResult(path, SESSION_CHANGED, f"session changed since the render: {where}", frame)
        cause = _renderer_versions(record, now)
        return VerifyResult(path, FRAMES_DIFFER, f"{where}; the session is unchanged ({cause})", frame)
    if record.output_sha256 != now.output_sha256:
        message = f"all {len(now.frame_sha256)} frames identical, encoded bytes differ: {_encoding_cause(record, now)}"
        return VerifyResult(path, ENCODING_DIFFERS, message)
    if session_changed:
        message = "session changed since the render (the re-render is still identical)"
        return VerifyResult(path, SESSION_CHANGED, message)
    on_disk = path.parent / record.output
    if on_disk.exists() and file_sha256(on_disk) != record.output_sha256:
        message = f"{record.output} on disk is not the file this manifest describes (a re-render is)"
        return VerifyResult(path, OUTPUT_CHANGED, message)
    note = "" if on_disk.exists() else f" ({record.output} is not on disk: compared with the manifest)"
    message = f"identical: {record.frame_count} frames, sha256 {record.output_sha256[:16]}{note}"
    return VerifyResult(path, IDENTICAL, message)


def verify_one(path: str | os.PathLike[str], workers: int = 1, progress: Progress | None = None) -> VerifyResult:
    """Re-render one manifest's output into a temporary folder and compare."""
    path = Path(path)
    try:
        record = manifests.load(path)
    except manifests.ManifestError as exc:
        return VerifyResult(path, INVALID, str(exc))
    session = path.parent / record.session
    if not session.is_file():
        return VerifyResult(path, SESSION_MISSING, f"session file {session} is missing: cannot re-render")
    session_changed = file_sha256(session) != record.session_sha256
    with tempfile.TemporaryDirectory(prefix="tokenreel-verify-") as tmp:
        out = Path(tmp) / record.output
        try:
            options = manifests.resolved_options(record.options, path.parent)
            result = render(session, out, options, workers, progress, record.chunk_frames)
        except Exception as exc:  # a bad session, a broken install, ffmpeg: nothing was compared
            reason = str(exc) if isinstance(exc, (ValueError, OSError, RuntimeError)) else f"{type(exc).__name__}: {exc}"
            changed = "the session changed since the render, and " if session_changed else ""
            return VerifyResult(path, INVALID, f"could not re-render: {changed}{reason}")
        return _compare(path, record, session_changed, result)


def find_manifests(paths: list[Path]) -> list[Path]:
    """Manifest paths as given, and every *.render.json under each folder (sorted, so the order
    never depends on the file system). ValueError when a path is missing or a folder has none."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.rglob("*.render.json") if p.is_file())
            if not inside:
                raise ValueError(f"{path}: no *.render.json manifests in this folder")
            found.extend(inside)
        elif path.is_file():
            found.append(path)
        else:
            raise ValueError(f"{path}: no such manifest or folder; give FILE.render.json files or folders of them")
    return found


def overall_exit_code(results: list[VerifyResult]) -> int:
    """1 when any output differs (a finding), else 2 when any could not be checked, else 0."""
    codes = {result.exit_code for result in results}
    if EXIT_DIFFERS in codes:
        return EXIT_DIFFERS
    return EXIT_UNVERIFIED if EXIT_UNVERIFIED in codes else EXIT_IDENTICAL


def verify(
    manifest_paths: list[str | os.PathLike[str]], workers: int = 1, progress: Progress | None = None
) -> list[VerifyResult]:
    """One result per manifest, in order; all ok means every output re-renders byte for byte."""
    return [verify_one(path, workers, progress) for path in manifest_paths]
