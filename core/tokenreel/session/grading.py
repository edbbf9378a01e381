"""What a correct answer is (`Grading`, a prompt's) and what grading found (`Grade`, a run's).

Kept beside the session model (tokenreel.session.model holds them in `Prompt.grading` and
`Run.grade`); docs/session-format.md §5.1 and §7.9 specify them.
"""

from __future__ import annotations

from dataclasses import dataclass

# How a graded prompt's answer is checked (`Grading.kind`): "tests" runs a Python program after
# the answer's code (exit 0 passes); "answer" compares one value taken from the answer.
GRADING_KINDS = ("tests", "answer")
# How `Grading.answer`'s value is taken from an answer: its last number, its last \boxed{...},
# group 1 of `Grading.pattern` (else the whole match) at its last match, or the whole answer stripped.
ANSWER_EXTRACTS = ("last_number", "boxed", "regex", "exact")


@dataclass
class Grading:
    """What a correct answer to a prompt is, so a speed step can be held to its accuracy.

    kind "tests": `tests` is a Python program run after the answer's code (the answer's first
    fenced code block, else the whole answer); exit 0 passes. An answer that does not define
    `entry_point` (a completion of a function's body) gets `prelude` (the prompt's code) before it.
    kind "answer": the value `extract` takes from the answer must equal `answer` (numbers compare
    as numbers: "42.0" equals "42").
    """

    kind: str  # GRADING_KINDS
    tests: str = ""
    prelude: str = ""
    entry_point: str = ""
    answer: str = ""
    extract: str = "last_number"  # ANSWER_EXTRACTS
    pattern: str = ""  # extract "regex" only


@dataclass
class Grade:
    """A run's answer graded after the recording (never between runs: grading must not disturb
    timing). `detail`: one line, why it failed or what was compared; `seconds`: the grading's
    wall time."""

    passed: bool
    detail: str = ""
    seconds: float = 0.0
