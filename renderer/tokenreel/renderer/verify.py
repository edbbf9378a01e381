"""Re-render what render manifests describe and say whether the bytes are the same, and if not, why.

The per-frame hashes separate the two ways a render can drift: the frames themselves differ
(the session or the renderer changed: the first differing frame is named), or every frame is
the same and only the encoded bytes differ (the encoder changed: ffmpeg then and now named).
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path

from tokenreel.base.safe_text import shown_path
from tokenreel.renderer import manifest as manifests
from tokenreel.renderer.render import Progress, clean_stale, regular_file_sha256, render
from tokenreel.session.archive import read_input

IDENTICAL = "identical"
SESSION_MISSING = "session_missing"
SESSION_CHANGED = "session_changed"  # the session file is not the one rendered (frames named if they differ)
FRAMES_DIFFER = "frames_differ"  # frames differ from the same session: the renderer changed
ENCODING_DIFFERS = "encoding_differs"  # same frames, other bytes: the encoder changed
OUTPUT_CHANGED = "output_changed"  # the re-render matches the manifest, the file on disk does not
OUTPUT_NOT_FILE = "output_not_file"  # the output the manifest names is a symlink, directory, FIFO...
OUTPUT_MISSING = "output_missing"  # no output on disk, and verify was asked to require it
MANIFEST_EDITED = "manifest_edited"  # the seal, the manifest's name or a re-derived field disagrees
OLDER = "older"  # a manifest of an older version: its frame hashes cannot be compared with a re-render's
INVALID = "invalid"  # the manifest cannot be read, or the render failed

# verify re-renders into <tmp>/tokenreel-verify-<pid>-<random>; one left by a killed verify is
# removed by the next (see render.clean_stale).
VERIFY_TMP_PREFIX = "tokenreel-verify-"
_VERIFY_TMP = re.compile(re.escape(VERIFY_TMP_PREFIX) + r"(\d+)-[A-Za-z0-9_]+")

# What `tokenreel verify` exits with: a re-render that failed (a broken install, a missing or
# unreadable session) proves nothing about the video, so it must never read as "differs".
EXIT_IDENTICAL, EXIT_DIFFERS, EXIT_UNVERIFIED = 0, 1, 2
_EXIT_CODES = {
    IDENTICAL: EXIT_IDENTICAL, INVALID: EXIT_UNVERIFIED, SESSION_MISSING: EXIT_UNVERIFIED, OLDER: EXIT_UNVERIFIED,
}


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
    for index, (a, b) in enumerate(zip(then, now, strict=False)):
        if a != b:
            return index
    return None if len(then) == len(now) else min(len(then), len(now))


def _encoding_cause(record: manifests.Manifest, now: manifests.Manifest, disk: tuple[str, str | None]) -> str:
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
    if disk == ("file", record.output_sha256):
        # The file on disk is what the manifest says, yet the same frames encode otherwise now.
        return (f"{shown_path(record.output)} on disk matches the manifest but not its re-render with the same encoder"
                " and arguments: the output and the manifest's hash were changed together after the render (re-sealed),"
                " or the encoder is not deterministic here")
    if record.poster_frame is not None:
        return f"same pillow ({now_v['pillow']}) writes the PNG: the manifest's hash was changed after the render"
    return f"same ffmpeg ({now_v['ffmpeg']!r}) and arguments: the encoder is not deterministic here"


def _renderer_versions(record: manifests.Manifest, now: manifests.Manifest) -> str:
    """What may have changed the frames when the session did not: the text engine and its
    libraries (HarfBuzz, FreeType, python-bidi; raqm and FriBiDi in manifests written before
    it), named first since another HarfBuzz or FreeType draws text into other pixels; then the
    versions of what draws the rest."""
    changed = [
        f"{key} {record.versions[key]} -> {now.versions[key]}"
        for key in ("tokenreel", "pillow", "numpy", "python")
        if record.versions[key] != now.versions[key]
    ]
    keys = manifests.LAYOUT_KEYS + manifests.PRE_ENGINE_KEYS
    recorded = [key for key in keys if key in record.versions]
    layout = [
        f"{key} {record.versions.get(key, 'not recorded')} -> {now.versions.get(key, 'not used')}"
        for key in keys
        if (key in record.versions or key in now.versions) and record.versions.get(key) != now.versions.get(key)
    ]
    if not recorded:  # a manifest from before text shaping: say what lays out text now
        now_layout = ", ".join(f"{key} {now.versions[key]}" for key in manifests.LAYOUT_KEYS if key in now.versions)
        changed.append(f"text layout not recorded then, now: {now_layout}")
    elif layout:
        changed.insert(0, "text engine changed: " + ", ".join(layout))
    design = record.versions.get("frame_design", "1"), now.versions.get("frame_design", "1")
    if design[0] != design[1]:  # named first: the frames were redesigned on purpose
        changed.insert(0, f"frame design {design[0]} -> {design[1]}: tokenreel draws frames differently now, re-render to adopt it")
    if changed:
        return "; ".join(changed)
    return "same tokenreel, pillow, numpy and python versions, same text engine and libraries"


def _differs(record: manifests.Manifest, now: manifests.Manifest) -> str | None:
    """Fields the re-render derives again, which must say what the manifest says."""
    for name in ("frame_count", "fps", "size", "poster_frame", "chunk_frames", "encoder_args"):
        then_value, now_value = getattr(record, name), getattr(now, name)
        if then_value != now_value:
            shown = (lambda v: "other arguments") if name == "encoder_args" else repr
            return f"the manifest says {name} {shown(then_value)}, its re-render {shown(now_value)}"
    if record.claims and record.claims != now.claims:  # a manifest from before claims were listed has none
        return "the speed-ups it lists (claims) are not the ones its re-render draws"
    if record.reconstructed != now.reconstructed:
        return "what it says was reconstructed (reconstructed) is not what its re-render places"
    return None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symlink"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return name
    return "not a regular file"


def _on_disk(path: Path, record: manifests.Manifest) -> tuple[str, str | None]:
    """What is at the output the manifest names: ("absent", None), ("file", its sha256), or
    ("other", what it is): a symlink (dangling or not), a directory, a FIFO... is not the output."""
    target = path.parent / record.output
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return "absent", None
    if not stat.S_ISREG(mode):
        return "other", _kind(mode)
    try:
        return "file", regular_file_sha256(target)
    except OSError as exc:  # replaced meanwhile, or unreadable
        return "other", f"unreadable ({exc.strerror or exc})"


def _compare(
    path: Path, record: manifests.Manifest, now: manifests.Manifest, disk: tuple[str, str | None],
    require_output: bool,
) -> VerifyResult:
    session_changed = now.session_sha256 != record.session_sha256  # hashed from the bytes rendered
    index = _first_difference(record.frame_sha256, now.frame_sha256)
    if index is not None:
        frame = index + (record.poster_frame or 0)
        where = f"frames differ from frame {frame} on ({record.frame_count} frames then, {now.frame_count} now)"
        if session_changed:
            return VerifyResult(path, SESSION_CHANGED, f"session changed since the render: {where}", frame)
        cause = _renderer_versions(record, now)
        return VerifyResult(path, FRAMES_DIFFER, f"{where}; the session is unchanged ({cause})", frame)
    if record.output_sha256 != now.output_sha256:
        message = f"all {len(now.frame_sha256)} frames identical, encoded bytes differ: {_encoding_cause(record, now, disk)}"
        return VerifyResult(path, ENCODING_DIFFERS, message)
    mismatch = _differs(record, now)
    if mismatch and session_changed:  # a record still adding runs, say: the session, not the manifest, moved
        return VerifyResult(path, SESSION_CHANGED, f"session changed since the render: {mismatch}")
    if mismatch:
        return VerifyResult(path, MANIFEST_EDITED, f"{mismatch}: the manifest does not describe this render")
    if session_changed:
        message = "session changed since the render (the re-render is still identical)"
        return VerifyResult(path, SESSION_CHANGED, message)
    state, detail = disk
    if state == "other":
        message = f"{shown_path(record.output)} on disk is {detail}, not a regular file: it is not the output this manifest describes"
        return VerifyResult(path, OUTPUT_NOT_FILE, message)
    if state == "file" and detail != record.output_sha256:
        message = (
            f"{shown_path(record.output)} on disk was changed after it was rendered: its bytes differ from the manifest's,"
            f" while a fresh re-render matches the manifest (render it again to get the original back)"
        )
        return VerifyResult(path, OUTPUT_CHANGED, message)
    if state == "absent" and require_output:
        message = f"{shown_path(record.output)} is not on disk (--require-output); the re-render matches the manifest"
        return VerifyResult(path, OUTPUT_MISSING, message)
    note = (
        "" if state == "file"
        else f" ({shown_path(record.output)} not on disk: only the re-render was compared with the manifest's hashes)"
    )
    what = (
        f"the image (frame {record.poster_frame} of the {record.frame_count}-frame video)" if record.poster_frame is not None
        else f"{record.frame_count} frames"
    )
    message = f"identical: {what}, sha256 {record.output_sha256[:16]}{note}"
    return VerifyResult(path, IDENTICAL, message)


def verify_one(
    path: str | os.PathLike[str], workers: int = 1, progress: Progress | None = None, require_output: bool = False
) -> VerifyResult:
    """Check one manifest against itself and what is on disk, then re-render it into a
    temporary folder and compare.

    What is checked, in order: the manifest reads (a regular file within files.INPUTS["manifest"]),
    is named after the output it describes (<output>.render.json), and its seal matches its
    content (an edit to any field), and is of this version (an older one's frame hashes are of
    another kind: exit 2, re-render it); the re-render gives the same frames, the same bytes and the
    same derived fields (frame_count, fps, size, poster_frame, chunk_frames, encoder_args) from a
    session whose bytes hash as recorded; the output it names, in the manifest's folder, is a
    regular file (never a symlink, directory or FIFO) with the recorded hash. An output that is
    not on disk at all (the archived manifests ship without their videos) still verifies, the
    message saying "not on disk"; require_output makes that a difference (exit 1).
    """
    path = Path(path)
    try:
        record, problem = manifests.read(path)
    except manifests.ManifestError as exc:
        return VerifyResult(path, INVALID, str(exc))
    if path.name != record.output + manifests.SUFFIX:
        message = (
            f"the manifest describes {record.output!r} but is named {path.name!r} (expected"
            f" {record.output + manifests.SUFFIX!r}): its output field was edited, or it was renamed"
        )
        return VerifyResult(path, MANIFEST_EDITED, message)
    if problem is not None:
        return VerifyResult(path, MANIFEST_EDITED if problem.edited else OLDER, problem.text)
    session = path.parent / record.session
    shown = os.path.normpath(session)  # said without the manifest's ../ hops; the file itself is opened as named
    try:
        os.stat(session)
    except (FileNotFoundError, NotADirectoryError):
        message = f"cannot re-render: the session file it was rendered from, {shown}, is missing (put it back there)"
        return VerifyResult(path, SESSION_MISSING, message)
    except OSError as exc:
        return VerifyResult(path, INVALID, f"could not re-render: {shown}: {exc.strerror or exc}")
    disk = _on_disk(path, record)
    clean_stale(Path(tempfile.gettempdir()), _VERIFY_TMP)
    with tempfile.TemporaryDirectory(prefix=f"{VERIFY_TMP_PREFIX}{os.getpid()}-") as tmp:
        out = Path(tmp) / record.output
        try:
            options = manifests.resolved_options(record.options, path.parent)
            result = render(session, out, options, workers, progress, record.chunk_frames)
        except Exception as exc:  # a bad session, a broken install, ffmpeg: nothing was compared
            reason = str(exc) if isinstance(exc, (ValueError, OSError, RuntimeError)) else f"{type(exc).__name__}: {exc}"
            changed = "the session changed since the render, and " if _session_changed(session, record) else ""
            return VerifyResult(path, INVALID, f"could not re-render: {changed}{reason}")
        return _compare(path, record, manifests.load(result.manifest), disk, require_output)


def _session_changed(session: Path, record: manifests.Manifest) -> bool:
    try:
        return sha256(read_input(session, "session")).hexdigest() != record.session_sha256
    except OSError:
        return False


def find_manifests(paths: list[Path]) -> list[Path]:
    """Manifest paths as given, and every *.render.json under each folder (sorted, so the order
    never depends on the file system). ValueError when a path is missing or a folder has none."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.rglob("*.render.json") if p.is_file())
            if not inside:
                raise ValueError(f"{shown_path(path)}: no *.render.json manifests in this folder")
            found.extend(inside)
        elif path.exists():  # a FIFO or a device too: reading it says what it is (never hangs)
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
    manifest_paths: list[str | os.PathLike[str]], workers: int = 1, progress: Progress | None = None,
    require_output: bool = False,
) -> list[VerifyResult]:
    """One result per manifest, in order; all ok means every output re-renders byte for byte."""
    return [verify_one(path, workers, progress, require_output) for path in manifest_paths]
