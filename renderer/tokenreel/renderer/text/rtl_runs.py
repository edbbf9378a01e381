"""Right-to-left runs on the grid: a run of RTL clusters of one font and style, with the spaces,
punctuation and digits between them, merged into one cell as wide as the run and shaped as a
unit, its numbers in their order; a merged run shows once the whole run has streamed in.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable

from tokenreel.renderer.text import fonts
from tokenreel.renderer.text.cells import Cell
from tokenreel.renderer.text.clusters import covered
from tokenreel.renderer.text.paragraph import SHAPED_FONT


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
            if role == _NEUTRAL and cell.style == head.style and covered(cell.text, head.font):  # type: ignore[arg-type]
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

