"""The simulator's written text, kept as data in assets/tokenreel/assets/simulator/.

written_answers.json holds the first built-in prompts' own answers (ladder4's, and mixed's first
three of each category), so a demo shows a reply about its own prompt; passages.json holds each
category's pool for every other prompt. Both store a text as its list of lines, so the files
read and diff like the text itself.
"""

from __future__ import annotations

import json
from typing import NamedTuple, TypedDict

from tokenreel.assets import file


class WrittenAnswer(NamedTuple):
    """One built-in prompt and the answer the simulator gives it."""

    id: str
    category: str
    prompt: str
    answer: str


class _AnswerEntry(TypedDict):
    id: str
    category: str
    prompt: str
    answer: list[str]


class _AnswersFile(TypedDict):
    about: str
    answers: list[_AnswerEntry]


class _PassagesFile(TypedDict):
    about: str
    pools: dict[str, list[list[str]]]


def _read(name: str) -> str:
    return file("simulator", name).read_text(encoding="utf-8")


def _answers() -> tuple[WrittenAnswer, ...]:
    data: _AnswersFile = json.loads(_read("written_answers.json"))
    return tuple(WrittenAnswer(e["id"], e["category"], e["prompt"], "\n".join(e["answer"])) for e in data["answers"])


def _pools() -> dict[str, tuple[str, ...]]:
    data: _PassagesFile = json.loads(_read("passages.json"))
    return {category: tuple("\n".join(lines) for lines in passages) for category, passages in data["pools"].items()}


# Every answer runs past 512 tokens (the shipped config's forced length) before it ends.
BUILTIN: tuple[WrittenAnswer, ...] = _answers()
# Category -> its passages, for prompts without a written answer (picked by the prompt's digest).
POOLS: dict[str, tuple[str, ...]] = _pools()
