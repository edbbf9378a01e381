"""The render manifest: `FILE.render.json` next to every rendered FILE.

It records what is needed to render the same bytes again and to say why they differ: the
session (by relative path and hash), the options, the chunking, the encoder steps, the
versions of everything that draws or encodes, and the hash of every frame. No absolute paths,
host names or timestamps: rendering the same thing twice writes the same manifest.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
from dataclasses import asdict, dataclass, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy
import orjson
import PIL

import tokenreel.base.version
from tokenreel.base.safe_text import shown_path
from tokenreel.base.theme import is_path as is_theme_path
from tokenreel.renderer import frames
from tokenreel.renderer.encode import Ffmpeg
from tokenreel.renderer.options import RenderOptions, choice
from tokenreel.renderer.text import fonts
from tokenreel.session.archive import read_input

FORMAT = "tokenreel.render"
# 2: the manifest carries SEAL, the SHA-256 of its own content, so an edit to any of
# its fields (versions, encoder_args, poster_frame, output...) is detected. 3: frame_sha256
# holds frame_digest.py's digests (SHA-256 over the SHA-256 of each tile), not a SHA-256 of
# each whole frame. Versions 1 and 2 are still read, but verify can only report them unverified
# (exit 2): their frame hashes are of another kind than a re-render's.
VERSION = 3
READS = (1, 2, 3)
SEAL = "manifest_sha256"
SUFFIX = ".render.json"
VERSION_KEYS = ("tokenreel", "pillow", "numpy", "ffmpeg", "ffmpeg_binary", "python")
# Written since text shaping: how glyphs are laid out and rasterised. Optional when
# reading, so manifests written before them still verify (they drew with the basic layout).
LAYOUT_KEYS = ("text_engine", "freetype", "harfbuzz", "uharfbuzz", "freetype_shaped", "freetype-py", "python-bidi")
PRE_ENGINE_KEYS = ("layout_engine", "raqm", "fribidi")  # written while Pillow's raqm shaped text
OPTIONAL_FIELDS = ("reconstructed",)  # left out when empty
RECONSTRUCTION_KEYS = ("arm", "tool", "version", "file", "rule")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SIZE = re.compile(r"[1-9][0-9]*x[1-9][0-9]*")


class ManifestError(ValueError):
    """A manifest that cannot be used; the message names the file and the field."""

    def __init__(self, path: str | os.PathLike[str], field_name: str, problem: str) -> None:
        self.path = str(path)
        self.field = field_name
        where = f"{shown_path(self.path)}: field '{field_name}'" if field_name else shown_path(self.path)
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True)
class Manifest:
    session: str  # path of the session file, relative to the manifest's folder, with '/'
    session_sha256: str
    output: str  # file name of the output, in the manifest's folder
    output_sha256: str
    options: RenderOptions
    chunk_frames: int
    frame_count: int
    fps: int
    size: str  # "WIDTHxHEIGHT"
    versions: dict[str, str]
    encoder_args: tuple[tuple[str, ...], ...]  # encoder steps in order (see encode.steps)
    frame_sha256: tuple[str, ...]  # each frame's digest (frame_digest.py) of its raw RGB; png: the poster only
    poster_frame: int | None  # png: the frame index saved, else None
    # Every speed-up drawn (race_claims.Claim, as a JSON object): what it says, its metric,
    # scope and arms, its value at full precision (the report's), the first frame showing it
    # and the first frame at which its evidence was complete. Absent in older manifests.
    claims: tuple[dict[str, Any], ...] = ()
    # What the video shows that its session's files did not hold, an object an arm (arm, tool,
    # version, file, rule): an imported reply placed over its chunks (placed_text.RULE). Written
    # only when there is one, so every other manifest is as before.
    reconstructed: tuple[dict[str, str], ...] = ()


def path_for(output: str | os.PathLike[str]) -> Path:
    """demo.mp4 -> demo.mp4.render.json (one manifest per output, so demo.gif has its own)."""
    out = Path(output)
    return out.with_name(out.name + SUFFIX)


def relative_path(path: str | os.PathLike[str], manifest_dir: str | os.PathLike[str]) -> str:
    """A file the manifest names (session, logo, theme), relative to the manifest's folder, so
    the folder can move or be checked out elsewhere and still verify."""
    return Path(os.path.relpath(Path(path).resolve(), Path(manifest_dir).resolve())).as_posix()


def _file_options(options: RenderOptions) -> dict[str, str]:
    """The options that name files: the logo, and the theme when it is a file, not a name."""
    named = {"logo": options.logo, "theme": options.theme if is_theme_path(options.theme) else None}
    return {key: value for key, value in named.items() if value}


def portable_options(options: RenderOptions, manifest_dir: str | os.PathLike[str]) -> RenderOptions:
    """The options as the manifest keeps them: file paths relative to the manifest's folder."""
    return _with_files(options, {key: relative_path(value, manifest_dir) for key, value in _file_options(options).items()})


def resolved_options(options: RenderOptions, manifest_dir: str | os.PathLike[str]) -> RenderOptions:
    """A manifest's options with its file paths found from the manifest's folder again."""
    return _with_files(options, {key: str(Path(manifest_dir) / value) for key, value in _file_options(options).items()})


def _with_files(options: RenderOptions, paths: dict[str, str]) -> RenderOptions:
    """The options with the file paths given (see _file_options) in place of their own."""
    return replace(options, logo=paths.get("logo", options.logo), theme=paths.get("theme", options.theme))


def current_versions(ffmpeg: Ffmpeg | None) -> dict[str, str]:
    """Everything whose version can change the frames or their encoding (ffmpeg: None for png)."""
    return {
        "tokenreel": tokenreel.base.version.__version__,
        "pillow": PIL.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "ffmpeg": ffmpeg.version if ffmpeg else "not used",
        "ffmpeg_binary": ffmpeg.origin if ffmpeg else "not used",
        **fonts.layout_versions(),
        "frame_design": frames.DESIGN,
    }


def to_dict(manifest: Manifest) -> dict[str, Any]:
    out: dict[str, Any] = {"format": FORMAT, "version": VERSION}
    for spec in fields(Manifest):
        value = getattr(manifest, spec.name)
        if spec.name in OPTIONAL_FIELDS and not value:
            continue
        out[spec.name] = asdict(value) if spec.name == "options" else value
    out[SEAL] = seal(out)
    return out


def seal(data: dict[str, Any]) -> str:
    """SHA-256 of the manifest's content without the seal itself, in a canonical form (sorted
    keys, no spaces): any field edited, added or removed changes it; reformatting does not."""
    content = {key: value for key, value in data.items() if key != SEAL}
    return hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()


def seal_problem(data: dict[str, Any]) -> str | None:
    """Why the manifest's content cannot be trusted as written by render, or None (a version-1
    manifest has no seal: see older_problem)."""
    if data.get("version") != 1 and data.get(SEAL) != seal(data):
        return f"the manifest was edited since render wrote it (its {SEAL} does not match its content)"
    return None


def older_problem(data: dict[str, Any]) -> str | None:
    """Why a manifest of an older version cannot be compared with a re-render now, or None."""
    version = data.get("version")
    if version == VERSION:
        return None
    return (
        f"a version-{version} manifest holds a SHA-256 of each whole frame, this tokenreel the digest of its tiles"
        f" (version {VERSION}): re-render it to write a version-{VERSION} manifest"
    )


def dumps(manifest: Manifest) -> bytes:
    return orjson.dumps(to_dict(manifest), option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"


class _Checker:
    """Typed field access raising ManifestError with the field's name."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = path

    def fail(self, name: str, problem: str) -> ManifestError:
        return ManifestError(self.path, name, problem)

    def field(self, data: dict[str, Any], name: str) -> Any:
        if name not in data:
            raise self.fail(name, "missing")
        return data[name]

    def text(self, value: Any, name: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(name, f"expected a non-empty string, got {value!r}")
        return value

    def count(self, value: Any, name: str, low: int = 1) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self.fail(name, f"expected a whole number >= {low}, got {value!r}")
        return value

    def sha256(self, value: Any, name: str) -> str:
        if not isinstance(value, str) or not _SHA256.fullmatch(value):
            raise self.fail(name, f"expected 64 lowercase hex digits, got {value!r}")
        return value

    def strings(self, value: Any, name: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.fail(name, "expected a list of strings")
        return tuple(value)

    def options(self, value: Any) -> RenderOptions:
        """RenderOptions field by field; the kind of each is that of its default."""
        if not isinstance(value, dict):
            raise self.fail("options", "expected an object")
        specs = {spec.name: spec for spec in fields(RenderOptions)}
        for key in value:
            if key not in specs:
                raise self.fail(f"options.{key}", "unknown option")
        kwargs: dict[str, Any] = {}
        for key, spec in specs.items():
            if key not in value:
                continue  # an option newer than the manifest: its default
            item, name = value[key], f"options.{key}"
            if spec.default is None:
                if item is not None and not isinstance(item, str):
                    raise self.fail(name, f"expected a string or null, got {item!r}")
            elif isinstance(spec.default, bool):
                if not isinstance(item, bool):
                    raise self.fail(name, f"expected true or false, got {item!r}")
            elif isinstance(spec.default, tuple):
                item = self.strings(item, name)
            elif isinstance(spec.default, int):
                item = self.count(item, name)
            elif isinstance(spec.default, StrEnum):
                try:
                    item = choice(type(spec.default), item, key)
                except ValueError as exc:
                    raise self.fail(name, str(exc).removeprefix(f"{key}: ")) from None
            elif not isinstance(item, str):
                raise self.fail(name, f"expected a string, got {item!r}")
            kwargs[key] = item
        return RenderOptions(**kwargs)


def from_dict(data: Any, path: str | os.PathLike[str]) -> Manifest:
    """Validate and build a Manifest; ManifestError names the first bad field."""
    c = _Checker(path)
    if not isinstance(data, dict):
        raise c.fail("", "expected a JSON object")
    if data.get("format") != FORMAT:
        raise c.fail("format", f"expected {FORMAT!r}, got {data.get('format')!r}: this is not a render manifest")
    version = c.count(c.field(data, "version"), "version")
    if version not in READS:
        raise c.fail("version", f"version {version} is not one this tokenreel reads ({', '.join(map(str, READS))})")
    if version >= 2:
        c.sha256(c.field(data, SEAL), SEAL)
    # The session path rule: relative to the manifest's folder (it may climb out of it: a
    # manifest in out/ names ../sessions/x.json), never absolute; verify then opens it only if
    # it is a regular file within the session size bound (files.INPUTS).
    session = c.text(c.field(data, "session"), "session")
    if Path(session).is_absolute() or session.startswith(("/", "\\")) or "\x00" in session:
        raise c.fail("session", f"expected a path relative to the manifest, got {session!r}")
    output = c.text(c.field(data, "output"), "output")
    if "/" in output or "\\" in output or "\x00" in output or output in (".", ".."):
        raise c.fail("output", f"expected a file name in the manifest's folder, got {output!r}")
    size = c.text(c.field(data, "size"), "size")
    if not _SIZE.fullmatch(size):
        raise c.fail("size", f"expected WIDTHxHEIGHT, got {size!r}")
    versions = c.field(data, "versions")
    if not isinstance(versions, dict):
        raise c.fail("versions", "expected an object")
    for key in VERSION_KEYS:
        if key not in versions:
            raise c.fail(f"versions.{key}", "missing")
    for key, value in versions.items():
        c.text(value, f"versions.{key}")
    steps = c.field(data, "encoder_args")
    if not isinstance(steps, list) or not steps:
        raise c.fail("encoder_args", "expected a non-empty list of steps")
    frame_count = c.count(c.field(data, "frame_count"), "frame_count")
    poster = c.field(data, "poster_frame")
    if poster is not None:
        c.count(poster, "poster_frame", low=0)
        if poster >= frame_count:
            raise c.fail("poster_frame", f"{poster} is not a frame of a {frame_count}-frame video")
    hashes = c.field(data, "frame_sha256")
    expected = frame_count if poster is None else 1
    if not isinstance(hashes, list) or len(hashes) != expected:
        raise c.fail("frame_sha256", f"expected a list of {expected} hashes")
    options = c.options(c.field(data, "options"))
    for key, value in _file_options(options).items():
        if Path(value).is_absolute():
            raise c.fail(f"options.{key}", f"expected a path relative to the manifest, got {value!r}")
    return Manifest(
        session=session,
        session_sha256=c.sha256(c.field(data, "session_sha256"), "session_sha256"),
        output=output,
        output_sha256=c.sha256(c.field(data, "output_sha256"), "output_sha256"),
        options=options,
        chunk_frames=c.count(c.field(data, "chunk_frames"), "chunk_frames"),
        frame_count=frame_count,
        fps=c.count(c.field(data, "fps"), "fps"),
        size=size,
        versions=versions,
        encoder_args=tuple(c.strings(step, f"encoder_args[{i}]") for i, step in enumerate(steps)),
        frame_sha256=tuple(c.sha256(h, f"frame_sha256[{i}]") for i, h in enumerate(hashes)),
        poster_frame=poster,
        claims=_claims(c, data.get("claims", [])),
        reconstructed=_reconstructed(c, data.get("reconstructed", [])),
    )


CLAIM_KEYS = {"text": str, "metric": str, "scope": str, "arm": str, "vs": str, "first_frame": int, "evidence_frame": int, "where": str}


def _claims(c: _Checker, value: Any) -> tuple[dict[str, Any], ...]:
    """The claims list: objects with CLAIM_KEYS of their kinds, prompt a string or null and value
    a number or null."""
    if not isinstance(value, list):
        raise c.fail("claims", "expected a list")
    for i, claim in enumerate(value):
        if not isinstance(claim, dict):
            raise c.fail(f"claims[{i}]", "expected an object")
        for key, kind in CLAIM_KEYS.items():
            if not isinstance(claim.get(key), kind) or isinstance(claim.get(key), bool):
                raise c.fail(f"claims[{i}].{key}", f"expected a {kind.__name__}")
        if claim.get("prompt") is not None and not isinstance(claim["prompt"], str):
            raise c.fail(f"claims[{i}].prompt", "expected a string or null")
        if claim.get("value") is not None and not isinstance(claim["value"], (int, float)):
            raise c.fail(f"claims[{i}].value", "expected a number or null")
    return tuple(value)


def _reconstructed(c: _Checker, value: Any) -> tuple[dict[str, str], ...]:
    """The reconstructed list: objects with RECONSTRUCTION_KEYS, each a string."""
    if not isinstance(value, list):
        raise c.fail("reconstructed", "expected a list")
    for i, entry in enumerate(value):
        if not isinstance(entry, dict) or sorted(entry) != sorted(RECONSTRUCTION_KEYS):
            raise c.fail(f"reconstructed[{i}]", f"expected an object with {', '.join(RECONSTRUCTION_KEYS)}")
        for key in RECONSTRUCTION_KEYS:
            if not isinstance(entry[key], str):
                raise c.fail(f"reconstructed[{i}].{key}", "expected a string")
    return tuple(value)


@dataclass(frozen=True)
class Problem:
    """Why a manifest that reads cannot be trusted (edited) or compared with a re-render (older)."""

    text: str
    edited: bool  # its seal does not match its content; else it is of an older version


def read(path: str | os.PathLike[str]) -> tuple[Manifest, Problem | None]:
    """Read and validate a manifest, and check its seal, then its version, on the same bytes."""
    try:
        payload = read_input(path, "manifest")
    except OSError as exc:
        raise ManifestError(path, "", str(exc)) from None
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise ManifestError(path, "", f"not valid JSON: {exc}") from None
    manifest = from_dict(data, path)
    if (edited := seal_problem(data)) is not None:
        return manifest, Problem(edited, edited=True)
    older = older_problem(data)
    return manifest, None if older is None else Problem(older, edited=False)


def load(path: str | os.PathLike[str]) -> Manifest:
    """Read and validate a manifest; every problem is a ManifestError naming file and field."""
    return read(path)[0]
