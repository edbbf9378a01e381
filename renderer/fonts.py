"""The bundled fonts, which codepoints each one covers, and which one draws a given character.

Pillow has no font fallback: a glyph missing from the font draws as a box. So coverage is read
from each font's cmap table (parsed here, no extra dependency) and a character goes to the
first font of the chain that has it. Fonts load with the BASIC layout engine because Raqm is
present on some machines and not others, and its shaping would change pixels between them.
"""

from __future__ import annotations

import struct
from functools import lru_cache

from PIL import ImageFont

from tokenreel import assets

REGULAR = "JetBrainsMono-Regular.ttf"
BOLD = "JetBrainsMono-Bold.ttf"
SYMBOLS = "DejaVuSansMono.ttf"
CJK = "DroidSansFallbackFull.ttf"
EMOJI = "NotoColorEmoji.ttf"

FALLBACK = (SYMBOLS, CJK, EMOJI)  # tried in this order after the primary (regular or bold) face
EMOJI_SIZE = 109  # the only size at which the CBDT bitmaps of Noto Color Emoji open
VARIATION_EMOJI = 0xFE0F  # "show the previous character as emoji"


def _cmap_format4(data: bytes, at: int) -> set[int]:
    seg_count = struct.unpack_from(">H", data, at + 6)[0] // 2
    ends_at = at + 14
    starts_at = ends_at + 2 * seg_count + 2
    deltas_at = starts_at + 2 * seg_count
    ranges_at = deltas_at + 2 * seg_count
    ends = struct.unpack_from(f">{seg_count}H", data, ends_at)
    starts = struct.unpack_from(f">{seg_count}H", data, starts_at)
    deltas = struct.unpack_from(f">{seg_count}H", data, deltas_at)
    offsets = struct.unpack_from(f">{seg_count}H", data, ranges_at)
    covered: set[int] = set()
    for seg, (start, end, delta, offset) in enumerate(zip(starts, ends, deltas, offsets)):
        if start == 0xFFFF:
            continue
        for code in range(start, end + 1):
            if offset == 0:
                glyph = (code + delta) & 0xFFFF
            else:
                where = ranges_at + 2 * seg + offset + 2 * (code - start)
                glyph = struct.unpack_from(">H", data, where)[0]
                glyph = (glyph + delta) & 0xFFFF if glyph else 0
            if glyph:
                covered.add(code)
    return covered


def _cmap_format12(data: bytes, at: int) -> set[int]:
    groups = struct.unpack_from(">I", data, at + 12)[0]
    covered: set[int] = set()
    for g in range(groups):
        start, end, glyph = struct.unpack_from(">3I", data, at + 16 + 12 * g)
        covered.update(range(start + (glyph == 0), end + 1))
    return covered


@lru_cache(maxsize=None)
def coverage(filename: str) -> frozenset[int]:
    """Codepoints that the font's Unicode cmap subtables map to a real glyph (not .notdef)."""
    data = assets.file("fonts", filename).read_bytes()
    tables = struct.unpack_from(">H", data, 4)[0]
    cmap = None
    for t in range(tables):
        tag, _, offset, _ = struct.unpack_from(">4sIII", data, 12 + 16 * t)
        if tag == b"cmap":
            cmap = offset
    if cmap is None:
        return frozenset()
    covered: set[int] = set()
    for r in range(struct.unpack_from(">H", data, cmap + 2)[0]):
        platform, encoding, offset = struct.unpack_from(">HHI", data, cmap + 4 + 8 * r)
        if platform not in (0, 3) or (platform == 3 and encoding not in (1, 10)):
            continue
        at = cmap + offset
        fmt = struct.unpack_from(">H", data, at)[0]
        if fmt == 4:
            covered |= _cmap_format4(data, at)
        elif fmt == 12:
            covered |= _cmap_format12(data, at)
    return frozenset(covered)


@lru_cache(maxsize=65536)
def font_for(codepoint: int, primary: str = REGULAR, prefer_emoji: bool = False) -> str | None:
    """The first font of primary + FALLBACK that has the codepoint; None when none has it.

    prefer_emoji (the character was followed by U+FE0F) tries the emoji font first.
    """
    chain = (EMOJI, primary, *FALLBACK[:-1]) if prefer_emoji else (primary, *FALLBACK)
    for filename in chain:
        if codepoint in coverage(filename):
            return filename
    return None


@lru_cache(maxsize=64)
def load(filename: str, size: int) -> ImageFont.FreeTypeFont:
    """A font at a pixel size; the emoji font ignores size and opens at EMOJI_SIZE."""
    if filename == EMOJI:
        size = EMOJI_SIZE
    return ImageFont.truetype(str(assets.file("fonts", filename)), size, layout_engine=ImageFont.Layout.BASIC)
