'''Deterministic, realistic answer text for the simulated engine.

Recorder and renderer code must see text that looks like a model's output (indented code,
newlines, multi-byte characters, words split into sub-word pieces), and the same prompt must
always give the same tokens, like temperature 0, so recordings and videos are reproducible.
The first built-in prompts (analysis/answers.py says which) get their own written answers, picked
by exact prompt text; any other prompt gets a passage of its category's pool (the category its
words suggest: a request carries no suite category), picked by digest. The text itself is data
(written_answers.py loads it).
'''

from __future__ import annotations

import hashlib
import itertools
import random
import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache

from tokenreel.simulator.written_answers import BUILTIN, POOLS

CATEGORIES: tuple[str, ...] = ("conversation", "reasoning", "prose", "code")

VOCAB_SIZE = 151_936  # Qwen3's vocabulary size, so token ids look plausible

_KEYWORDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (category, re.compile(r"\b(?:" + "|".join(words) + r")\b", re.IGNORECASE))
    for category, words in (
        (
            "code",
            (
                "function", "python", "implement", "class", "bug", "code", "script",
                "program", "javascript", "typescript", "sql", "regex", "refactor", "debug",
                "compile", "unit tests?",
            ),
        ),
        (
            "reasoning",
            (
                "how many", "how much", "calculate", "solve", "step by step", "math",
                "equation", "arithmetic", "percent(?:age)?", "probability", "prove",
            ),
        ),
        (
            "prose",
            (
                "essay", "story", "write an article", "article", "describe in detail",
                "poem", "narrative", "blog post",
            ),
        ),
    )
)

# newline | spaces before another space (indentation) | word | punctuation | spaces | other
_PIECE = re.compile(r"\n| +(?= )| ?\w+| ?[^\w\s]{1,3}| +|\s")
_MAX_PIECE = 7
_SUBWORD = 5


def tokenize(text: str) -> list[str]:
    """Split text into token-like pieces: short words whole (with their leading space),
    longer ones cut into even sub-word pieces of about 5 chars, newlines on their own."""
    pieces: list[str] = []
    for match in _PIECE.finditer(text):
        piece = match.group()
        if len(piece) <= _MAX_PIECE:
            pieces.append(piece)
            continue
        parts = -(-len(piece) // _SUBWORD)
        bounds = [round(i * len(piece) / parts) for i in range(parts + 1)]
        pieces.extend(piece[a:b] for a, b in zip(bounds, bounds[1:], strict=False))
    return pieces


def token_id(piece: str) -> int:
    """A stable fake vocabulary id for a piece (the same piece always maps to the same id)."""
    return zlib.crc32(piece.encode()) % VOCAB_SIZE


def prompt_digest(text: str) -> int:
    """Stable 64-bit digest of a prompt; seeds everything that varies between prompts."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def classify(prompt_text: str) -> str:
    """Guess the prompt category from keywords; code wins over reasoning over prose."""
    for category, pattern in _KEYWORDS:
        if pattern.search(prompt_text):
            return category
    return "conversation"


_TOKENS: dict[str, tuple[tuple[str, ...], ...]] = {
    category: tuple(tuple(tokenize(p)) for p in passages)
    for category, passages in POOLS.items()
}
_SEPARATOR: tuple[str, ...] = ("\n", "\n")


def prompt_key(text: str) -> str:
    """A prompt as the built-in table is keyed: whitespace runs collapsed, ends stripped."""
    return " ".join(text.split())


# The built-in prompts' own answers: their tokens by answer id, and (answer id, category) by prompt text.
_BUILTIN_TOKENS: dict[str, tuple[str, ...]] = {
    written.id: tuple(tokenize(written.answer)) for written in BUILTIN
}
_BUILTIN_BY_PROMPT: dict[str, tuple[str, str]] = {
    prompt_key(written.prompt): (written.id, written.category) for written in BUILTIN
}


@dataclass(frozen=True)
class Reply:
    """The answer to one prompt: a passage that ends naturally, continued on demand.

    A built-in prompt's reply is its own written answer (`answer` is its id, e.g. "code-1");
    any other prompt gets passage number `passage` of its category's pool (`answer` None);
    a planned answer (a profile's `answers`) is served as `planned`, its tokens.
    """

    category: str
    passage: int = 0
    answer: str | None = None
    planned: tuple[str, ...] = ()

    def _chain(self) -> Iterator[tuple[str, ...]]:
        """Passages in the order they are emitted: the reply, then what ignore_eos adds. A
        forced length never makes the answer repeat itself: after it comes every other passage
        the simulator holds, once (its own category's first), then text generated from them."""
        pool = _TOKENS[self.category]
        if self.planned:
            own = self.planned
        elif self.answer is not None:
            own = _BUILTIN_TOKENS[self.answer]
        else:
            own = pool[self.passage % len(pool)]
        yield own
        yield from (passage for passage in _continuations(self.category) if passage is not own)
        for paragraph in itertools.count():
            yield _generated(self.category, paragraph)

    @property
    def natural_len(self) -> int:
        """Tokens before the model would emit end-of-sequence."""
        return len(next(self._chain()))

    def tokens(self, n: int, diverges_at: int = 0) -> list[str]:
        """The first n tokens; past the natural end other passages follow (like ignore_eos).

        diverges_at (1-based, 0: never): weights that pick another token there; the simulated
        pick leaves the original's token out and carries on with the next, so the answers part
        at that token and stay alike after it (a word dropped, a line's indent one space short).
        """
        if 0 < diverges_at <= n:
            longer = self.tokens(n + 1)
            return longer[: diverges_at - 1] + longer[diverges_at:]
        out: list[str] = []
        for passage in self._chain():
            if len(out) >= n:
                break
            if out:
                out.extend(_SEPARATOR)
            out.extend(passage)
        return out[:n]


@lru_cache(maxsize=None)
def _category_texts(category: str) -> tuple[tuple[str, ...], ...]:
    """The category's passages, then its built-in answers (tokenized)."""
    builtin = tuple(_BUILTIN_TOKENS[written.id] for written in BUILTIN if written.category == category)
    return (*_TOKENS[category], *builtin)


def _continuations(category: str) -> tuple[tuple[str, ...], ...]:
    """Every passage and built-in answer, the category's own first, each once."""
    return tuple(p for c in (category, *(c for c in CATEGORIES if c != category)) for p in _category_texts(c))


@lru_cache(maxsize=None)
def _successors(category: str) -> dict[str, tuple[str, ...]]:
    """For each token of the category's texts, the tokens that follow it there (in text order)."""
    follows: dict[str, list[str]] = {}
    for passage in _category_texts(category):
        for a, b in zip(passage, passage[1:], strict=False):
            follows.setdefault(a, []).append(b)
    return {a: tuple(b) for a, b in follows.items()}


def _generated(category: str, paragraph: int, length: int = 240) -> tuple[str, ...]:
    """Paragraph `paragraph` of text generated past the end of every passage: a walk through
    which token follows which in the category's texts, seeded by the paragraph's number (the
    same tokens every time; a string seed does not depend on PYTHONHASHSEED)."""
    follows = _successors(category)
    pick = random.Random(f"tokenreel-sim-{category}-{paragraph}")
    starts = sorted(b for a, nexts in follows.items() if a in (".", "\n") for b in nexts if b.strip())
    out = [pick.choice(starts)]
    while len(out) < length:
        nexts = follows.get(out[-1])
        out.append(pick.choice(nexts) if nexts else pick.choice(starts))
    return tuple(out)


def builtin_answer(prompt_text: str) -> str | None:
    """The id of a built-in prompt's own answer (e.g. "code-1"), or None for other prompts."""
    found = _BUILTIN_BY_PROMPT.get(prompt_key(prompt_text))
    return found[0] if found else None


def reply_for(prompt_text: str, planned: Mapping[str, str] | None = None) -> Reply:
    """The deterministic reply to a prompt (temperature 0: same prompt, same tokens).

    A prompt `planned` holds (keyed by `prompt_key`) gets that answer; a built-in prompt its
    own; any other prompt a passage of its category's pool, chosen by the prompt's digest.
    """
    answer = planned.get(prompt_key(prompt_text)) if planned else None
    if answer:
        return Reply(classify(prompt_text), planned=tuple(tokenize(answer)))
    found = _BUILTIN_BY_PROMPT.get(prompt_key(prompt_text))
    if found is not None:
        answer_id, category = found
        return Reply(category, answer=answer_id)
    category = classify(prompt_text)
    return Reply(category, prompt_digest(prompt_text) % len(_TOKENS[category]))
