"""`tokenreel demo` writes into a fresh folder (the ladder, and the sweep with its report and
charts) and never overwrites without --force."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_cli import invoke
from tokenreel.session import archive

QUICK = ("--max-tokens", "16", "--repeats", "1", "--time-scale", "0.005", "--no-video")


def test_demo_records_into_a_new_folder_and_asks_for_force_to_reuse_it(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    first = invoke("demo", "--out", folder, *QUICK)
    assert first.exit_code == 0, first.output
    session = archive.load(folder / "demo.json")
    assert session.simulated and [arm.id for arm in session.arms] == ["bf16", "nvfp4", "nvfp4-dflash2"]
    page = (folder / "demo.html").read_text(encoding="utf-8")
    assert "Content-Security-Policy" in page and 'id="replay' in page and session.name in page
    sweep = archive.load(folder / "sweep.json")  # and the sweep, its report and charts
    assert sweep.kind == "sweep" and [arm.id for arm in sweep.arms] == ["base", "drafter"]
    assert sorted({record.level for record in sweep.levels}) == [1, 2, 4, 8]
    assert "<svg " in (folder / "sweep.html").read_text(encoding="utf-8")
    assert all((folder / f"sweep-{chart}.{fmt}").stat().st_size for chart in ("speedup", "throughput") for fmt in ("png", "svg"))
    assert (session.settings.warmup, session.settings.repeats) == (0, 1)  # the short ladder by default
    before = (folder / "demo.json").read_bytes()
    again = invoke("demo", "--out", folder, *QUICK)
    assert again.exit_code == 2 and "already holds files; pass --force" in again.output
    assert (folder / "demo.json").read_bytes() == before
    forced = invoke("demo", "--out", folder, "--force", *QUICK)
    assert forced.exit_code == 0 and (folder / "demo.json").read_bytes() != before


def test_demo_into_a_file_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("mine")
    result = invoke("demo", "--out", tmp_path / "taken", *QUICK)
    assert result.exit_code == 2 and "is a file" in result.output


def test_the_demo_video_carries_no_warning_badge(tmp_path: Path) -> None:
    """Long enough for NVFP4 to part from bf16 (token 143): the drafter, declared to draft for
    NVFP4, is "same answer as" it, and NVFP4's difference from bf16 is no warning."""
    from tokenreel.renderer.frames import FrameRenderer
    from tokenreel.renderer.options import RenderOptions
    from tokenreel.renderer.render_plan import build_plan
    from tokenreel.simulator.profiles import NVFP4_DIVERGES_AT

    folder = tmp_path / "demo"
    result = invoke("demo", "--out", folder, "--max-tokens", str(NVFP4_DIVERGES_AT + 20), *QUICK[2:])
    assert result.exit_code == 0, result.output
    session = archive.load(folder / "demo.json")
    assert session.arm("nvfp4-dflash2").drafts_for == "nvfp4"
    for size in ("1920x1080", "1080x1920", "1080x1080"):
        plan = build_plan(session, RenderOptions(prompt="code-1", answer_badge=True, size=size, hold_s="0"))
        badges = [column.fitted_badge for column in FrameRenderer(plan).columns]
        assert [len(b) for b in badges] == [0, 1, 1], badges  # at most one badge a column
        assert f"{NVFP4_DIVERGES_AT} " in badges[1][0][0] and "same" in badges[2][0][0], badges
        assert all(style != "tool" for b in badges for _, _, style in b), badges  # tool: the warning colour


def test_demo_prints_each_line_once_and_ends_with_the_files_to_open(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    result = invoke("demo", "--out", folder, *QUICK)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    level_lines = [line for line in lines if " level " in line and ": ok, " in line]
    assert len(level_lines) == 8 and len(set(level_lines)) == 8  # each sweep level once
    assert all(re.search(r" in \d+\.\d\d s$", line) for line in level_lines)  # one way to write a time
    assert any("NVFP4 + DFlash2" in line and "concurrent requests" in line for line in lines)  # the crossover
    assert "NVML" not in result.output or Path("/proc/driver/nvidia").exists()
    assert lines[-3:] == [
        "open:",
        f"  report {folder / 'demo.html'}  (charts, percentiles, same answers, a replay)",
        f"  sweep  {folder / 'sweep.html'}  (the crossover and ratios per level; its charts are beside it, sweep-*.png)",
    ]
    assert sum(str(folder / "demo.html") in line for line in lines) == 1


def test_demo_full_records_the_seed_sized_ladder(tmp_path: Path) -> None:
    result = invoke("demo", "--full", "--out", tmp_path / "full", *QUICK)
    assert result.exit_code == 0, result.output
    settings = archive.load(tmp_path / "full" / "demo.json").settings
    assert (settings.warmup, settings.repeats, settings.max_tokens) == (1, 1, 16)  # --full, with the options given winning
