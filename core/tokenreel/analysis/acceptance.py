"""Acceptance pooled over runs, as the engines' own tools take it.

`vllm bench serve`, vLLM's /metrics and the seeds give an acceptance length over many requests
as 1 + Σaccepted / Σdrafts (and a rate as Σaccepted / Σdraft tokens): long runs weigh more than
short ones, and a figure averaged over per-request lengths is another, smaller figure (1.30
against 1.39 on the same 64 ngram runs). Pooling needs the counts; where some run gave only its
length (an engine that counts no verify steps), the median of the per-run figures stands in and
`pooled` is False.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tokenreel.session.model import Acceptance


@dataclass(frozen=True)
class Pooled:
    """Acceptance over several runs: the counts summed where every run had them."""

    length: float | None
    rate: float | None
    drafts: float | None = None  # Σ verify steps (None: some run did not count them)
    draft_tokens: float | None = None  # Σ tokens proposed
    accepted: float | None = None  # Σ draft tokens accepted

    @property
    def pooled(self) -> bool:
        """True when the length is 1 + Σaccepted / Σdrafts, not a median of per-run lengths."""
        return self.drafts is not None and self.accepted is not None


NONE = Pooled(None, None)


def pool(items: Sequence[Acceptance | Pooled]) -> Pooled:
    """1 + Σaccepted / Σdrafts and Σaccepted / Σdraft tokens over `items` (runs' acceptance, or
    cells' pooled figures); where some item lacks a count, the median of the items' own figures."""
    lengths = [v for a in items if (v := a.mean_length if isinstance(a, Acceptance) else a.length) is not None]
    rates = [a.rate for a in items if a.rate is not None]
    if not lengths and not rates:
        return NONE
    drafts = _sum([a.drafts for a in items])
    accepted = _sum([a.accepted for a in items])
    draft_tokens = _sum([a.draft_tokens for a in items])
    if drafts and accepted is not None and len(lengths) == len(items):
        length: float | None = 1.0 + accepted / drafts
    else:
        length, drafts = (statistics.median(lengths) if lengths else None), None
    if draft_tokens and accepted is not None and len(rates) == len(items):
        rate: float | None = accepted / draft_tokens
    else:
        rate, draft_tokens = (statistics.median(rates) if rates else None), None
    return Pooled(length, rate, drafts, draft_tokens, accepted if drafts is not None or draft_tokens is not None else None)


def spread(lengths: Sequence[float | None]) -> list[float] | None:
    """[lowest, highest] of the per-prompt acceptance lengths, shown beside the pooled figure."""
    present = [v for v in lengths if v is not None]
    return [min(present), max(present)] if len(present) > 1 else None


def _sum(values: list[float | None]) -> float | None:
    return None if not values or any(v is None for v in values) else sum(v for v in values if v is not None)
