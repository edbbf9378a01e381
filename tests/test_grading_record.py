"""`record --suite` with a graded suite against the simulator ends with every counted run graded
and saved; `tokenreel grade` grades an archived session again; what cannot be graded is one line."""

from __future__ import annotations

from pathlib import Path

from tests.test_cli import invoke, write_config
from tokenreel.recorder.grading.extract import same_value
from tokenreel.recorder.grading.session_grades import answer_text
from tokenreel.session import archive
from tokenreel.simulator.profiles import SEED_LADDER

PROBLEMS = 4


def test_record_grades_a_graded_suite_at_the_end_and_grade_redoes_it(tmp_path: Path, make_sim) -> None:
    cluster = make_sim(SEED_LADDER[:2])
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=16)
    path = tmp_path / "s.json"
    recorded = invoke("record", "--config", config, "--out", path, "--suite", f"arith:{PROBLEMS}")
    assert recorded.exit_code == 0, recorded.output
    session = archive.load(path)
    assert session.settings.prompts == f"arith:{PROBLEMS}" and [p.id for p in session.prompts] == [
        f"arith-{i}" for i in range(1, PROBLEMS + 1)]
    measured = [run for run in session.runs if not run.warmup]
    assert len(measured) == PROBLEMS * 2 and all(run.grade is not None for run in measured)
    for run in measured:  # each grade is what the answer says against the planted value
        expected = session.prompt(run.prompt).grading
        assert run.grade is not None and expected is not None
        assert run.grade.passed == (run.grade.detail.startswith("extracted ") and
                                    same_value(run.grade.detail.split(",")[0].removeprefix("extracted "), expected.answer))
        assert answer_text(run) and run.grade.seconds >= 0
    for arm in ("bf16", "nvfp4"):
        passed = sum(1 for run in measured if run.arm == arm and run.grade and run.grade.passed)
        assert f"{arm}: {passed} of {PROBLEMS} passed" in recorded.output
    assert "sandbox: no code to run" in recorded.output  # arithmetic runs no code

    # Grades removed by hand come back the same from `tokenreel grade`.
    before = {run.key: run.grade for run in measured}
    for run in session.runs:
        run.grade = None
    archive.save(session, path)
    regraded = invoke("grade", str(path))
    assert regraded.exit_code == 0, regraded.output
    again = archive.load(path)
    assert {run.key: run.grade and (run.grade.passed, run.grade.detail) for run in again.runs if not run.warmup} == {
        key: grade and (grade.passed, grade.detail) for key, grade in before.items()}

    # --resume with another suite is a changed prompt text, as today: refused in one line.
    resumed = invoke("record", "--config", config, "--out", path, "--resume", "--suite", f"arith:{PROBLEMS + 1}")
    assert resumed.exit_code == 2 and "its prompts differ from the config's suite" in resumed.output
    assert archive.load(path).prompts == again.prompts


def test_grade_refuses_an_ungraded_session_in_one_line(tmp_path: Path, make_sim) -> None:
    cluster = make_sim(SEED_LADDER[:1])
    path = tmp_path / "plain.json"
    recorded = invoke("record", "--config", write_config(tmp_path / "c.toml", cluster, max_tokens=8), "--out", path)
    assert recorded.exit_code == 0, recorded.output
    assert "passed" not in recorded.output  # nothing graded, no grading line
    result = invoke("grade", path)
    assert result.exit_code == 2
    assert result.output.strip() == (f"tokenreel: {path}: no graded prompts; record it with a graded suite "
                                     "(record --suite humaneval, arith:N, or a prompt file with a 'tests' or 'answer' column)")
    missing = invoke("grade", tmp_path / "none.json")
    assert missing.exit_code == 2 and "Traceback" not in missing.output
