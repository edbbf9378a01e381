"""`tokenreel compare`: each difference with its 95 % interval and a verdict; the exit code follows.

Sessions are real files, run through the real command: the archived seed ladder (4 prompts: too
few for an interval over prompts, so its ladder is judged from the runs: tests/test_compare_runs.py)
and edited copies of it, the two llama.cpp sessions recorded
on one H200 (tests/data/h200-llamacpp/: 12 prompts in 4 categories, 2 runs a cell), and
synthetic ladders at known speeds (`tests.session_factory.ladder`). Stretching a run's timestamps
by 5 % slows its decode speed by 1 - 1/1.05 = 4.76 %.
"""

from __future__ import annotations

import csv
import io
import math
import shutil
import statistics
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from tests import session_factory as sf
from tests.test_cli import REPO, invoke
from tokenreel.analysis.answers import compare as compare_answers
from tokenreel.analysis.comparison import SPREAD_FLOOR_PCT, _diff
from tokenreel.analysis.intervals import Pair, ratio_interval
from tokenreel.analysis.ladder import usable_runs
from tokenreel.analysis.metrics import run_metrics
from tokenreel.analysis.verdicts import CANT_TELL, judge, runs_interval
from tokenreel.session import archive
from tokenreel.session.model import Session

SEED = REPO / "sessions" / "seed-ladder-demo.json"
H200 = REPO / "tests" / "data" / "h200-llamacpp"
H200_A, H200_B = H200 / "session-default-cache.json", H200 / "session-cache-ram-0.json"
ARMS = ("bf16", "nvfp4", "nvfp4-dflash2")
PROMPTS = ("conversation-1", "reasoning-1", "prose-1", "code-1")


def edited(tmp_path: Path, name: str, edit, source: Path = SEED) -> Path:
    session = archive.load(source)
    edit(session)
    path = tmp_path / name
    archive.save(session, path)
    return path


def stretch(arm: str, prompt: str | None, factor: float):
    """Every run of `arm` on `prompt` (on every prompt when None) takes `factor` times as long."""
    def edit(session: Session) -> None:
        for run in session.runs:
            if run.arm == arm and prompt in (None, run.prompt):
                run.chunks.t_ns[:] = [round(t * factor) for t in run.chunks.t_ns]
    return edit


def compare_json(*args: object) -> tuple[int, dict]:
    result = invoke("compare", *args, "--format", "json")
    return result.exit_code, orjson.loads(result.stdout)


def judged(data: dict) -> list[dict]:
    """Every judged entry of a json comparison: ladder rows, ladder ratios, cells."""
    return [*data["ladder"], *data["ratios"], *data["cells"]]


def verdict_of_interval(entry: dict, tolerance: float) -> str:
    """What the entry's interval supports, from the definitions, not from the code under test."""
    if entry["diff_ci95"] is None:
        return CANT_TELL
    low, high = entry["diff_ci95"]
    if -tolerance <= low and high <= tolerance:
        return "same"
    if low > tolerance:
        return "faster"
    return "slower" if high < -tolerance else CANT_TELL


def test_identical_copies_reproduce(tmp_path: Path) -> None:
    copy = tmp_path / "copy.json"
    shutil.copyfile(H200_A, copy)
    code, data = compare_json(H200_A, copy)
    assert code == 0
    assert data["outcome"] == "reproduced" and data["reproduced"] is True and data["exit_code"] == 0
    assert data["cells_compared"] == 36 and data["not_matched"] == 0
    assert all(c["figures"]["decode_tok_s"]["diff_pct"] == 0 for c in data["cells"])
    assert all(c["figures"][f]["within_spread"] for c in data["cells"] for f in c["figures"])
    assert [row["arm"] for row in data["ladder"]] == ["f16", "q4_0", "q4_0-spec"]
    assert [(r["arm"], r["base"], r["vs"]) for r in data["ratios"]] == [
        ("q4_0", "f16", "first"), ("q4_0-spec", "f16", "first"), ("q4_0-spec", "q4_0", "prior")]
    # Every prompt's difference is 0, so the interval over prompts is [0, 0]: "same" at any tolerance.
    assert all(r["diff_ci95"] == [0, 0] and r["verdict"] == "same" for r in data["ladder"] + data["ratios"])
    assert data["verdicts"]["ladder"] == {"same": 6, "faster": 0, "slower": 0, CANT_TELL: 0}


def test_a_cell_stretched_by_5_percent_is_slower_and_named(tmp_path: Path) -> None:
    slower = edited(tmp_path, "slower.json", stretch("nvfp4", "prose-1", 1.05))
    result = invoke("compare", SEED, slower)
    assert result.exit_code == 0  # cells do not gate; nvfp4's row, from the runs, is 1.19 % slower: the same within ±2 %
    assert "Cells that differ (shown, not gated):\n\n- nvfp4 / prose-1 slower (-4.76 % [-4.79 %, -4.73 %])\n" in result.stdout
    assert result.stderr.strip().endswith("; 12 cells (not gated): 11 same, 1 slower")
    code, data = compare_json(SEED, slower)
    assert [(c["arm"], c["prompt"]) for c in data["cells"] if c["verdict"] != "same"] == [("nvfp4", "prose-1")]
    cell = next(c for c in data["cells"] if c["verdict"] == "slower")
    assert cell["figures"]["decode_tok_s"]["diff_pct"] == pytest.approx((1 / 1.05 - 1) * 100, abs=0.01)
    assert cell["estimate_pct"] == pytest.approx((1 / 1.05 - 1) * 100, abs=0.01)  # 2 runs: the mean is the median
    assert cell["figures"]["ttft_s"]["diff_pct"] == pytest.approx(5, abs=0.01)
    assert cell["more_runs"] is None and data["verdicts"]["cells"] == {"same": 11, "faster": 0, "slower": 1, CANT_TELL: 0}


def test_an_arm_stretched_by_5_percent_is_not_reproduced_and_named(tmp_path: Path) -> None:
    """Every cell of q4_0 5 % slower: its row, and the ratios it is in, are slower; exit 1."""
    slower = edited(tmp_path, "slower.json", stretch("q4_0", None, 1.05), H200_A)
    result = invoke("compare", H200_A, slower)
    assert result.exit_code == 1
    line = result.stderr.strip()
    assert line.startswith(
        "NOT reproduced: ladder (decode tok/s, gated, ±2 %): 3 same, 1 faster, 2 slower (q4_0 decode slower (-4.76 % [-4.76 %, -4.76 %]);"
        " q4_0 / f16 slower (-4.76 % [-4.76 %, -4.76 %]); q4_0-spec / q4_0 faster (+5.00 % [+5.00 %, +5.00 %]))"
    )  # the arm after it is now 5 % further ahead of it
    assert "Not reproduced:\n\n- q4_0 decode slower (-4.76 % [-4.76 %, -4.76 %]), outside ±2 %\n" in result.stdout
    code, data = compare_json(H200_A, slower)
    verdicts = {(r["arm"], r.get("base")): r["verdict"] for r in data["ladder"] + data["ratios"]}
    assert verdicts == {("f16", None): "same", ("q4_0", None): "slower", ("q4_0-spec", None): "same",
                        ("q4_0", "f16"): "slower", ("q4_0-spec", "f16"): "same", ("q4_0-spec", "q4_0"): "faster"}
    assert data["outcome"] == "not reproduced" and data["exit_code"] == 1


def test_a_change_within_tolerance_reproduces_but_is_outside_the_spread(tmp_path: Path) -> None:
    slower = edited(tmp_path, "slower.json", stretch("bf16", "code-1", 1.01))
    code, data = compare_json(SEED, slower)
    assert code == 0  # the ladder's figures, from the runs, move by 0.25 % at most
    cell = next(c for c in data["cells"] if (c["arm"], c["prompt"]) == ("bf16", "code-1"))
    decode = cell["figures"]["decode_tok_s"]
    assert decode["diff_pct"] == pytest.approx((1 / 1.01 - 1) * 100, abs=0.01)
    seed_decodes = [run_metrics(r).decode_tok_s for r in usable_runs(archive.load(SEED), "bf16", "code-1")]
    assert decode["spread_a"] == pytest.approx(max(seed_decodes) - min(seed_decodes), abs=0.001)
    assert abs(decode["b"] - decode["a"]) > max(decode["spread_a"], decode["spread_b"])
    assert decode["within_spread"] is False  # 1 % moves further than the two runs scatter
    assert cell["verdict"] == "same" and -2 < cell["diff_ci95"][0] < cell["diff_ci95"][1] < 0
    code, data = compare_json(SEED, slower, "--tolerance", "0.5")
    assert [(c["arm"], c["prompt"], c["verdict"]) for c in data["cells"] if c["verdict"] != "same"] == [("bf16", "code-1", "slower")]
    # A whole arm 1 % slower: the same within ±2 %, and not reproduced within ±0.5 %.
    arm = edited(tmp_path, "arm.json", stretch("f16", None, 1.01), H200_A)
    assert invoke("compare", H200_A, arm).exit_code == 0
    code, data = compare_json(H200_A, arm, "--tolerance", "0.5")
    assert code == 1 and [r["verdict"] for r in data["ladder"] + data["ratios"]] == ["slower", "same", "same", "faster", "faster", "same"]


def test_an_arm_or_prompt_on_one_side_only_is_listed_and_fails(tmp_path: Path) -> None:
    def drop(session: Session) -> None:
        session.arms = [a for a in session.arms if a.id != "nvfp4"]
        session.prompts = [p for p in session.prompts if p.id != "prose-1"]
        session.runs = [r for r in session.runs if r.arm != "nvfp4" and r.prompt != "prose-1"]

    smaller = edited(tmp_path, "smaller.json", drop)
    code, data = compare_json(SEED, smaller)
    assert code == 1
    assert [(u["what"], u["arm"], u["prompt"]) for u in data["unmatched"]] == [("arm", "nvfp4", ""), ("prompt", "", "prose-1")]
    assert data["cells_compared"] == 6 and data["verdicts"]["cells"]["same"] == 6
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

    other = edited(tmp_path, "other.json", change, H200_A)
    code, data = compare_json(H200_A, other)
    assert code == 0
    assert data["notes"] == ["setting temperature: 0.0 in A, 0.7 in B", "arm q4_0: model target-q4_0 in A, another/model in B"]
    assert "Recorded differently (context, not gated):" in invoke("compare", H200_A, other).stdout


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
    assert invoke("compare", SEED, slower, "-o", target).exit_code == 0
    rows = list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8"))))
    assert [r["row"] for r in rows] == ["ladder"] * 3 + ["ratio"] * 3 + ["cell"] * 12
    assert [(r["arm"], r["prompt"]) for r in rows if r["verdict"] == "slower"] == [("nvfp4", "prose-1")]
    assert {r["verdict"] for r in rows} == {"same", "slower"}
    assert [(r["arm"], r["base"]) for r in rows if r["row"] == "ratio"] == [
        ("nvfp4", "bf16"), ("nvfp4-dflash2", "bf16"), ("nvfp4-dflash2", "nvfp4")]
    cell = next(r for r in rows if r["verdict"] == "slower")
    assert float(cell["diff_ci95_low"]) < float(cell["estimate_pct"]) < float(cell["diff_ci95_high"]) < -2
    # 4 prompts: the ladder is judged from the runs; the arms and ratios the cell is not in, from the same runs
    assert [(r["method"], r["method_prompts"], r["method_runs_min"], r["method_runs_max"]) for r in rows[:6]] == [
        ("same runs", "4", "2", "2"), ("runs", "4", "2", "2"), ("same runs", "4", "2", "2"),
        ("runs", "4", "2", "2"), ("same runs", "4", "2", "2"), ("runs", "4", "2", "2")]
    assert all(r["method"] == "" for r in rows[6:])
    assert invoke("compare", SEED, slower, "-o", target).exit_code == 2  # exists, no --force
    assert invoke("compare", SEED, slower, "-o", target, "--format", "json", "--force").exit_code == 0
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
    assert line.startswith(
        "NOT reproduced: 6 of 12 cells have no usable run on one side (bf16 / reasoning-1: no usable run in B: all 2 runs contended"
    )
    assert "; and 3 more)" in line and line.endswith("; 6 cells (not gated): 6 same")


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


# --- verdicts on real sessions ------------------------------------------------------------------


def test_the_two_h200_sessions_cannot_tell_yet_and_each_verdict_follows_its_interval() -> None:
    """Same binaries, token-identical answers, ladders within 0.8 %: the old per-cell gate said
    "NOT reproduced: 20 of 36 cells" (exit 1). Judged by intervals over prompts, no ladder figure
    differs beyond ±2 %, but none is settled by 12 prompts either: the f16 row is 1.90 % slower
    in B, [-3.19 %, -0.60 %], which crosses -2 %; the drafter arm's cells move by up to 14 %
    between the sessions, so its row and ratios have wide intervals."""
    code, data = compare_json(H200_A, H200_B)
    assert code == 3 and data["outcome"] == CANT_TELL
    for entry in judged(data):
        assert entry["verdict"] == verdict_of_interval(entry, 2.0), entry
        if entry["diff_ci95"] is not None:
            assert entry["diff_ci95"][0] < entry["estimate_pct"] < entry["diff_ci95"][1]
    rows = {r["arm"]: r for r in data["ladder"]}
    assert rows["f16"]["diff_ci95"] == pytest.approx([-3.188, -0.596], abs=0.001)
    assert rows["q4_0"]["diff_ci95"] == pytest.approx([-3.015, 0.069], abs=0.001)
    assert rows["q4_0-spec"]["diff_ci95"] == pytest.approx([-5.649, 5.566], abs=0.001)
    for row in data["ladder"]:  # a row's estimate is the ladder rows' own difference
        assert row["estimate_pct"] == pytest.approx(row["decode_tok_s"]["diff_pct"], abs=1e-9)
    ratios = {(r["arm"], r["base"]): r for r in data["ratios"]}
    first = ratios[("q4_0", "f16")]
    assert first["diff_ci95"] == pytest.approx([-1.733, 2.628], abs=0.001) and first["more_prompts"] == 7
    for ratio in data["ratios"]:  # B's speed-up over A's, as the ladder prints them
        assert ratio["estimate_pct"] == pytest.approx((ratio["b"] / ratio["a"] - 1) * 100, abs=1e-9)
    assert data["verdicts"] == {"ladder": {"same": 0, "faster": 0, "slower": 0, CANT_TELL: 6},
                                "cells": {"same": 1, "faster": 0, "slower": 2, CANT_TELL: 33}}
    assert all(e["more_prompts"] > 0 for e in data["ladder"] + data["ratios"])
    slower = [(c["arm"], c["prompt"]) for c in data["cells"] if c["verdict"] == "slower"]
    assert slower == [("q4_0", "prose-2"), ("q4_0-spec", "conversation-1")]
    sessions = archive.load(H200_A), archive.load(H200_B)
    for cell in data["cells"]:  # a cell's interval is around B / A of the means over its runs
        a, b = (statistics.fmean(run_metrics(r).decode_tok_s for r in usable_runs(s, cell["arm"], cell["prompt"])) for s in sessions)
        assert cell["estimate_pct"] == pytest.approx((b / a - 1) * 100, abs=1e-9)
        assert (cell["more_runs"] is not None) == (cell["verdict"] == CANT_TELL)
    md = invoke("compare", H200_A, H200_B).stdout
    assert "| 512/512 | [-0.35 %, +2.22 %] | can't tell yet: about 1 more run |" in md  # f16 / conversation-1
    assert "| Original · f16 | 657.3 | 644.9 | -1.90 % | [-3.19 %, -0.60 %] | 1.00x | 1.00x | can't tell yet: about " in md


def test_the_h200_verdicts_follow_the_tolerance() -> None:
    """Within ±10 % every ladder figure of the two H200 sessions is the same (exit 0); within
    ±0.5 % the f16 row, [-3.19 %, -0.60 %], is slower: not reproduced (exit 1)."""
    code, data = compare_json(H200_A, H200_B, "--tolerance", "10")
    assert code == 0 and all(e["verdict"] == "same" for e in data["ladder"] + data["ratios"])
    assert all(e["verdict"] == verdict_of_interval(e, 10.0) for e in judged(data))
    code, data = compare_json(H200_A, H200_B, "--tolerance", "0.5")
    assert code == 1 and [r["verdict"] for r in data["ladder"]] == ["slower", CANT_TELL, CANT_TELL]
    assert all(e["verdict"] == verdict_of_interval(e, 0.5) for e in judged(data))


# --- verdicts at known speeds -------------------------------------------------------------------

SPEEDS = {"base": 100.0, "quant": 150.0, "spec": 300.0}
SYNTHETIC_PROMPTS = [f"{category}-{i}" for category in ("code", "prose", "reasoning") for i in (1, 2, 3)]


def synthetic(tmp_path: Path, name: str, change: Callable[[str, int], float] = lambda arm, k: 1.0,
              runs: tuple[float, ...] = (0.998, 1.0, 1.002)) -> Path:
    """9 prompts in 3 categories, 3 arms: arm on prompt k decodes at SPEEDS[arm] x (1 + 0.05 (k mod 4))
    x change(arm, k), each run x its factor in `runs` (±0.2 % run to run)."""
    speeds = {
        arm: {p: [speed * (1 + 0.05 * (k % 4)) * change(arm, k) * r for r in runs] for k, p in enumerate(SYNTHETIC_PROMPTS)}
        for arm, speed in SPEEDS.items()
    }
    path = tmp_path / f"{name}.json"
    archive.save(sf.ladder(speeds), path)
    return path


def jitter(k: int) -> float:
    """±0.1 % from prompt to prompt: what a re-recording moves when nothing changed."""
    return 1 + 0.001 * (-1) ** k


def gated_verdicts(data: dict) -> dict[str, str]:
    return {f"{r['arm']} / {r['base']}" if "base" in r else r["arm"]: r["verdict"] for r in data["ladder"] + data["ratios"]}


def test_a_rerecording_within_the_jitter_is_the_same_and_exits_0(tmp_path: Path) -> None:
    a = synthetic(tmp_path, "a")
    code, data = compare_json(a, synthetic(tmp_path, "b", lambda arm, k: jitter(k)))
    assert code == 0 and set(gated_verdicts(data).values()) == {"same"}
    assert all(c["verdict"] == "same" for c in data["cells"])
    assert all(e["verdict"] == verdict_of_interval(e, 2.0) for e in judged(data))
    for row in data["ladder"]:
        assert -2 < row["diff_ci95"][0] < row["estimate_pct"] < row["diff_ci95"][1] < 2


@pytest.mark.parametrize(("factor", "verdict", "prior"), [(0.95, "slower", "-5.00 %"), (1.05, "faster", "+5.00 %")])
def test_an_arm_5_percent_off_is_named_and_exits_1(tmp_path: Path, factor: float, verdict: str, prior: str) -> None:
    a = synthetic(tmp_path, "a")
    b = synthetic(tmp_path, "b", lambda arm, k: jitter(k) * (factor if arm == "spec" else 1))
    result = invoke("compare", a, b)
    assert result.exit_code == 1
    assert f"spec / quant {verdict} ({prior} [" in result.stderr and result.stderr.startswith("NOT reproduced: ladder")
    assert (
        f"- spec decode {verdict} (" in result.stdout
        and f"- spec / base {verdict} ({prior} [{prior}, {prior}]), outside ±2 %" in result.stdout
    )
    code, data = compare_json(a, b)
    assert gated_verdicts(data) == {"base": "same", "quant": "same", "spec": verdict,
                                    "quant / base": "same", "spec / base": verdict, "spec / quant": verdict}
    assert [c["verdict"] for c in data["cells"] if c["arm"] == "spec"] == [verdict] * 9
    assert all(e["verdict"] == verdict_of_interval(e, 2.0) for e in judged(data))
    spec = data["ladder"][2]
    assert spec["estimate_pct"] == pytest.approx((factor - 1) * 100, abs=0.05) and spec["more_prompts"] is None


def test_prompts_that_scatter_cannot_tell_yet_and_say_how_many_more(tmp_path: Path) -> None:
    """spec's prompts move ±4 % in B: its cells differ (their runs agree), but they do not gate;
    its row's interval over 9 prompts crosses the band: can't tell yet (exit 3), with how many more."""
    a = synthetic(tmp_path, "a")
    b = synthetic(tmp_path, "b", lambda arm, k: 1 + 0.04 * (-1) ** k if arm == "spec" else jitter(k))
    result = invoke("compare", a, b)
    assert result.exit_code == 3
    code, data = compare_json(a, b)
    spec = data["ladder"][2]
    assert spec["verdict"] == CANT_TELL and spec["diff_ci95"][0] < -2 and spec["diff_ci95"][1] > 2
    assert spec["more_prompts"] > 0 and f"can't tell yet: about {spec['more_prompts']} more prompts" in result.stdout
    assert {c["verdict"] for c in data["cells"] if c["arm"] == "spec"} == {"faster", "slower"}
    assert result.stderr.strip().endswith("27 cells (not gated): 18 same, 5 faster, 4 slower")
    assert all(e["verdict"] == verdict_of_interval(e, 2.0) for e in judged(data))


def test_one_run_a_cell_gives_no_cell_interval_and_says_so(tmp_path: Path) -> None:
    a = synthetic(tmp_path, "a", runs=(1.0,))
    code, data = compare_json(a, synthetic(tmp_path, "b", lambda arm, k: jitter(k), runs=(1.0,)))
    assert code == 0  # the ladder's intervals are over prompts: one run a cell still reproduces
    note = "1 run in A and 1 run in B: no interval (it needs 2 a side)"
    assert all(c["diff_ci95"] is None and c["diff_ci95_note"] == note and c["more_runs"] is None for c in data["cells"])
    assert all(c["verdict"] == CANT_TELL for c in data["cells"])


def test_more_runs_or_prompts_as_estimated_settle_it() -> None:
    """The estimate of how many more, checked by adding them: the same scatter over n + more
    settles the verdict, over n + more / 3 it does not. With 2 runs a side the t quantile is
    4.3, and falls as runs come in: 2 more runs, where 1/sqrt(n) with the quantile held says 10."""
    a, b = [100.0, 102.0], [104.5, 106.5]  # +4.5 %: outside ±2 %, but 2 runs a side cannot show it
    verdict = judge(runs_interval(a, b), 2.0, "runs")
    assert verdict.verdict == CANT_TELL and verdict.more is not None and verdict.more <= 4
    enough = 2 + verdict.more + verdict.more % 2  # an even count keeps the pattern's means
    assert judge(runs_interval(a * (enough // 2), b * (enough // 2)), 2.0, "runs").verdict == "faster"

    def pairs(per_category: int) -> list[Pair]:  # B / A alternates 1.03, 1.00 within each category
        return [Pair(c, 100.0 + i, (100.0 + i) * (1.03 if i % 2 else 1.0)) for c in "abc" for i in range(per_category)]

    verdict = judge(ratio_interval(pairs(2)), 2.0, "prompts")
    assert verdict.verdict == CANT_TELL and verdict.more is not None and verdict.more > 20
    per_category = math.ceil((6 + verdict.more) / 6) * 2
    assert judge(ratio_interval(pairs(per_category)), 2.0, "prompts").verdict == "same"
    assert judge(ratio_interval(pairs(math.floor((6 + verdict.more / 3) / 6) * 2)), 2.0, "prompts").verdict == CANT_TELL
