"""Markdown source as people read it: the text a frame shows, its styles, and where each
source offset lands in it.

An answer streams in as markdown source (`**bold**`, backticks, fences, `#` headings, `- `
lists, `|` tables); the video shows it rendered. The final text is parsed once: markdown-it-py
gives the block structure (which lines are headings, list items, fences, tables), a small
inline parser here strips emphasis, code-span and escape markers character by character. Every
display character keeps an anchor, the source offset whose arrival shows it; anchors never
decrease, so the display shown after a chunk is the prefix of characters anchored before the
chunk's end (`Markdown.offset`). A chunk that ends inside a removed marker shows up to the next
display character, and nothing shown ever changes or moves later.

Styles (colours are aliases of theme colours, tokenreel.base.theme.STYLE_ALIASES; BOLD_STYLES are
drawn in the bold face): strong, emphasis, strong_emphasis, inline_code, heading, bullet (a
list marker: wrapping hangs the item's continuation rows under its text), rule (a table's
header rule) and pad (the spaces that align a table's columns: dropped where the table is
wider than the column, wrap.py). Fenced code is left for highlight.py to colour: `code` lists
its display spans with their languages.
"""

from __future__ import annotations

import re
import unicodedata
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import overload

from markdown_it import MarkdownIt
from markdown_it.token import Token

from tokenreel.renderer.text.style_ids import StyleIds

TEXT = "text"
STRONG, EMPHASIS, STRONG_EMPHASIS = "strong", "emphasis", "strong_emphasis"
INLINE_CODE, HEADING, BULLET, RULE, PAD = "inline_code", "heading", "bullet", "rule", "pad"
BOLD_STYLES = frozenset({STRONG, STRONG_EMPHASIS, HEADING})
BULLET_CHAR = "•"
RULE_CHAR = "─"
CELL_GAP = 2  # spaces between table columns
_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_MARKER = re.compile(r"[ \t]*([-*+]|\d{1,9}[.)])([ \t]+|(?=\n)|$)")
_ATX_OPEN = re.compile(r"[ \t]*#{1,6}(?:[ \t]+|(?=\n)|$)")
_ATX_CLOSE = re.compile(r"(?:[ \t]+#+)?[ \t]*$")
_FENCE_CLOSE = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*\n?")


class Anchors(Sequence[int]):
    """Display characters' anchors as runs: a kept stretch of source is one run of consecutive
    offsets, an inserted marker one run of a repeated offset; 9 bytes a run, not 4 a character.
    Anchors never decrease, so runs are found by bisection on their first anchors."""

    def __init__(self) -> None:
        self.shown = array("I")  # where each run starts in the display
        self.firsts = array("I")  # its first anchor
        self.steps = bytearray()  # 1: consecutive offsets, 0: one offset repeated
        self._len = 0

    def add(self, first: int, count: int, step: int) -> None:
        """Append count anchors first, first + step, ..."""
        if count <= 0:
            return
        if self.steps:
            last_count = self._len - self.shown[-1]
            same = self.steps[-1] == step and self.firsts[-1] + step * last_count == first
            if same or (last_count == 1 and self.firsts[-1] + step == first):
                self.steps[-1] = step
                self._len += count
                return
        self.shown.append(self._len)
        self.firsts.append(first)
        self.steps.append(step)
        self._len += count

    def extend(self, other: Anchors) -> None:
        for k in range(len(other.steps)):
            end = other.shown[k + 1] if k + 1 < len(other.steps) else len(other)
            self.add(other.firsts[k], end - other.shown[k], other.steps[k])

    def below(self, source_end: int) -> int:
        """How many anchors are before source_end."""
        r = bisect_left(self.firsts, source_end) - 1
        if r < 0:
            return 0
        end = self.shown[r + 1] if r + 1 < len(self.steps) else self._len
        count = end - self.shown[r]
        return self.shown[r] + (min(count, source_end - self.firsts[r]) if self.steps[r] else count)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, k: int) -> int: ...

    @overload
    def __getitem__(self, k: slice) -> list[int]: ...

    def __getitem__(self, k: int | slice) -> int | list[int]:
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(self._len))]
        if k < 0:
            k += self._len
        if not 0 <= k < self._len:
            raise IndexError("anchor index out of range")
        r = bisect_right(self.shown, k) - 1
        return self.firsts[r] + self.steps[r] * (k - self.shown[r])


@dataclass
class Markdown:
    """The display text, one style per character, and per character the source offset that shows it."""

    text: str
    styles: StyleIds
    anchors: Anchors
    code: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, language) of fenced code

    def offset(self, source_end: int) -> int:
        """How much of the display shows once the source up to source_end has arrived."""
        return self.anchors.below(source_end)


class _Out:
    def __init__(self, limit: int) -> None:
        self.limit = limit  # the source's length: every anchor is before it, so the whole text shows at the end
        self.chars: list[str] = []  # pieces of the display text, not one object per character
        self.styles = StyleIds()
        self.anchors = Anchors()

    def keep(self, src: str, start: int, end: int, style: str) -> None:
        self.chars.append(src[start:end])
        self.styles.run(style, end - start)
        self.anchors.add(start, end - start, 1)

    def put(self, text: str, style: str, anchor: int) -> None:
        anchor = max(min(anchor, self.limit - 1), self.anchors[-1] if self.anchors else 0)  # never before what is shown
        self.chars.append(text)
        self.styles.run(style, len(text))
        self.anchors.add(anchor, len(text), 0)

    def extend(self, other: _Out) -> None:
        self.chars += other.chars
        self.styles.extend_from(other.styles, 0, len(other.styles))
        self.anchors.extend(other.anchors)

    def width(self) -> int:
        return sum(_char_width(c) for piece in self.chars for c in piece)


def _char_width(char: str) -> int:
    """Grid cells of a character, near enough to align table columns (the grid's own rules are clusters.py's)."""
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def _combine(base: str, mark: str) -> str:
    if base in (HEADING, STRONG_EMPHASIS) or base == mark:
        return base
    if {base, mark} == {STRONG, EMPHASIS}:
        return STRONG_EMPHASIS
    return mark


def _code_span_end(src: str, i: int, end: int) -> tuple[int, int] | None:
    """A code span opening at i: (closing run's start, run length), or None."""
    n = 1
    while i + n < end and src[i + n] == "`":
        n += 1
    j = i + n
    while j < end:
        k = src.find("`" * n, j, end)
        if k < 0:
            return None
        m = n
        while k + m < end and src[k + m] == "`":
            m += 1
        if m == n:
            return k, n
        j = k + m
    return None


def _run(src: str, i: int, end: int) -> int:
    n = 1
    while i + n < end and src[i + n] == src[i]:
        n += 1
    return n


def _past_escape_or_code(src: str, i: int, end: int) -> int | None:
    """Where scanning resumes when a backslash escape or a code span starts at i (markers inside
    them do not count); None when neither does."""
    if src[i] == "\\":
        return i + 2
    if src[i] == "`":
        span = _code_span_end(src, i, end)
        return span[0] + span[1] if span else i + _run(src, i, end)
    return None


def _closer(src: str, i: int, end: int, char: str, n: int) -> int | None:
    """Where the n delimiters closing an opener before i start: a right-flanking run of char,
    of exactly n first, else the end of a longer run; code spans and escapes skipped."""
    longer = None
    j = i
    while j < end:
        skipped = _past_escape_or_code(src, j, end)
        if skipped is not None:
            j = skipped
            continue
        if src[j] == char:
            m = _run(src, j, end)
            flanking = j > i and not src[j - 1].isspace()
            after = src[j + m] if j + m < end else " "
            if char == "_" and after.isalnum():
                flanking = False
            if flanking and m == n:
                return j
            if flanking and m > n and longer is None:
                longer = j + m - n
            j += m
            continue
        j += 1
    return longer


_INLINE_MARK = re.compile(r"[\\`*_]")  # what _inline looks at: an escape, a code span, emphasis


def _inline(src: str, start: int, end: int, base: str, out: _Out) -> None:
    """Inline markdown of src[start:end] into out: markers dropped, their text styled."""
    i = start
    while i < end:
        c = src[i]
        if c == "\\" and i + 1 < end and src[i + 1] in _PUNCT:
            out.keep(src, i + 1, i + 2, base)
            i += 2
        elif c == "`":
            span = _code_span_end(src, i, end)
            if span is None:
                n = _run(src, i, end)
                out.keep(src, i, i + n, base)
                i += n
                continue
            close, n = span
            a, b = i + n, close
            if b - a >= 2 and src[a] == " " and src[b - 1] == " " and src[a:b].strip(" "):
                a, b = a + 1, b - 1
            out.keep(src, a, b, INLINE_CODE)
            i = close + n
        elif c in "*_":
            run = _run(src, i, end)
            n = min(run, 3)
            after = src[i + run] if i + run < end else " "
            before = src[i - 1] if i > start else " "
            opens = not after.isspace() and not (c == "_" and before.isalnum())
            closer = _closer(src, i + run, end, c, n) if opens else None
            if closer is None:
                out.keep(src, i, i + run, base)
                i += run
                continue
            # a longer opening run: its first characters are literal
            out.keep(src, i, i + run - n, base)
            mark = STRONG_EMPHASIS if n == 3 else STRONG if n == 2 else EMPHASIS
            _inline(src, i + run, closer, _combine(base, mark), out)
            i = closer + n
        else:  # plain text up to the next character that may start markup, kept as one piece
            special = _INLINE_MARK.search(src, i + 1, end)
            stop = special.start() if special else end
            out.keep(src, i, stop, base)
            i = stop


def _table_cells(src: str, start: int, end: int) -> list[tuple[int, int]]:
    """A table row's cells, [start, end) each with spaces trimmed; pipes in code spans or escaped stay."""
    bounds: list[tuple[int, int]] = []
    cell = start
    i = start
    while i < end:
        skipped = _past_escape_or_code(src, i, end)
        if skipped is not None:
            i = skipped
            continue
        if src[i] == "|":
            bounds.append((cell, i))
            cell = i + 1
        i += 1
    bounds.append((cell, end))
    if bounds and not src[bounds[0][0] : bounds[0][1]].strip():
        bounds = bounds[1:]  # a leading pipe
    if bounds and not src[bounds[-1][0] : bounds[-1][1]].strip() and src[start:end].rstrip().endswith("|"):
        bounds = bounds[:-1]  # a trailing pipe
    trimmed = []
    for a, b in bounds:
        while a < b and src[a] in " \t":
            a += 1
        while b > a and src[b - 1] in " \t":
            b -= 1
        trimmed.append((a, b))
    return trimmed


class _Lines:
    def __init__(self, src: str) -> None:
        self.src = src
        self.starts = [0]
        for k, c in enumerate(src):
            if c == "\n":
                self.starts.append(k + 1)
        if self.starts[-1] == len(src) and len(self.starts) > 1:
            self.starts.pop()

    def __len__(self) -> int:
        return len(self.starts)

    def span(self, line: int) -> tuple[int, int, int]:
        """(start, end without its newline, end with it)."""
        start = self.starts[line]
        full = self.starts[line + 1] if line + 1 < len(self.starts) else len(self.src)
        bare = full - 1 if full > start and self.src[full - 1] == "\n" else full
        return start, bare, full


def render(src: str) -> Markdown:
    """Parse markdown once: the display text, its styles, anchors, and fenced code spans."""
    lines = _Lines(src)
    # markdown-it turns a lone CR into a line break; clusters.py does not: parse with it as a space.
    tokens = _parser().parse(src.replace("\r", " "))
    markers = [0] * len(lines)  # list items opening on each line
    blocks: dict[int, tuple[str, Token, int]] = {}  # first line -> (kind, token, the line after it)
    for token in tokens:
        if token.map is None or token.map[0] >= len(lines):
            continue
        first = token.map[0]
        if token.type == "list_item_open":
            markers[first] += 1
        elif token.type in ("paragraph_open", "heading_open", "fence", "code_block", "table_open", "hr", "html_block"):
            blocks.setdefault(first, (token.type, token, token.map[1]))
    out = _Out(len(src))
    code: list[tuple[int, int, str]] = []
    line = 0
    while line < len(lines):
        start, bare, full = lines.span(line)
        at = _markers(src, start, bare, markers[line], out)
        if line not in blocks:
            out.keep(src, at, full, TEXT)
            line += 1
            continue
        kind, token, after = blocks[line]
        last = min(after, len(lines)) - 1
        if kind == "paragraph_open":
            _inline(src, at, lines.span(last)[1], TEXT, out)
            out.keep(src, lines.span(last)[1], lines.span(last)[2], TEXT)
        elif kind == "heading_open":
            _heading(src, lines, line, last, at, token.markup, out)
        elif kind == "fence":
            body_end = last
            close_start, _, close_full = lines.span(last)
            if last > line and _FENCE_CLOSE.fullmatch(src, close_start, close_full):
                body_end = last - 1
            a = lines.span(line + 1)[0] if line + 1 <= body_end else full
            b = lines.span(body_end)[2] if line + 1 <= body_end else full
            shown = len(out.anchors)
            out.keep(src, a, b, "code")
            language = (token.info or "").split()[0] if (token.info or "").split() else ""
            code.append((shown, len(out.anchors), language))
        elif kind == "table_open":
            _table(src, lines, line, last, out)
        else:  # indented code, a thematic break, html: as written
            out.keep(src, at, lines.span(last)[2], TEXT)
        line = last + 1
    text = "".join(out.chars)
    return Markdown(src if text == src else text, out.styles, out.anchors, code)  # plain prose: one string, not two


def _markers(src: str, start: int, bare: int, count: int, out: _Out) -> int:
    """The list markers opening a line: indentation kept, `-`/`*`/`+` as a bullet, numbers kept,
    then one space; returns where the line's content starts."""
    at = start
    for _ in range(count):
        match = _MARKER.match(src, at, bare)
        if match is None:
            break
        indent_end, mark = match.start(1), match.group(1)
        out.keep(src, at, indent_end, TEXT)
        if mark in "-*+":
            out.put(BULLET_CHAR, BULLET, match.start(1))
        else:
            out.keep(src, match.start(1), match.end(1), BULLET)
        out.put(" ", BULLET, match.end(1) if match.end(2) > match.start(2) else match.start(1))
        at = match.end()
    return at


def _heading(src: str, lines: _Lines, line: int, last: int, at: int, markup: str, out: _Out) -> None:
    if markup.startswith("#"):
        _, bare, full = lines.span(line)
        opener = _ATX_OPEN.match(src, at, bare)
        a = opener.end() if opener else at
        closer = _ATX_CLOSE.search(src, a, bare)
        b = closer.start() if closer else bare
        _inline(src, a, b, HEADING, out)
        out.keep(src, bare, full, TEXT)
        return
    # setext: the text lines, then the underline, which goes
    text_end = lines.span(last - 1)[1]
    _inline(src, at, text_end, HEADING, out)
    out.keep(src, text_end, lines.span(last - 1)[2], TEXT)


def _table(src: str, lines: _Lines, line: int, last: int, out: _Out) -> None:
    """Pipe table rows as aligned columns (the header bold, its separator a rule); every row as
    wide as the table, with pad spaces that wrap.py drops when the table does not fit."""
    rows: list[list[_Out]] = []
    anchors: list[list[int]] = []  # per cell: where its padding is anchored
    width = 0
    for number in range(line, last + 1):
        if number == line + 1:
            rows.append([])
            anchors.append([])
            continue
        start, bare, _ = lines.span(number)
        cells = _table_cells(src, start, bare)
        if number > line and rows[0]:
            cells = cells[: len(rows[0])]
        row, row_anchors = [], []
        for a, b in cells:
            cell = _Out(out.limit)
            _inline(src, a, b, STRONG if number == line else TEXT, cell)
            row.append(cell)
            row_anchors.append(max(a, b - 1))
        rows.append(row)
        anchors.append(row_anchors)
    count = len(rows[0])
    widths = [0] * count
    for row in rows:
        for k, cell in enumerate(row):
            widths[k] = max(widths[k], cell.width())
    width = sum(widths) + CELL_GAP * max(0, count - 1)
    for offset, row in enumerate(rows):
        number = line + offset
        start, bare, full = lines.span(number)
        if number == line + 1:
            out.put(RULE_CHAR * width, RULE, start)
        else:
            for k in range(count):
                anchor = anchors[offset][k] if k < len(row) else bare - 1
                if k < len(row):
                    out.extend(row[k])
                    pad = widths[k] - row[k].width()
                else:
                    pad = widths[k]
                if pad:
                    out.put(" " * pad, PAD, anchor)
                if k + 1 < count:
                    out.put(" " * CELL_GAP, TEXT, anchor)
        out.keep(src, bare, full, TEXT)
