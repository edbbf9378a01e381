"""A sweep's crossover as a drafting schedule an engine takes: vLLM's per-batch-size draft length,
a disable-above threshold, the best k per level; in the report and in the file beside the sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tests.test_cli import invoke, run_cli, write_config
from tests.test_sweep_report import BASE, DRAFTER, SCALE
from tokenreel.analysis.draft_length import draft_length
from tokenreel.recorder.runner import new_session
from tokenreel.report.sweep_data import sweep_report
from tokenreel.report.sweep_schedule import K_PLACEHOLDER, schedule_path, sweep_schedule
from tokenreel.session.archive import load
from tokenreel.session.model import Arm, Settings

DEMO = Path(__file__).resolve().parent.parent / "sessions" / "sweep-demo.json"
KEY = "num_speculative_tokens_per_batch_size"


def test_the_archived_demo_sweep_is_cut_at_its_crossover_and_says_k_is_unknown() -> None:
    session = load(DEMO)
    [drafter] = sweep_report(session)["schedule"]["drafters"]
    assert [(e["level"], e["pays"]) for e in drafter["levels"]] == [(1, True), (2, True), (4, True), (8, False)]
    assert drafter["crossover_level"] == 8 and drafter["disable_above"] == 7
    assert drafter["k"] is None and "num_speculative_tokens" in drafter["k_missing"]
    assert drafter["vllm"][KEY] == [[1, 7, K_PLACEHOLDER], [8, 8, 0]]
    # declared, k fills the mapping and says where it came from
    session.arm("drafter").settings["num_speculative_tokens"] = "3"
    [declared] = sweep_report(session)["schedule"]["drafters"]
    assert declared["vllm"][KEY] == [[1, 7, 3], [8, 8, 0]] and declared["k_missing"] == ""
    assert declared["k_source"] == "[arms.settings] num_speculative_tokens"


def test_every_view_shows_the_schedule_and_why() -> None:
    md = invoke("report", DEMO, "--format", "md")
    assert md.exit_code == 0, md.output
    assert "## Drafting schedule" in md.output and f"[[1, 7, {K_PLACEHOLDER}], [8, 8, 0]]" in md.output
    assert "| 8 | 0.79× [0.77, 0.82] | no | 0 |" in md.output
    html = invoke("report", DEMO, "--format", "html")
    assert 'id="schedule"' in html.output and "disable above 7 concurrent requests" in html.output


def test_k_from_the_launch_command_before_the_settings() -> None:
    launch = ["vllm", "serve", "m", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}']
    arm = Arm(id="d", label="d", base_url="http://x/v1", model="m", fingerprint={"launch": launch},
              settings={"num_speculative_tokens": "2"})
    assert (draft_length(arm).k, draft_length(arm).source) == (4, "the launch command's --speculative-config")
    spec = Arm(id="d", label="d", base_url="http://x/v1", model="m", settings={"spec": '{"num_speculative_tokens": 5}'})
    assert draft_length(spec).k == 5
    assert draft_length(Arm(id="d", label="d", base_url="http://x/v1", model="m", settings={"k": "lots"})).k is None


def _row(arm: str, level: int, decode: list[float]) -> dict[str, Any]:
    return {"arm": arm, "level": level, "decode_tok_s": decode, "aggregate_output_tok_s": sum(decode) * level,
            "drafts_per_step": None, "counters": {}}


def test_several_draft_lengths_give_the_best_k_per_level() -> None:
    arms = [Arm(id="base", label="Base", base_url="http://x/v1", model="m")]
    arms += [Arm(id=f"k{k}", label=f"k {k}", base_url="http://x/v1", model="m", drafts_for="base",
                 settings={"num_speculative_tokens": str(k)}) for k in (2, 4)]
    session = new_session("s", Settings(max_tokens=8), [], arms)
    speeds = {"base": (100, 100, 100), "k2": (150, 130, 90), "k4": (200, 110, 80)}
    rows = [_row(arm, level, [speed * f for f in (0.99, 1.0, 1.01)])
            for arm, per_level in speeds.items() for level, speed in zip((1, 2, 4), per_level, strict=True)]
    schedule = sweep_schedule(session, rows)
    [best] = schedule["best_k"]
    assert [(e["level"], e["k"]) for e in best["levels"]] == [(1, 4), (2, 2), (4, 0)]
    assert best["levels"][0]["ci95"][0] > 1 and best["levels"][2]["arm"] is None
    assert best["vllm"][KEY] == [[1, 1, 4], [2, 3, 2], [4, 4, 0]]
    assert (best["crossover_level"], best["disable_above"]) == (4, 3)


def test_a_fresh_sweep_writes_the_schedule_beside_it_as_its_report_gives_it(tmp_path: Path, make_sim) -> None:
    cluster = make_sim([BASE, DRAFTER], time_scale=SCALE)
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=32)
    with config.open("a") as handle:  # the last arm is the drafter: its k, declared
        handle.write(f'[arms.settings]\nnum_speculative_tokens = "{DRAFTER.spec_k}"\n')
    out = tmp_path / "sweep.json"
    result = run_cli("sweep", "--config", config, "--concurrency", "1,2,4", "--requests", "8", "--out", out)
    assert result.returncode == 0, result.stderr
    written = orjson.loads(schedule_path(out).read_bytes())
    assert "schedule: " in result.stdout and schedule_path(out).name in result.stdout
    report = invoke("report", out, "--format", "json")
    schedule = orjson.loads(report.output)["schedule"]
    assert {k: v for k, v in written.items() if k not in ("format", "version")} == schedule
    [drafter] = written["drafters"]
    assert drafter["k"] == DRAFTER.spec_k
    # the mapping follows the levels that paid in this recording, whatever they were
    values = [DRAFTER.spec_k if e["pays"] else 0 for e in drafter["levels"]]
    expanded = [k for lo, hi, k in drafter["vllm"][KEY] for _ in range(lo, hi + 1)]
    assert [expanded[e["level"] - 1] for e in drafter["levels"]] == values
