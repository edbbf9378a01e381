"""One answer graded by its prompt's `Grading`: a value compared, or code run with its tests."""

from __future__ import annotations

import re
import time

from tokenreel.recorder.grading.extract import code_of, same_value, value_of
from tokenreel.recorder.grading.sandbox import Limits, run_program
from tokenreel.recorder.secrets import one_line
from tokenreel.session.grading import Grade, Grading

DETAIL_CHARS = 200
_NOT_FOUND = {"last_number": "no number found", "boxed": "no \\boxed{} found", "regex": "the pattern did not match",
              "exact": "empty answer"}


def grade_answer(answer: str, grading: Grading, limits: Limits, processes: int) -> Grade:
    """The answer's grade; `seconds` is the grading's own wall time."""
    started = time.perf_counter()
    if grading.kind == "answer":
        passed, detail = _compare(answer, grading)
    else:
        code = code_of(answer)
        if not code:
            passed, detail = False, "no code found"
        else:
            outcome = run_program(program_of(code, grading), limits, processes)
            passed, detail = outcome.passed, outcome.detail
    return Grade(passed=passed, detail=detail, seconds=time.perf_counter() - started)


def _compare(answer: str, grading: Grading) -> tuple[bool, str]:
    found = value_of(answer, grading)
    if found is None or (grading.extract == "exact" and not found):
        return False, _NOT_FOUND[grading.extract]
    if same_value(found, grading.answer):
        return True, one_line(f"extracted {found}", DETAIL_CHARS)
    return False, one_line(f"extracted {found}, expected {grading.answer}", DETAIL_CHARS)


def program_of(code: str, grading: Grading) -> str:
    """The program run: the prelude (the prompt's code) then the answer's code, then the tests.
    An answer that defines `entry_point` itself follows the prelude on a line of its own (the
    prelude still gives it the prompt's imports); one that does not continues the prelude (a
    completion of the function's body)."""
    defines = bool(grading.entry_point) and re.search(rf"^\s*def\s+{re.escape(grading.entry_point)}\s*\(", code, re.M)
    if not grading.prelude:
        body = code
    elif defines:
        body = f"{grading.prelude}\n{code}"
    else:
        body = grading.prelude + code
    return f"{body}\n\n{grading.tests}\n"
