"""The Unicode bidirectional algorithm (UAX #9) for a paragraph, and the visual order of a line.

Levels come from python-bidi, whose wheels carry the unicode-bidi crate (Servo's conformant
implementation, rules P2-P3 and X1-I2) compiled in: no system library, so the same text gets
the same levels on every machine. Its only way to hand the levels out is the debug form of its
BidiInfo (one level per UTF-8 byte), which is parsed here; the version is pinned, and a test
holds the parse to known levels. L1 (whitespace at a line's end goes back to the paragraph
level) and L2 (reversal) need the line breaks, which are the layout's, so they are done here.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from importlib.metadata import version

from bidi import get_base_level, get_display

_LEVEL = re.compile(r"Level\(\s*(\d+),\s*\)")
_STRONG_RTL = frozenset({"R", "AL"})
_RESET = frozenset({"WS", "FSI", "LRI", "RLI", "PDI", "BN", "LRE", "RLE", "LRO", "RLO", "PDF"})  # L1, with S and B


_ISOLATE_OPENERS = frozenset({"LRI", "RLI", "FSI"})


def is_rtl_paragraph(text: str) -> bool:
    """P2-P3: the first strong character (outside isolates) is right to left. Read here up to
    that character; python-bidi reads only from an isolate on (handing it a long paragraph
    would keep a UTF-8 copy of it on the string for as long as the string lives)."""
    for k, char in enumerate(text):
        kind = unicodedata.bidirectional(char)
        if kind in _STRONG:
            return kind != "L"
        if kind == "B":
            return False
        if kind in _ISOLATE_OPENERS:
            level: int = get_base_level(text[k:])
            return level == 1
    return False


def has_rtl(text: str) -> bool:
    """Whether any character is strongly right to left (R or AL): only then can levels differ."""
    return any(unicodedata.bidirectional(c) in _STRONG_RTL for c in text)


LEVEL_CHUNK = 1024  # characters resolved at once in a long paragraph (python-bidi holds about 250 bytes a character of one)
_WHOLE = frozenset({"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI", "B", "S"})
_STRONG = frozenset({"L", "R", "AL"})


def levels(text: str, chunk: int = LEVEL_CHUNK) -> bytearray:
    """The resolved embedding level of each character of one paragraph (rules X1-I2), a byte
    each (UAX #9 levels stop at 126).

    A long paragraph without explicit embeddings, isolates, separators or mirrored characters
    (N0 pairs brackets across any distance) is resolved a chunk at a time (python-bidi's debug
    form costs about 100 bytes a character): each chunk ends just after a strong character and
    the next starts with that character again as its context. No other rule looks past a strong
    character (W2 and W7 stop at it, N1 and N2 are bounded by it, the rest are local), so every
    level is the one the whole paragraph gives."""
    if len(text) <= chunk or any(unicodedata.bidirectional(c) in _WHOLE or unicodedata.mirrored(c) for c in set(text)):
        return bytearray(_levels(text, None))
    base = "R" if is_rtl_paragraph(text) else "L"
    out = bytearray()
    start, context = 0, ""
    while start < len(text):
        end = len(text) if len(text) - start <= chunk else _after_strong(text, start + chunk // 2, start + chunk)
        out.extend(_levels(context + text[start:end], base)[len(context) :])
        start, context = end, text[end - 1]
    return out


def _after_strong(text: str, low: int, high: int) -> int:
    """The last end in (low, high] right after a strong character; past high when there is none."""
    for end in range(high, low, -1):
        if unicodedata.bidirectional(text[end - 1]) in _STRONG:
            return end
    return next((end for end in range(high + 1, len(text)) if unicodedata.bidirectional(text[end - 1]) in _STRONG), len(text))


def _levels(text: str, base: str | None) -> list[int]:
    info = get_display(text, base_dir=base, debug=True)
    per_byte = [int(m) for m in _LEVEL.findall(info.split("paragraphs:", 1)[0])]
    out, at = [], 0
    for char in text:
        out.append(per_byte[at])
        at += len(char.encode("utf-8"))
    if at != len(per_byte):
        raise RuntimeError(f"python-bidi {version('python-bidi')} gave {len(per_byte)} levels for {at} bytes")
    return out


def line_levels(text: str, resolved: Sequence[int], base: int) -> list[int]:
    """L1 for one line: segment separators, and whitespace before them or at the line's end,
    take the paragraph level."""
    out = list(resolved)
    trailing = True
    for k in range(len(text) - 1, -1, -1):
        kind = unicodedata.bidirectional(text[k])
        if kind in ("S", "B"):
            out[k] = base
            trailing = True
        elif kind in _RESET and trailing:
            out[k] = base
        else:
            trailing = False
    return out


def visual_order(line: Sequence[int]) -> list[int]:
    """L2: indices of a line's units (characters or runs) in display order, left to right."""
    order = list(range(len(line)))
    if not line:
        return order
    lowest_odd = min(level for level in line if level % 2) if any(level % 2 for level in line) else None
    if lowest_odd is None:
        return order
    for level in range(max(line), lowest_odd - 1, -1):
        k = 0
        while k < len(order):
            if line[order[k]] >= level:
                end = k
                while end < len(order) and line[order[end]] >= level:
                    end += 1
                order[k:end] = reversed(order[k:end])
                k = end
            else:
                k += 1
    return order


def versions() -> dict[str, str]:
    return {"python-bidi": version("python-bidi")}
