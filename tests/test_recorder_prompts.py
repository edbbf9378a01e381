"""Prompt suites: builtin, JSONL (validated with file:line errors) and seeded random prompts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenreel.recorder.prompts import PromptError, chat_messages, completion_text, load_prompts, random_prompt


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
