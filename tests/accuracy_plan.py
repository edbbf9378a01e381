"""Graded sessions for the accuracy tests: problems with known answers, served by the simulator
by plan (right for one arm, broken for a chosen few on another), recorded over real HTTP.

`grade` is the real grader (`tokenreel.recorder.grading`): an "answer" problem's last number
against the expected value, a "tests" problem's code and tests run in its sandbox.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.test_recorder_support import arm_for, fast_settings, seed
from tokenreel.recorder.grading.session_grades import grade_session
from tokenreel.recorder.runner import new_session, record
from tokenreel.session.grading import Grading
from tokenreel.session.model import Prompt, Session
from tokenreel.simulator.planned_answers import load_answers

# Arithmetic problems: (id, question, value). Ids carry the category, as the suites' do.
ARITH = [(f"reasoning-{i}", f"Ana has {3 * i + 4} apples and buys {2 * i + 5} more. How many apples does she have now?", 5 * i + 9)
         for i in range(10)]

# Code problems, HumanEval-like: (id, prompt, canonical answer, a broken answer, tests).
CODE = [
    ("code-add", "Write a Python function add(a, b) returning the sum.",
     "```python\ndef add(a, b):\n    return a + b\n```", "```python\ndef add(a, b):\n    return a - b\n```",
     "assert add(2, 3) == 5\nassert add(-1, 1) == 0\n"),
    ("code-rev", "Write a Python function rev(s) returning the string reversed.",
     "```python\ndef rev(s):\n    return s[::-1]\n```", "```python\ndef rev(s):\n    return s\n```",
     "assert rev('abc') == 'cba'\n"),
    ("code-even", "Write a Python function evens(xs) keeping the even numbers.",
     "```python\ndef evens(xs):\n    return [x for x in xs if x % 2 == 0]\n```",
     "```python\ndef evens(xs):\n    return [x for x in xs if x % 2]\n```",
     "assert evens([1, 2, 3, 4]) == [2, 4]\n"),
    ("code-max", "Write a Python function biggest(xs) returning the largest number.",
     "```python\ndef biggest(xs):\n    return max(xs)\n```", "```python\ndef biggest(xs):\n    return min(xs)\n```",
     "assert biggest([3, 9, 2]) == 9\n"),
]


def arith_prompts() -> list[Prompt]:
    return [Prompt(id=pid, category="reasoning", messages=[{"role": "user", "content": q}], prompt="",
                   grading=Grading(kind="answer", answer=str(v))) for pid, q, v in ARITH]


def code_prompts() -> list[Prompt]:
    return [Prompt(id=pid, category="code", messages=[{"role": "user", "content": q}], prompt="",
                   grading=Grading(kind="tests", tests=tests)) for pid, q, _, _, tests in CODE]


def arith_answers(wrong: set[int]) -> list[dict[str, str]]:
    """Each question's answer, off by one on the problems numbered in `wrong`."""
    return [{"prompt": q, "answer": f"She has {v + (i in wrong)} apples now."} for i, (_, q, v) in enumerate(ARITH)]


def code_answers(broken: set[int]) -> list[dict[str, str]]:
    """Each problem's canonical answer, its broken one for the problems numbered in `broken`."""
    return [{"prompt": q, "answer": bad if i in broken else good} for i, (_, q, good, bad, _) in enumerate(CODE)]


def write_answers(path: Path, rows: Sequence[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def grade(session: Session) -> Session:
    """Every counted run of a graded prompt graded by the real grader (its sandbox, one job)."""
    grade_session(session, jobs=1)
    return session


def record_planned(make_sim: Any, tmp_path: Path, prompts: list[Prompt], plans: dict[str, list[dict[str, str]]],
                   prompts_name: str, **settings: Any) -> Session:
    """Record one arm per plan (seed profiles bf16, nvfp4, nvfp4-dflash2 in order), each serving its
    planned answers, then grade it by the plan's rule."""
    ids = ["bf16", "nvfp4", "nvfp4-dflash2"][: len(plans)]
    profiles = [seed(pid, answers=load_answers(write_answers(tmp_path / f"{name}.jsonl", rows)), diverges_at=0)
                for pid, (name, rows) in zip(ids, plans.items(), strict=True)]
    cluster = make_sim(profiles)
    arms = [replace(arm_for(cluster, pid), label=name) for pid, name in zip(ids, plans, strict=True)]
    chosen = fast_settings(prompts=prompts_name, ignore_eos=False, max_tokens=64) if not settings else \
        fast_settings(prompts=prompts_name, **settings)
    session = new_session("graded", chosen, prompts, arms)
    asyncio.run(record(session, tmp_path / "graded.json"))
    assert [r.status for r in session.runs] == ["ok"] * len(session.runs), [r.error for r in session.runs]
    return grade(session)
