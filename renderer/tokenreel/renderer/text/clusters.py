"""Text into grid clusters: each user-perceived character, and the font and width it is drawn with.

Text from real models holds CJK, emoji, control characters, tabs and tokens longer than a
line, and every script. Each user-perceived character (a grapheme cluster: a base with its
marks, an emoji ZWJ sequence, a flag, a keycap, an Indic conjunct) becomes a cluster of 1 or 2
cells drawn by one font that covers all of it, so nothing can spill outside the grid and font
fallback never splits a cluster. Clusters that need shaping are drawn by the text engine
(painter.py); wrapping them into lines is wrap.py's job.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from tokenreel.renderer.text import fonts, shaping
from tokenreel.renderer.text.cells import BREAK, GLYPH, NEWLINE, SPACE, TAB, Cell, Cluster
from tokenreel.renderer.text.markup import BOLD_STYLES

STREAM_KINDS = ("reasoning", "tool")  # styles that are not the answer: a line break separates them

NEWLINES = "\n\u2028\u2029\x85"
_DEL_PICTURE = "\u2421"
_REPLACEMENT = "\ufffd"
_SKIN_TONES = (0x1F3FB, 0x1F3FF)  # emoji modifiers: shaped into the emoji before them
_ZWJ = "\u200d"
_REGIONAL = (0x1F1E6, 0x1F1FF)  # two of them make a flag
_TAGS = (0xE0020, 0xE007F)  # subdivision flags: black flag, tag letters, cancel tag
_SPACING_MARKS = frozenset("\u0e33\u0eb3")  # Thai and Lao SARA AM: letters, but they extend a cluster
_INDIC = (0x0900, 0x0DFF)  # scripts whose virama + consonant stay in one cluster (conjuncts)
_JAMO_VT = (0x1160, 0x11FF)  # conjoining Hangul vowels and trailing consonants
MEASURE_SIZE = 64  # px: where the widths of proportional-script clusters are measured
WIDE_ADVANCE = 1.5  # a cluster wider than this many cells takes 2 (narrower ones are squeezed into 1)


def _ignorable(code: int) -> bool:
    """Default-ignorable characters that the shaper consumes: no font needs a glyph for them."""
    return 0x200B <= code <= 0x200F or 0x2060 <= code <= 0x206F or _is_variation_selector(code) or 0xE0000 <= code <= 0xE0FFF


def covered(text: str, font: str) -> bool:
    cover = fonts.coverage(font)
    return all(ord(c) in cover or _ignorable(ord(c)) for c in text)


def _pictographic(code: int) -> bool:
    """Can start or continue an emoji sequence: outside ASCII and in the emoji font."""
    return code > 0x7F and code in fonts.coverage(fonts.EMOJI)


def _extends(chars: str, code: int) -> bool:
    """Whether the character with this code continues the cluster chars (a GLYPH cluster)."""
    last = ord(chars[-1])
    if _SKIN_TONES[0] <= code <= _SKIN_TONES[1] or _TAGS[0] <= code <= _TAGS[1]:
        return _pictographic(ord(chars[0]))
    if _REGIONAL[0] <= code <= _REGIONAL[1]:
        return len(chars) == 1 and _REGIONAL[0] <= last <= _REGIONAL[1]
    if chr(code) in _SPACING_MARKS:
        return True
    if _JAMO_VT[0] <= code <= _JAMO_VT[1]:
        return 0x1100 <= last <= 0x11FF or 0xAC00 <= last <= 0xD7A3
    if _INDIC[0] <= code <= _INDIC[1] and unicodedata.combining(chars[-1]) == 9 and code >> 7 == last >> 7:
        return unicodedata.category(chr(code)) == "Lo"  # virama, then a consonant of its script
    return False


def _is_variation_selector(code: int) -> bool:
    return 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF


def _resolve(text: str, primary: str, prefer_emoji: bool) -> tuple[str, str | None]:
    """Display text and font of a cluster: one font draws all of it (fallback never splits a
    cluster); what no font can draw with the base is dropped."""
    text = unicodedata.normalize("NFC", text)
    base = ord(text[0])
    font = fonts.font_for(base, primary, prefer_emoji)
    if len(text) == 1 or font is None:
        return text[0], font
    if covered(text, font):
        return text, font
    script = fonts.script_font(base)
    for candidate in ((script,) if script else ()) + (primary, *fonts.FALLBACK, *fonts.SCRIPT_FONTS):
        if base in fonts.coverage(candidate) and covered(text, candidate):
            return text, candidate
    cover = fonts.coverage(font)
    return text[0] + "".join(c for c in text[1:] if ord(c) in cover or _ignorable(ord(c))), font


def _visible(char: str) -> str | None:
    """What a control character shows as (a Control Pictures symbol), or None for ordinary text."""
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return _DEL_PICTURE
    if 0x80 <= code < 0xA0 or 0xD800 <= code <= 0xDFFF:
        return _REPLACEMENT
    return None


@dataclass(slots=True)
class _Pending:
    """A cluster being read: more characters may still join it."""

    start: int
    kind: int
    chars: str
    style: str
    emoji: bool = False  # an emoji presentation selector followed it: drawn from the emoji font


def _raw_clusters(text: str, styles: Sequence[str], start: int = 0, end: int | None = None) -> Iterator[_Pending]:
    """Each cluster of text[start:end] (starts counted in text), in order; a cluster is yielded
    only once the next one has begun, since combining marks and selectors amend the last one."""
    last: _Pending | None = None
    previous_kind = None
    joining = False  # the last character was a ZWJ inside an emoji sequence
    i = start
    n = len(text) if end is None else end
    while i < n:
        char = text[i]
        style = styles[i]
        stream_kind = style if style in STREAM_KINDS else ""
        item: _Pending | None = None
        if previous_kind is not None and stream_kind != previous_kind:
            if last is not None:
                yield last
            last = _Pending(i, BREAK, "", style)
        previous_kind = stream_kind
        code = ord(char)
        was_joining, joining = joining, False
        if was_joining and last is not None and last.kind == GLYPH:
            last.chars += char
            i += 1
            continue
        if char == "\r" and i + 1 < n and text[i + 1] == "\n":
            item = _Pending(i, NEWLINE, "", style)
            i += 1
        elif char in NEWLINES:
            item = _Pending(i, NEWLINE, "", style)
        elif char == "\t":
            item = _Pending(i, TAB, " ", style)
        elif char == " ":
            item = _Pending(i, SPACE, " ", style)
        elif 0x20 < code < 0x7F:
            item = _Pending(i, GLYPH, char, style)
        elif (picture := _visible(char)) is not None:
            item = _Pending(i, GLYPH, picture, "control")
        elif last is not None and last.kind == GLYPH and last.style != "control" and _extends(last.chars, code):
            last.chars += char
        elif (
            char == _ZWJ and last is not None and last.kind == GLYPH and i + 1 < n
            and _pictographic(ord(last.chars[0])) and _pictographic(ord(text[i + 1]))
        ):
            last.chars += char
            joining = True
            i += 1
            continue
        elif _is_variation_selector(code):
            if code == fonts.VARIATION_EMOJI and last is not None and last.kind == GLYPH:
                last.emoji = True
        elif unicodedata.category(char) in ("Mn", "Me", "Mc"):
            if last is not None and last.kind == GLYPH and last.style != "control":
                last.chars += char
            else:
                item = _Pending(i, GLYPH, "\u00a0" + char, style)
        elif unicodedata.category(char) != "Cf":  # format characters (ZWJ, bidi marks) take no cell
            item = _Pending(i, GLYPH, char, style)
        if item is not None:
            if last is not None:
                yield last
            last = item
        i += 1
    if last is not None:
        yield last


def iter_clusters(
    text: str, styles: Sequence[str], primary: str = fonts.REGULAR, start: int = 0, end: int | None = None
) -> Iterator[Cluster]:
    """clusters() of text[start:end] one at a time, so a long stream is never held as one object
    per character. Markdown's strong styles (markdown.BOLD_STYLES) take the bold face instead of
    primary."""
    cells: dict[tuple[int, str, str, bool], Cell] = {}  # equal clusters share one Cell
    for pending in _raw_clusters(text, styles, start, end):
        start, kind, chars, style, prefer_emoji = pending.start, pending.kind, pending.chars, pending.style, pending.emoji
        key = (kind, chars, style, prefer_emoji)
        cell = cells.get(key)
        if cell is None:
            if kind != GLYPH:
                cell = Cell(chars, fonts.REGULAR, 1, style)
            else:
                shown, font = _resolve(chars, fonts.BOLD if style in BOLD_STYLES else primary, prefer_emoji)
                if font in fonts.MEASURED:
                    width = measured_width(shown, font)
                else:
                    wide = font == fonts.EMOJI or unicodedata.east_asian_width(shown[0]) in ("W", "F")
                    width = 2 if wide else 1
                cell = Cell(shown, font, width, style)
            cells[key] = cell
        yield Cluster(start, kind, cell)


@lru_cache(maxsize=8192)
def measured_width(text: str, font: str) -> int:
    """Cells of a cluster of a proportional script (fonts.MEASURED): 2 when its shaped advance is
    over WIDE_ADVANCE cells of the grid, measured at one reference size so it never depends on
    the render's size."""
    em = fonts.load(fonts.REGULAR, MEASURE_SIZE).getlength("M")
    return 2 if shaping.advance(text, font, font in fonts.RTL) * MEASURE_SIZE > WIDE_ADVANCE * em * shaping.units_per_em(font) else 1


def needs_shaping(text: str, font: str | None) -> bool:
    """Whether a cell is drawn by the text engine (HarfBuzz, then FreeType by glyph id): a
    cluster of more than one codepoint, or any text of a script font. One codepoint of the other
    fonts draws with Pillow's BASIC layout, the pixels tokenreel always drew."""
    return font is not None and (len(text) > 1 or font in fonts.SCRIPT_FONTS)



@lru_cache(maxsize=4096)
def lone_cell(char: str, style: str, primary: str = fonts.REGULAR) -> Cell | None:
    """The cell a character is in any line of such characters, or None when its cluster can
    depend on its neighbours. A character qualifies when it always starts a cluster of its own
    and never extends the one before (no mark, joiner, selector, control, regional indicator,
    emoji modifier or tag, Hangul vowel or trailing consonant, Indic or spacing-mark letter) and
    its font is not right to left (whose runs merge). A line of them is then the cells of its
    characters one by one, what clusters() gives it, without reading the line as a whole:
    figure lines are measured and drawn every frame."""
    code = ord(char)
    if not 0x20 <= code < 0x7F:
        if (
            char in NEWLINES or char == "\t" or _visible(char) is not None or char == _ZWJ
            or _is_variation_selector(code) or char in _SPACING_MARKS
            or any(first <= code <= last for first, last in (_SKIN_TONES, _REGIONAL, _TAGS, _INDIC, _JAMO_VT))
            or unicodedata.category(char) in ("Mn", "Me", "Mc", "Cf")
        ):
            return None
    found = list(_raw_clusters(char, [style]))
    if len(found) != 1 or found[0].kind not in (GLYPH, SPACE):
        return None
    cell = next(iter_clusters(char, [style], primary)).cell
    return None if cell.font in fonts.RTL else cell


def clusters(text: str, styles: Sequence[str], primary: str = fonts.REGULAR) -> list[Cluster]:
    """Split text into grid clusters; styles gives one style name per character."""
    return list(iter_clusters(text, styles, primary))



def boundaries(text: str) -> list[int]:
    """Where text may be cut without splitting a user-perceived character (a base and its
    marks, an emoji sequence, a flag, CR LF): 0, the start of each cluster, and len(text)."""
    starts = {pending.start for pending in _raw_clusters(text, [""] * len(text))}
    return sorted(starts | {0, len(text)})
