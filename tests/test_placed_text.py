"""placed_text.spread: a reply kept whole, cut into one piece a chunk by the stated rule."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenreel.renderer.placed_text import spread
from tokenreel.renderer.text.clusters import boundaries

# Characters whose clusters span several code points: marks, ZWJ, skin tones, flags, CR LF, jamo.
PARTS = st.sampled_from(["a", " ", "é", "e\u0301", "\u0308", "\U0001F469\u200D\U0001F52C", "\U0001F44D\U0001F3FD",
                         "\U0001F1EB\U0001F1F7", "\r\n", "\n", "東", "\u1100\u1161", "क्ष", "\ufe0f", "\u200d"])


@settings(max_examples=200, deadline=None)
@given(st.lists(PARTS, max_size=40).map("".join), st.integers(min_value=1, max_value=60))
def test_pieces_join_back_at_cluster_boundaries_evenly(text: str, chunks: int) -> None:
    pieces = spread(text, chunks)
    assert len(pieces) == chunks and "".join(pieces) == text
    cuts = boundaries(text)
    widest = max((b - a for a, b in zip(cuts, cuts[1:], strict=False)), default=0)
    at = 0
    for i, piece in enumerate(pieces):
        at += len(piece)
        assert at in cuts
        assert abs(at - (i + 1) * len(text) // chunks) <= widest  # the nearest boundary to the even cut


def test_one_token_a_chunk_of_plain_text_is_even() -> None:
    pieces = spread("abcdefghij", 4)
    assert pieces == ("ab", "cde", "fg", "hij") and spread("", 3) == ("", "", "")
    assert spread("e\u0301e\u0301", 4) == ("", "e\u0301", "", "e\u0301")  # a mark never leaves its letter
