"""`tokenreel compare` at the seeds' session size: too few prompts for an interval over prompts,
so the ladder's verdicts come from the runs (`tokenreel.analysis.pooled_runs`).

Sessions are the archived ones, and the seed ladder (4 prompts) turned into the seeds'
reproducibility check, 4 prompts x 3 runs a cell, by copying each cell's first run; noisy copies
scale each run's token times by a seeded random factor, as a host's run-to-run scatter would.
"""

from __future__ import annotations

import copy
import math
import random
import shutil
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from tests import session_factory as sf
from tests.test_cli import REPO, invoke
from tests.test_compare import SEED, compare_json, verdict_of_interval
from tokenreel.analysis.comparison import compare_sessions
from tokenreel.analysis.verdicts import CANT_TELL
from tokenreel.session import archive
from tokenreel.session.model import Session

DRAFTER = "nvfp4-dflash2"
# Run-to-run scatter (sd of log decode tok/s) by arm: about the real llama.cpp H200 sessions'
# (tests/data/h200-llamacpp/: median 0.3-0.8 % for the plain arms, 1.8 % for the drafter's).
NOISE = {"bf16": 0.005, "nvfp4": 0.008, DRAFTER: 0.015}


def archived_ladders() -> list[Path]:
    """Every ladder session archived in sessions/ and docs/ (renders' sidecars and sweeps are not)."""
    found = []
    for path in sorted([*(REPO / "sessions").rglob("*.json"), *(REPO / "docs").rglob("*.json")]):
        data = orjson.loads(path.read_bytes())
        if data.get("format") == "tokenreel.session" and data.get("kind", "ladder") == "ladder":
            found.append(path)
    return found


def three_runs() -> Session:
    """The seed ladder with a third measured run a cell (a copy of the cell's first)."""
    session = archive.load(SEED)
    extra = []
    for run in session.runs:
        if not run.warmup and run.index == min(r.index for r in session.runs if (r.arm, r.prompt) == (run.arm, run.prompt)
                                               and not r.warmup):
            third = copy.deepcopy(run)
            third.index = max(r.index for r in session.runs if (r.arm, r.prompt) == (run.arm, run.prompt)) + 1
            extra.append(third)
    session.runs += extra
    session.settings.repeats = 3
    return session


def scaled(session: Session, factor: dict[str, float] | None = None, rng: random.Random | None = None) -> Session:
    """A copy whose runs of each arm take 1 / factor[arm] as long (decode factor[arm] times as fast),
    each run also times exp(N(0, NOISE[arm])) when `rng` is given."""
    out = copy.copy(session)  # shallow: only the token times are new
    out.runs = []
    for run in session.runs:
        stretch = 1 / (factor or {}).get(run.arm, 1.0)
        if rng is not None:
            stretch *= math.exp(rng.gauss(0, NOISE[run.arm]))
        times = [round(t * stretch) for t in run.chunks.t_ns]
        out.runs.append(replace(run, chunks=replace(run.chunks, t_ns=times)))
    return out


def save(session: Session, path: Path) -> Path:
    archive.save(session, path)
    return path


@pytest.mark.parametrize("path", archived_ladders(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_archived_session_compared_with_a_copy_of_itself_is_the_same(tmp_path: Path, path: Path) -> None:
    copied = tmp_path / path.name
    shutil.copyfile(path, copied)
    code, data = compare_json(path, copied)
    assert code == 0 and data["outcome"] == "reproduced", data["ladder"]
    assert all(e["verdict"] == "same" and e["diff_ci95"] == [0, 0] for e in data["ladder"] + data["ratios"])


def test_archived_sessions_are_found() -> None:
    names = {p.name for p in archived_ladders()}
    assert {"seed-ladder-demo.json", "multilingual.json", "session.json"} <= names
    assert "sweep-demo.json" not in names


def test_a_copy_of_the_four_prompt_seed_is_the_same_and_says_from_what(tmp_path: Path) -> None:
    """4 prompts give no interval over prompts; B's runs are A's, so every difference is 0 exactly."""
    copied = tmp_path / "copy.json"
    shutil.copyfile(SEED, copied)
    result = invoke("compare", SEED, copied)
    assert result.exit_code == 0
    assert result.stderr.strip() == (
        "reproduced: ladder (decode tok/s, gated, ±2 %, from 2 runs a cell, 4 prompts): 6 same; 12 cells (not gated): 12 same"
    )
    assert ("| Original · bf16 | 97.1 | 97.1 | 0.00 % | [0.00 %, 0.00 %] | 1.00x | 1.00x "
            "| same (from 2 runs a cell, 4 prompts: the same runs in both sessions) |") in result.stdout
    code, data = compare_json(SEED, copied)
    assert all(e["basis"] == {"method": "same runs", "prompts": 4, "runs_a_cell": [2, 2]} for e in data["ladder"] + data["ratios"])
    assert set(data["methods"]) == {"prompts", "runs"}


@pytest.mark.parametrize(("factor", "verdict", "code"), [(0.997, "same", 0), (0.9, "slower", 1), (1.1, "faster", 1)])
def test_the_seeds_check_is_decided_from_the_runs(tmp_path: Path, factor: float, verdict: str, code: int) -> None:
    """4 prompts x 3 runs with the host's scatter; B the same runs, the drafter's factor times as
    fast: 0.3 % slower is the same within ±2 %, 10 % slower is slower, 10 % faster is faster."""
    a = scaled(three_runs(), rng=random.Random(40))
    path_a, path_b = save(a, tmp_path / "a.json"), save(scaled(a, {DRAFTER: factor}), tmp_path / "b.json")
    result = invoke("compare", path_a, path_b)
    assert result.exit_code == code, result.stderr
    assert "ladder (decode tok/s, gated, ±2 %, from 3 runs a cell, 4 prompts): " in result.stderr
    got, data = compare_json(path_a, path_b)
    rows = {r["arm"]: r for r in data["ladder"]}
    drafter = rows[DRAFTER]
    assert drafter["verdict"] == verdict and drafter["basis"] == {"method": "runs", "prompts": 4, "runs_a_cell": [3, 3]}
    assert drafter["estimate_pct"] == pytest.approx((factor - 1) * 100, abs=0.01)
    assert drafter["diff_ci95"][0] < drafter["estimate_pct"] < drafter["diff_ci95"][1]
    assert f"| {verdict} (from 3 runs a cell, 4 prompts) |" in result.stdout
    for arm in ("bf16", "nvfp4"):  # untouched arms: the same runs
        assert rows[arm]["verdict"] == "same" and rows[arm]["basis"]["method"] == "same runs"
    ratios = {r["base"]: r for r in data["ratios"] if r["arm"] == DRAFTER}
    assert {base: r["verdict"] for base, r in ratios.items()} == {"bf16": verdict, "nvfp4": verdict}
    assert all(e["verdict"] == verdict_of_interval(e, 2.0) for e in data["ladder"] + data["ratios"])


def test_noisy_rerecordings_of_the_same_truth_stay_honest() -> None:
    """200 pairs of seed-sized sessions (4 prompts x 3 runs), A and B each with its own seeded
    run-to-run scatter around the same speeds: the 95 % intervals hold the truth (a difference of
    0) about 95 % of the time (95.1 % over these 1,200), no gated figure is ever called faster or
    slower, and most are "same" (80 %: the drafter's 1.5 % scatter leaves some at "can't tell yet")."""
    base = three_runs()
    rng = random.Random(2026)
    held = differs = same = total = 0
    for _ in range(200):
        c = compare_sessions(scaled(base, rng=rng), scaled(base, rng=rng))
        for _, v in c.gated:
            assert v.diff_ci95 is not None
            total += 1
            held += v.diff_ci95[0] <= 0 <= v.diff_ci95[1]
            differs += v.differs
            same += v.verdict == "same"
        assert {b.method for b in c.bases} == {"runs"}
    assert 0.92 <= held / total <= 0.98, held / total
    assert differs == 0
    assert same / total >= 0.75, same / total


def test_noisy_rerecordings_3_percent_slower_are_never_called_the_same() -> None:
    """The drafter 3 % slower in truth (outside ±2 %), each session with its own scatter: the
    interval holds -3 % about 95 % of the time, and its row is never "same" or "faster"."""
    base = three_runs()
    rng = random.Random(3)
    held = 0
    verdicts = []
    for _ in range(200):
        c = compare_sessions(scaled(base, rng=rng), scaled(base, {DRAFTER: 0.97}, rng=rng))
        row = next(r for r in c.ladder if r.arm == DRAFTER).verdict
        assert row.diff_ci95 is not None
        held += row.diff_ci95[0] <= -3 <= row.diff_ci95[1]
        verdicts.append(row.verdict)
    assert 0.92 <= held / 200 <= 0.98, held / 200
    assert set(verdicts) <= {"slower", CANT_TELL} and "slower" in verdicts


def test_one_run_a_cell_and_too_few_prompts_cannot_tell_and_say_why(tmp_path: Path) -> None:
    """4 prompts, 1 run a cell: neither the prompts nor the runs give a spread, so no verdict."""
    speeds = {arm: {f"code-{k}": [speed * (1 + 0.1 * k)] for k in range(4)} for arm, speed in (("a", 100.0), ("b", 150.0))}
    path_a = save(sf.ladder(speeds), tmp_path / "a.json")
    slower = {arm: {p: [s * 0.999 for s in runs] for p, runs in prompts.items()} for arm, prompts in speeds.items()}
    code, data = compare_json(path_a, save(sf.ladder(slower), tmp_path / "b.json"))
    assert code == 3
    note = "n = 4 prompts: no interval (it needs 6); 1 run a cell: no run-to-run scatter to judge by"
    assert all(e["diff_ci95"] is None and e["diff_ci95_note"] == note and e["basis"]["method"] == "runs"
               for e in data["ladder"] + data["ratios"])


def test_twelve_prompts_keep_the_interval_over_prompts() -> None:
    """A session big enough for an interval over prompts is judged over prompts, as before."""
    h200 = REPO / "tests" / "data" / "h200-llamacpp"
    c = compare_sessions(archive.load(h200 / "session-default-cache.json"), archive.load(h200 / "session-cache-ram-0.json"))
    assert [b.method for b in c.bases] == ["prompts"] * 6 and all(b.prompts == 12 for b in c.bases)
