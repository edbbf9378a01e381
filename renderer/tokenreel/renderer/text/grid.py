"""Streamed text on a monospace grid: clusters, cell widths, wrapping, and cached pixel tiles.

Text from real models holds CJK, emoji, control characters, tabs and tokens longer than a
line, and every script. Each user-perceived character (a grapheme cluster: a base with its
marks, an emoji ZWJ sequence, a flag, a keycap, an Indic conjunct) becomes a cluster of 1 or 2
cells drawn by one font that covers all of it, so nothing can spill outside the grid and font
fallback never splits a cluster. Clusters that need shaping are drawn by the text engine
(HarfBuzz, then FreeType by glyph id: shaping.py, raster.py).
A prose paragraph holding right-to-left text (Arabic, Hebrew) leaves the grid: paragraph.py lays
it out on shaped widths in bidi order, right-aligned when it reads right to left, and wrapping
places its lines whole. On the grid (code, one-line UI text) a run of RTL clusters (with the
spaces, punctuation and digits between them) of one font and style is merged into one cell as
wide as the run and shaped as a unit, its numbers in their order; a merged run shows once the
whole run has streamed in. The whole stream is laid out once from its final text; a frame shows a prefix of that layout, so words never jump while they
stream and no frame re-wraps anything. Wrapped code keeps a hanging indent: a code line's
continuation rows start right of its own indentation, behind one blank cell. Clusters stream
through the wrap and the layout keeps palette indices and int arrays, so a long run costs a few
bytes per character, not an object.
Glyphs are drawn once per (text, font, colours) into cell-sized tiles and lines are rows of
tiles, because Pillow's per-frame text drawing is far too slow for real-time rendering.
"""

from __future__ import annotations

import math
import unicodedata
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw

from tokenreel.base.theme import RGB
from tokenreel.renderer.text import fonts, paragraph, raster, shaping
from tokenreel.renderer.text.cells import BREAK, GLYPH, NEWLINE, SHAPED, SPACE, TAB, Cell, Cluster, cell_metrics, glyph_size64
from tokenreel.renderer.text.highlight import CODE_STYLES
from tokenreel.renderer.text.markup import BOLD_STYLES, BULLET, PAD, RULE
from tokenreel.renderer.text.paragraph import SHAPED_FONT, ShapedLine

TAB_STOP = 4
# Wrapped rows of a code line start this many cells right of the line's indentation: off the
# 4-cell grid most answers' code is indented on (Python, the default language, uses 4), so a
# continuation cannot be mistaken for a nested block or the next statement, and cheap enough
# for a 51-column third of a 1080p frame.
HANGING_INDENT = 2
EMOJI_FILL = 0.86  # emoji height / line height
RESAMPLE = Image.Resampling.LANCZOS  # fixed, so scaled glyphs are the same pixels everywhere
STREAM_KINDS = ("reasoning", "tool")  # styles that are not the answer: a line break separates them

_NEWLINES = "\n\u2028\u2029\x85"
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
RUN_TILE_CACHE = 512  # merged RTL runs are big tiles: a cache of their own, so memory stays bounded


def _ignorable(code: int) -> bool:
    """Default-ignorable characters that the shaper consumes: no font needs a glyph for them."""
    return 0x200B <= code <= 0x200F or 0x2060 <= code <= 0x206F or _is_variation_selector(code) or 0xE0000 <= code <= 0xE0FFF


def _covered(text: str, font: str) -> bool:
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
    if _covered(text, font):
        return text, font
    script = fonts.script_font(base)
    for candidate in ((script,) if script else ()) + (primary, *fonts.FALLBACK, *fonts.SCRIPT_FONTS):
        if base in fonts.coverage(candidate) and _covered(text, candidate):
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


def _raw_clusters(text: str, styles: Sequence[str]) -> Iterator[list]:
    """[start, kind, chars, style, prefer_emoji] per cluster, in order; a cluster is yielded
    only once the next one has begun, since combining marks and selectors amend the last one."""
    last: list | None = None
    previous_kind = None
    joining = False  # the last character was a ZWJ inside an emoji sequence
    i = 0
    n = len(text)
    while i < n:
        char = text[i]
        style = styles[i]
        stream_kind = style if style in STREAM_KINDS else ""
        item: list | None = None
        if previous_kind is not None and stream_kind != previous_kind:
            if last is not None:
                yield last
            last = [i, BREAK, "", style, False]
        previous_kind = stream_kind
        code = ord(char)
        was_joining, joining = joining, False
        if was_joining and last is not None and last[1] == GLYPH:
            last[2] += char
            i += 1
            continue
        if char == "\r" and i + 1 < n and text[i + 1] == "\n":
            item = [i, NEWLINE, "", style, False]
            i += 1
        elif char in _NEWLINES:
            item = [i, NEWLINE, "", style, False]
        elif char == "\t":
            item = [i, TAB, " ", style, False]
        elif char == " ":
            item = [i, SPACE, " ", style, False]
        elif 0x20 < code < 0x7F:
            item = [i, GLYPH, char, style, False]
        elif (picture := _visible(char)) is not None:
            item = [i, GLYPH, picture, "control", False]
        elif last is not None and last[1] == GLYPH and last[3] != "control" and _extends(last[2], code):
            last[2] += char
        elif (
            char == _ZWJ and last is not None and last[1] == GLYPH and i + 1 < n
            and _pictographic(ord(last[2][0])) and _pictographic(ord(text[i + 1]))
        ):
            last[2] += char
            joining = True
            i += 1
            continue
        elif _is_variation_selector(code):
            if code == fonts.VARIATION_EMOJI and last is not None and last[1] == GLYPH:
                last[4] = True
        elif unicodedata.category(char) in ("Mn", "Me", "Mc"):
            if last is not None and last[1] == GLYPH and last[3] != "control":
                last[2] += char
            else:
                item = [i, GLYPH, "\u00a0" + char, style, False]
        elif unicodedata.category(char) != "Cf":  # format characters (ZWJ, bidi marks) take no cell
            item = [i, GLYPH, char, style, False]
        if item is not None:
            if last is not None:
                yield last
            last = item
        i += 1
    if last is not None:
        yield last


def iter_clusters(text: str, styles: Sequence[str], primary: str = fonts.REGULAR) -> Iterator[Cluster]:
    """clusters() one at a time, so a long stream is never held as one object per character.
    Markdown's strong styles (markdown.BOLD_STYLES) take the bold face instead of primary."""
    cells: dict[tuple[int, str, str, bool], Cell] = {}  # equal clusters share one Cell
    for start, kind, chars, style, prefer_emoji in _raw_clusters(text, styles):
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


def _bidi_role(cell: Cell) -> int:
    """_STRONG_RTL for a cluster of an RTL font, _NEUTRAL for a space, punctuation or a digit
    (it joins an RTL run when RTL text follows it on the line), else _OTHER."""
    if cell.font == SHAPED_FONT:
        return _OTHER
    if cell.font in fonts.RTL:
        return _STRONG_RTL
    if cell.text == " " and cell.width == 1:
        return _NEUTRAL
    if len(cell.text) == 1 and unicodedata.bidirectional(cell.text) in ("EN", "AN", "CS", "ES", "ET", "ON", "WS"):
        return _NEUTRAL
    return _OTHER


_STRONG_RTL, _NEUTRAL, _OTHER = range(3)


class RtlRuns:
    """Sits between a wrap and the lines it fills: a run of RTL clusters of one font and style on
    one line, with the neutrals between them (those the run's font covers), goes on as one merged
    cell, as wide as its clusters, whose text the painter shapes right to left. Everything else
    passes through in order. Call flush() when the text ends."""

    def __init__(self, place: Callable[[Cell], None], new_line: Callable[[], None]) -> None:
        self._place = place
        self._new_line = new_line
        self.run: list[Cell] = []
        self.tail: list[Cell] = []  # neutrals after the run's last RTL cluster

    def place(self, cell: Cell) -> None:
        role = _bidi_role(cell)
        if self.run:
            head = self.run[0]
            if role == _STRONG_RTL and cell.font == head.font and cell.style == head.style:
                self.run.extend(self.tail)
                self.tail.clear()
                self.run.append(cell)
                return
            if role == _NEUTRAL and cell.style == head.style and _covered(cell.text, head.font):  # type: ignore[arg-type]
                self.tail.append(cell)
                return
            self.flush()
        if role == _STRONG_RTL:
            self.run.append(cell)
        else:
            self._place(cell)

    def new_line(self) -> None:
        self.flush()
        self._new_line()

    def flush(self) -> None:
        if self.run:
            # Digits right after RTL text belong to its run (the bidi algorithm makes them, and
            # the neutrals before them, part of the right-to-left run: "عام 2024" shows the
            # number on the left); neutrals after the last digit stay outside.
            digits = [k for k, cell in enumerate(self.tail) if unicodedata.bidirectional(cell.text[0]) in ("EN", "AN")]
            if digits:
                self.run.extend(self.tail[: digits[-1] + 1])
                del self.tail[: digits[-1] + 1]
            head = self.run[0]
            text = "".join(c.text for c in self.run)
            self._place(Cell(text, head.font, sum(c.width for c in self.run), head.style))
            self.run.clear()
        for cell in self.tail:
            self._place(cell)
        self.tail.clear()


def merge_rtl_runs(cells: Iterable[Cell]) -> list[Cell]:
    """One line of cells with its RTL runs merged (see RtlRuns)."""
    out: list[Cell] = []
    runs = RtlRuns(out.append, lambda: None)
    for cell in cells:
        runs.place(cell)
    runs.flush()
    return out


def clusters(text: str, styles: Sequence[str], primary: str = fonts.REGULAR) -> list[Cluster]:
    """Split text into grid clusters; styles gives one style name per character."""
    return list(iter_clusters(text, styles, primary))


class CellLines(Sequence[tuple[Cell, ...]]):
    """Wrapped lines stored compactly: per placed cell an index into a palette of distinct cells
    (2 or 4 bytes), per line where its cells start. Indexing gives the line's cells as a tuple."""

    def __init__(self) -> None:
        self.palette: list[Cell] = []
        self._index: dict[Cell, int] = {}
        self.ids = array("H")
        self.starts = array("I", [0])  # starts[k]..starts[k+1] are line k's cells; the last line is open

    def place(self, cell: Cell) -> None:
        """Append a cell to the last line."""
        i = self._index.get(cell)
        if i is None:
            i = self._index[cell] = len(self.palette)
            self.palette.append(cell)
            if i > 0xFFFF and self.ids.typecode == "H":
                self.ids = array("I", self.ids)
        self.ids.append(i)

    def new_line(self) -> None:
        self.starts.append(len(self.ids))

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, k):  # type: ignore[override]
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        n = len(self.starts)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError("line index out of range")
        end = self.starts[k + 1] if k + 1 < n else len(self.ids)
        return tuple(map(self.palette.__getitem__, self.ids[self.starts[k] : end]))

    def __iter__(self) -> Iterator[tuple[Cell, ...]]:
        return (self[k] for k in range(len(self)))


class Carets(Sequence[tuple[int, int]]):
    """(line, col) pairs in two int arrays: 8 bytes each instead of a tuple of two ints."""

    def __init__(self) -> None:
        self.lines = array("i")
        self.cols = array("i")

    def append(self, line: int, col: int) -> None:
        self.lines.append(line)
        self.cols.append(col)

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, v):  # type: ignore[override]
        if isinstance(v, slice):
            return [self[j] for j in range(*v.indices(len(self)))]
        return self.lines[v], self.cols[v]


@dataclass
class TextLayout:
    """Wrapped lines of a whole stream, and where the caret is after each prefix of it.

    caret[v] is (line, col) after the first v chunks; every cell of lines before the caret's
    line, and of the caret's line left of col, is visible at that point.
    """

    lines: Sequence[tuple[Cell, ...]]
    caret: Sequence[tuple[int, int]]


def continuation_indent(lead: int, cols: int) -> int:
    """Where the wrapped rows of a code line indented by lead cells start, in a cols-cell column.

    Its own indentation plus HANGING_INDENT, so a continuation never reads as the next
    statement; at most half the column (and none below 3 cols), so at least half the width,
    and never less than 2 cells (a wide glyph), is left for text.
    """
    return min(lead + HANGING_INDENT, cols // 2, max(0, cols - 2))


def _wrap(
    items: Iterable[Cluster],
    cols: int,
    place: Callable[[Cell], None],
    new_line: Callable[[], None],
    caret: Callable[[int, int], None],
) -> None:
    """Greedy word wrap into cols cells, told cell by cell: place(cell) on the last line,
    new_line(), and caret(line, col) once per cluster, in order, with the caret after it.

    A source line whose first glyph is code (highlight.CODE_STYLES) continues its wrapped rows
    behind a blank cell at its own indentation plus HANGING_INDENT (see continuation_indent); a
    list item's (its first glyph a markdown.BULLET marker) behind a blank cell as wide as its
    indentation and marker, so they start under the item's text (at most half the column).
    That depends only on the line's own start, so the layout stays a function of the text and
    cols, and cells already placed never move."""
    line = col = line_start = 0
    start = 0  # where the current row's text starts: 0, or a continuation row's indent
    pending = False  # a space overflowed: the next word starts a new line
    word: list[Cell] = []
    leading = True  # still in the source line's leading whitespace
    lead = 0  # width of that whitespace, in cells
    hang: Cell | None = None  # the blank cell continuation rows of this source line start with
    marker = False  # in a list item's marker (markdown.BULLET): its text, and its rows, start after it

    def break_line(continued: bool = True) -> None:
        """End the row; a continued source line carries on behind its hanging indent."""
        nonlocal line, col, start
        new_line()
        line += 1
        col = start = 0
        if continued and hang is not None:
            place(hang)
            col = start = hang.width

    def new_source_line() -> None:
        nonlocal leading, lead, hang, marker
        leading, lead, hang, marker = True, 0, None, False

    def place_word() -> None:
        nonlocal col, pending
        if not word:
            return
        if pending:
            break_line()
            pending = False
        width = sum(cell.width for cell in word)
        if col > start and col + width > cols:
            break_line()
        for cell in word:
            if col > start and col + cell.width > cols:
                break_line()
            place(cell)
            col += cell.width
            caret(line, col)
        word.clear()

    for item in items:
        kind, cell = item.kind, item.cell
        if kind == SHAPED:  # a whole paragraph, laid out already: its lines, then its carets
            place_word()
            if col:
                break_line(continued=False)
            first = line
            for number, shaped_line in enumerate(cell.lines):
                if number:
                    break_line(continued=False)
                place(shaped_line)
            for number, shown in cell.carets:
                caret(first + number, shown)
            col = cols  # the paragraph's last line counts as full: a stream break after it starts a new one
            continue
        if marker and cell.style != BULLET:
            marker = False
            place_word()
            indent = min(col, cols // 2, max(0, cols - 2)) if line_start == line else 0
            hang = Cell(" ", fonts.REGULAR, indent, "text") if indent else None
        if leading and kind in (SPACE, TAB):
            lead += TAB_STOP - lead % TAB_STOP if kind == TAB else 1
        elif leading and kind == GLYPH:
            leading = False
            marker = cell.style == BULLET
            line_start = line
            indent = continuation_indent(lead, cols) if cell.style in CODE_STYLES else 0
            hang = Cell(" ", fonts.REGULAR, indent, "code") if indent else None  # blank: one tile per width
        if kind == GLYPH:
            if cell.width > 1:
                place_word()
                word.append(cell)
                place_word()
            else:
                word.append(cell)
            continue
        if word:
            place_word()
        if kind == NEWLINE:
            pending = False
            new_source_line()
            break_line(continued=False)
        elif kind == BREAK:
            new_source_line()
            if col or pending:
                pending = False
                break_line(continued=False)
        elif not pending:
            width = TAB_STOP - col % TAB_STOP if kind == TAB else 1
            if col + width > cols:
                pending = True
            else:
                place(cell if cell.width == width else cell._replace(width=width))
                col += width
        caret(line, col)
    place_word()


def wrap(items: Iterable[Cluster], cols: int) -> tuple[list[tuple[Cell, ...]], list[tuple[int, int]]]:
    """Greedy word wrap into cols cells; words longer than a line are hard-wrapped.

    Returns the lines and the caret after each cluster. A space or tab that does not fit ends
    the line and is not drawn. Wrapped rows of a code line start with one blank cell as wide as
    their hanging indent; prose rows start at column 0.
    """
    lines: list[list[Cell]] = [[]]
    carets: list[tuple[int, int]] = []
    runs = RtlRuns(lambda cell: lines[-1].append(cell), lambda: lines.append([]))
    _wrap(items, cols, runs.place, runs.new_line, lambda line, col: carets.append((line, col)))
    runs.flush()
    return [tuple(line) for line in lines], carets


def fit_tables(items: Iterable[Cluster], cols: int) -> Iterator[Cluster]:
    """The clusters as they are, but a markdown table row wider than the column (markdown.py
    pads every row to the table's width) loses its alignment padding (markdown.PAD), and its
    header rule (markdown.RULE) is cut to the column: rows without the pipes, wrapped as prose.
    Only those styles are ever dropped, so a line is held back from its first one to its end."""
    held: list[Cluster] = []
    width = 0
    for item in items:
        if item.kind in (NEWLINE, BREAK):
            yield from _fit_row(held, width > cols, cols - (width - sum(i.cell.width for i in held)))
            yield item
            held.clear()
            width = 0
            continue
        width += item.cell.width if item.kind != SHAPED else 0
        if held or item.cell.style in (PAD, RULE):
            held.append(item)
        else:
            yield item
    yield from _fit_row(held, width > cols, cols - (width - sum(i.cell.width for i in held)))


def _fit_row(items: list[Cluster], wide: bool, room: int) -> list[Cluster]:
    """A row's clusters from its first PAD or RULE on: as they are when the row fits, else
    without the padding and with the rule cut to the room left on the line."""
    if not wide:
        return items
    out = []
    for item in items:
        if item.cell.style == PAD:
            continue
        if item.cell.style == RULE:
            room -= item.cell.width
            if room < 0:
                continue
        out.append(item)
    return out


def shape_paragraphs(items: Iterable[Cluster], cols: int, size: int) -> Iterator[Cluster]:
    """The clusters as they are, but each prose paragraph that holds right-to-left text as one
    SHAPED cluster laid out on shaped widths at the font size (paragraph.py). A paragraph ends
    at a line break or where the stream changes kind."""
    held: list[Cluster] = []
    for item in items:
        if item.kind not in (NEWLINE, BREAK):
            held.append(item)
            continue
        yield from _paragraph(held, cols, size)
        held.clear()
        yield item
    yield from _paragraph(held, cols, size)


def _paragraph(items: list[Cluster], cols: int, size: int) -> list[Cluster]:
    if items and paragraph.wants_shaping(items):
        return [Cluster(items[0].start, SHAPED, paragraph.layout(items, cols, size))]
    return items


def layout_stream(text: str, styles: Sequence[str], chunk_ends: Sequence[int], cols: int, size: int = 18) -> TextLayout:
    """Lay out the final text once; chunk_ends[v] is where the first v+1 chunks end in text.
    size: the font size in px, which shaped paragraphs are laid out at.

    Clusters stream through the wrap and the lines are kept compactly, so memory grows by a few
    bytes per character, not by an object per character (only the current paragraph's clusters
    are held, until its end tells whether it holds right-to-left text).
    """
    starts = array("I")
    after = Carets()  # the caret after each cluster
    lines = CellLines()

    def tap(items: Iterable[Cluster]) -> Iterator[Cluster]:
        for item in items:
            if item.kind == SHAPED:
                starts.extend(item.cell.starts)
            else:
                starts.append(item.start)
            yield item

    runs = RtlRuns(lines.place, lines.new_line)
    items = shape_paragraphs(fit_tables(iter_clusters(text, styles), cols), cols, size)
    _wrap(tap(items), cols, runs.place, runs.new_line, after.append)
    runs.flush()
    caret = Carets()
    caret.append(0, 0)
    for end in chunk_ends:
        shown = bisect_left(starts, end)
        caret.append(*(after[shown - 1] if shown else (0, 0)))
    return TextLayout(lines, caret)


def fit(text: str, cols: int, style: str, primary: str = fonts.REGULAR) -> list[Cell]:
    """One line of UI text: newlines and tabs become spaces, overflow ends with an ellipsis."""
    if cols <= 0:
        return []
    flat = "".join(" " if c in _NEWLINES or c in "\r\t" else c for c in text)
    cells = [item.cell for item in clusters(flat, [style] * len(flat), primary) if item.kind != BREAK]
    if sum(c.width for c in cells) <= cols:
        return merge_rtl_runs(cells)
    out: list[Cell] = []
    used = 0
    for cell in cells:
        if used + cell.width > cols - 1:
            break
        out.append(cell)
        used += cell.width
    return [*merge_rtl_runs(out), Cell("…", fonts.REGULAR, 1, style)]


class GlyphPainter:
    """Draws clusters into cell-sized RGB tiles on a solid background, once per distinct tile."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.cell_w, self.line_h, self.baseline = cell_metrics(size)
        self.tile = lru_cache(maxsize=16384)(self._tile)
        self.run_tile = lru_cache(maxsize=RUN_TILE_CACHE)(self._tile)  # merged RTL runs, wide

    def _mask(self, text: str, font: str, width: int) -> Image.Image:
        if not needs_shaping(text, font):
            face = fonts.load(font, self.size)
            advance = face.getlength(text)
            canvas_w = max(width, math.ceil(advance))
            mask = Image.new("L", (canvas_w, self.line_h), 0)
            ImageDraw.Draw(mask).text(((canvas_w - int(advance)) // 2, self.baseline), text, font=face, fill=255, anchor="ls")
        else:
            size64 = glyph_size64(font, self.size)
            rtl = font in fonts.RTL  # a merged run: numbers in it keep their order
            placed, end4 = paragraph.place_bidi(text, font, size64) if rtl else raster.place(shaping.shape(text, font), font, size64)
            canvas_w = max(width, -(-end4 // raster.SUBPIXEL))
            coverage = np.zeros((self.line_h, canvas_w), dtype=np.uint8)
            raster.draw(coverage, placed, self.baseline, (canvas_w * raster.SUBPIXEL - end4) // 2)
            mask = Image.fromarray(coverage)
        return mask if canvas_w == width else mask.resize((width, self.line_h), RESAMPLE)

    def _emoji(self, text: str, width: int) -> Image.Image:
        if needs_shaping(text, fonts.EMOJI):
            big = self._emoji_sequence(text)
        else:
            big = Image.new("RGBA", (fonts.EMOJI_SIZE * 2, fonts.EMOJI_SIZE * 2), (0, 0, 0, 0))
            ImageDraw.Draw(big).text((0, 0), text, font=fonts.load(fonts.EMOJI, fonts.EMOJI_SIZE), embedded_color=True)
        box = big.getbbox()
        out = Image.new("RGBA", (width, self.line_h), (0, 0, 0, 0))
        if box is None:
            return out
        big = big.crop(box)
        scale = min(width / big.width, self.line_h * EMOJI_FILL / big.height)
        small = big.resize((max(1, round(big.width * scale)), max(1, round(big.height * scale))), RESAMPLE)
        out.paste(small, ((width - small.width) // 2, (self.line_h - small.height) // 2))
        return out

    @staticmethod
    def _emoji_sequence(text: str) -> Image.Image:
        """A shaped emoji sequence (ZWJ, flag, skin tone, keycap) at the font's one strike: its
        glyphs' PNGs side by side at their advances (one glyph when the font ligates it)."""
        glyphs = shaping.shape(text, fonts.EMOJI)
        upem, ppem = shaping.units_per_em(fonts.EMOJI), fonts.EMOJI_SIZE
        images = [raster.color(fonts.EMOJI, g.gid, ppem) for g in glyphs]
        pens = [sum(g.x_advance for g in glyphs[:k]) * ppem // upem for k in range(len(glyphs))]
        big = Image.new("RGBA", (max([p + i.width for p, i in zip(pens, images, strict=False)] + [1]), max([i.height for i in images] + [1])), (0, 0, 0, 0))
        for pen, image in zip(pens, images, strict=False):
            big.alpha_composite(image, (pen, 0))
        return big

    def _box(self, width: int) -> Image.Image:
        mask = Image.new("L", (width, self.line_h), 0)
        inset = max(1, self.cell_w // 6)
        top = self.baseline - round(self.size * 0.7)
        ImageDraw.Draw(mask).rectangle((inset, top, width - 1 - inset, self.baseline), outline=200)
        return mask

    def _tile(self, text: str, font: str | None, width: int, fg: RGB, bg: RGB) -> np.ndarray:
        pixels = width * self.cell_w
        if font == fonts.EMOJI:
            rgba = np.asarray(self._emoji(text, pixels), dtype=np.uint16)
            alpha, fore = rgba[..., 3:], rgba[..., :3]
        else:
            image = self._box(pixels) if font is None else self._mask(text, font, pixels)
            alpha, fore = np.asarray(image, dtype=np.uint16)[..., None], np.array(fg, dtype=np.uint16)
        back = np.array(bg, dtype=np.uint16)
        tile = ((back * (255 - alpha) + fore * alpha + 127) // 255).astype(np.uint8)
        tile.flags.writeable = False  # shared through the cache
        return tile

    def paint(self, cells: Sequence[Cell], color: Callable[[str], RGB], bg: RGB) -> np.ndarray:
        """A row of tiles, (line_h, cells' width x cell_w, 3); a shaped line as a whole."""
        if not cells:
            return np.empty((self.line_h, 0, 3), dtype=np.uint8)
        if isinstance(cells[0], ShapedLine):
            return self.shaped(cells[0], len(cells[0].cursor), color, bg)
        return np.concatenate(
            [(self.run_tile if c.font in fonts.RTL else self.tile)(c.text, c.font, c.width, color(c.style), bg) for c in cells],
            axis=1,
        )

    def shaped(self, line: ShapedLine, shown: int, color: Callable[[str], RGB], bg: RGB) -> np.ndarray:
        """A shaped line with its first `shown` clusters drawn: tiles (emoji, boxes) first, then
        each style's glyphs as one coverage mask over them."""
        tile = np.empty((self.line_h, line.width * self.cell_w, 3), dtype=np.uint8)
        tile[...] = bg
        masks: dict[str, tuple[np.ndarray, int, int]] = {}  # style -> (coverage, inked columns)
        for piece in line.pieces:
            if piece.order >= shown:
                continue
            if piece.cell is not None:
                x = piece.x4 // raster.SUBPIXEL
                cell = piece.cell
                part = self.tile(cell.text, cell.font, cell.width, color(piece.style), bg)[:, : max(0, tile.shape[1] - x)]
                tile[:, x : x + part.shape[1]] = part
                continue
            mask, left, right = masks.get(piece.style) or (np.zeros(tile.shape[:2], dtype=np.uint8), tile.shape[1], 0)
            x0, x1 = raster.draw(mask, (piece.glyph,), self.baseline)  # type: ignore[arg-type]
            masks[piece.style] = (mask, min(left, x0), max(right, x1))
        for style, (mask, left, right) in masks.items():
            if left >= right:
                continue
            alpha = mask[:, left:right, None].astype(np.uint16)
            fore = np.array(color(style), dtype=np.uint16)
            region = tile[:, left:right]
            region[...] = (region.astype(np.uint16) * (255 - alpha) + fore * alpha + 127) // 255
        return tile
