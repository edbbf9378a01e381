"""Colour themes, kept as JSON in assets/themes so a new look needs no code change."""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

from tokenreel import assets

RGB = tuple[int, int, int]
SYNTAX_STYLES = ("code", "keyword", "name", "builtin", "string", "number", "comment", "operator", "punctuation", "fence")
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
        """The colour of a text style: a syntax style or a plain field such as 'dim'."""
        for name, rgb in self.syntax:
            if name == style:
                return rgb
        return getattr(self, style)

    def accent(self, index: int) -> RGB:
        return self.accents[index % len(self.accents)]


def available() -> list[str]:
    return assets.names("themes", ".json")


def _rgb(value: object, where: str) -> RGB:
    if not isinstance(value, str) or not _HEX.fullmatch(value):
        raise ValueError(f"theme: {where} must be a colour like '#12abef', got {value!r}")
    return (int(value[1:3], 16), int(value[3:5], 16), int(value[5:7], 16))


def load_theme(name: str) -> Theme:
    """Read the shipped themes/<name>.json; ValueError names the theme option and the bad field."""
    if name not in available():
        raise ValueError(f"theme: unknown theme {name!r} (known: {', '.join(available())})")
    data = orjson.loads(assets.file("themes", f"{name}.json").read_bytes())
    plain = [f for f in Theme.__dataclass_fields__ if f not in ("name", "accents", "syntax")]
    missing = [key for key in (*plain, "accents", "syntax") if key not in data]
    if missing:
        raise ValueError(f"theme: {name}.json lacks {', '.join(missing)}")
    accents = data["accents"]
    if not isinstance(accents, list) or not accents:
        raise ValueError(f"theme: {name}.json accents must be a non-empty list")
    syntax = data["syntax"]
    if not isinstance(syntax, dict) or set(syntax) != set(SYNTAX_STYLES):
        raise ValueError(f"theme: {name}.json syntax must have exactly {', '.join(SYNTAX_STYLES)}")
    return Theme(
        name=name,
        **{key: _rgb(data[key], key) for key in plain},
        accents=tuple(_rgb(c, f"accents[{i}]") for i, c in enumerate(accents)),
        syntax=tuple((key, _rgb(syntax[key], f"syntax.{key}")) for key in SYNTAX_STYLES),
    )
