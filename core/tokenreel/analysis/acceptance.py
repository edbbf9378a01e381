"""Acceptance pooled over runs, as the engines' own tools take it.

`vllm bench serve`, vLLM's /metrics and the seeds give an acceptance length over many requests
as 1 + Σaccepted / Σdrafts (and a rate as Σaccepted / Σdraft tokens): long runs weigh more than
short ones, and a figure averaged over per-request lengths is another, smaller figure (1.30
against 1.39 on the same 64 ngram runs). Pooling needs the counts; where some run gave only its
length (an engine that counts no verify steps), the median of the per-run figures stands in and
`pooled` is False.

Per draft position the same pooling holds: the rate at position i is Σ accepted at i / Σ verify
steps that reached i. Where the engine counts the drafts that reached each position (vLLM's
`spec_decode_num_draft_tokens_per_pos`, its per-request histogram by draft length) those are the
denominator; else every verify step is, as vLLM's and llama.cpp's own per-position rates take it
(the same thing when every draft had the full k tokens); there, runs whose counts end at
different positions (SGLang's histogram ends at the most drafts one step accepted) are pooled
with zeros past each run's end. docs/acceptance.md has the definitions.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tokenreel.session.model import Acceptance


@dataclass(frozen=True)
class Pooled:
    """Acceptance over several runs: the counts summed where every run had them."""

    length: float | None
    rate: float | None
    drafts: float | None = None  # Σ verify steps (None: some run did not count them)
    draft_tokens: float | None = None  # Σ tokens proposed
    accepted: float | None = None  # Σ draft tokens accepted
    # Per draft position: Σ accepted there and Σ verify steps counted as reaching it (`basis`).
    per_position: PerPosition | None = None

    @property
    def pooled(self) -> bool:
        """True when the length is 1 + Σaccepted / Σdrafts, not a median of per-run lengths."""
        return self.drafts is not None and self.accepted is not None


# "drafted": the engine counted the drafts that reached each position; "drafts": every verify
# step is the denominator at every position (exact when every draft had the full k tokens).
Basis = Literal["drafted", "drafts"]
# The per-request source whose per-position counts end at the most drafts one step accepted.
OPEN_ENDED_SOURCE = "sglext.spec_tokens_details"


@dataclass(frozen=True)
class PerPosition:
    """Acceptance per draft position, summed over runs (index 0: the first drafted token)."""

    accepted: tuple[float, ...]
    reached: tuple[float, ...]  # verify steps that reached each position, by `basis`
    basis: Basis
    # The counts end where the engine's histogram did (SGLang's grows only to the most drafts one
    # step accepted): no position past the end was accepted, so zeros extend them exactly.
    open_ended: bool = False

    def widened(self, width: int) -> PerPosition:
        """The counts over `width` positions: zeros accepted past the end, every verify step reached."""
        extra = width - len(self.accepted)
        return PerPosition(self.accepted + (0.0,) * extra, self.reached + self.reached[-1:] * extra, self.basis, True)

    @property
    def rates(self) -> list[float | None]:
        """Σ accepted at i / Σ verify steps that reached i (None where none reached it)."""
        return [a / r if r else None for a, r in zip(self.accepted, self.reached, strict=True)]


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
    counted = accepted if drafts is not None or draft_tokens is not None else None
    return Pooled(length, rate, drafts, draft_tokens, counted, pool_positions(items))


def pool_positions(items: Sequence[Acceptance | Pooled]) -> PerPosition | None:
    """Per-position counts summed over `items`; None unless every item has them for the same
    number of positions. The denominator is the drafts that reached each position where every
    item counted those, else every verify step (which then every item must have counted)."""
    parts = [_positions(a) for a in items]
    if not parts or any(p is None for p in parts):
        return None
    known = [p for p in parts if p is not None]
    basis: Basis = "drafted" if all(p.basis == "drafted" for p in known) else "drafts"
    width = max(len(p.accepted) for p in known)
    if any(len(p.accepted) != width and not (p.open_ended and p.basis == "drafts") for p in known):
        return None
    known = [p.widened(width) if len(p.accepted) != width else p for p in known]
    reached: list[tuple[float, ...]] = []
    for item, part in zip(items, known, strict=True):
        if basis == part.basis:
            reached.append(part.reached)
        elif item.drafts is None:
            return None
        else:
            reached.append((item.drafts,) * width)
    accepted = tuple(sum(column) for column in zip(*(p.accepted for p in known), strict=True))
    open_ended = all(p.open_ended for p in known)
    return PerPosition(accepted, tuple(sum(column) for column in zip(*reached, strict=True)), basis, open_ended)


def _positions(item: Acceptance | Pooled) -> PerPosition | None:
    """One item's per-position counts as a PerPosition (a run's, with its denominator chosen)."""
    if isinstance(item, Pooled):
        return item.per_position
    accepted = item.accepted_per_position
    if not accepted:
        return None
    drafted = item.drafted_per_position
    if drafted is not None and len(drafted) == len(accepted):
        return PerPosition(tuple(accepted), tuple(drafted), "drafted")
    if item.drafts is None:
        return None
    return PerPosition(tuple(accepted), (item.drafts,) * len(accepted), "drafts", item.source == OPEN_ENDED_SOURCE)


def spread(lengths: Sequence[float | None]) -> list[float] | None:
    """[lowest, highest] of the per-prompt acceptance lengths, shown beside the pooled figure."""
    present = [v for v in lengths if v is not None]
    return [min(present), max(present)] if len(present) > 1 else None


def _sum(values: list[float | None]) -> float | None:
    return None if not values or any(v is None for v in values) else sum(v for v in values if v is not None)
