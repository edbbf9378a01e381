'''Deterministic, realistic answer text for the simulated engine.

Recorder and renderer code must see text that looks like a model's output (indented code,
newlines, multi-byte characters, words split into sub-word pieces), and the same prompt must
always give the same tokens, like temperature 0, so recordings and videos are reproducible.
The first built-in prompts (answers.py says which) get their own written answers, picked by
exact prompt text; any other prompt gets a passage of its category's pool (the category its
words suggest: a request carries no suite category), picked by digest.
'''

from __future__ import annotations

import hashlib
import itertools
import random
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from tokenreel.simulator.written_answers import BUILTIN

CATEGORIES: tuple[str, ...] = ("conversation", "reasoning", "prose", "code")

VOCAB_SIZE = 151_936  # Qwen3's vocabulary size, so token ids look plausible

_CODE = (
    '''Here is a small, dependency-free implementation of a token-bucket rate limiter:

```python
import time
from dataclasses import dataclass, field


@dataclass
class TokenBucket:
    """Allow bursts up to `capacity`, refilled at `rate` tokens per second."""

    capacity: float
    rate: float
    tokens: float = field(init=False)
    updated: float = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = self.capacity
        self.updated = time.monotonic()

    def _refill(self) -> None:
        now = time.monotonic()
        elapsed = now - self.updated
        self.tokens = min(self.capacity, self.tokens + elapsed * self.rate)
        self.updated = now

    def try_acquire(self, cost: float = 1.0) -> bool:
        self._refill()
        if self.tokens >= cost:
            self.tokens -= cost
            return True
        return False

    def wait_time(self, cost: float = 1.0) -> float:
        self._refill()
        missing = max(0.0, cost - self.tokens)
        return missing / self.rate
```

The bucket refills lazily inside `_refill`, so there is no background thread to manage. \
Use `time.monotonic()` rather than `time.time()`: the wall clock can jump backwards when \
the system synchronises, and the limiter would then hand out a burst it should not.''',
    '''The bug is in how the loop counts tokens: it assumes one token per chunk, which is \
not true once the server batches several tokens into a single event. Here is a fixed version:

```python
import json


def parse_stream(lines):
    """Return (text, tokens) from an OpenAI-style SSE stream."""
    text_parts = []
    tokens = 0
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith(":"):
            continue
        if not line.startswith("data: "):
            raise ValueError(f"unexpected line: {line!r}")
        payload = line[len("data: "):]
        if payload == "[DONE]":
            break
        event = json.loads(payload)
        if "error" in event:
            raise RuntimeError(event["error"]["message"])
        usage = event.get("usage") or {}
        if "completion_tokens" in usage:
            tokens = usage["completion_tokens"]
        for choice in event.get("choices", []):
            delta = choice.get("delta", {})
            text_parts.append(delta.get("content") or "")
    return "".join(text_parts), tokens
```

With `continuous_usage_stats` enabled, every event carries the cumulative count, so the \
difference between two events is exactly the number of tokens that arrived — no guessing \
from the length of the text.''',
)

_REASONING = (
    '''Let's solve this step by step.

1. The first train leaves at 09:00 and travels at 80 km/h.
2. The second train leaves at 10:30 from the same station, at 120 km/h.
3. When the second train starts, the first one has been moving for 1.5 hours, so it is \
80 × 1.5 = 120 km ahead.
4. The second train closes the gap at 120 − 80 = 40 km/h.
5. Time to close a 120 km gap: 120 ÷ 40 = 3 hours.
6. So the second train catches up at 10:30 + 3:00 = 13:30.

Let's check the answer. By 13:30 the first train has travelled for 4.5 hours: \
80 × 4.5 = 360 km. The second train has travelled for 3 hours: 120 × 3 = 360 km. \
Both are 360 km from the station, so the distances match.

**Answer:** the second train catches up at 13:30, 360 km from the station.''',
    '''We need to find the final price after both discounts, then compare it with a single \
discount.

Step 1: the original price is $240.
Step 2: the first discount is 25%, so we subtract 0.25 × 240 = 60. The price becomes \
240 − 60 = 180.
Step 3: the second discount is 10% of the new price: 0.10 × 180 = 18. The price becomes \
180 − 18 = 162.
Step 4: the total saving is 240 − 162 = 78.
Step 5: as a single percentage, 78 ÷ 240 = 0.325, which is 32.5%.

Notice that this is not 25% + 10% = 35%. The second discount applies to a smaller amount, \
so it is worth less. In general, two discounts a and b combine to 1 − (1 − a)(1 − b). \
Here that gives 1 − 0.75 × 0.90 = 1 − 0.675 = 0.325, which matches.

**Answer:** the final price is $162, a combined discount of 32.5%, not 35%.''',
)

_PROSE = (
    '''Every harbour town keeps a lighthouse long after it stops needing one. The ships \
carry satellite receivers now, and the charts on their screens know every rock to within a \
metre, yet the towns repaint the towers each spring and pay someone to climb the stairs. \
It would be easy to call this nostalgia, but I think it is closer to a promise.

A lighthouse was never only a warning. It was a statement that somebody on shore was \
awake, that the dark was being watched, and that a stranger's safety was worth the cost of \
oil and sleep. The keepers who trimmed the wicks through winter nights rarely saw the ships \
they helped; they simply trusted that the light reached someone.

When I visited the tower at the end of the breakwater last autumn, the keeper's logbook \
was still open on the desk. The entries were short — wind, visibility, the hour the lamp was \
lit — and almost none of them mentioned an event. That is the quiet genius of the job: \
success looks exactly like nothing happening.

Perhaps that is why we keep them. In a world that measures everything, the lighthouse \
reminds us that some of the most valuable work leaves no trace at all.''',
    '''Bread is one of the oldest technologies we still use every day, and it has barely \
changed. Flour, water, salt and time: the recipe a baker follows in a small café today would \
be familiar to someone grinding grain five thousand years ago.

What has changed is our patience. Industrial loaves are mixed, proved and baked in a few \
hours, because the machines can force what the yeast would otherwise do slowly. The result \
is soft and uniform, and it lasts for a week in its plastic bag. But something is lost. \
Long fermentation lets enzymes break starch into sugars, which is where the crust's deep \
colour and the crumb's faint sweetness come from.

The revival of slow baking is often described as a trend, but it feels more like a \
correction. People who start baking at home discover that the hard part is not the \
kneading; it is waiting. A good loaf asks you to plan a day ahead, to check the dough \
instead of the clock, and to accept that the weather in your kitchen matters.

There is a kind of naïve pleasure in that — a reminder that not every process can be \
hurried, and that some of the best results simply take the time they take.''',
)

_CONVERSATION = (
    '''Great question! Lisbon is a wonderful city for a long weekend, and three days is \
enough to see the highlights without rushing.

On the first day, I'd start in Alfama, the oldest neighbourhood. Wander up the narrow \
streets to the Castelo de São Jorge for the view, then have lunch at one of the small \
family restaurants near the cathedral. In the evening, try to catch a fado performance; \
the smaller venues are the most atmospheric.

For the second day, take the tram or a short train ride to Belém. The monastery is \
stunning, and you really shouldn't leave without trying the pastéis de nata at the \
famous bakery nearby — yes, the queue is long, but it moves quickly.

On your last day, consider a day trip to Sintra. The palaces look like something out of \
a fairy tale, and the forest paths are lovely when it's warm. Just start early, because \
the buses get crowded by mid-morning.

A couple of practical tips: wear comfortable shoes, since the hills and cobblestones are \
steep, and get a rechargeable transport card at any metro station. Have a fantastic trip, \
and let me know if you'd like restaurant suggestions!''',
    '''I'm sorry to hear your plant is struggling! Yellow leaves are very common, and the \
good news is that the cause is usually easy to fix.

The most likely reason is overwatering. Most houseplants prefer their soil to dry out a \
little between waterings. Push a finger about two centimetres into the soil: if it still \
feels damp, wait a few more days. Also check that the pot has a drainage hole, because \
water sitting at the bottom can rot the roots.

If the soil is dry and the leaves are yellow and crispy, the plant may be thirsty instead, \
or the air might be too dry. Moving it away from radiators helps a lot in winter.

Light matters too. If only the lower leaves are turning yellow and the plant is leaning \
towards the window, it probably wants a brighter spot — just not direct afternoon sun.

Finally, a little fertiliser once a month during spring and summer can help, but skip it \
in winter when growth slows down.

Give it a couple of weeks after any change; plants respond slowly. Feel free to send me a \
description of the leaves if it doesn't improve, and we can figure it out together!''',
)

_PASSAGES: dict[str, tuple[str, ...]] = {
    "code": _CODE,
    "reasoning": _REASONING,
    "prose": _PROSE,
    "conversation": _CONVERSATION,
}

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
    for category, passages in _PASSAGES.items()
}
_SEPARATOR: tuple[str, ...] = ("\n", "\n")


def _prompt_key(text: str) -> str:
    """A prompt as the built-in table is keyed: whitespace runs collapsed, ends stripped."""
    return " ".join(text.split())


# The built-in prompts' own answers (answers.py), keyed by prompt text: answer id, category.
_BUILTIN_TOKENS: dict[str, tuple[str, ...]] = {
    answer_id: tuple(tokenize(answer)) for answer_id, _, _, answer in BUILTIN
}
_BUILTIN_BY_PROMPT: dict[str, tuple[str, str]] = {
    _prompt_key(prompt): (answer_id, category) for answer_id, category, prompt, _ in BUILTIN
}


@dataclass(frozen=True)
class Reply:
    """The answer to one prompt: a passage that ends naturally, continued on demand.

    A built-in prompt's reply is its own written answer (`answer` is its id, e.g. "code-1");
    any other prompt gets passage number `passage` of its category's pool (`answer` None).
    """

    category: str
    passage: int = 0
    answer: str | None = None

    def _chain(self) -> Iterator[tuple[str, ...]]:
        """Passages in the order they are emitted: the reply, then what ignore_eos adds. A
        forced length never makes the answer repeat itself: after it comes every other passage
        the simulator holds, once (its own category's first), then text generated from them."""
        own = _BUILTIN_TOKENS[self.answer] if self.answer is not None else _TOKENS[self.category][self.passage % len(_TOKENS[self.category])]
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
            out = self.tokens(n + 1)
            return out[: diverges_at - 1] + out[diverges_at:]
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
    builtin = tuple(_BUILTIN_TOKENS[answer_id] for answer_id, cat, _, _ in BUILTIN if cat == category)
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
    found = _BUILTIN_BY_PROMPT.get(_prompt_key(prompt_text))
    return found[0] if found else None


def reply_for(prompt_text: str) -> Reply:
    """The deterministic reply to a prompt (temperature 0: same prompt, same tokens).

    A built-in prompt gets its own answer; any other prompt a passage of its category's pool,
    chosen by the prompt's digest.
    """
    found = _BUILTIN_BY_PROMPT.get(_prompt_key(prompt_text))
    if found is not None:
        answer_id, category = found
        return Reply(category, answer=answer_id)
    category = classify(prompt_text)
    return Reply(category, prompt_digest(prompt_text) % len(_TOKENS[category]))
