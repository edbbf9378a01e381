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


def is_rtl_paragraph(text: str) -> bool:
    """P2-P3: the first strong character (outside isolates) is right to left."""
    level: int = get_base_level(text)
    return level == 1


def has_rtl(text: str) -> bool:
    """Whether any character is strongly right to left (R or AL): only then can levels differ."""
    return any(unicodedata.bidirectional(c) in _STRONG_RTL for c in text)


def levels(text: str) -> list[int]:
    """The resolved embedding level of each character of one paragraph (rules X1-I2)."""
    info = get_display(text, debug=True)
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
