"""Colour themes, kept as JSON in assets/tokenreel/assets/themes so a new look needs no code change.

Core, not renderer: the video and the charts (`tokenreel.report.charts`) draw with the same colours,
and an arm has the same accent in both (accents[i] for the session's i-th arm).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import orjson

from tokenreel import assets
from tokenreel.base.files import read_input
from tokenreel.base.safe_text import shown_path

RGB = tuple[int, int, int]
SYNTAX_STYLES = ("code", "keyword", "name", "builtin", "string", "number", "comment", "operator", "punctuation", "fence")
# The video's markdown styles (renderer/tokenreel/renderer/text/markup.py), drawn in these colours of the theme; the
# bold face of strong text and headings is the renderer's, not a colour.
STYLE_ALIASES = {
    "strong": "text",
    "emphasis": "keyword",
    "strong_emphasis": "keyword",
    "inline_code": "string",
    "heading": "name",
    "bullet": "dim",
    "rule": "dim",
    "pad": "text",
}
_HEX = re.compile(r"#[0-9a-fA-F]{6}")


@dataclass(frozen=True)
class Theme:
    """Every colour a frame uses; text styles name a field or a syntax entry."""

    name: str
    background: RGB
    panel: RGB
    panel_edge: RGB
    title: RGB
    text: RGB
    dim: RGB
    faint: RGB
    reasoning: RGB
    tool: RGB
    control: RGB
    good: RGB
    accents: tuple[RGB, ...]
    syntax: tuple[tuple[str, RGB], ...]

    def color(self, style: str) -> RGB:
        """The colour of a text style: a syntax style, a plain field such as 'dim', or a
        markdown style (STYLE_ALIASES)."""
        style = STYLE_ALIASES.get(style, style)
        for name, rgb in self.syntax:
            if name == style:
                return rgb
        plain: RGB = getattr(self, style)  # a colour field named by the style (AttributeError for none)
        return plain

    def accent(self, index: int) -> RGB:
        return self.accents[index % len(self.accents)]


def hex_color(rgb: RGB) -> str:
    """"#rrggbb", as CSS and matplotlib take a colour."""
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def available() -> list[str]:
    return assets.names("themes", ".json")


def _rgb(value: object, where: str, source: str = "") -> RGB:
    if not isinstance(value, str) or not _HEX.fullmatch(value):
        raise ValueError(f"theme: {source}{where} must be a colour like '#12abef', got {value!r}")
    return (int(value[1:3], 16), int(value[3:5], 16), int(value[5:7], 16))


def is_path(name: str) -> bool:
    """A theme option naming a JSON file rather than a shipped theme."""
    return name.lower().endswith(".json") or "/" in name or "\\" in name


def load_theme(name: str) -> Theme:
    """A shipped theme (themes/<name>.json) or a JSON theme file at a path; ValueError names the
    theme option, the file and the bad key, on one line."""
    if is_path(name):
        try:
            payload = read_input(name, "theme")
        except OSError as exc:
            raise ValueError(f"theme: cannot read theme file {shown_path(name)}: {exc.strerror or exc}") from None
        return _parse(payload, Path(name).name, shown_path(name))
    if name not in available():
        raise ValueError(f"theme: unknown theme {name!r} (known: {', '.join(available())}; or a path to a .json file)")
    return _parse(assets.file("themes", f"{name}.json").read_bytes(), name, f"{name}.json")


def _parse(payload: bytes, theme_name: str, source: str) -> Theme:
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"theme: {source} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"theme: {source} must hold a JSON object of colours")
    plain = [f for f in Theme.__dataclass_fields__ if f not in ("name", "accents", "syntax")]
    known = (*plain, "accents", "syntax")
    unknown = [key for key in data if key not in known]
    if unknown:
        raise ValueError(f"theme: {source}: unknown key {unknown[0]!r} (keys: {', '.join(known)})")
    missing = [key for key in known if key not in data]
    if missing:
        raise ValueError(f"theme: {source} lacks {', '.join(missing)}")
    accents = data["accents"]
    if not isinstance(accents, list) or not accents:
        raise ValueError(f"theme: {source}: key 'accents' must be a non-empty list")
    syntax = data["syntax"]
    if not isinstance(syntax, dict) or set(syntax) != set(SYNTAX_STYLES):
        raise ValueError(f"theme: {source}: key 'syntax' must have exactly {', '.join(SYNTAX_STYLES)}")
    where = f"{source}: key "
    return Theme(
        name=theme_name,
        **{key: _rgb(data[key], key, where) for key in plain},
        accents=tuple(_rgb(c, f"accents[{i}]", where) for i, c in enumerate(accents)),
        syntax=tuple((key, _rgb(syntax[key], f"syntax.{key}", where)) for key in SYNTAX_STYLES),
    )
