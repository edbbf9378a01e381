"""Planned answers: a JSONL of {"prompt", "answer"} a profile serves instead of its passages.

Accuracy figures need an engine whose answers are known beforehand (right for one arm, wrong by
plan for another), so a test or a demo can hold the report's pass@1 and flip counts to the plan.
A prompt is matched as the built-in answers are: whitespace runs collapsed, ends stripped.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenreel.base.files import read_input
from tokenreel.simulator.answer_text import prompt_key


def load_answers(path: Path) -> dict[str, str]:
    """Prompt key -> planned answer, from a JSONL file; ValueError names the file, line and field."""
    try:
        lines = read_input(path, "planned answers").decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the planned answers ({exc}); give a UTF-8 JSONL file") from None
    answers: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not JSON ({exc.msg}); each line is {{\"prompt\": ..., \"answer\": ...}}") from None
        if not isinstance(entry, dict):
            raise ValueError(f"{path}:{number}: expected an object with \"prompt\" and \"answer\"")
        for name in ("prompt", "answer"):
            if not isinstance(entry.get(name), str) or not entry[name].strip():
                raise ValueError(f"{path}:{number}: \"{name}\" must be a non-empty string")
        answers[prompt_key(entry["prompt"])] = entry["answer"]
    return answers
