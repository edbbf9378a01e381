"""Model ids cut from the middle to fit a width, keeping what tells the arms on screen apart.

Ids of one family share their start ("ThakiCloud/Qwen3.8-27B-") and differ at the end (the
quantization, the drafter), so cutting the end ("ThakiCloud/Qwen3.8-27B-N…") leaves two arms
the same name. Here the cut goes in the middle, at the end-heavy split that no other id on
screen could also be read as.
"""

from __future__ import annotations

from collections.abc import Sequence

ELLIPSIS = "…"


def _could_be(head: str, tail: str, other: str) -> bool:
    return len(other) >= len(head) + len(tail) and other.startswith(head) and other.endswith(tail)


def middle_cut(model: str, others: Sequence[str], chars: int) -> str:
    """`model` in at most `chars` characters: whole when it fits, else its start and its end
    around "…", the end given most of the room where that tells it from every other id."""
    if len(model) <= chars:
        return model
    if chars < 3:
        return model[:chars]
    rivals = [other for other in dict.fromkeys(others) if other != model]
    room = chars - 1
    owner = model.find("/") + 1  # an organisation's prefix ("Qwen/") is the first thing to keep
    preferred = min(owner, room // 3) if owner else room // 3
    heads = [preferred, *range(preferred - 1, 0, -1), *range(preferred + 1, room)]
    for head in heads:
        start, end = model[:head], model[len(model) - (room - head):]
        if not any(_could_be(start, end, other) for other in rivals):
            return f"{start}{ELLIPSIS}{end}"
    start = model[:preferred]
    return f"{start}{ELLIPSIS}{model[len(model) - (room - preferred):]}"
