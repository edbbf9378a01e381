"""How many tokens each streamed event carried, decided once the stream is over.

From the best source the server gave (`TOKEN_SOURCES` in the archive): a running count
(usage under continuous_usage_stats, llama.cpp's timings.predicted_n), token ids, logprobs, a
local tokenizer, or one per text event reconciled with the final usage. Chunks are never
assumed to hold one token each: speculative decoding, reasoning parsers and slow readers all
put several tokens in one event.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Callable, Protocol

from tokenreel.session.model import Chunks

# Given every event's text, the tokens each one carries (a local tokenizer); see `tokenizer_counts`.
CountText = Callable[[list[str]], list[int]]


@dataclass
class CountColumns:
    """Per event, each count the stream carried (None: that event had none), and whether the
    event was role-only; `StreamParser` appends to them, `fill` makes the tokens column."""

    usage_cum: list[int | None] = field(default_factory=list)  # usage.completion_tokens
    timings_cum: list[int | None] = field(default_factory=list)  # llama.cpp timings.predicted_n (timings_per_token)
    token_ids: list[int | None] = field(default_factory=list)
    logprobs: list[int | None] = field(default_factory=list)
    role_only: list[bool] = field(default_factory=list)

    def fill(self, chunks: Chunks, usage: dict[str, int] | None, count_text: CountText | None) -> str:
        """Fill the tokens column of `chunks` from the best source; its name (`TOKEN_SOURCES`).

        count_text (a local tokenizer) is used only when the stream itself gave no count per event.
        """
        text_events = [i for i in range(len(chunks)) if chunks.has_text(i)]
        source = self._counted_source(chunks.tokens, text_events)
        total = usage.get("completion_tokens") if usage is not None else None
        if source == "per_event" and count_text is not None and text_events:
            texts = [c + r + t for c, r, t in zip(chunks.content, chunks.reasoning, chunks.tool, strict=False)]
            chunks.tokens[:] = count_text(texts)
            source = "tokenizer"
            if total is not None:  # the server's total wins (template and special tokens have no text)
                reconcile(chunks.tokens, text_events, total)
        elif source == "per_event":
            for i in text_events:
                chunks.tokens[i] = 1
            if total is not None and text_events:
                reconcile(chunks.tokens, text_events, total)
        self._move_role_counts(chunks)
        return source

    def _move_role_counts(self, chunks: Chunks) -> None:
        """A role-only event is not a token (vLLM #3759): a count on it moves to the next event that
        carries text or tokens. Events with empty text that carry tokens keep them (vLLM 0.33 sends
        a first token that decodes to a partial character that way): they are real tokens."""
        tokens, role_only = chunks.tokens, self.role_only
        for i, count in enumerate(tokens):
            if count and role_only[i]:
                later = (j for j in range(i + 1, len(tokens)) if not role_only[j] and (tokens[j] or chunks.has_text(j)))
                j = next(later, None)
                if j is not None:
                    tokens[j] += count
                    tokens[i] = 0

    def _counted_source(self, tokens: list[int], text_events: list[int]) -> str:
        """Fill tokens from the first source present on every text event; its name, or per_event.

        Running counts (usage under continuous_usage_stats, llama.cpp's timings.predicted_n under
        timings_per_token) come first: they also count a token whose text the server held back
        (a character split across tokens) on the event that finally carried it.
        """
        for source, running in (("usage_delta", self.usage_cum), ("timings", self.timings_cum)):
            if text_events and all(running[i] is not None for i in text_events):
                previous = 0
                for i, cum in enumerate(running):
                    if cum is not None:
                        tokens[i] = max(0, cum - previous)
                        previous = max(previous, cum)
                return source
        for source, counts in (("token_ids", self.token_ids), ("logprobs", self.logprobs)):
            if text_events and all(counts[i] is not None for i in text_events):
                for i, count in enumerate(counts):
                    tokens[i] = count or 0
                return source
        return "per_event"


class _Tokenizer(Protocol):
    def encode(self, sequence: str, add_special_tokens: bool = ...) -> Any: ...


def tokenizer_counts(tokenizer: _Tokenizer, texts: list[str]) -> list[int]:
    """Tokens per event by a local (Hugging Face `tokenizers`) tokenizer.

    The whole reply is tokenized once (tokenizing each event alone would split tokens at event
    borders) and each token is counted on the event where its text ends, so a token whose text the
    server held back (a character split across tokens) counts on the event that carried it.
    """
    counts = [0] * len(texts)
    joined = "".join(texts)
    if not joined:
        return counts
    ends = list(accumulate(len(text) for text in texts))
    for _, end in tokenizer.encode(joined, add_special_tokens=False).offsets:
        counts[min(bisect_left(ends, max(end, 1)), len(texts) - 1)] += 1
    return counts


def reconcile(tokens: list[int], text_events: list[int], total: int) -> None:
    """Make the column sum to the server's count: the difference goes on the last token events."""
    difference = total - sum(tokens)
    if difference >= 0:
        tokens[text_events[-1]] += difference
        return
    for i in reversed(text_events):
        take = min(tokens[i], -difference)
        tokens[i] -= take
        difference += take
        if difference == 0:
            return
