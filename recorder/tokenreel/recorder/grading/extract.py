"""What is graded in an answer: its code, or one value.

Code is the answer's first fenced block (```python, ```py or a bare ```; a block the answer's
length cut keeps what it has), else the whole answer. A value is taken by the prompt's
`Grading.extract` rule; numbers compare as numbers ("42.0" equals "42", "1,000" equals "1000").
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from tokenreel.session.grading import Grading

_FENCE = re.compile(r"```[ \t]*(python3?|py|)[ \t]*\n(.*?)(?:```|\Z)", re.S | re.I)
_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|-?\.\d+")
_BOXED = "\\boxed{"


def code_of(answer: str) -> str:
    """The code to run: the first fenced Python block, else the whole answer ("" when blank)."""
    fence = _FENCE.search(answer)
    return fence.group(2) if fence else answer if answer.strip() else ""


def value_of(answer: str, grading: Grading) -> str | None:
    """The value the rule takes from the answer; None when there is none."""
    if grading.extract == "last_number":
        numbers = _NUMBER.findall(answer)
        return numbers[-1] if numbers else None
    if grading.extract == "boxed":
        return _last_boxed(answer)
    if grading.extract == "regex":
        matches = list(re.finditer(grading.pattern, answer))
        if not matches:
            return None
        last = matches[-1]
        return last.group(1) if last.re.groups else last.group(0)
    return answer.strip()


def _last_boxed(answer: str) -> str | None:
    """The contents of the last \\boxed{...}, braces inside it balanced."""
    start = answer.rfind(_BOXED)
    if start < 0:
        return None
    depth, at = 1, start + len(_BOXED)
    for i in range(at, len(answer)):
        depth += {"{": 1, "}": -1}.get(answer[i], 0)
        if depth == 0:
            return answer[at:i]
    return None


def as_number(text: str) -> Decimal | None:
    """The text as a number ("1,000", "$42", "42.0", "-3"), else None."""
    cleaned = text.strip().replace(",", "").removeprefix("$").rstrip(".")
    try:
        number = Decimal(cleaned)
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def same_value(found: str, expected: str) -> bool:
    """Numbers as numbers, anything else as stripped text."""
    a, b = as_number(found), as_number(expected)
    if a is not None and b is not None:
        return a == b
    return found.strip() == expected.strip()
