"""The bundled fonts, which codepoints each one covers, and which one draws a given character.

Pillow has no font fallback: a glyph missing from the font draws as a box. So coverage is read
from each font's cmap table (parsed here, no extra dependency) and a cluster goes to one font
of the chain that has all of it. Characters of the scripts with a font of their own (Arabic,
Hebrew, Devanagari, Thai, Hangul) go to that font first; everything else keeps the chain it had
before those fonts were added, which they only extend at its end.

Shaping: a cluster of one codepoint in a font that needs no shaping (Latin, Greek, Cyrillic,
CJK, Hangul syllables, a single emoji) is drawn with the BASIC layout engine, whose hinted
advances are the pixels tokenreel always drew. Anything that needs shaping (a base with its
marks, emoji ZWJ sequences, flags, skin tones, keycaps, Devanagari and Thai clusters, runs of
Arabic and Hebrew) is drawn with Pillow's complex layout: raqm, with HarfBuzz and FriBiDi.
Pillow's wheels load FriBiDi from the system at run time and silently fall back to BASIC
without it, which would draw other pixels; so rendering refuses to start where raqm is not
available (require_shaping), and the manifest records the engine and its library versions.
"""

from __future__ import annotations

import struct
from functools import lru_cache

from PIL import ImageFont, features

from tokenreel import assets

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
RTL = frozenset({ARABIC, HEBREW})  # their runs are shaped right to left as one unit (text.py)
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


class ShapingUnavailable(ValueError):
    """Pillow here has no complex text layout (raqm), so shaped text would draw other pixels.
    A ValueError, so the CLI prints it as its one line (and verify reports "could not re-render")."""


def shaping_available() -> bool:
    return bool(features.check("raqm"))


def require_shaping() -> None:
    """Raise ShapingUnavailable, one line saying what to install, unless raqm is available."""
    if not shaping_available():
        raise ShapingUnavailable(
            "text shaping is not available: Pillow found no raqm/FriBiDi (PIL.features.check('raqm') is False),"
            " and without it Arabic, Hebrew, Devanagari, Thai and emoji sequences would draw other pixels;"
            " install FriBiDi (Debian/Ubuntu: sudo apt-get install libfribidi0) and render again"
        )


def layout_versions() -> dict[str, str]:
    """The text layout engine and the libraries that shape and rasterise glyphs, for the manifest."""
    def version(name: str) -> str:
        return str(features.version(name) or "not available")

    return {
        "layout_engine": "raqm" if shaping_available() else "basic",
        "raqm": version("raqm"),
        "fribidi": version("fribidi"),
        "harfbuzz": version("harfbuzz"),
        "freetype": version("freetype2"),
    }


@lru_cache(maxsize=128)
def load(filename: str, size: int, shaped: bool = False) -> ImageFont.FreeTypeFont:
    """A font at a pixel size; the emoji font ignores size and opens at EMOJI_SIZE.

    shaped: with the RAQM layout engine (HarfBuzz shaping, FriBiDi reordering), for clusters
    and runs that need it; ShapingUnavailable where Pillow has no raqm. Otherwise BASIC.
    """
    if filename == EMOJI:
        size = EMOJI_SIZE
    path = str(assets.file("fonts", filename))
    if shaped:
        require_shaping()
        return ImageFont.truetype(path, size, layout_engine=ImageFont.Layout.RAQM)
    return ImageFont.truetype(path, size, layout_engine=ImageFont.Layout.BASIC)
