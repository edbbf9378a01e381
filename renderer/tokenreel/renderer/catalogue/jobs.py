"""A catalogue: every chosen prompt of every session in every layout and theme, as render jobs.

Each job is one video and its poster, DIR/<session-stem>/<prompt>-<layout>-<theme>.mp4 and .png,
named from `file_component`s so an id from a session file never picks a folder. Everything the
user typed (layouts, themes, prompts, arms, the other options) is checked here before a frame
is drawn, so a typo is bad input rather than a failure of every video; what can fail for one
video only (an arm with no usable run of that prompt) is kept on its job as its problem.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

from tokenreel.base.safe_text import file_component, shown_path
from tokenreel.base.theme import is_path as is_theme_path
from tokenreel.renderer import manifest as manifests
from tokenreel.renderer.options import RenderOptions, check_options, parse_size, pin_files
from tokenreel.renderer.render import CHUNK_FRAMES, load_session, regular_file_sha256
from tokenreel.renderer.render_plan import build_plan, chosen_arms


class NamedLayout(StrEnum):
    """The shapes a catalogue is asked for by name; any size `render --size` takes works too."""

    WIDE = "16:9"
    TALL = "9:16"  # arms stacked
    SQUARE = "1:1"
    UHD = "4k"

    @property
    def size(self) -> str:
        """WIDTHxHEIGHT, as RenderOptions.size takes it."""
        return _NAMED_SIZES[self]


_NAMED_SIZES = {NamedLayout.WIDE: "1920x1080", NamedLayout.TALL: "1080x1920", NamedLayout.SQUARE: "1080x1080", NamedLayout.UHD: "3840x2160"}
VIDEO, POSTER = ".mp4", ".png"
_SIZE_LIKE = re.compile(r"\d+[xX×]\d+")


@dataclass(frozen=True)
class Layout:
    name: NamedLayout | str  # "16:9", "4k", or a size as the user gave it, such as "1280x720"
    size: str  # WIDTHxHEIGHT, as RenderOptions.size takes it

    @property
    def label(self) -> str:
        """The layout in a file name: "16x9", "9x16", "1x1", "4k", "1280x720"."""
        return file_component(self.name.replace(":", "x"))


@dataclass(frozen=True)
class Job:
    """One video of the catalogue and its poster (a PNG of the same options: the end card's
    first frame, as `render -o X.png` writes it)."""

    session: Path
    session_sha256: str  # of the bytes planned from; the manifest must name the same
    prompt: str
    layout: Layout
    theme: str  # a shipped theme's name or a theme file's path
    options: RenderOptions  # pinned (pin_files): exactly what `render` would be given
    video: Path
    poster: Path
    frames: int  # the video's frame count (0 when it cannot be rendered)
    problem: str | None = None  # why this video cannot be rendered, in one line

    @property
    def theme_label(self) -> str:
        return theme_label(self.theme)

    @property
    def outputs(self) -> tuple[Path, Path]:
        return self.video, self.poster


def layouts(names: Sequence[str]) -> tuple[Layout, ...]:
    """The layouts named (NamedLayout) or given as sizes; ValueError names the first bad one."""
    found = []
    for name in names:
        if name.lower() in set(NamedLayout):
            named = NamedLayout(name.lower())
            found.append(Layout(named, named.size))
            continue
        if not _SIZE_LIKE.fullmatch(name):
            raise ValueError(f"layouts: unknown layout {name!r} (known: {', '.join(NamedLayout)}, or a size such as 1280x720)")
        parse_size(name)  # its own line: "size: ..." says what is wrong with it
        found.append(Layout(name, name))
    _unique([layout.label for layout in found], "layouts", "layout")
    return tuple(found)


def theme_label(theme: str) -> str:
    """The theme in a file name: its name, or a theme file's stem."""
    return file_component(Path(theme).stem if is_theme_path(theme) else theme)


def _unique(labels: Sequence[str], option: str, what: str) -> None:
    """Two entries that would write the same files are refused: one would overwrite the other."""
    seen = set()
    for label in labels:
        if label in seen:
            raise ValueError(f"{option}: two {what}s would both write files named {label!r}; give each once")
        seen.add(label)


def _prompts(session_path: Path, ids: list[str], chosen: Sequence[str] | None) -> list[str]:
    if chosen is None:
        return ids
    for prompt in chosen:
        if prompt not in ids:
            raise ValueError(f"prompts: no prompt {prompt!r} in {shown_path(session_path)} (prompts: {', '.join(ids)})")
    _unique([file_component(p) for p in chosen], "prompts", "prompt")
    return list(chosen)


def catalogue(
    sessions: Sequence[Path],
    out: Path,
    base: RenderOptions,
    chosen_layouts: Sequence[Layout],
    themes: Sequence[str],
    prompts: Sequence[str] | None = None,
) -> list[Job]:
    """The jobs in order: session, prompt (the session's order, or the order given), layout,
    theme. `prompts` None is every prompt. ValueError (one line) for bad input."""
    _unique([theme_label(theme) for theme in themes], "themes", "theme")
    _unique([file_component(Path(path).stem) for path in sessions], "sessions", "session file name")
    pinned = {}
    for layout in chosen_layouts:
        for theme in themes:
            options = pin_files(replace(base, size=layout.size, theme=theme))
            check_options(options)
            pinned[layout, theme] = options
    jobs = []
    for session_path in sessions:
        session, sha256 = load_session(session_path)
        if session.kind == "sweep":
            raise ValueError(f"{shown_path(session_path)}: a sweep session (tokenreel sweep); a catalogue renders ladder sessions")
        try:
            chosen_arms(session, base.arms)
        except ValueError as exc:
            raise ValueError(f"{shown_path(session_path)}: {exc}") from None
        folder = out / file_component(Path(session_path).stem)
        for prompt in _prompts(session_path, [p.id for p in session.prompts], prompts):
            for layout in chosen_layouts:
                for theme in themes:
                    options = replace(pinned[layout, theme], prompt=prompt)
                    stem = folder / f"{file_component(prompt)}-{layout.label}-{theme_label(theme)}"
                    try:
                        frames, problem = build_plan(session, options).frame_count, None
                    except ValueError as exc:
                        frames, problem = 0, str(exc)
                    video, poster = stem.with_name(stem.name + VIDEO), stem.with_name(stem.name + POSTER)
                    jobs.append(Job(Path(session_path), sha256, prompt, layout, theme, options, video, poster, frames, problem))
    return jobs


def is_current(job: Job, output: Path, versions: dict[str, str]) -> bool:
    """Whether `output` and its manifest are what rendering the job would write now: the same
    session bytes, at the same relative path, the same options, chunking and versions, and the
    file on disk the one the manifest hashed (a sealed manifest of this version: an edited one is
    not trusted, an older one is rendered again)."""
    try:
        record, problem = manifests.read(manifests.path_for(output))
        on_disk = regular_file_sha256(output)
    except (manifests.ManifestError, OSError):
        return False
    return (
        problem is None
        and record.output == output.name
        and record.session == manifests.relative_path(job.session, output.parent)
        and record.session_sha256 == job.session_sha256
        and record.options == manifests.portable_options(job.options, output.parent)
        and record.chunk_frames == CHUNK_FRAMES
        and record.versions == versions
        and on_disk == record.output_sha256
    )

