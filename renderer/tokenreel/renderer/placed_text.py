"""An imported reply's text over its chunks: the one rule a replay of a peer's result follows.

vllm bench keeps every chunk's arrival exactly but each reply's text whole, so which characters
came with which chunk is not in its file. The replay spreads the reply evenly: of a reply of L
characters over n chunks, chunk i (from 0) shows the characters from i·L/n to (i+1)·L/n, each cut
moved to the nearest boundary of a user-perceived character (the renderer's own clusters; the
earlier one on a tie), so no letter with its marks, emoji sequence or flag is split. Where each
chunk carried one token (chunk count = output tokens) this is the text in proportion to each
chunk's tokens. It is applied at render time: the session keeps only what the file held (the
reply on its last chunk), and the same session always places the text the same way.
"""

from __future__ import annotations

from bisect import bisect_left

from tokenreel.renderer.text.clusters import boundaries

RULE = ("each reply's text spread evenly over its chunks by character count, cut at character boundaries (the file"
        " keeps each reply whole, not per chunk); every chunk's arrival time is the file's")


def notes(tool: str) -> tuple[str, ...]:
    """What a viewer is told of it, longest first (the footer and the end card take the first
    that fits): the text is placed, the times are not."""
    return (f"{tool} import: each reply's text placed over its chunks by length; chunk times exact",
            f"{tool} import: text placed over chunks by length; times exact",
            "Text placed by length; times exact")


def spread(text: str, chunks: int) -> tuple[str, ...]:
    """text cut into `chunks` pieces by RULE; "".join of them is text."""
    if chunks < 1:
        raise ValueError("spread: a run has at least one chunk")
    cuts = boundaries(text)
    at = [0, *(_nearest(cuts, i * len(text) // chunks) for i in range(1, chunks)), len(text)]
    return tuple(text[a:b] for a, b in zip(at, at[1:], strict=False))


def _nearest(cuts: list[int], target: int) -> int:
    """The boundary nearest to target; the earlier one on a tie (monotonic in target)."""
    i = bisect_left(cuts, target)
    if cuts[i] == target or i == 0:
        return cuts[i]
    before, after = cuts[i - 1], cuts[i]
    return before if target - before <= after - target else after
