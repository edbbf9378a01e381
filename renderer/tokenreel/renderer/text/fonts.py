"""The bundled fonts, which codepoints each one covers, and which one draws a given character.

Pillow has no font fallback: a glyph missing from the font draws as a box. So coverage is read
from each font's cmap table (parsed here, no extra dependency) and a cluster goes to one font
of the chain that has all of it. Characters of the scripts with a font of their own (Arabic,
Hebrew, Devanagari, Thai, Hangul) go to that font first; everything else keeps the chain it had
before those fonts were added, which they only extend at its end.

Drawing: a cluster of one codepoint in a font that needs no shaping (Latin, Greek, Cyrillic,
CJK, a single emoji) is drawn by Pillow's BASIC layout with the FreeType its wheel carries:
hinted, the pixels tokenreel always drew. Anything that needs shaping (a base with its marks,
emoji sequences, Hangul, Devanagari and Thai clusters, Arabic and Hebrew) goes through the
text engine: HarfBuzz (shaping.py), the bidi algorithm (bidi.py) and FreeType by glyph id
(raster.py), all from pinned wheels. Pillow's own complex layout (raqm) is never used: it
loads FriBiDi from the system at run time, so its pixels would depend on the machine.
"""

from __future__ import annotations

import struct
from functools import lru_cache

from PIL import ImageFont, features

from tokenreel import assets
from tokenreel.renderer.text import bidi, raster, shaping

REGULAR = "JetBrainsMono-Regular.ttf"
BOLD = "JetBrainsMono-Bold.ttf"
SYMBOLS = "DejaVuSansMono.ttf"
CJK = "DroidSansFallbackFull.ttf"
EMOJI = "NotoColorEmoji.ttf"
ARABIC = "NotoSansArabic-Regular.ttf"
HEBREW = "NotoSansHebrew-Regular.ttf"
DEVANAGARI = "NotoSansDevanagari-Regular.ttf"
THAI = "NotoSansThai-Regular.ttf"
HANGUL = "NanumGothicCoding.ttf"

FALLBACK = (SYMBOLS, CJK, EMOJI)  # tried in this order after the primary (regular or bold) face
SCRIPT_FONTS = (HANGUL, ARABIC, HEBREW, DEVANAGARI, THAI)  # tried last, after FALLBACK
MEASURED = frozenset({DEVANAGARI, THAI})  # proportional clusters: 1 or 2 cells by their advance
RTL = frozenset({ARABIC, HEBREW})  # their runs are shaped right to left as one unit (rtl_runs.py)
# (first, last) codepoint ranges whose characters try their script's font before the chain
SCRIPT_RANGES = (
    (0x0590, 0x05FF, HEBREW), (0xFB1D, 0xFB4F, HEBREW),
    (0x0600, 0x06FF, ARABIC), (0x0750, 0x077F, ARABIC), (0x0870, 0x08FF, ARABIC),
    (0xFB50, 0xFDFF, ARABIC), (0xFE70, 0xFEFF, ARABIC),
    (0x0900, 0x097F, DEVANAGARI), (0xA8E0, 0xA8FF, DEVANAGARI),
    (0x0E00, 0x0E7F, THAI),
    (0x1100, 0x11FF, HANGUL), (0x3130, 0x318F, HANGUL), (0xA960, 0xA97F, HANGUL),
    (0xAC00, 0xD7FF, HANGUL),
)
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
    for seg, (start, end, delta, offset) in enumerate(zip(starts, ends, deltas, offsets, strict=False)):
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

    prefer_emoji (the character was followed by U+FE0F) tries the emoji font first. A character
    of a script with its own font (SCRIPT_RANGES) tries that font before anything else.
    """
    chain = (EMOJI, primary, *FALLBACK[:-1]) if prefer_emoji else (primary, *FALLBACK)
    script = script_font(codepoint)
    for filename in ((script,) if script else ()) + chain + SCRIPT_FONTS:
        if codepoint in coverage(filename):
            return filename
    return None


def script_font(codepoint: int) -> str | None:
    """The font of the codepoint's script when it has one of its own (SCRIPT_RANGES)."""
    for first, last, filename in SCRIPT_RANGES:
        if first <= codepoint <= last:
            return filename
    return None


TEXT_ENGINE = "pillow-basic + harfbuzz/freetype/python-bidi"


def layout_versions() -> dict[str, str]:
    """The text engine and every library that lays out or rasterises glyphs, for the manifest:
    Pillow's FreeType draws single grid glyphs, the rest draw shaped text."""
    return {
        "text_engine": TEXT_ENGINE,
        "freetype": str(features.version("freetype2")),
        **shaping.versions(),
        **raster.versions(),
        **bidi.versions(),
    }


@lru_cache(maxsize=128)
def load(filename: str, size: int) -> ImageFont.FreeTypeFont:
    """A font at a pixel size with Pillow's BASIC layout; the emoji font opens at EMOJI_SIZE."""
    if filename == EMOJI:
        size = EMOJI_SIZE
    return ImageFont.truetype(str(assets.file("fonts", filename)), size, layout_engine=ImageFont.Layout.BASIC)
