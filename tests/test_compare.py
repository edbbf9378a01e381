"""`tokenreel compare`: a re-recording that moved a cell is caught and named; one that did not passes.

Sessions are the archived seed ladder and edited copies of it (real files, the real command):
stretching one cell's timestamps by 5 % slows its decode speed by 1 - 1/1.05 = 4.76 %, outside
the default 2 % tolerance; by 1 %, 0.99 %, inside it.
"""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import orjson
import pytest

from tests.test_cli import REPO, invoke
from tokenreel import archive
from tokenreel.answers import compare as compare_answers
from tokenreel.comparison import SPREAD_FLOOR_PCT, _diff
from tokenreel.ladder import usable_runs
from tokenreel.metrics import run_metrics
from tokenreel.model import Session

SEED = REPO / "sessions" / "seed-ladder-demo.json"
ARMS = ("bf16", "nvfp4", "nvfp4-dflash2")
PROMPTS = ("conversation-1", "reasoning-1", "prose-1", "code-1")


def edited(tmp_path: Path, name: str, edit) -> Path:
    session = archive.load(SEED)
    edit(session)
    path = tmp_path / name
    archive.save(session, path)
    return path


def stretch(arm: str, prompt: str, factor: float):
    def edit(session: Session) -> None:
        for run in session.runs:
            if (run.arm, run.prompt) == (arm, prompt):
                run.chunks.t_ns[:] = [round(t * factor) for t in run.chunks.t_ns]
    return edit


def compare_json(*args: object) -> tuple[int, dict]:
    result = invoke("compare", *args, "--format", "json")
    return result.exit_code, orjson.loads(result.stdout)


def test_identical_copies_reproduce(tmp_path: Path) -> None:
    copy = tmp_path / "copy.json"
    shutil.copyfile(SEED, copy)
    code, data = compare_json(SEED, copy)
    assert code == 0
    assert data["reproduced"] is True and data["cells_compared"] == 12 and data["not_matched"] == 0
    assert all(c["figures"]["decode_tok_s"]["diff_pct"] == 0 for c in data["cells"])
    assert all(c["figures"][f]["within_spread"] for c in data["cells"] for f in c["figures"])
    assert [row["arm"] for row in data["ladder"]] == list(ARMS)


def test_a_cell_stretched_by_5_percent_fails_and_is_named(tmp_path: Path) -> None:
    slower = edited(tmp_path, "slower.json", stretch("nvfp4", "prose-1", 1.05))
    result = invoke("compare", SEED, slower)
    assert result.exit_code == 1
    assert "- nvfp4 / prose-1: decode 136.7 → 130.2 tok/s (-4.76 %), outside ±2 %" in result.stdout
    assert result.stderr.strip() == (
        "NOT reproduced: 1 of 12 matched cells are outside ±2 % on decode tok/s: nvfp4 / prose-1 (-4.76 %);"
        " the 11 other matched cells agree within ±2 %"
    )
    code, data = compare_json(SEED, slower)
    assert code == 1
    failing = [(c["arm"], c["prompt"]) for c in data["cells"] if not c["reproduced"]]
    assert failing == [("nvfp4", "prose-1")]
    cell = next(c for c in data["cells"] if not c["reproduced"])
    assert cell["figures"]["decode_tok_s"]["diff_pct"] == pytest.approx((1 / 1.05 - 1) * 100, abs=0.01)
    assert cell["figures"]["ttft_s"]["diff_pct"] == pytest.approx(5, abs=0.01)


def test_a_change_within_tolerance_reproduces_but_is_outside_the_spread(tmp_path: Path) -> None:
    slower = edited(tmp_path, "slower.json", stretch("bf16", "code-1", 1.01))
    code, data = compare_json(SEED, slower)
    assert code == 0 and data["reproduced"] is True
    cell = next(c for c in data["cells"] if (c["arm"], c["prompt"]) == ("bf16", "code-1"))
    decode = cell["figures"]["decode_tok_s"]
    assert decode["diff_pct"] == pytest.approx((1 / 1.01 - 1) * 100, abs=0.01)
    seed_decodes = [run_metrics(r).decode_tok_s for r in usable_runs(archive.load(SEED), "bf16", "code-1")]
    assert decode["spread_a"] == pytest.approx(max(seed_decodes) - min(seed_decodes), abs=0.001)
    assert abs(decode["b"] - decode["a"]) > max(decode["spread_a"], decode["spread_b"])
    assert decode["within_spread"] is False  # 1 % moves further than the two runs scatter
    assert invoke("compare", SEED, slower, "--tolerance", "0.5").exit_code == 1


def test_an_arm_or_prompt_on_one_side_only_is_listed_and_fails(tmp_path: Path) -> None:
    def drop(session: Session) -> None:
        session.arms = [a for a in session.arms if a.id != "nvfp4"]
        session.prompts = [p for p in session.prompts if p.id != "prose-1"]
        session.runs = [r for r in session.runs if r.arm != "nvfp4" and r.prompt != "prose-1"]

    smaller = edited(tmp_path, "smaller.json", drop)
    code, data = compare_json(SEED, smaller)
    assert code == 1
    assert [(u["what"], u["arm"], u["prompt"]) for u in data["unmatched"]] == [("arm", "nvfp4", ""), ("prompt", "", "prose-1")]
    assert data["cells_compared"] == 6 and data["cells_reproduced"] == 6
    assert data["notes"] == [
        "the ladder rows average different prompts: A over conversation-1, reasoning-1, prose-1, code-1, "
        "B over conversation-1, reasoning-1, code-1; compare the cells"
    ]
    code, data = compare_json(smaller, SEED)  # the other way round: only in B
    assert code == 1 and "only in B" in data["unmatched"][0]["reason"]
    md = invoke("compare", SEED, smaller).stdout
    assert "| arm | nvfp4 | — | only in A" in md and "| prompt | — | prose-1 | only in A" in md


def test_a_prompt_whose_text_changed_under_the_same_id_is_not_compared(tmp_path: Path) -> None:
    def reword(session: Session) -> None:
        session.prompts[3].messages = [{"role": "user", "content": "Write a different program."}]

    other = edited(tmp_path, "other.json", reword)
    code, data = compare_json(SEED, other)
    assert code == 1 and data["cells_compared"] == 9
    assert data["unmatched"] == [
        {"what": "prompt", "arm": "", "prompt": "code-1", "reason": "same id, different prompt text or category: not compared"}
    ]


def test_settings_recorded_differently_are_noted_not_gated(tmp_path: Path) -> None:
    def change(session: Session) -> None:
        session.settings.temperature = 0.7
        session.arms[1].model = "another/model"

    other = edited(tmp_path, "other.json", change)
    code, data = compare_json(SEED, other)
    assert code == 0
    assert data["notes"] == ["setting temperature: 0.0 in A, 0.7 in B", "arm nvfp4: model ThakiCloud/Qwen3.8-27B-NVFP4-FP8ATTN in A, another/model in B"]
    assert "Recorded differently (context, not gated):" in invoke("compare", SEED, other).stdout


def test_a_cell_without_usable_runs_on_one_side_is_listed(tmp_path: Path) -> None:
    def contend(session: Session) -> None:
        for run in session.runs:
            if (run.arm, run.prompt) == ("bf16", "reasoning-1") and not run.warmup:
                run.contended, run.contention_detail = True, "another request was running"

    busy = edited(tmp_path, "busy.json", contend)
    code, data = compare_json(SEED, busy)
    assert code == 1
    assert [(u["what"], u["arm"], u["prompt"]) for u in data["unmatched"]] == [("cell", "bf16", "reasoning-1")]
    assert data["unmatched"][0]["reason"].startswith("no usable run in B: all 2 runs contended")


def test_csv_and_out_follow_the_report_format_rule(tmp_path: Path) -> None:
    slower = edited(tmp_path, "slower.json", stretch("nvfp4", "prose-1", 1.05))
    target = tmp_path / "c.csv"
    assert invoke("compare", SEED, slower, "-o", target).exit_code == 1
    rows = list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8"))))
    assert [r["row"] for r in rows] == ["ladder"] * 3 + ["cell"] * 12
    assert [(r["arm"], r["prompt"]) for r in rows if r["reproduced"] == "false"] == [("nvfp4", "prose-1")]
    assert {r["reproduced"] for r in rows} == {"true", "false"}
    assert invoke("compare", SEED, slower, "-o", target).exit_code == 2  # exists, no --force
    assert invoke("compare", SEED, slower, "-o", target, "--format", "json", "--force").exit_code == 1
    assert orjson.loads(target.read_bytes())["format"] == "tokenreel.compare"


@pytest.mark.parametrize("tolerance", ["-1", "abc", "nan", "inf"])
def test_a_bad_tolerance_is_one_line_and_exit_2(tolerance: str) -> None:
    result = invoke("compare", SEED, SEED, "--tolerance", tolerance)
    assert result.exit_code == 2
    assert result.stderr.strip() == f"tokenreel: --tolerance {tolerance}: give a percentage of 0 or more, e.g. --tolerance 2"


def test_an_unreadable_session_is_exit_2(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    for args in ([SEED, broken], [tmp_path / "absent.json", SEED]):
        result = invoke("compare", *args)
        assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert str(args[0] if args[0] != SEED else args[1]) in result.stderr


def test_cells_without_a_run_lead_the_verdict(tmp_path: Path) -> None:
    """Before: "NOT reproduced: 6 of 6 matched cells within ±2 %; 6 not matched"."""
    def contend(session: Session) -> None:
        for run in session.runs:
            if run.prompt in ("reasoning-1", "prose-1") and not run.warmup:
                run.contended, run.contention_detail = True, "another request was running"

    result = invoke("compare", SEED, edited(tmp_path, "busy.json", contend))
    assert result.exit_code == 1
    line = result.stderr.strip()
    assert line.startswith("NOT reproduced: 6 of 12 cells have no usable run on one side (bf16 / reasoning-1: no usable run in B: all 2 runs contended")
    assert "; and 3 more)" in line and line.endswith("; the 6 matched agree within ±2 %")


def test_a_spread_of_zero_is_not_a_tolerance_of_zero() -> None:
    """Identical runs scatter by 0: a +0.01 % difference is within their spread, a +1 % one is not."""
    assert _diff(100.0, 100.01, 0.0, 0.0).within_spread is True
    assert _diff(100.0, 100.0 + SPREAD_FLOOR_PCT * 2, 0.0, 0.0).within_spread is False
    assert _diff(100.0, 103.0, 4.0, 0.0).within_spread is True  # a real spread still counts


def test_answers_that_part_are_named_with_their_token(tmp_path: Path) -> None:
    def reword(session: Session) -> None:
        for run in session.runs:
            if (run.arm, run.prompt) == ("nvfp4", "code-1"):
                run.chunks.content[40] = "banana"

    other = edited(tmp_path, "other.json", reword)
    a, b = archive.load(SEED), archive.load(other)
    expected = compare_answers(usable_runs(a, "nvfp4", "code-1")[0], usable_runs(b, "nvfp4", "code-1")[0]).diverges_at_token
    assert expected and expected > 1
    code, data = compare_json(SEED, other)
    cell = next(c for c in data["cells"] if (c["arm"], c["prompt"]) == ("nvfp4", "code-1"))
    assert cell["answers_compared"] is True and cell["answers_diverge_at"] == expected
    assert f"answers part at token {expected}" in cell["note"] and data["cells_with_other_answers"] == 1
    assert all(c["answers_diverge_at"] is None for c in data["cells"] if c is not cell)
    assert f"answers differ in nvfp4 / code-1 (from token {expected})" in invoke("compare", SEED, other).stderr
