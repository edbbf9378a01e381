"""`arith:N`: N seeded arithmetic word problems with exact whole-number answers.

Problem i is drawn from its own seed, so `arith:N` is the same N problems on every machine and
`arith:10` is the first ten of `arith:100`: a graded suite for the demo and the tests that needs
no package.
"""

from __future__ import annotations

import random

from tokenreel.session.grading import Grading
from tokenreel.session.model import Prompt

MAX_PROBLEMS = 10_000
ASK = "{question} Think step by step, then give the final answer as a number on the last line."
_NAMES = ("Ana", "Ben", "Chen", "Dara", "Eli", "Femi", "Gita", "Hugo", "Ines", "Jon")


def _shop(rng: random.Random) -> tuple[str, int]:
    a, b, c, d = rng.randint(50, 500), rng.randint(1, 49), rng.randint(2, 12), rng.randint(6, 24)
    return (f"A shop has {a} apples. It sells {b} of them, then receives {c} boxes of {d} apples each. "
            f"How many apples does it have now?", a - b + c * d)


def _reading(rng: random.Random) -> tuple[str, int]:
    name, a, b, c = rng.choice(_NAMES), rng.randint(5, 60), rng.randint(2, 30), rng.randint(1, 99)
    return f"{name} reads {a} pages a day for {b} days, then {c} more pages. How many pages does {name} read in all?", a * b + c


def _train(rng: random.Random) -> tuple[str, int]:
    a, b, c, d = rng.randint(40, 120), rng.randint(2, 9), rng.randint(40, 120), rng.randint(2, 9)
    return (f"A train travels at {a} km per hour for {b} hours, then at {c} km per hour for {d} hours. "
            f"How many km does it travel?", a * b + c * d)


def _sharing(rng: random.Random) -> tuple[str, int]:
    groups, each, left = rng.randint(3, 15), rng.randint(4, 40), rng.randint(0, 20)
    return (f"A teacher has {groups * each + left} stickers. She gives {each} to each of {groups} students. "
            f"How many stickers are left?", left)


_KINDS = (_shop, _reading, _train, _sharing)


def arith_prompts(count: int) -> list[Prompt]:
    """Problems 1..count, category `math`, each graded by its last number."""
    prompts = []
    for i in range(1, count + 1):
        rng = random.Random(f"tokenreel-arith-{i}")
        question, answer = rng.choice(_KINDS)(rng)
        prompts.append(Prompt(id=f"arith-{i}", category="math", messages=[{"role": "user", "content": ASK.format(question=question)}],
                              prompt="", grading=Grading("answer", answer=str(answer), extract="last_number")))
    return prompts
