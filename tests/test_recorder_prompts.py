"""Prompt suites: builtin, JSONL (validated with file:line errors) and seeded random prompts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tokenreel import assets
from tokenreel.recorder.suites import MIN_PER_CATEGORY, PromptError, chat_messages, completion_text, load_prompts, random_prompt

REPO = Path(__file__).resolve().parents[1]


def test_builtin_suite_loads() -> None:
    prompts = load_prompts("builtin:mixed", Path("/nonexistent"))
    assert prompts and len({p.id for p in prompts}) == len(prompts)
    assert all(p.messages or p.prompt for p in prompts)


def test_unknown_builtin_lists_known_suites() -> None:
    with pytest.raises(PromptError, match="no such built-in suite; known: .*mixed"):
        load_prompts("builtin:nope", Path("."))


def test_prompt_rows_and_message_rows(tmp_path: Path) -> None:
    (tmp_path / "s.jsonl").write_text(
        '{"id": "p", "category": "code", "prompt": "Write code"}\n'
        "\n"
        '{"id": "m", "category": "chat", "messages": [{"role": "system", "content": "Be brief."},'
        ' {"role": "user", "content": "Hello"}]}\n'
    )
    by_prompt, by_messages = load_prompts("s.jsonl", tmp_path)
    assert chat_messages(by_prompt) == [{"role": "user", "content": "Write code"}]
    assert completion_text(by_prompt) == "Write code"
    assert chat_messages(by_messages) == by_messages.messages
    assert completion_text(by_messages) == "Be brief.\n\nHello"


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ("not json", "not valid JSON"),
        ("[1]", "expected a JSON object"),
        ('{"category": "c", "prompt": "x"}', "'id' must be a non-empty string"),
        ('{"id": "a", "prompt": "x"}', "'category' must be a non-empty string"),
        ('{"id": "a", "category": "c"}', "exactly one of 'messages' or 'prompt'"),
        ('{"id": "a", "category": "c", "messages": [{"role": "user"}]}', "messages[0]"),
        ('{"id": "a", "category": "c", "prompt": "x", "extra": 1}', "unknown key 'extra'"),
        ('{"id": "a", "category": "c", "messages": []}', "non-empty list"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path: Path, row: str, problem: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "ok", "category": "c", "prompt": "fine"}\n' + row + "\n")
    with pytest.raises(PromptError) as caught:
        load_prompts(str(path), tmp_path)
    assert str(caught.value).startswith(f"{path}:2: ") and problem in str(caught.value)


def test_duplicate_ids_and_empty_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "dup.jsonl").write_text('{"id": "a", "category": "c", "prompt": "x"}\n' * 2)
    with pytest.raises(PromptError, match=r"dup.jsonl:2: duplicate id 'a' \(first on line 1\)"):
        load_prompts("dup.jsonl", tmp_path)
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(PromptError, match="no prompts in the file"):
        load_prompts("empty.jsonl", tmp_path)
    with pytest.raises(PromptError, match="prompt file not found"):
        load_prompts("missing.jsonl", tmp_path)


def test_random_prompt_is_seeded_and_about_n_tokens() -> None:
    [prompt] = load_prompts("random:1024", Path("."))
    assert prompt == random_prompt(1024)
    assert prompt.id == "random-1024" and prompt.category == "random"
    assert 1000 <= len(prompt.prompt.split()) <= 1030
    assert random_prompt(512).prompt != prompt.prompt
    for bad in ("random:", "random:0", "random:x", "random:-5"):
        with pytest.raises(PromptError, match="random:N"):
            load_prompts(bad, Path("."))


SUITES = assets.names("prompts", ".jsonl")
QUICK_LOOK = {"ladder4"}  # one prompt a category, for the demo and smoke tests (docs/recording.md: "Prompt suites")


@pytest.mark.parametrize("suite", SUITES)
def test_builtin_suites_are_whole(suite: str) -> None:
    """Unique ids, no blank prompt, and enough prompts in each category for a per-category claim."""
    prompts = load_prompts(f"builtin:{suite}", Path("/nonexistent"))
    assert len({p.id for p in prompts}) == len(prompts)
    assert all(completion_text(p).strip() and [m for m in p.messages if m["role"] == "user"] for p in prompts)
    counts = Counter(p.category for p in prompts)
    if suite in QUICK_LOOK:
        assert set(counts.values()) == {1} and 1 < MIN_PER_CATEGORY  # one a category: the exception
    else:
        assert min(counts.values()) >= MIN_PER_CATEGORY, counts


def test_the_quick_look_suite_is_the_documented_exception() -> None:
    assert set(SUITES) - QUICK_LOOK == {"mixed", "speed"}
    readme = " ".join((REPO / "docs" / "recording.md").read_text(encoding="utf-8").split())
    assert "`builtin:ladder4` (4 prompts, one per category) is for a quick look" in readme
    assert "too small for any interval or per-category claim" in readme


def test_mixed_and_speed_have_the_documented_shape() -> None:
    mixed = load_prompts("builtin:mixed", Path("."))
    assert Counter(p.category for p in mixed) == dict.fromkeys(("conversation", "reasoning", "prose", "code"), 8)
    assert [p.id for p in mixed[:12]] == [f"{c}-{n}" for c in ("conversation", "reasoning", "prose", "code") for n in (1, 2, 3)]
    speed = load_prompts("builtin:speed", Path("."))
    categories = ("coding", "math", "stem", "humanities", "writing", "summarization", "roleplay", "rag",
                  "multilingual", "reasoning", "qa")
    assert [p.id for p in speed] == [f"{c}-{n}" for c in categories for n in range(1, 9)]
    system = {"role": "system", "content": "You are a helpful assistant."}
    assert all(p.messages[0] == system and len(p.messages) == 2 for p in [*mixed, *speed])
