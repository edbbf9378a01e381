"""HarfBuzz shaping of one run of text (one font, one direction): which glyphs, and where.

uharfbuzz's wheels carry HarfBuzz itself, so shaping needs no system library and gives the
same glyphs and positions on every machine with the pinned version. Positions are in font
units (the font's scale is its units per em), so they scale exactly to any pixel size; text is
added as codepoints, so a glyph's cluster is the index of its first character in the run.
A right-to-left run comes back in visual order (left to right), mirrored characters mirrored.

A long run (a paragraph of Arabic prose is one run of one font and level) is shaped in
segments of SEGMENT characters with their neighbours as context, cut where HarfBuzz marks a
cluster safe to break: its guarantee is that both sides then shape exactly as in the whole
run, so the advances are the same while no buffer holds more than a segment.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from functools import lru_cache
from typing import NamedTuple

import uharfbuzz as hb

from tokenreel import assets


class Glyph(NamedTuple):
    gid: int
    cluster: int  # index in the run of the first character it draws
    x_advance: int  # font units
    x_offset: int
    y_offset: int


@lru_cache(maxsize=None)
def _font(filename: str) -> hb.Font:
    return hb.Font(hb.Face(assets.file("fonts", filename).read_bytes()))


def units_per_em(filename: str) -> int:
    upem: int = _font(filename).face.upem
    return upem


@lru_cache(maxsize=16384)
def shape(text: str, filename: str, rtl: bool = False) -> tuple[Glyph, ...]:
    """The glyphs of text in the font, in visual order; default features (kerning, ligatures,
    the joining forms and mark positioning a script needs)."""
    buffer = hb.Buffer()
    buffer.add_codepoints([ord(c) for c in text])
    buffer.direction = "rtl" if rtl else "ltr"
    buffer.guess_segment_properties()
    hb.shape(_font(filename), buffer, {})
    return tuple(
        Glyph(info.codepoint, info.cluster, pos.x_advance, pos.x_offset, pos.y_offset)
        for info, pos in zip(buffer.glyph_infos, buffer.glyph_positions, strict=False)
    )


SEGMENT = 1024  # characters shaped at once in a long run
CONTEXT = 64  # characters on each side handed to HarfBuzz as context, not shaped


def advances(text: str, filename: str, rtl: bool = False, segment: int = SEGMENT) -> Iterator[tuple[int, int]]:
    """(cluster, x_advance) of each glyph of the run in visual order, as `shape` of the whole
    run gives them, shaped a segment at a time. Told one by one: a right-to-left run's parts
    come last first, so they are kept until its end, as two int arrays (8 bytes a glyph)."""
    if len(text) <= segment:
        yield from ((g.cluster, g.x_advance) for g in shape(text, filename, rtl))
        return
    parts: list[tuple[array[int], array[int]]] = []
    at = 0
    while at < len(text):
        end = min(len(text), at + segment)
        while True:  # a part with no safe place to cut (hardly text) grows until it has one or ends
            buffer, left = _shape_part(text, at, end, filename, rtl)
            cut = end if end == len(text) else _safe_cut(buffer, left, at + segment // 2, end, rtl)
            if cut is not None:
                break
            end = min(len(text), end + segment)
        kept = [(left + info.cluster, pos.x_advance)
                for info, pos in zip(buffer.glyph_infos, buffer.glyph_positions, strict=False)
                if left + info.cluster < cut]
        if rtl:
            parts.append((array("I", (c for c, _ in kept)), array("i", (a for _, a in kept))))
        else:
            yield from kept
        at = cut
    for clusters, widths in reversed(parts):
        yield from zip(clusters, widths, strict=True)


def _shape_part(text: str, start: int, end: int, filename: str, rtl: bool) -> tuple[hb.Buffer, int]:
    """text[start:end] shaped with up to CONTEXT characters each side as context; and where
    the characters handed over start in text (glyph clusters count from there)."""
    left = max(0, start - CONTEXT)
    buffer = hb.Buffer()
    buffer.add_codepoints([ord(c) for c in text[left : end + CONTEXT]], start - left, end - start)
    buffer.direction = "rtl" if rtl else "ltr"
    buffer.guess_segment_properties()
    hb.shape(_font(filename), buffer, {})
    return buffer, left


def _safe_cut(buffer: hb.Buffer, left: int, low: int, high: int, rtl: bool) -> int | None:
    """The last cluster start in (low, high) where no glyph is unsafe to break, if any: glyphs
    are looked at from the part's logical end back, so usually only a few."""
    infos = buffer.glyph_infos
    logical = range(len(infos)) if rtl else range(len(infos) - 1, -1, -1)  # rtl glyphs are in visual order
    unsafe = hb.GlyphFlags.UNSAFE_TO_BREAK
    candidate: int | None = None
    safe = True
    for k in logical:
        cluster: int = left + infos[k].cluster
        if cluster != candidate:
            if candidate is not None and safe and low < candidate < high:
                return candidate
            if cluster <= low:
                return None
            candidate, safe = cluster, True
        safe = safe and not infos[k].flags & unsafe
    return candidate if candidate is not None and safe and low < candidate < high else None


def advance(text: str, filename: str, rtl: bool = False) -> int:
    """The shaped run's width, in font units."""
    return sum(g.x_advance for g in shape(text, filename, rtl))


def color_png(filename: str, gid: int, ppem: int) -> bytes:
    """The PNG a colour bitmap font (CBDT, as Noto Color Emoji) holds for a glyph at a strike."""
    font = _font(filename)
    font.ppem = (ppem, ppem)
    return bytes(font.get_glyph_color_png(gid).data)


def versions() -> dict[str, str]:
    return {"harfbuzz": hb.version_string(), "uharfbuzz": hb.__version__}
