"""A ladder recorded arm by arm (one GPU: `record --arms bf16`, then the next arm into the same
session), through the real CLI against the simulator: after each arm, `record`'s summary and
`report` (terminal and json) give every recorded arm its own figures, the ratios between the arms
that are in, and one line naming the arms not recorded yet; `report --arms` limits the ladder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tests.test_cli import invoke, write_config
from tokenreel.analysis.figures import MISSING, figure, multiplier
from tokenreel.simulator.profiles import SEED_LADDER

# The profiles' real timing: the drafter's 32 tokens over about 75 ms, so a busy machine still reads
# a stream in several reads and every arm has its decode speed and TTFT (at a quarter of it, 19 ms,
# a loaded CI box once read the drafter's whole answer at once: no decode interval).
TIME_SCALE = 1.0


def table_rows(output: str) -> dict[str, list[str]]:
    """The terminal ladder's rows, by step number: its cells, stripped."""
    rows = {}
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if cells and cells[0].isdigit():
            rows[cells[0]] = cells
    return rows


def one_line(output: str, start: str) -> str:
    """The one line of `output` that starts with `start` (none, or two, fails)."""
    [line] = [line for line in output.splitlines() if line.startswith(start)]
    return line


def check_report(report: dict[str, Any], recorded: list[str], pending: list[str]) -> None:
    """Every recorded arm with its own figures; the ratios between them; the rest named, not figured."""
    rows = report["ladder"]
    assert [row["arm"] for row in rows] == recorded
    assert report["not_recorded"] == pending and report["arms_left_out"] == []
    assert report["prompts_compared"] == 4
    for row in rows:
        assert row["prompts"] == 4 and row["decode_tok_s"] > 0 and row["ttft_s"] > 0, row
    for prior, row in zip(rows, rows[1:], strict=False):
        assert row["vs_prior"] == row["decode_tok_s"] / prior["decode_tok_s"]
        assert row["vs_first"] == row["decode_tok_s"] / rows[0]["decode_tok_s"]
    assert {cell["arm"] for cell in report["cells"]} == set(recorded)
    assert report["missing_cells"] == []  # an arm not recorded yet is one line, not 4 missing cells
    headline = report["headline"]
    if len(recorded) < 2:
        assert headline is None
    else:
        assert (headline["arm"], headline["vs"], headline["prompts"]) == (recorded[-1], recorded[0], 4)
        assert headline["value"] == rows[-1]["vs_first"]


def test_each_arm_has_its_figures_as_it_lands(tmp_path: Path, make_sim) -> None:
    cluster = make_sim(SEED_LADDER, TIME_SCALE)
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=32, prompts="builtin:ladder4")
    session = tmp_path / "s.json"
    arms = [profile.id for profile in SEED_LADDER]
    for done in range(1, len(arms) + 1):
        recorded, pending = arms[:done], arms[done:]
        result = invoke("record", "--config", config, "--out", session, "--arms", recorded[-1])
        assert result.exit_code == 0, result.output
        report = orjson.loads(invoke("report", session, "--format", "json").output)
        check_report(report, recorded, pending)

        # record's summary prints the report's figures, the same strings, for every recorded arm
        rows = table_rows(result.output)
        assert sorted(rows) == [str(step) for step in range(1, done + 1)], result.output
        for step, row in enumerate(report["ladder"], start=1):
            decode, vs_prior, vs_first, ttft = rows[str(step)][2:6]
            assert decode == figure(row["decode_tok_s"]) and ttft == figure(row["ttft_s"], 2)
            assert vs_prior.startswith(multiplier(row["vs_prior"])) and vs_first.startswith(multiplier(row["vs_first"]))
        terminal = invoke("report", session)
        assert terminal.exit_code == 0
        for text in (result.output, terminal.output):
            assert "over 0 prompts" not in text and "Missing cells" not in text
            if pending:
                line = one_line(text, "Not recorded yet:")
                assert line.startswith(f"Not recorded yet: {', '.join(pending)} (")
                assert f"--arms {','.join(pending)} --out" in line
            else:
                assert "Not recorded yet" not in text
        assert f"--config {config} --arms" in result.output or not pending  # record names its own files
        for row in report["ladder"]:
            assert f"| {row['label']} | {figure(row['decode_tok_s'], 1, ' tok/s')} |" in terminal.output

    drafter = report["ladder"][-1]
    assert drafter["acceptance_length"] is not None and drafter["acceptance_length"] > 1  # the drafter's own acceptance
    assert drafter["acceptance_length"] == orjson.loads(invoke("report", session, "--format", "json", "--arms",
                                                               arms[-1]).output)["ladder"][0]["acceptance_length"]


def test_report_arms_limits_the_ladder(tmp_path: Path, make_sim) -> None:
    cluster = make_sim(SEED_LADDER, TIME_SCALE)
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=32, prompts="builtin:ladder4")
    session = tmp_path / "s.json"
    assert invoke("record", "--config", config, "--out", session, "--arms", "bf16,nvfp4-dflash2").exit_code == 0
    full = orjson.loads(invoke("report", session, "--format", "json").output)
    assert full["not_recorded"] == ["nvfp4"]

    first, last = SEED_LADDER[0].id, SEED_LADDER[-1].id
    chosen = orjson.loads(invoke("report", session, "--format", "json", "--arms", f"{last},{first}").output)
    assert [row["arm"] for row in chosen["ladder"]] == [first, last]  # in the session's order
    assert chosen["not_recorded"] == [] and chosen["arms_left_out"] == []
    alone = orjson.loads(invoke("report", session, "--format", "json", "--arms", last).output)
    assert [row["arm"] for row in alone["ladder"]] == [last] and alone["arms_left_out"] == [first]
    assert alone["headline"] is None and alone["ladder"][0]["decode_tok_s"] == full["ladder"][1]["decode_tok_s"]
    markdown = invoke("report", session, "--arms", last).output
    assert one_line(markdown, "Left out by --arms:") == f"Left out by --arms: {first}."

    # an arm asked for that is not recorded yet: named, not figured
    asked = orjson.loads(invoke("report", session, "--format", "json", "--arms", f"{first},nvfp4").output)
    assert [row["arm"] for row in asked["ladder"]] == [first] and asked["not_recorded"] == ["nvfp4"]

    for args, named in (
        (["--arms", "bf16,nope"], "--arms: unknown arm 'nope'; known arms: bf16, nvfp4, nvfp4-dflash2"),
        (["--baseline", "nvfp4"], "--baseline: arm 'nvfp4' is not recorded yet; the report shows bf16, nvfp4-dflash2"),
        (["--arms", last, "--baseline", first], f"--baseline: arm '{first}' is left out by --arms; the report shows {last}"),
    ):
        refused = invoke("report", session, *args)
        assert refused.exit_code == 2, refused.output
        lines = [line for line in refused.output.splitlines() if line.strip()]
        assert len(lines) == 1 and named in lines[0] and "Traceback" not in refused.output, refused.output

    # the arm recorded last, between the two: the summary's ladder is the session's three arms, each with its speed
    rows = table_rows(invoke("record", "--config", config, "--out", session, "--arms", "nvfp4").output)
    assert sorted(rows) == ["1", "2", "3"] and MISSING not in [row[2] for row in rows.values()]
