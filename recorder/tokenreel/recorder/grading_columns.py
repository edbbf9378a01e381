"""A prompt row's grading columns (a JSONL suite's keys, an imported set's columns) as a `Grading`.

`tests` (+ `entry_point`, `prelude`) grades code; `answer` (+ `extract`, `pattern`) grades one
value. Every problem is a `PromptError` naming the row and the column; a regex is compiled here,
so a bad one is found before the endpoints are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tokenreel.recorder.grading.extract import as_number
from tokenreel.recorder.prompt_error import PromptError
from tokenreel.session.grading import ANSWER_EXTRACTS, Grading

TESTS_COLUMNS = ("tests", "entry_point", "prelude")
ANSWER_COLUMNS = ("answer", "extract", "pattern")
GRADING_COLUMNS = (*TESTS_COLUMNS, *ANSWER_COLUMNS)


def grading_of(values: Mapping[str, Any], where: str, blank_is_absent: bool = False) -> Grading | None:
    """The row's Grading, or None when it has no grading column. `blank_is_absent`: an empty
    cell leaves the row ungraded (a CSV or Parquet set where only some rows are graded)."""
    given = {column: values[column] for column in GRADING_COLUMNS
             if column in values and not (blank_is_absent and values[column] in (None, ""))}
    if not given:
        return None
    kind = "tests" if "tests" in given else "answer" if "answer" in given else None
    if kind is None or ("tests" in given and "answer" in given):
        raise PromptError(f"{where}: column {next(iter(given))!r}: give exactly one of 'tests' (code) or 'answer' (a value)")
    stray = next((column for column in given if column not in (TESTS_COLUMNS if kind == "tests" else ANSWER_COLUMNS)), None)
    if stray is not None:
        raise PromptError(f"{where}: column {stray!r} does not go with {kind!r}")
    text = {column: _text(where, column, value) for column, value in given.items()}
    if kind == "tests":
        return Grading("tests", tests=text["tests"], prelude=text.get("prelude", ""), entry_point=text.get("entry_point", ""))
    extract = text.get("extract", "last_number")
    if extract not in ANSWER_EXTRACTS:
        raise PromptError(f"{where}: column 'extract': {extract!r} is not one of {', '.join(ANSWER_EXTRACTS)}")
    if (extract == "regex") != ("pattern" in text):
        raise PromptError(f"{where}: column 'pattern': give a pattern with extract 'regex', and only then")
    if extract == "regex":
        try:
            re.compile(text["pattern"])
        except re.error as exc:
            raise PromptError(f"{where}: column 'pattern': not a valid regular expression ({exc})") from None
    if extract == "last_number" and as_number(text["answer"]) is None:
        raise PromptError(f"{where}: column 'answer': {text['answer'][:40]!r} is not a number (extract 'last_number')")
    return Grading("answer", answer=text["answer"], extract=extract, pattern=text.get("pattern", ""))


def _text(where: str, column: str, value: Any) -> str:
    """Text, or a whole number given as one (an answer column of integers)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        shown = repr(value)
        raise PromptError(f"{where}: column {column!r}: expected non-empty text, found {type(value).__name__} "
                          f"{shown if len(shown) <= 40 else shown[:37] + '...'}")
    return value


def grading_columns(grading: Grading | None) -> dict[str, str]:
    """The columns a suite file holds for a Grading (the inverse of `grading_of`)."""
    if grading is None:
        return {}
    names = TESTS_COLUMNS if grading.kind == "tests" else ANSWER_COLUMNS
    values = {name: getattr(grading, name) for name in names}
    if grading.kind == "answer" and grading.extract == "last_number":
        del values["extract"]
    return {name: value for name, value in values.items() if value}
