"""Where a stream's layout starts afresh: after each line break, and in a long paragraph, a new
line at the first space past every SECTION characters (with none in twice that, between the
next two characters that are clusters of their own); and the blocks a layout is made in.

The wrap keeps nothing across a line break (wrap.py): the text after one is laid out as if it
began there, from the next line. A paragraph longer than SECTION characters gets such a break
too, so a paragraph of any length can be laid out a part at a time. That costs a short line
every SECTION characters of a paragraph longer than that, which no answer shown at a readable
size has (a frame of a 1080p column shows about 2,000 characters); for that, a frame late in a
long answer lays out the blocks it shows (blocks.py), not the answer before them.
"""

from __future__ import annotations

import re
from array import array
from itertools import chain
from typing import NamedTuple

from tokenreel.renderer.text.clusters import NEWLINES

SECTION = 8192  # characters of a paragraph after which the next space ends a line
BLOCK = 4096  # characters a block holds at least: it ends at the first restart point past them
_NEWLINE = re.compile(f"[{NEWLINES}]")
# Characters no neighbour joins into one cluster (printable ASCII, kana and CJK ideographs): a
# paragraph with no space in 2 x SECTION characters is cut between two of them.
_ALONE = "!-~\u3041-\u3096\u30a1-\u30fa\u3400-\u4dbf\u4e00-\u9fff"
_PAIR = re.compile(f"(?<=[{_ALONE}])[{_ALONE}]")


class Sections(NamedTuple):
    cuts: array[int]  # where a long paragraph's next line starts (the character before is a space)
    blocks: array[int]  # where each block starts, then len(text): every one a restart point


def sections(text: str, section: int = SECTION, block: int = BLOCK) -> Sections:
    """The text's cuts and blocks. A block starts after a line break or at a cut: the wrap then
    starts afresh, as it would for the text from there alone (a change of stream kind there
    ends a line that is already ended)."""
    cuts, starts = array("I"), array("I", [0])

    def restart(at: int) -> None:
        if at - starts[-1] >= block:
            starts.append(at)

    start = 0  # where the current paragraph, or its last section, starts
    for found in chain(_NEWLINE.finditer(text), [None]):
        end = found.start() if found else len(text)
        if end and text[end - 1] == "\r" and found is not None and found.group() == "\n":
            end -= 1  # CR LF is one line break
        while end - start > section:
            space = text.find(" ", start + section, min(end, start + 2 * section))
            if space >= 0:
                cut = space + 1
                while cut < end and text[cut] == " ":
                    cut += 1
            else:  # no space: between two characters that are clusters of their own
                found_pair = _PAIR.search(text, start + 2 * section, end)
                if found_pair is None:
                    break
                cut = found_pair.start()
            if cut >= end:
                break
            cuts.append(cut)
            restart(cut)
            start = cut
        if found is not None:
            start = found.end()
            if start < len(text):
                restart(start)
    if starts[-1] != len(text) or len(starts) == 1:
        starts.append(len(text))
    return Sections(cuts, starts)
